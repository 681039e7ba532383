//! `[hardware]` of a correctness scenario: the resources the message-level world models when a
//! scenario names them (sim/src/world/resources.rs): each node's NIC (a bandwidth per direction,
//! a cost per message and a latency per message that occupies nothing, given as a median and a
//! p99 or as a measured round trip, `crate::trip`), each target's SSD (bandwidth, IOPS, queue depth and a latency
//! distribution) and, optionally, each node's CPU (cores, a cost per request and per byte on a
//! message's path, one beside it per message and per byte a chunk store moves, and the chunk
//! store's own CPU per operation, on its path).
//!
//! A scenario without `[hardware]` keeps the fault model's size-blind latencies, so its runs and
//! trace hashes do not change. A profile gives every value; keys after it override one each.
//! Invariant: a loaded `Hardware` has positive bandwidths and rates, at least one queue slot and
//! `ssd_p99 >= ssd_p50 > 0`, each other p99 at least its median, and a transfer spread of at
//! least 1. Not here: how the world queues on these resources.

use core::time::Duration;

use serde::Deserialize;

use crate::trip::Trip;

/// Gbps in bytes per second.
pub const fn gbps(g: f64) -> f64 {
    g * 1e9 / 8.0
}

/// The resources of every node of a scenario's cluster (all nodes alike; one SSD per target).
#[derive(Clone, Debug, PartialEq)]
pub struct Hardware {
    /// The profile it started from.
    pub profile: String,
    /// NIC bandwidth per node, bytes per second, each direction.
    pub nic_bytes: f64,
    /// NIC and stack time per message, paid on the sender's NIC (its median).
    pub nic_message: Duration,
    /// 99th percentile of the time per message: with the median, a log-normal distribution
    /// (equal to the median: every message pays the median, and nothing is drawn).
    pub nic_message_p99: Duration,
    /// Time a message takes that occupies no resource (its median): the wake-ups and hand-offs
    /// between threads and processes of a software stack, which concurrent messages overlap,
    /// unlike `nic_message` (queued on the NIC) and `cpu_request` (queued on a core). 0 in the
    /// built-in profiles, and nothing is drawn.
    pub nic_latency: Duration,
    /// 99th percentile of `nic_latency`: with the median, a log-normal distribution (equal to
    /// it: nothing is drawn).
    pub nic_latency_p99: Duration,
    /// A request's measured round trip (its latency less the CPU on its path), which replaces
    /// `nic_latency` where given: each message draws its share of it (`crate::trip`). None in
    /// the built-in profiles.
    pub nic_latency_trip: Option<Trip>,
    /// SSD read bandwidth per target, bytes per second (reads and writes share one queue).
    pub ssd_bytes: f64,
    /// SSD write bandwidth per target, bytes per second (durable writes).
    pub ssd_write_bytes: f64,
    /// The read rate one operation alone sees (its own transfer time), bytes per second:
    /// `ssd_bytes` unless given (a device that serves several at once has a bandwidth above
    /// what one operation gets).
    pub ssd_lone_bytes: f64,
    /// The same for a write: `ssd_write_bytes` unless given.
    pub ssd_write_lone_bytes: f64,
    /// SSD operations per second per target.
    pub ssd_iops: f64,
    /// Operations one SSD serves at once.
    pub ssd_queue_depth: u32,
    /// Median SSD access latency (before the bytes move).
    pub ssd_p50: Duration,
    /// 99th percentile SSD access latency: with the median, a log-normal distribution.
    pub ssd_p99: Duration,
    /// Time from an SSD operation's completion until its node has it (its median), holding
    /// nothing: a store thread's sleep in its wait and its wake-up, beyond what a request's
    /// message latency holds. 0 in the built-in profiles, and nothing is drawn.
    pub ssd_wake: Duration,
    /// 99th percentile of `ssd_wake`: with the median, a log-normal distribution.
    pub ssd_wake_p99: Duration,
    /// Time a mutation's durability point adds (a metadata fdatasync; 0 for a drive with
    /// power-loss protection, whose flush returns at once).
    pub ssd_sync: Duration,
    /// 99th percentile of the durability point: with `ssd_sync`, a log-normal distribution
    /// (equal to it: every mutation pays `ssd_sync`, and nothing is drawn).
    pub ssd_sync_p99: Duration,
    /// How many lone operations' worth of work the SSD does at once, for reads and for
    /// mutations: with both set (above 0), the operations in service share the SSD (processor
    /// sharing: with `n` in service each progresses at `min(1, C / n)` of its lone speed, a later
    /// one slowing an earlier one too) in place of its FIFO transfer queue and bandwidths. 0 in
    /// the built-in profiles: the transfer queue.
    pub ssd_read_concurrency: f64,
    /// The same for mutations (a transfer with its durability point).
    pub ssd_write_concurrency: f64,
    /// How much slower than its median a transfer (an operation's bytes over the SSD's
    /// bandwidth) is at the 99th percentile: a log-normal factor on each operation's transfer
    /// time (1: no spread, and nothing is drawn).
    pub ssd_transfer_spread: f64,
    /// The same for a write's transfer (its bytes into a fresh extent and their fdatasync);
    /// `ssd_transfer_spread` unless given.
    pub ssd_write_spread: f64,
    /// CPU cores per node that handle received messages (0: CPU not modelled).
    pub cpu_cores: u32,
    /// CPU time per received message.
    pub cpu_request: Duration,
    /// CPU time per received byte, nanoseconds.
    pub cpu_byte_ns: f64,
    /// CPU time per received message that runs beside its path rather than on it: work a lone
    /// message does not wait for (the sender's half, hand-offs between a service's threads)
    /// but that holds a core, so it bounds throughput under load. 0 in the built-in profiles.
    pub cpu_overlap: Duration,
    /// CPU time beside the path per byte a chunk store operation reads, nanoseconds, on the
    /// target's node: the store's copies and checksums and the sender's copies of the bytes,
    /// which overlap the transfer. 0 in the built-in profiles.
    pub cpu_overlap_read_byte_ns: f64,
    /// The same per byte an update writes (copies, checksums, the write and its durability
    /// point's system calls). 0 in the built-in profiles.
    pub cpu_overlap_write_byte_ns: f64,
    /// The chunk store's own CPU per operation, which is on its path: it waits for a free core
    /// before its latency runs (a store thread that finds every core busy waits its turn).
    /// Zero in the built-in profiles: no store operation waits for a core.
    pub cpu_store: StoreCpu,
    /// Every node on one host (a loopback cluster): one NIC pair, one set of CPU cores and one
    /// SSD shared by all nodes and targets, instead of one of each per node and per target.
    pub shared_host: bool,
}

/// The CPU a chunk store spends on one operation of its own (its system calls, copies and
/// checksums), as a fixed part and a part per byte, for reads and for mutations (an update's
/// bytes; a commit moves none). All zero: no store operation holds a core.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StoreCpu {
    /// Per read.
    pub read: Duration,
    /// Per byte read, nanoseconds.
    pub read_byte_ns: f64,
    /// Per mutation.
    pub write: Duration,
    /// Per byte written, nanoseconds.
    pub write_byte_ns: f64,
}

impl StoreCpu {
    /// Whether no store operation costs CPU on its path.
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }

    /// The CPU of one operation moving `bytes` (a mutation when `write`).
    pub fn of(&self, bytes: usize, write: bool) -> Duration {
        let (fixed, byte_ns) = if write {
            (self.write, self.write_byte_ns)
        } else {
            (self.read, self.read_byte_ns)
        };
        fixed + Duration::from_nanos((bytes as f64 * byte_ns).ceil() as u64)
    }
}

impl Hardware {
    /// Named profiles: `nvme-rdma` (3FS-class: a 200 Gbps RDMA NIC and a PCIe 4.0 NVMe SSD per
    /// target) and `gbe-sata` (a 10 GbE node with SATA SSDs, for saturation at small scale).
    pub fn profile(name: &str) -> Option<Self> {
        let us = Duration::from_micros;
        match name {
            // 3FS's storage NICs are 2 x 200 Gbps per node (README); one NIC per simulated node
            // here. SSD: a PCIe 4.0 x4 NVMe datasheet class (7 GB/s, 1 M IOPS, 80 us median
            // access, 300 us at the 99th percentile under load). CPU off: 3FS's RDMA path keeps
            // the CPU out of the byte path.
            "nvme-rdma" => Some(Self {
                profile: name.into(),
                nic_bytes: gbps(200.0),
                nic_message: us(1),
                nic_message_p99: us(1),
                nic_latency: Duration::ZERO,
                nic_latency_p99: Duration::ZERO,
                nic_latency_trip: None,
                ssd_bytes: 7.0e9,
                ssd_write_bytes: 5.0e9,
                ssd_lone_bytes: 7.0e9,
                ssd_write_lone_bytes: 5.0e9,
                ssd_iops: 1.0e6,
                ssd_queue_depth: 128,
                ssd_p50: us(80),
                ssd_p99: us(300),
                ssd_sync: Duration::ZERO,
                ssd_sync_p99: Duration::ZERO,
                ssd_read_concurrency: 0.0,
                ssd_write_concurrency: 0.0,
                ssd_wake: Duration::ZERO,
                ssd_wake_p99: Duration::ZERO,
                ssd_transfer_spread: 1.0,
                ssd_write_spread: 1.0,
                cpu_cores: 0,
                cpu_request: Duration::ZERO,
                cpu_byte_ns: 0.0,
                cpu_overlap: Duration::ZERO,
                cpu_overlap_read_byte_ns: 0.0,
                cpu_overlap_write_byte_ns: 0.0,
                cpu_store: StoreCpu::default(),
                shared_host: false,
            }),
            // A 10 GbE TCP node: a kernel stack costs CPU per message and per byte copied.
            "gbe-sata" => Some(Self {
                profile: name.into(),
                nic_bytes: gbps(10.0),
                nic_message: us(5),
                nic_message_p99: us(5),
                nic_latency: Duration::ZERO,
                nic_latency_p99: Duration::ZERO,
                nic_latency_trip: None,
                ssd_bytes: 500e6,
                ssd_write_bytes: 450e6,
                ssd_lone_bytes: 500e6,
                ssd_write_lone_bytes: 450e6,
                ssd_iops: 80e3,
                ssd_queue_depth: 32,
                ssd_p50: us(150),
                ssd_p99: us(1500),
                ssd_sync: us(200),
                ssd_sync_p99: us(200),
                ssd_read_concurrency: 0.0,
                ssd_write_concurrency: 0.0,
                ssd_wake: Duration::ZERO,
                ssd_wake_p99: Duration::ZERO,
                ssd_transfer_spread: 1.0,
                ssd_write_spread: 1.0,
                cpu_cores: 4,
                cpu_request: us(10),
                cpu_byte_ns: 0.25,
                cpu_overlap: Duration::ZERO,
                cpu_overlap_read_byte_ns: 0.0,
                cpu_overlap_write_byte_ns: 0.0,
                cpu_store: StoreCpu::default(),
                shared_host: false,
            }),
            _ => None,
        }
    }

    /// Names of the profiles. `this-host` has no values of its own: `t3fs calibrate` measures
    /// this host and writes every key (a file naming it must give them all).
    pub const PROFILES: &'static [&'static str] = &["nvme-rdma", "gbe-sata", THIS_HOST];
}

/// The profile whose values are measured on this host (`t3fs calibrate`), never built in.
pub const THIS_HOST: &str = "this-host";

/// The `[hardware]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHardware {
    profile: String,
    nic_gbps: Option<f64>,
    nic_message_us: Option<f64>,
    nic_message_p99_us: Option<f64>,
    nic_latency_us: Option<f64>,
    nic_latency_p99_us: Option<f64>,
    nic_latency_trip: Option<Vec<[f64; 2]>>,
    ssd_mb_s: Option<f64>,
    ssd_write_mb_s: Option<f64>,
    ssd_lone_mb_s: Option<f64>,
    ssd_write_lone_mb_s: Option<f64>,
    ssd_iops: Option<f64>,
    ssd_queue_depth: Option<u32>,
    ssd_p50_us: Option<f64>,
    ssd_p99_us: Option<f64>,
    ssd_sync_us: Option<f64>,
    ssd_sync_p99_us: Option<f64>,
    ssd_read_concurrency: Option<f64>,
    ssd_write_concurrency: Option<f64>,
    ssd_wake_us: Option<f64>,
    ssd_wake_p99_us: Option<f64>,
    ssd_transfer_spread: Option<f64>,
    ssd_write_spread: Option<f64>,
    cpu_cores: Option<u32>,
    cpu_request_us: Option<f64>,
    cpu_byte_ns: Option<f64>,
    cpu_overlap_us: Option<f64>,
    cpu_overlap_read_byte_ns: Option<f64>,
    cpu_overlap_write_byte_ns: Option<f64>,
    cpu_store_read_us: Option<f64>,
    cpu_store_read_byte_ns: Option<f64>,
    cpu_store_write_us: Option<f64>,
    cpu_store_write_byte_ns: Option<f64>,
    shared_host: Option<bool>,
}

impl RawHardware {
    /// The key a `this-host` section leaves out, if any: it has no profile to fall back on.
    fn missing(&self) -> Option<&'static str> {
        let given = [
            ("nic_gbps", self.nic_gbps.is_some()),
            ("nic_message_us", self.nic_message_us.is_some()),
            ("ssd_mb_s", self.ssd_mb_s.is_some()),
            ("ssd_write_mb_s", self.ssd_write_mb_s.is_some()),
            ("ssd_iops", self.ssd_iops.is_some()),
            ("ssd_queue_depth", self.ssd_queue_depth.is_some()),
            ("ssd_p50_us", self.ssd_p50_us.is_some()),
            ("ssd_p99_us", self.ssd_p99_us.is_some()),
            ("ssd_sync_us", self.ssd_sync_us.is_some()),
            ("cpu_cores", self.cpu_cores.is_some()),
            ("cpu_request_us", self.cpu_request_us.is_some()),
            ("cpu_byte_ns", self.cpu_byte_ns.is_some()),
            ("shared_host", self.shared_host.is_some()),
        ];
        given.iter().find(|(_, g)| !g).map(|(k, _)| *k)
    }

    /// The hardware, or the offending key and why.
    pub(crate) fn validate(self) -> Result<Hardware, (&'static str, String)> {
        let mut h = self.base()?;
        self.apply_nic(&mut h)?;
        self.apply_ssd(&mut h)?;
        self.apply_cpu(&mut h)?;
        h.profile = self.profile;
        Ok(h)
    }

    /// The profile's values the keys start from (`gbe-sata`'s for a complete `this-host`).
    fn base(&self) -> Result<Hardware, (&'static str, String)> {
        if self.profile == THIS_HOST {
            if let Some(key) = self.missing() {
                return Err((
                    key,
                    "a `this-host` section gives every key (`t3fs calibrate` writes one)".into(),
                ));
            }
        }
        let base = if self.profile == THIS_HOST {
            "gbe-sata"
        } else {
            &self.profile
        };
        Hardware::profile(base).ok_or_else(|| {
            let known = Hardware::PROFILES.join(", ");
            (
                "profile",
                format!("no profile `{}` (known: {known})", self.profile),
            )
        })
    }

    /// The NIC keys, over `h`.
    fn apply_nic(&self, h: &mut Hardware) -> Result<(), (&'static str, String)> {
        if let Some(v) = positive("nic_gbps", self.nic_gbps)? {
            h.nic_bytes = gbps(v);
        }
        (h.nic_message, h.nic_message_p99) = median_and_p99(
            ("nic_message_us", "nic_message_p99_us"),
            (self.nic_message_us, self.nic_message_p99_us),
            h.nic_message,
        )?;
        (h.nic_latency, h.nic_latency_p99) = median_and_p99(
            ("nic_latency_us", "nic_latency_p99_us"),
            (self.nic_latency_us, self.nic_latency_p99_us),
            h.nic_latency,
        )?;
        if let Some(points) = &self.nic_latency_trip {
            if self.nic_latency_us.is_some() || self.nic_latency_p99_us.is_some() {
                let why = "gives the message latency itself: leave out nic_latency_us and \
                           nic_latency_p99_us";
                return Err(("nic_latency_trip", why.into()));
            }
            let points = points
                .iter()
                .map(|&[p, v]| {
                    at_least_zero("nic_latency_trip", Some(v))?;
                    Ok((p, us(v)))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let trip = Trip::new(points).map_err(|e| ("nic_latency_trip", e))?;
            (h.nic_latency, h.nic_latency_p99) = (Duration::ZERO, Duration::ZERO);
            h.nic_latency_trip = Some(trip);
        }
        Ok(())
    }

    /// The SSD keys, over `h`.
    fn apply_ssd(&self, h: &mut Hardware) -> Result<(), (&'static str, String)> {
        if let Some(v) = positive("ssd_mb_s", self.ssd_mb_s)? {
            h.ssd_bytes = v * 1e6;
        }
        if let Some(v) = positive("ssd_write_mb_s", self.ssd_write_mb_s)? {
            h.ssd_write_bytes = v * 1e6;
        }
        h.ssd_lone_bytes = match positive("ssd_lone_mb_s", self.ssd_lone_mb_s)? {
            Some(v) => v * 1e6,
            None => h.ssd_bytes,
        };
        h.ssd_write_lone_bytes = match positive("ssd_write_lone_mb_s", self.ssd_write_lone_mb_s)? {
            Some(v) => v * 1e6,
            None => h.ssd_write_bytes,
        };
        if let Some(v) = positive("ssd_iops", self.ssd_iops)? {
            h.ssd_iops = v;
        }
        match self.ssd_queue_depth {
            Some(0) => return Err(("ssd_queue_depth", "at least 1".into())),
            Some(q) => h.ssd_queue_depth = q,
            None => {}
        }
        if let Some(v) = positive("ssd_p50_us", self.ssd_p50_us)? {
            h.ssd_p50 = us(v);
        }
        if let Some(v) = positive("ssd_p99_us", self.ssd_p99_us)? {
            h.ssd_p99 = us(v);
        }
        (h.ssd_sync, h.ssd_sync_p99) = median_and_p99(
            ("ssd_sync_us", "ssd_sync_p99_us"),
            (self.ssd_sync_us, self.ssd_sync_p99_us),
            h.ssd_sync,
        )?;
        self.apply_concurrency(h)?;
        (h.ssd_wake, h.ssd_wake_p99) = median_and_p99(
            ("ssd_wake_us", "ssd_wake_p99_us"),
            (self.ssd_wake_us, self.ssd_wake_p99_us),
            h.ssd_wake,
        )?;
        match self.ssd_transfer_spread {
            Some(v) if !(v.is_finite() && v >= 1.0) => {
                return Err(("ssd_transfer_spread", format!("{v}: must be at least 1")))
            }
            Some(v) => h.ssd_transfer_spread = v,
            None => {}
        }
        h.ssd_write_spread = match self.ssd_write_spread {
            Some(v) if !(v.is_finite() && v >= 1.0) => {
                return Err(("ssd_write_spread", format!("{v}: must be at least 1")))
            }
            Some(v) => v,
            None => h.ssd_transfer_spread,
        };
        if h.ssd_p99 < h.ssd_p50 {
            return Err(("ssd_p99_us", "below the median `ssd_p50_us`".into()));
        }
        Ok(())
    }

    /// The shared disk's concurrencies over `h`: both or neither, each above 0.
    fn apply_concurrency(&self, h: &mut Hardware) -> Result<(), (&'static str, String)> {
        match (self.ssd_read_concurrency, self.ssd_write_concurrency) {
            (None, None) => {}
            (Some(r), Some(w)) if r > 0.0 && w > 0.0 && r.is_finite() && w.is_finite() => {
                (h.ssd_read_concurrency, h.ssd_write_concurrency) = (r, w);
            }
            (Some(_), Some(_)) => {
                return Err((
                    "ssd_read_concurrency",
                    "both concurrencies must be above 0".into(),
                ))
            }
            (Some(_), None) => {
                return Err((
                    "ssd_write_concurrency",
                    "given with ssd_read_concurrency".into(),
                ))
            }
            (None, Some(_)) => {
                return Err((
                    "ssd_read_concurrency",
                    "given with ssd_write_concurrency".into(),
                ))
            }
        }
        Ok(())
    }

    /// The CPU keys and `shared_host`, over `h`.
    fn apply_cpu(&self, h: &mut Hardware) -> Result<(), (&'static str, String)> {
        if let Some(c) = self.cpu_cores {
            h.cpu_cores = c;
        }
        if let Some(v) = at_least_zero("cpu_request_us", self.cpu_request_us)? {
            h.cpu_request = us(v);
        }
        if let Some(v) = at_least_zero("cpu_byte_ns", self.cpu_byte_ns)? {
            h.cpu_byte_ns = v;
        }
        if let Some(v) = at_least_zero("cpu_overlap_us", self.cpu_overlap_us)? {
            h.cpu_overlap = us(v);
        }
        let (read, write) = (
            self.cpu_overlap_read_byte_ns,
            self.cpu_overlap_write_byte_ns,
        );
        if let Some(v) = at_least_zero("cpu_overlap_read_byte_ns", read)? {
            h.cpu_overlap_read_byte_ns = v;
        }
        if let Some(v) = at_least_zero("cpu_overlap_write_byte_ns", write)? {
            h.cpu_overlap_write_byte_ns = v;
        }
        self.apply_store_cpu(&mut h.cpu_store)?;
        if let Some(v) = self.shared_host {
            h.shared_host = v;
        }
        Ok(())
    }

    /// The `cpu_store_*` keys over `c`.
    fn apply_store_cpu(&self, c: &mut StoreCpu) -> Result<(), (&'static str, String)> {
        if let Some(v) = at_least_zero("cpu_store_read_us", self.cpu_store_read_us)? {
            c.read = us(v);
        }
        if let Some(v) = at_least_zero("cpu_store_read_byte_ns", self.cpu_store_read_byte_ns)? {
            c.read_byte_ns = v;
        }
        if let Some(v) = at_least_zero("cpu_store_write_us", self.cpu_store_write_us)? {
            c.write = us(v);
        }
        let write = self.cpu_store_write_byte_ns;
        if let Some(v) = at_least_zero("cpu_store_write_byte_ns", write)? {
            c.write_byte_ns = v;
        }
        Ok(())
    }
}

/// `v` when absent or positive and finite; else the key and why.
fn positive(key: &'static str, v: Option<f64>) -> Result<Option<f64>, (&'static str, String)> {
    match v {
        Some(v) if !(v.is_finite() && v > 0.0) => Err((key, format!("{v}: must be positive"))),
        v => Ok(v),
    }
}

/// `v` when absent or at least 0 and finite; else the key and why.
fn at_least_zero(key: &'static str, v: Option<f64>) -> Result<Option<f64>, (&'static str, String)> {
    match v {
        Some(v) if !(v.is_finite() && v >= 0.0) => Err((key, format!("{v}: must be >= 0"))),
        v => Ok(v),
    }
}

/// Microseconds as a duration, rounded to the nanosecond.
fn us(v: f64) -> Duration {
    Duration::from_nanos((v * 1e3).round() as u64)
}

/// A p99 key (microseconds) of a distribution whose median is `p50` (the key `of`). A spread
/// left out is none: the p99 follows the median given.
/// A distribution given by a median key and a p99 key (microseconds), over the profile's
/// `median`: the median where given, and the p99 where given, else the median (nothing drawn).
fn median_and_p99(
    (key, p99_key): (&'static str, &'static str),
    (median_us, p99_us): (Option<f64>, Option<f64>),
    median: Duration,
) -> Result<(Duration, Duration), (&'static str, String)> {
    let m = at_least_zero(key, median_us)?.map_or(median, us);
    Ok((m, p99(p99_key, p99_us, m, key)?))
}

fn p99(
    key: &'static str,
    v: Option<f64>,
    p50: Duration,
    of: &str,
) -> Result<Duration, (&'static str, String)> {
    let p99 = at_least_zero(key, v)?.map_or(p50, us);
    if p99 < p50 {
        return Err((key, format!("below the median `{of}`")));
    }
    Ok(p99)
}

#[cfg(test)]
mod tests;
