//! Real reads and writes through the running cluster, several at a time, and the CPU the whole
//! host spends on each: what a request costs the cores when they are busy, which the probes of
//! single components (a null request, a lone round trip, the store alone) do not add up to.
//!
//! Three phases on one file of the cluster, each by `depth` clients at once (each its own
//! connections, one operation at a time, as `bench io --numjobs` runs the jobs) for a fixed
//! time, each with every cluster process's and this process's CPU time around it: 1 MiB writes
//! (the file is laid down by them), 4 KiB reads at random block offsets in it, and 1 MiB reads
//! of whole chunks. The profile takes its CPU beside a message's path from them
//! (`calibrate_profile.rs`).
//!
//! Invariant: every operation must succeed; a failure ends the probe with its error, never a
//! figure. The file is removed after, pass or fail. Not here: latencies (the jobs measure
//! them), and deciding what the CPU means (the profile).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use t3fs_client::client::{Client, File};

/// CPU seconds a phase cost the host, over how many operations.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseCpu {
    /// Operations completed.
    pub ops: usize,
    /// CPU seconds of every cluster process and this one over the phase.
    pub cpu: f64,
}

impl PhaseCpu {
    /// CPU seconds per operation (0 with none).
    pub fn per_op(&self) -> f64 {
        self.cpu / self.ops.max(1) as f64
    }

    /// Phases pooled: their operations and CPU summed.
    pub fn sum(all: impl Iterator<Item = PhaseCpu>) -> PhaseCpu {
        all.fold(PhaseCpu::default(), |a, b| PhaseCpu {
            ops: a.ops + b.ops,
            cpu: a.cpu + b.cpu,
        })
    }
}

/// What the three phases cost.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LoadCpu {
    /// 1 MiB writes (each down the whole chain).
    pub write_1m: PhaseCpu,
    /// 4 KiB reads at random block offsets.
    pub read_4k: PhaseCpu,
    /// 1 MiB reads of whole chunks.
    pub read_1m: PhaseCpu,
    /// The replicas of the file's chain.
    pub replicas: u32,
}

const MIB: u64 = 1 << 20;
/// The file's largest size: its writes stop here even if time is left (disk space is bounded).
const FILE_MIB: u64 = 256;

/// Runs the three phases through the cluster in `cluster` (chains of `replicas`), `depth`
/// streams at once, for `each` apiece.
pub fn measure(
    cluster: &Path,
    replicas: u32,
    each: Duration,
    depth: usize,
) -> Result<LoadCpu, String> {
    use crate::calibrate_cpu::cluster_cpu_of;
    let opts = t3fs_real::cluster::client_options(cluster)?;
    let rt = t3fs_client::client::bench_runtime()?;
    let path = format!("/.calibrate-load-{}", std::process::id());
    let clients = rt.block_on(async {
        let mut v = Vec::new();
        for _ in 0..depth.max(1) {
            let c = Client::connect(opts.clone()).await;
            v.push(Arc::new(c.map_err(|e| format!("load probe: {e}"))?));
        }
        Ok::<_, String>(v)
    })?;
    let c = &clients;
    let phases = || -> Result<LoadCpu, String> {
        let f = rt
            .block_on(c[0].create(&path, 0o644))
            .map_err(|e| format!("load probe: create {path}: {e}"))?;
        let (written, write_cpu) = cluster_cpu_of(cluster, || rt.block_on(writes(c, &f, each)));
        let mib = written?;
        rt.block_on(c[0].close_file(&f, mib * MIB))
            .map_err(|e| format!("load probe: close {path}: {e}"))?;
        let mut out = LoadCpu {
            write_1m: PhaseCpu {
                ops: mib as usize,
                cpu: write_cpu,
            },
            replicas,
            ..LoadCpu::default()
        };
        for (len, into) in [(4096, &mut out.read_4k), (MIB, &mut out.read_1m)] {
            let (n, cpu) = cluster_cpu_of(cluster, || rt.block_on(reads(c, &f, mib, len, each)));
            *into = PhaseCpu { ops: n?, cpu };
        }
        Ok(out)
    };
    let out = phases();
    rt.block_on(async {
        let _ = clients[0].remove(&path, false).await;
        for c in clients {
            if let Ok(c) = Arc::try_unwrap(c) {
                c.close().await;
            }
        }
    });
    out
}

/// 1 MiB writes by each of `clients`, client `s` of `n` at MiB `s`, `s + n`, … until `each`
/// passed or the file reached its largest size: how many MiB it holds from its start.
async fn writes(clients: &[Arc<Client>], f: &File, each: Duration) -> Result<u64, String> {
    let stop = Instant::now() + each;
    let depth = clients.len() as u64;
    let mut streams = tokio::task::JoinSet::new();
    for (s, c) in (0..depth).zip(clients) {
        let (c, f) = (c.clone(), f.clone());
        streams.spawn(async move {
            let data: Vec<u8> = (0..MIB).map(|i| (i * 7 + s) as u8).collect();
            let mut k = s;
            while k < FILE_MIB && Instant::now() < stop {
                c.write(&f, k * MIB, data.clone())
                    .await
                    .map_err(|e| format!("load probe: write at MiB {k}: {e}"))?;
                k += depth;
            }
            Ok::<u64, String>(k)
        });
    }
    // The file holds every MiB below the first one some stream did not write.
    let mut end = FILE_MIB;
    while let Some(done) = streams.join_next().await {
        end = end.min(done.map_err(|e| format!("load probe: {e}"))??);
    }
    Ok(end)
}

/// Reads of `len` bytes at `len`-aligned offsets in the first `mib` MiB of `f` (random for
/// 4 KiB, each client's run of chunks in turn for 1 MiB), one at a time by each of `clients`
/// for `each`: how many completed.
async fn reads(
    clients: &[Arc<Client>],
    f: &File,
    mib: u64,
    len: u64,
    each: Duration,
) -> Result<usize, String> {
    let stop = Instant::now() + each;
    let slots = (mib * MIB / len).max(1);
    let depth = clients.len() as u64;
    let mut streams = tokio::task::JoinSet::new();
    for (s, c) in (0..depth).zip(clients) {
        let (c, f) = (c.clone(), f.clone());
        streams.spawn(async move {
            let (mut n, mut x) = (0usize, 0x9E37_79B9_7F4A_7C15u64 ^ (s + 1));
            while Instant::now() < stop {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let slot = if len == MIB {
                    (s + n as u64 * depth) % slots
                } else {
                    x % slots
                };
                let got = c
                    .read(&f, slot * len, len)
                    .await
                    .map_err(|e| format!("load probe: read at {}: {e}", slot * len))?;
                if got.len() as u64 != len {
                    return Err(format!("load probe: read {} of {len} bytes", got.len()));
                }
                n += 1;
            }
            Ok::<usize, String>(n)
        });
    }
    let mut total = 0;
    while let Some(done) = streams.join_next().await {
        total += done.map_err(|e| format!("load probe: {e}"))??;
    }
    Ok(total)
}
