//! The `this-host` hardware profile of `t3fs calibrate`: what is measured on this host, and how
//! each measurement becomes a value of the simulator's resource model
//! (sim/src/world/resources.rs).
//!
//! Each resource is measured through the real component the loopback cluster uses for it: the
//! SSD through the io_uring chunk stores of one chain driven in a write's order, on the file
//! system the cluster's targets share (`t3fs_real::probe_store`), the per-message
//! cost through requests to the running cluster that touch no disk, the line rate through
//! loopback TCP (`t3fs_real::probe`), the CPU's per-byte cost through this CPU's CRC32C speed,
//! the store's own CPU on an operation's path through the same chunk stores (their CPU one
//! operation at a time), and the CPU beside a request's path through real reads and writes 8
//! clients at a time (`calibrate_load.rs`), less what is on the path.
//!
//! Invariant: nothing here is fitted to the jobs the profile predicts; every value is one
//! measurement (or a difference of two) named in the profile's comments, or an assumption named
//! there as ASSUMED. The load probe runs operations of the kinds the concurrency jobs run, so
//! only its CPU seconds per operation are used (a cost, like the CRC32C speed), never its
//! throughput or latencies. Not here: running the jobs (`calibrate.rs`), the probes themselves
//! (`calibrate_probes.rs`, `calibrate_load.rs`), the profile's comments (`provenance.rs`).

use std::path::Path;
use std::time::Duration;

use crate::calibrate_load::{LoadCpu, PhaseCpu};
use crate::calibrate_probes::{null_requests, store_probe};
use t3fs_real::probe_store::StoreLatencies;
use t3fs_scenario::hardware::{StoreCpu, THIS_HOST};
use t3fs_scenario::trip::Trip;
use t3fs_scenario::Hardware;

/// This host's measured inputs to the profile.
pub struct Measured {
    /// The disk and loopback bounds.
    pub probe: t3fs_real::probe::Probe,
    /// The latencies of one round, or of every round pooled.
    pub sample: Sample,
    /// Nanoseconds per byte of CRC32C on this CPU.
    pub crc_ns_per_byte: f64,
    /// This host's cores.
    pub cores: u32,
}

/// What one round of `t3fs calibrate` measures just before its jobs run, so that the jobs are
/// judged against this host as it was then (its disk's figures drift within minutes). Every
/// latency vector is sorted.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    /// The io_uring chunk store's operations, one at a time.
    pub store: StoreLatencies,
    /// Reads of absent chunks through the running cluster, one at a time.
    pub null: Vec<Duration>,
    /// Round trips through the TCP transport of a frame with an empty and with a 1 MiB bulk
    /// part, each answered by a small frame.
    pub message: (Vec<Duration>, Vec<Duration>),
    /// CPU seconds null requests `PROBE_DEPTH` at a time cost every process of the
    /// cluster and this one, and how many there were.
    pub null_cpu: f64,
    /// Null requests the CPU time was measured over.
    pub null_cpu_reads: usize,
    /// CPU seconds each set of round trips cost this process (both ends run here).
    pub message_cpu: (f64, f64),
    /// Real writes and reads through the cluster `PROBE_DEPTH` at a time, and their CPU.
    pub load: LoadCpu,
}

impl Sample {
    /// One round's measurements: the stores of a chain of `replicas` targets under `dir`, the
    /// TCP transport, and null requests through the running cluster at `cluster`.
    pub fn measure(dir: &Path, cluster: &Path, replicas: u32) -> Result<Sample, String> {
        use crate::calibrate_cpu::{cluster_cpu_of, self_cpu_of};
        use t3fs_real::probe_message::round_trips;
        let store = store_probe(dir, replicas)?;
        let (m0, c0) = self_cpu_of(|| round_trips(0, 2000));
        let (m1, c1) = self_cpu_of(|| round_trips(1 << 20, 600));
        let second = Duration::from_secs(1);
        let null = null_requests(cluster, second, 1)?;
        // The CPU a request costs when the host is busy: with one at a time, much of the
        // processes' CPU is per wake-up, not per request (their CPU over a second of single
        // null reads exceeds a second on two cores), so depth 1 would overstate it.
        let (busy, null_cpu) =
            cluster_cpu_of(cluster, || null_requests(cluster, second, PROBE_DEPTH));
        let load = crate::calibrate_load::measure(cluster, replicas, second, PROBE_DEPTH)?;
        Ok(Sample {
            store,
            message: (m0?, m1?),
            null,
            null_cpu,
            null_cpu_reads: busy?.len(),
            message_cpu: (c0, c1),
            load,
        })
    }

    /// Every sample's latencies together, sorted: the host over all rounds. Each round weighs
    /// as many operations as it timed, so a faster round (more operations in its time) weighs
    /// more.
    pub fn pooled(all: &[&Sample]) -> Sample {
        let join = |f: fn(&Sample) -> &Vec<Duration>| {
            let mut v: Vec<Duration> = all.iter().flat_map(|s| f(s).iter().copied()).collect();
            v.sort();
            v
        };
        Sample {
            store: StoreLatencies {
                read_4k: join(|s| &s.store.read_4k),
                read_1m: join(|s| &s.store.read_1m),
                update_1m: join(|s| &s.store.update_1m),
                commit: join(|s| &s.store.commit),
                cpu: std::array::from_fn(|i| all.iter().map(|s| s.store.cpu[i]).sum()),
                threaded_null: join(|s| &s.store.threaded_null),
                threaded_read_4k: join(|s| &s.store.threaded_read_4k),
                read_depth_mib_s: all
                    .iter()
                    .flat_map(|s| &s.store.read_depth_mib_s)
                    .copied()
                    .collect(),
                write_depth_mib_s: all
                    .iter()
                    .flat_map(|s| &s.store.write_depth_mib_s)
                    .copied()
                    .collect(),
            },
            null: join(|s| &s.null),
            message: (join(|s| &s.message.0), join(|s| &s.message.1)),
            null_cpu: all.iter().map(|s| s.null_cpu).sum(),
            null_cpu_reads: all.iter().map(|s| s.null_cpu_reads).sum(),
            message_cpu: (
                all.iter().map(|s| s.message_cpu.0).sum(),
                all.iter().map(|s| s.message_cpu.1).sum(),
            ),
            load: LoadCpu {
                write_1m: PhaseCpu::sum(all.iter().map(|s| s.load.write_1m)),
                read_4k: PhaseCpu::sum(all.iter().map(|s| s.load.read_4k)),
                read_1m: PhaseCpu::sum(all.iter().map(|s| s.load.read_1m)),
                replicas: all.iter().map(|s| s.load.replicas).max().unwrap_or(0),
            },
        }
    }
}

/// Requests in flight while their CPU time is measured, and the queue depth of the disk's
/// random-read probe: as deep as the concurrency variants of the jobs run. At depth 1 much of
/// the processes' CPU is per wake-up rather than per request, and the disk's IOPS at depth 1
/// is a latency, not what it serves several at a time.
pub const PROBE_DEPTH: usize = 8;

/// Passes over a message's bytes the receiving service makes in user space: building the
/// payload's block checksums. The kernel's copies are in the loopback line rate, the payload
/// is shared (not copied) between decoding and the store.
const PASSES_PER_HOP: f64 = 1.0;

/// The median and 99th percentile of sorted `v` (zero when empty).
pub fn p50_p99(v: &[Duration]) -> (Duration, Duration) {
    match v.len() {
        0 => (Duration::ZERO, Duration::ZERO),
        n => (v[n / 2], v[(n * 99 / 100).min(n - 1)]),
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The latencies the profile is made of: medians and 99th percentiles of `m`'s samples, and
/// the figures derived from them.
struct Figures {
    null50: Duration,
    null99: Duration,
    r4k50: Duration,
    r4k99: Duration,
    r1m50: Duration,
    r1m99: Duration,
    u50: Duration,
    u99: Duration,
    c50: Duration,
    c99: Duration,
    /// The round trip without and with a 1 MiB bulk part (p50), and the latter's p99.
    m0: Duration,
    m1: Duration,
    m1_99: Duration,
    /// What 1 MiB adds to a lone message.
    lone: Duration,
    /// The durability point: commits less the access latency (p50, p99).
    sync50: Duration,
    sync99: Duration,
    /// An update's transfer: its median less the sync median.
    transfer_w: Duration,
    /// CPU time per message on the whole host: the null requests' CPU over their messages
    /// (a request and its reply each).
    cpu_msg: Duration,
    /// CPU nanoseconds per byte a 1 MiB bulk part costs the transport's receiving end: half
    /// of what it costs both ends beyond an empty frame's round trip (the sender's half runs
    /// at the same time on another core, and the model charges a message's CPU at its
    /// receiver).
    transport_byte_ns: f64,
    /// CPU per received byte on a message's path: the CRC32C passes and the transport's
    /// receiving half (the profile's `cpu_byte_ns`).
    on_path_byte_ns: f64,
    /// CPU beside a message's path, per message, and per byte a chunk store reads or writes:
    /// what real reads and writes several at a time cost the host beyond the CPU on their path.
    overlap: Beside,
    /// The store's own CPU per operation (on its path): from its CPU one at a time.
    store_cpu: StoreCpu,
    /// The store's 1 MiB reads and updates (with their commits) per second several at a time,
    /// in MiB: the median over rounds (none if not measured).
    read_depth_mib_s: Option<f64>,
    write_depth_mib_s: Option<f64>,
    /// The null reads' round trips less their two messages' CPU: the latency a request and
    /// its reply take beyond their work, as measured (none without null reads).
    trip: Option<Trip>,
    /// Through a store thread: the hand-off alone (p50) and with a 4 KiB read (p50, p99).
    t_null50: Duration,
    t_r4k50: Duration,
    t_r4k99: Duration,
}

/// The median of `v` (the mean of the middle two when even; 0 when empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The median of `v`, none if empty.
fn median_of(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| median(v.to_vec()))
}

/// CPU beside the path (see `Hardware::cpu_overlap`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Beside {
    per_msg: Duration,
    read_byte_ns: f64,
    write_byte_ns: f64,
}

impl Figures {
    /// The figures of `m`'s samples.
    fn of(m: &Measured) -> Figures {
        let s = &m.sample.store;
        let (null50, null99) = p50_p99(&m.sample.null);
        let (r4k50, r4k99) = p50_p99(&s.read_4k);
        let (r1m50, r1m99) = p50_p99(&s.read_1m);
        let (u50, u99) = p50_p99(&s.update_1m);
        let (c50, c99) = p50_p99(&s.commit);
        let message = &m.sample.message;
        let ((m0, _), (m1, m1_99)) = (p50_p99(&message.0), p50_p99(&message.1));
        let lone = m1.saturating_sub(m0).max(Duration::from_micros(1));
        // The model's commit is an access latency plus the durability point; an update is its
        // transfer plus the durability point.
        let sync50 = c50.saturating_sub(r4k50);
        let sync99 = c99.saturating_sub(r4k50).max(sync50);
        let transfer_w = u50.saturating_sub(sync50).max(Duration::from_micros(1));
        let sm = &m.sample;
        let cpu_msg = Duration::from_secs_f64(sm.null_cpu / (2 * sm.null_cpu_reads).max(1) as f64);
        let per_trip = |cpu: f64, n: usize| cpu / n.max(1) as f64;
        let transport_byte_ns = ((per_trip(sm.message_cpu.1, sm.message.1.len())
            - per_trip(sm.message_cpu.0, sm.message.0.len()))
            * 1e9
            / (1u64 << 20) as f64
            / 2.0)
            .max(0.0);
        let on_path_byte_ns = m.crc_ns_per_byte * PASSES_PER_HOP + transport_byte_ns;
        let store_cpu = store_cpu(s.cpu_per_op());
        let overlap = beside_path(&sm.load, cpu_msg, on_path_byte_ns, &store_cpu);
        let trip = (!sm.null.is_empty()).then(|| {
            let less_cpu: Vec<Duration> = sm
                .null
                .iter()
                .map(|d| d.saturating_sub(2 * cpu_msg))
                .collect();
            Trip::of_sorted(&less_cpu)
        });
        Figures {
            trip,
            null50,
            null99,
            r4k50,
            r4k99,
            r1m50,
            r1m99,
            u50,
            u99,
            c50,
            c99,
            m0,
            m1,
            m1_99,
            lone,
            sync50,
            sync99,
            transfer_w,
            cpu_msg,
            transport_byte_ns,
            on_path_byte_ns,
            overlap,
            store_cpu,
            t_null50: p50_p99(&s.threaded_null).0,
            t_r4k50: p50_p99(&s.threaded_read_4k).0,
            t_r4k99: p50_p99(&s.threaded_read_4k).1,
            read_depth_mib_s: median_of(&s.read_depth_mib_s),
            write_depth_mib_s: median_of(&s.write_depth_mib_s),
        }
    }

    /// The part of a message's half-read that is not CPU work: the latency concurrent
    /// messages overlap (median, p99).
    fn latency(&self) -> (Duration, Duration) {
        let l50 = (self.null50 / 2).saturating_sub(self.cpu_msg);
        let l99 = (self.null99 / 2).saturating_sub(self.cpu_msg).max(l50);
        (l50, l99)
    }

    /// A store operation's wake-up on a store thread beyond the hand-off a null request
    /// already holds and the store's own latency: a threaded 4 KiB read less a threaded
    /// absent-chunk read less an inline 4 KiB read (median; p99 from the threaded read's p99
    /// and the inline p99), never below zero.
    fn wake(&self) -> (Duration, Duration) {
        if self.t_r4k50.is_zero() {
            return (Duration::ZERO, Duration::ZERO);
        }
        let w50 = self.t_r4k50.saturating_sub(self.t_null50 + self.r4k50);
        let w99 = self
            .t_r4k99
            .saturating_sub(self.t_null50 + self.r4k99)
            .max(w50);
        (w50, w99)
    }

    /// The loopback line's time for 1 MiB less the CPU the transport spends on it (counted on
    /// the cores): what the NIC's bytes term keeps.
    /// How many lone operations' worth the disk serves at once, for reads and for mutations:
    /// its bandwidth with the chain's stores 8 operations in flight over what one alone does
    /// (a 1 MiB read's lone rate; a 1 MiB update's lone transfer and sync plus its commit's
    /// sync, the two mutations each update of the probe makes). 0 for both where the depth
    /// bandwidths were not measured: the model keeps its FIFO transfer queue.
    fn concurrency(&self) -> (f64, f64) {
        let (Some(r), Some(w)) = (self.read_depth_mib_s, self.write_depth_mib_s) else {
            return (0.0, 0.0);
        };
        let read = r * self.r1m50.as_secs_f64();
        let write = w * (self.transfer_w + 2 * self.sync50).as_secs_f64();
        (read.max(1e-3), write.max(1e-3))
    }

    fn wire_1m(&self) -> Duration {
        let cpu = Duration::from_secs_f64(self.transport_byte_ns * (1u64 << 20) as f64 / 1e9);
        self.lone.saturating_sub(cpu).max(Duration::from_micros(1))
    }
}

const MIB: f64 = (1u64 << 20) as f64;

/// The CPU beside the path from real reads and writes several at a time (each never below
/// zero): per byte a store reads, a 1 MiB read's CPU beyond a 4 KiB read's per byte, less the
/// CPU per received byte on the path (a read's store bytes are its reply's); per message, a
/// 4 KiB read's beyond its two messages on the path and its bytes, halved; per byte a store
/// writes, a 1 MiB write's beyond its messages (a `Write` or `Update` received by each of the
/// chain's replicas, and a reply each) and their received bytes, over the bytes the replicas'
/// updates write.
fn beside_path(
    load: &LoadCpu,
    cpu_msg: Duration,
    on_path_byte_ns: f64,
    store: &StoreCpu,
) -> Beside {
    let (r4k, r1m, w1m) = (load.read_4k, load.read_1m, load.write_1m);
    if r4k.ops == 0 || r1m.ops == 0 || w1m.ops == 0 {
        return Beside::default();
    }
    // The store's own CPU is on the path now (it waits for a core): not beside it too.
    let own = |bytes: usize, write: bool| store.of(bytes, write).as_secs_f64();
    let replicas = load.replicas.max(1) as f64;
    let (r4k, r1m, w1m) = (
        r4k.per_op() - own(4096, false),
        r1m.per_op() - own(1 << 20, false),
        w1m.per_op() - replicas * (own(1 << 20, true) + own(0, true)),
    );
    let read_byte_ns = ((r1m - r4k) * 1e9 / (MIB - 4096.0) - on_path_byte_ns).max(0.0);
    let msg = cpu_msg.as_secs_f64();
    let on_path = 2.0 * msg + 4096.0 * (on_path_byte_ns + read_byte_ns) / 1e9;
    let per_msg = ((r4k - on_path) / 2.0).max(0.0);
    let messages = 2.0 * replicas * (msg + per_msg);
    let write_byte_ns = ((w1m - messages) * 1e9 / (replicas * MIB) - on_path_byte_ns).max(0.0);
    Beside {
        per_msg: Duration::from_secs_f64(per_msg),
        read_byte_ns,
        write_byte_ns,
    }
}

/// The store's own CPU per operation from its CPU per 4 KiB read, 1 MiB read, 1 MiB update
/// and commit (seconds, one at a time): a read's fixed part and part per byte through the two
/// reads; a mutation's fixed part is a commit's (which moves no bytes), and its part per byte
/// what an update costs beyond that. Never below zero.
fn store_cpu([r4k, r1m, update, commit]: [f64; 4]) -> StoreCpu {
    let read_byte_ns = ((r1m - r4k) * 1e9 / (MIB - 4096.0)).max(0.0);
    let read = (r4k - 4096.0 * read_byte_ns / 1e9).max(0.0);
    StoreCpu {
        read: Duration::from_secs_f64(read),
        read_byte_ns,
        write: Duration::from_secs_f64(commit.max(0.0)),
        write_byte_ns: ((update - commit) * 1e9 / MIB).max(0.0),
    }
}

/// The `this-host` profile from `m`, with where each value comes from.
pub fn this_host(m: &Measured) -> (Hardware, Vec<String>) {
    let f = Figures::of(m);
    (hardware(m, &f), provenance::provenance(m, &f))
}

/// The profile's values from `m` and its figures `f`.
fn hardware(m: &Measured, f: &Figures) -> Hardware {
    let p = &m.probe;
    let mib = (1u64 << 20) as f64;
    // The measured round trip where there is one; its halves' median and p99 otherwise.
    let (nic_latency, nic_latency_p99) = match f.trip {
        Some(_) => (Duration::ZERO, Duration::ZERO),
        None => f.latency(),
    };
    let lone_read = mib / f.r1m50.as_secs_f64().max(1e-9);
    let lone_write = mib / f.transfer_w.as_secs_f64();
    let (ssd_wake, ssd_wake_p99) = f.wake();
    let concurrency = f.concurrency();
    Hardware {
        profile: THIS_HOST.into(),
        nic_bytes: mib / f.wire_1m().as_secs_f64(),
        // On one host a message's stack work is CPU (cpu_request) and its wait is latency
        // (nic_latency); nothing is left to queue on a NIC per message.
        nic_message: Duration::ZERO,
        nic_message_p99: Duration::ZERO,
        nic_latency,
        nic_latency_p99,
        nic_latency_trip: f.trip.clone(),
        // The bandwidths several at a time; what one alone sees from the lone operations.
        ssd_bytes: f.read_depth_mib_s.map_or(lone_read, |r| r * mib),
        ssd_write_bytes: f.write_depth_mib_s.map_or(lone_write, |w| w * mib),
        ssd_lone_bytes: lone_read,
        ssd_write_lone_bytes: lone_write,
        ssd_iops: p.rand_read_iops,
        ssd_queue_depth: 32,
        ssd_p50: f.r4k50.max(Duration::from_nanos(1)),
        ssd_p99: f.r4k99.max(f.r4k50).max(Duration::from_nanos(1)),
        ssd_sync: f.sync50,
        ssd_sync_p99: f.sync99,
        ssd_read_concurrency: concurrency.0,
        ssd_write_concurrency: concurrency.1,
        ssd_wake,
        ssd_wake_p99,
        ssd_transfer_spread: (f.r1m99.as_secs_f64() / f.r1m50.as_secs_f64().max(1e-9)).max(1.0),
        // The update's tail beyond its median, all of it on the transfer (the sync draws its
        // own spread on top, from the commits).
        ssd_write_spread: (f.u99.saturating_sub(f.sync50).as_secs_f64()
            / f.transfer_w.as_secs_f64())
        .max(1.0),
        cpu_cores: m.cores,
        cpu_request: f.cpu_msg,
        cpu_byte_ns: f.on_path_byte_ns,
        cpu_overlap: f.overlap.per_msg,
        cpu_overlap_read_byte_ns: f.overlap.read_byte_ns,
        cpu_overlap_write_byte_ns: f.overlap.write_byte_ns,
        cpu_store: f.store_cpu,
        shared_host: true,
    }
}

mod provenance;
#[cfg(test)]
mod tests;
