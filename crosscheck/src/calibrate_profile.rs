//! The `this-host` hardware profile of `t3fs calibrate`: what is measured on this host, and how
//! each measurement becomes a value of the simulator's resource model
//! (sim/src/world/resources.rs).
//!
//! Each resource is measured through the real component the loopback cluster uses for it: the
//! SSD through the io_uring chunk stores of one chain driven in a write's order, on the file
//! system the cluster's targets share (`t3fs_real::probe_store`), the per-message
//! cost through requests to the running cluster that touch no disk, the line rate through
//! loopback TCP (`t3fs_real::probe`), the CPU's per-byte cost through this CPU's CRC32C speed.
//!
//! Invariant: nothing here is fitted to the jobs the profile predicts; every value is one
//! measurement (or a difference of two) named in the profile's comments, or an assumption named
//! there as ASSUMED. Not here: running the jobs (`calibrate.rs`).

use std::path::Path;
use std::time::{Duration, Instant};

use t3fs_real::probe_store::StoreLatencies;
use t3fs_scenario::hardware::THIS_HOST;
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
    /// CPU seconds null requests `NULL_DEPTH_FOR_CPU` at a time cost every process of the
    /// cluster and this one, and how many there were.
    pub null_cpu: f64,
    /// Null requests the CPU time was measured over.
    pub null_cpu_reads: usize,
    /// CPU seconds each set of round trips cost this process (both ends run here).
    pub message_cpu: (f64, f64),
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
        let (busy, null_cpu) = cluster_cpu_of(cluster, || {
            null_requests(cluster, second, NULL_DEPTH_FOR_CPU)
        });
        Ok(Sample {
            store,
            message: (m0?, m1?),
            null,
            null_cpu,
            null_cpu_reads: busy?.len(),
            message_cpu: (c0, c1),
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
            },
            null: join(|s| &s.null),
            message: (join(|s| &s.message.0), join(|s| &s.message.1)),
            null_cpu: all.iter().map(|s| s.null_cpu).sum(),
            null_cpu_reads: all.iter().map(|s| s.null_cpu_reads).sum(),
            message_cpu: (
                all.iter().map(|s| s.message_cpu.0).sum(),
                all.iter().map(|s| s.message_cpu.1).sum(),
            ),
        }
    }
}

/// Null requests in flight while their CPU time is measured: as deep as the concurrency
/// variants of the jobs run.
const NULL_DEPTH_FOR_CPU: usize = 8;

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
        Figures {
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
        }
    }

    /// The part of a message's half-read that is not CPU work: the latency concurrent
    /// messages overlap (median, p99).
    fn latency(&self) -> (Duration, Duration) {
        let l50 = (self.null50 / 2).saturating_sub(self.cpu_msg);
        let l99 = (self.null99 / 2).saturating_sub(self.cpu_msg).max(l50);
        (l50, l99)
    }

    /// The loopback line's time for 1 MiB less the CPU the transport spends on it (counted on
    /// the cores): what the NIC's bytes term keeps.
    fn wire_1m(&self) -> Duration {
        let cpu = Duration::from_secs_f64(self.transport_byte_ns * (1u64 << 20) as f64 / 1e9);
        self.lone.saturating_sub(cpu).max(Duration::from_micros(1))
    }
}

/// The `this-host` profile from `m`, with where each value comes from.
pub fn this_host(m: &Measured) -> (Hardware, Vec<String>) {
    let f = Figures::of(m);
    (hardware(m, &f), provenance(m, &f))
}

/// The profile's values from `m` and its figures `f`.
fn hardware(m: &Measured, f: &Figures) -> Hardware {
    let p = &m.probe;
    let mib = (1u64 << 20) as f64;
    let (nic_latency, nic_latency_p99) = f.latency();
    Hardware {
        profile: THIS_HOST.into(),
        nic_bytes: mib / f.wire_1m().as_secs_f64(),
        // On one host a message's stack work is CPU (cpu_request) and its wait is latency
        // (nic_latency); nothing is left to queue on a NIC per message.
        nic_message: Duration::ZERO,
        nic_message_p99: Duration::ZERO,
        nic_latency,
        nic_latency_p99,
        ssd_bytes: mib / f.r1m50.as_secs_f64().max(1e-9),
        ssd_write_bytes: mib / f.transfer_w.as_secs_f64(),
        ssd_iops: p.rand_read_iops,
        ssd_queue_depth: 32,
        ssd_p50: f.r4k50.max(Duration::from_nanos(1)),
        ssd_p99: f.r4k99.max(f.r4k50).max(Duration::from_nanos(1)),
        ssd_sync: f.sync50,
        ssd_sync_p99: f.sync99,
        ssd_transfer_spread: (f.r1m99.as_secs_f64() / f.r1m50.as_secs_f64().max(1e-9)).max(1.0),
        // The update's tail beyond its median, all of it on the transfer (the sync draws its
        // own spread on top, from the commits).
        ssd_write_spread: (f.u99.saturating_sub(f.sync50).as_secs_f64()
            / f.transfer_w.as_secs_f64())
        .max(1.0),
        cpu_cores: m.cores,
        cpu_request: f.cpu_msg,
        cpu_byte_ns: m.crc_ns_per_byte * PASSES_PER_HOP + f.transport_byte_ns,
        shared_host: true,
    }
}

/// Where each of the profile's values comes from, one line per value (or group of values).
fn provenance(m: &Measured, f: &Figures) -> Vec<String> {
    let (p, s) = (&m.probe, &m.sample.store);
    vec![
        format!(
            "nic_gbps: what 1 MiB adds to a lone message through the TCP transport, {:.0} us \
             (round trip p50 {:.0} us with a 1 MiB bulk part, p99 {:.0} us; {:.0} us without; \
             streams reach {:.0} MiB/s, probe), less the CPU the transport spends on it \
             ({:.0} us, in cpu_byte_ns): {:.0} us",
            us(f.lone),
            us(f.m1),
            us(f.m1_99),
            us(f.m0),
            p.loopback_mibs,
            us(f.lone.saturating_sub(f.wire_1m())),
            us(f.wire_1m())
        ),
        "nic_message_us, nic_message_p99_us: 0 (on one host a message's stack work is CPU, \
         cpu_request_us, and its wait is latency, nic_latency_us)"
            .into(),
        format!(
            "nic_latency_us, nic_latency_p99_us: half a read of an absent chunk through the \
             running cluster (client, transport both ways, storage service and its store \
             thread; no disk), {} reads one at a time: p50 {:.0} us, p99 {:.0} us, each less \
             the CPU per message (cpu_request_us)",
            m.sample.null.len(),
            us(f.null50),
            us(f.null99)
        ),
        format!(
            "ssd_p50_us, ssd_p99_us: the io_uring chunk store's 4 KiB reads, one at a time, p50 \
             {:.0} us, p99 {:.0} us ({} reads)",
            us(f.r4k50),
            us(f.r4k99),
            s.read_4k.len()
        ),
        format!(
            "ssd_mb_s, ssd_transfer_spread: its 1 MiB chunk reads, p50 {:.0} us, p99 {:.0} us \
             ({} reads)",
            us(f.r1m50),
            us(f.r1m99),
            s.read_1m.len()
        ),
        format!(
            "ssd_sync_us, ssd_sync_p99_us: its commits (a metadata record made durable), p50 \
             {:.0} us, p99 {:.0} us, less the 4 KiB read median (the model's access latency)",
            us(f.c50),
            us(f.c99)
        ),
        format!(
            "ssd_write_mb_s, ssd_write_spread: its 1 MiB updates (fresh extent, data fdatasync, \
             record, fdatasync), p50 {:.0} us, p99 {:.0} us ({} updates), each less the sync \
             median",
            us(f.u50),
            us(f.u99),
            s.update_1m.len()
        ),
        format!(
            "ssd_iops: 4 KiB O_DIRECT random reads {:.0} IOPS at qd {} (probe)",
            p.rand_read_iops, p.qd
        ),
        "ssd_queue_depth: 32, ASSUMED (jobs at depth 1 never reach it)".into(),
        format!("cpu_cores: {} (this host)", m.cores),
        format!(
            "cpu_byte_ns: {PASSES_PER_HOP} pass per received byte (the payload's block \
             checksums) at this CPU's CRC32C speed, {:.3} ns/byte, plus the receiving end's half \
             of the transport's CPU per byte of a 1 MiB bulk part beyond an empty frame (both \
             ends run here: this process's CPU time over the round trips), {:.3} ns/byte",
            m.crc_ns_per_byte, f.transport_byte_ns
        ),
        format!(
            "cpu_request_us: CPU per message on the busy host: every cluster process's and \
             this one's CPU time over {} null reads {NULL_DEPTH_FOR_CPU} at a time, {:.3} s, \
             over their {} messages",
            m.sample.null_cpu_reads,
            m.sample.null_cpu,
            2 * m.sample.null_cpu_reads
        ),
        "shared_host: every node and target of a loopback cluster on one host".into(),
    ]
}

/// The io_uring chunk stores of one chain of `replicas` targets under `dir` (removed after),
/// as the cluster's targets run them on this file system: their operation latencies, one at a
/// time in the order a write reaches them.
pub fn store_probe(dir: &Path, replicas: u32) -> Result<StoreLatencies, String> {
    let _ = std::fs::remove_dir_all(dir);
    let mut stores = (0..replicas.max(1))
        .map(|i| {
            let d = dir.join(format!("target-{i}"));
            t3fs_services::chunk_store::UringChunkStore::open(&d)
                .map_err(|e| format!("{}: {e}", d.display()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut chain: Vec<&mut dyn t3fs_core::chunk::ChunkStore> = stores
        .iter_mut()
        .map(|s| s as &mut dyn t3fs_core::chunk::ChunkStore)
        .collect();
    let r = t3fs_real::probe_store::measure(&mut chain, Duration::from_secs(1));
    drop(chain);
    drop(stores);
    let _ = std::fs::remove_dir_all(dir);
    r.map_err(|e| format!("chunk store probe: {e}"))
}

/// Nanoseconds per byte of CRC32C, best of three passes over 64 MiB.
pub fn crc_speed() -> f64 {
    let data = vec![7u8; 64 << 20];
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        std::hint::black_box(t3fs_core::crc32c::checksum(&data));
        best = best.min(t.elapsed().as_secs_f64() * 1e9 / data.len() as f64);
    }
    best
}

/// Reads of absent chunks through the cluster in `cluster` for `for_`, `depth` at a time: a
/// request's round trip through the whole stack with no disk under it (sorted).
pub fn null_requests(
    cluster: &Path,
    for_: Duration,
    depth: usize,
) -> Result<Vec<Duration>, String> {
    use std::sync::Arc;
    use t3fs_core::ids::{ChainId, ChunkId};
    let opts = t3fs_real::cluster::client_options(cluster)?;
    // As `t3fs bench io` runs its client.
    let rt = t3fs_client::client::bench_runtime()?;
    rt.block_on(async {
        let c = Arc::new(
            t3fs_client::client::Client::connect(opts)
                .await
                .map_err(|e| format!("null requests: {e}"))?,
        );
        let stop = Instant::now() + for_;
        let mut streams = tokio::task::JoinSet::new();
        for s in 0..depth.max(1) as u64 {
            let c = c.clone();
            streams.spawn(async move {
                let mut v = Vec::new();
                // Inodes no file has: the meta service numbers from 1 up.
                let mut k = (1u64 << 41) + (s << 32);
                while Instant::now() < stop {
                    k += 1;
                    let t = Instant::now();
                    let read = c.read_chunk(ChainId(1), ChunkId::new(k, 0), 1 << 20, 0, 4096);
                    read.await.map_err(|e| format!("null request: {e}"))?;
                    v.push(t.elapsed());
                }
                Ok::<_, String>(v)
            });
        }
        let mut v = Vec::new();
        while let Some(done) = streams.join_next().await {
            v.extend(done.map_err(|e| format!("null requests: {e}"))??);
        }
        if let Ok(c) = Arc::try_unwrap(c) {
            c.close().await;
        }
        v.sort();
        Ok(v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_is_the_measurements_mapped_as_documented() {
        let probe = t3fs_real::probe::Probe::parse(
            r#"{"at": 1, "disk_write_mibs": 900, "disk_write_buffered_mibs": 600,
                "disk_read_mibs": 2000, "rand_read_iops": 10000, "qd": 1, "write_qd": 1,
                "loopback_mibs": 4000, "loopback_streams": 2}"#,
        )
        .expect("probe json");
        let d = Duration::from_micros;
        // 100 sorted latencies whose median is `p50` and 99th percentile `p99`.
        let lat = |p50: u64, p99: u64| {
            let mut v = vec![d(1); 50];
            v.extend(std::iter::repeat_n(d(p50), 49));
            v.push(d(p99));
            v
        };
        let store = StoreLatencies {
            read_4k: lat(80, 400),
            read_1m: lat(1000, 1500),
            update_1m: lat(1300, 3000),
            commit: lat(380, 880),
        };
        // The null reads cost 20 us of CPU per message (two a read); a 1 MiB bulk part costs the
        // transport's two ends 0.2 ns of CPU per byte beyond an empty frame's 10 us, the
        // receiver half of it.
        let mib = (1u64 << 20) as f64;
        let sample = Sample {
            store,
            null: lat(100, 300),
            message: (lat(60, 90), lat(1060, 2000)),
            null_cpu: 100.0 * 2.0 * 20e-6,
            null_cpu_reads: 100,
            message_cpu: (100.0 * 10e-6, 100.0 * (10e-6 + 0.2e-9 * mib)),
        };
        let m = Measured {
            probe,
            sample,
            crc_ns_per_byte: 0.1,
            cores: 2,
        };
        let (hw, why) = this_host(&m);
        let wire = 1000e-6 - 0.1e-9 * mib;
        assert!(
            (hw.nic_bytes / (mib / wire) - 1.0).abs() < 1e-6,
            "1 MiB's share of a lone message, less the transport's CPU on it: {}",
            hw.nic_bytes
        );
        assert_eq!((hw.nic_message, hw.nic_message_p99), (d(0), d(0)));
        assert_eq!(hw.cpu_request, d(20), "the null reads' CPU per message");
        assert_eq!(
            (hw.nic_latency, hw.nic_latency_p99),
            (d(30), d(130)),
            "half a null read less its CPU"
        );
        assert_eq!((hw.ssd_p50, hw.ssd_p99), (d(80), d(400)));
        assert_eq!(hw.ssd_bytes, mib / 1000e-6);
        assert!((hw.ssd_transfer_spread - 1.5).abs() < 1e-12);
        assert_eq!(
            (hw.ssd_sync, hw.ssd_sync_p99),
            (d(300), d(800)),
            "commits less the access latency"
        );
        assert_eq!(hw.ssd_write_bytes, mib / 1000e-6, "updates less the sync");
        assert!(
            (hw.ssd_write_spread - 2.7).abs() < 1e-12,
            "the update's p99 less the sync, over its median less the sync"
        );
        assert!(
            (hw.cpu_byte_ns - 0.2).abs() < 1e-9,
            "CRC32C and the transport's receiving half: {}",
            hw.cpu_byte_ns
        );
        assert!(hw.shared_host);
        assert!(
            why.iter().any(|w| w.contains("ASSUMED")),
            "assumptions are named"
        );
    }

    #[test]
    fn pooled_samples_hold_every_rounds_latencies_sorted() {
        let d = Duration::from_micros;
        let round = |a: u64, b: u64| Sample {
            store: StoreLatencies {
                read_4k: vec![d(a), d(b)],
                ..StoreLatencies::default()
            },
            null: vec![d(a)],
            message: (vec![d(b)], Vec::new()),
            null_cpu: a as f64,
            null_cpu_reads: 2,
            message_cpu: (b as f64, 0.5),
        };
        let p = Sample::pooled(&[&round(5, 9), &round(1, 7)]);
        assert_eq!(
            (p.null_cpu, p.message_cpu),
            (6.0, (16.0, 1.0)),
            "CPU times add up"
        );
        assert_eq!(p.store.read_4k, vec![d(1), d(5), d(7), d(9)]);
        assert_eq!((p.null, p.message.0), (vec![d(1), d(5)], vec![d(7), d(9)]));
        assert!(p.store.commit.is_empty() && p.message.1.is_empty());
    }

    #[test]
    fn the_median_and_tail_of_sorted_latencies() {
        let v: Vec<Duration> = (1..=200).map(Duration::from_micros).collect();
        assert_eq!(
            p50_p99(&v),
            (Duration::from_micros(101), Duration::from_micros(199))
        );
        assert_eq!(p50_p99(&[]), (Duration::ZERO, Duration::ZERO));
    }
}
