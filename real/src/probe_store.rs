//! The chunk store's own operation latencies on this disk: what one simulated SSD is calibrated
//! from (`t3fs calibrate`).
//!
//! The stores of one chain (one per replica, each in its own directory on the same file system,
//! as a loopback cluster's targets are) are driven one operation at a time, in the order a
//! depth-1 job's write reaches them: a 1 MiB whole-chunk update on each from head to tail, then
//! the commits from tail to head, over a set of chunks (so extents are freed and reused as in a
//! running target); then 1 MiB reads of whole chunks and 4 KiB reads at random block offsets
//! from the head's store. Measured alone, one store's commits were about half as long as a
//! running cluster's (which shares its disk and file system journal with the other replicas'
//! stores). Each operation is timed from submission to its completion, so the store's own work
//! (copy-on-write into a fresh extent, data fdatasync, metadata record and its fdatasync,
//! checksum verification on reads) is in the figures, which a raw-disk probe (`probe.rs`)
//! leaves out.
//!
//! Invariant: every operation must succeed; a failure ends the probe with its error, never a
//! figure. Not here: the store's thread hand-off and the network (the calibration measures
//! those with a request through the running cluster), and concurrency (the disk's bounds under
//! load are `probe.rs`'s).

use std::time::{Duration, Instant};

use t3fs_core::chunk::{ChunkDone, ChunkOp, ChunkStore, UpdateKind};
use t3fs_core::ids::{ChainVersion, ChunkId, ChunkVersion, IoId};
use t3fs_core::payload::Payload;

/// Sorted latencies of each kind of operation.
#[derive(Clone, Debug, Default)]
pub struct StoreLatencies {
    /// 4 KiB reads at a random block of a random chunk.
    pub read_4k: Vec<Duration>,
    /// Whole-chunk (1 MiB) reads.
    pub read_1m: Vec<Duration>,
    /// Whole-chunk (1 MiB) updates, durable when they complete.
    pub update_1m: Vec<Duration>,
    /// Commits of those updates (a metadata record made durable).
    pub commit: Vec<Duration>,
}

/// Chunks written and read: enough that an update's fresh extent is not the one just freed.
const CHUNKS: u32 = 64;
const MIB: u32 = 1 << 20;

/// Drives the chain `stores` (head first) for about `each` per kind of operation (the writes at
/// least once over every chunk, so the reads find data).
pub fn measure(
    stores: &mut [&mut dyn ChunkStore],
    each: Duration,
) -> Result<StoreLatencies, String> {
    let mut ids = 0;
    let mut out = StoreLatencies::default();
    let data: Payload = (0..MIB)
        .map(|i| (i * 7 % 251) as u8)
        .collect::<Vec<_>>()
        .into();
    let chunk = |k: u32| ChunkId::new(1 << 40, k);
    let stop = Instant::now() + each;
    let mut round = 0;
    while round == 0 || Instant::now() < stop {
        round += 1;
        for k in 0..CHUNKS {
            let version = ChunkVersion(round);
            for store in stores.iter_mut() {
                let kind = UpdateKind::Replace { data: data.clone() };
                let update = ChunkOp::Update {
                    chunk: chunk(k),
                    version,
                    kind,
                    tag: None,
                };
                out.update_1m.push(run(&mut **store, &mut ids, update)?);
            }
            for store in stores.iter_mut().rev() {
                let commit = ChunkOp::Commit {
                    chunk: chunk(k),
                    version,
                    chain_version: ChainVersion(1),
                };
                out.commit.push(run(&mut **store, &mut ids, commit)?);
            }
        }
    }
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for (len, into) in [(MIB, &mut out.read_1m), (4096, &mut out.read_4k)] {
        let stop = Instant::now() + each;
        while Instant::now() < stop {
            let r = next(&mut x);
            let offset = if len == MIB {
                0
            } else {
                (r >> 32) as u32 % (MIB / 4096) * 4096
            };
            let read = ChunkOp::Read {
                chunk: chunk(r as u32 % CHUNKS),
                offset,
                len,
                uncommitted: false,
                unverified: false,
            };
            let head = stores.first_mut().ok_or("no store to probe")?;
            into.push(run(&mut **head, &mut ids, read)?);
        }
    }
    for v in [
        &mut out.read_4k,
        &mut out.read_1m,
        &mut out.update_1m,
        &mut out.commit,
    ] {
        v.sort();
    }
    Ok(out)
}

/// xorshift64.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Submits `op` to `store` and waits for it: its latency, or why it failed.
fn run(store: &mut dyn ChunkStore, next: &mut u64, op: ChunkOp) -> Result<Duration, String> {
    *next += 1;
    let id = IoId(*next);
    // Named before it moves; not by its Debug form, which prints a payload's every byte.
    let what = match &op {
        ChunkOp::Update { chunk, .. } => format!("update of {chunk:?}"),
        ChunkOp::Commit { chunk, .. } => format!("commit of {chunk:?}"),
        ChunkOp::Read { chunk, len, .. } => format!("{len}-byte read of {chunk:?}"),
        _ => "operation".to_string(),
    };
    let t = Instant::now();
    store.submit(id, op);
    let mut done = Vec::new();
    loop {
        store.poll_completions(&mut done);
        if let Some((_, r)) = done.iter().find(|(i, _)| *i == id) {
            let lat = t.elapsed();
            return match r {
                Ok(ChunkDone::Read(Some(_)) | ChunkDone::Updated(_) | ChunkDone::Committed(_)) => {
                    Ok(lat)
                }
                Ok(other) => Err(format!("{what}: unexpected {other:?}")),
                Err(e) => Err(format!("{what}: {e:?}")),
            };
        }
        if store.in_flight() > 0 {
            store.wait(Duration::from_millis(10));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_probe_times_every_kind_of_operation_and_sorts_them() {
        let dir = std::env::temp_dir().join(format!("t3fs-probe-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let open =
            |i: u32| t3fs_services::chunk_store::FileChunkStore::open(&dir.join(i.to_string()));
        let (mut a, mut b) = (open(0).expect("open"), open(1).expect("open"));
        let l = measure(&mut [&mut a, &mut b], Duration::from_millis(20)).expect("probe");
        std::fs::remove_dir_all(&dir).expect("cleanup");
        let writes = 2 * CHUNKS as usize;
        assert!(l.update_1m.len() >= writes && l.commit.len() == l.update_1m.len());
        for v in [&l.read_4k, &l.read_1m, &l.update_1m, &l.commit] {
            assert!(!v.is_empty() && v.windows(2).all(|w| w[0] <= w[1]));
        }
    }
}
