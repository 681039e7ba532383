//! The probes one round of `t3fs calibrate` runs besides the load (`calibrate_load.rs`): the
//! io_uring chunk stores of one chain on the cluster's file system, this CPU's CRC32C speed, and
//! reads of absent chunks through the running cluster.
//!
//! Invariant: a probe that fails ends the round with its error, never a figure; what a probe
//! writes on disk is removed after it. Not here: what the figures become (`calibrate_profile.rs`).

use std::path::Path;
use std::time::{Duration, Instant};

use t3fs_real::probe_store::StoreLatencies;

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
    use t3fs_real::probe_store::{measure, measure_depth, DEPTH};
    let each = Duration::from_secs(1);
    let r = measure(&mut chain, each).and_then(|mut r| {
        let (read, write) = measure_depth(&mut chain, each, DEPTH)?;
        (r.read_depth_mib_s, r.write_depth_mib_s) = (vec![read], vec![write]);
        Ok(r)
    });
    drop(chain);
    drop(stores);
    // The head's store again, now on a store thread as a node runs it.
    let r = r.and_then(|mut r| {
        let head = t3fs_services::chunk_store::UringChunkStore::open(&dir.join("target-0"))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        (r.threaded_null, r.threaded_read_4k) =
            t3fs_real::probe_store::measure_threaded(Box::new(head), each)?;
        Ok(r)
    });
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
