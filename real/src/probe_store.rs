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

use std::collections::BTreeMap;
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
    /// 1 MiB reads and 1 MiB updates (each with its commit) per second with
    /// [`DEPTH`] in flight ([`measure_depth`]), in MiB: one figure per round measured.
    pub read_depth_mib_s: Vec<f64>,
    /// See `read_depth_mib_s`.
    pub write_depth_mib_s: Vec<f64>,
    /// Through a store thread, as a node hands its operations over, one at a time: reads of
    /// absent chunks (no I/O: the hand-off alone) and 4 KiB reads ([`measure_threaded`]).
    pub threaded_null: Vec<Duration>,
    /// See `threaded_null`.
    pub threaded_read_4k: Vec<Duration>,
    /// This process's CPU seconds over each kind's operations, submission to completion, in
    /// the order above: the store's own work (copies, checksums, system calls, its io_uring
    /// workers), which a busy host queues on its cores.
    pub cpu: [f64; 4],
}

impl StoreLatencies {
    /// CPU seconds per operation of each kind (read 4 KiB, read 1 MiB, update, commit).
    pub fn cpu_per_op(&self) -> [f64; 4] {
        let n = [&self.read_4k, &self.read_1m, &self.update_1m, &self.commit].map(|v| v.len());
        std::array::from_fn(|i| self.cpu[i] / n[i].max(1) as f64)
    }
}

/// Chunks written and read: enough that an update's fresh extent is not the one just freed.
const CHUNKS: u32 = 64;
/// Operations in flight in [`measure_depth`] as `t3fs calibrate` runs it: as many as the
/// concurrency variants of its jobs have.
pub const DEPTH: usize = 8;
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
                let (lat, cpu) = run(&mut **store, &mut ids, update)?;
                out.update_1m.push(lat);
                out.cpu[2] += cpu;
            }
            for store in stores.iter_mut().rev() {
                let commit = ChunkOp::Commit {
                    chunk: chunk(k),
                    version,
                    chain_version: ChainVersion(1),
                };
                let (lat, cpu) = run(&mut **store, &mut ids, commit)?;
                out.commit.push(lat);
                out.cpu[3] += cpu;
            }
        }
    }
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let (r1m, r4k) = (&mut out.read_1m, &mut out.read_4k);
    let (c4k, c1m) = out.cpu.split_at_mut(1);
    for (len, into, cpu) in [(MIB, r1m, &mut c1m[0]), (4096, r4k, &mut c4k[0])] {
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
            let (lat, c) = run(&mut **head, &mut ids, read)?;
            into.push(lat);
            *cpu += c;
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

/// Aggregate rates of the chain `stores` with `depth` operations in flight, spread over the
/// stores in turn, for about `each` apiece: 1 MiB reads of the chunks [`measure`] wrote, then
/// 1 MiB updates each followed by its commit (on chunks of their own), in MiB per second. What
/// one disk serves several at a time, which a lone operation's time does not say (a virtual
/// disk served 8 reads at once at three times one's rate).
pub fn measure_depth(
    stores: &mut [&mut dyn ChunkStore],
    each: Duration,
    depth: usize,
) -> Result<(f64, f64), String> {
    let n = stores.len();
    if n == 0 {
        return Err("no store to probe".into());
    }
    let data: Payload = vec![5u8; MIB as usize].into();
    let mut ids = 1 << 32;
    // Slot i: the store it runs on, its chunk, and the version its next update writes.
    let slots: Vec<(usize, ChunkId)> = (0..depth.max(1))
        .map(|i| (i % n, ChunkId::new((1 << 40) + 1, i as u32)))
        .collect();
    let mut version = vec![0u32; slots.len()];
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let read = |x: &mut u64| ChunkOp::Read {
        chunk: ChunkId::new(1 << 40, next(x) as u32 % CHUNKS),
        offset: 0,
        len: MIB,
        uncommitted: false,
        unverified: false,
    };
    let reads = in_flight(stores, &slots, each, |_, _| read(&mut x), &mut ids)?;
    // Each slot's update, then that update's commit, then the next version's update.
    let write = |slot: usize, last: Option<&ChunkOp>| {
        let chunk = slots[slot].1;
        match last {
            Some(ChunkOp::Update { version: v, .. }) => ChunkOp::Commit {
                chunk,
                version: *v,
                chain_version: ChainVersion(1),
            },
            _ => {
                version[slot] += 1;
                ChunkOp::Update {
                    chunk,
                    version: ChunkVersion(version[slot]),
                    kind: UpdateKind::Replace { data: data.clone() },
                    tag: None,
                }
            }
        }
    };
    let writes = in_flight(stores, &slots, each, write, &mut ids)?;
    // A write is an update and its commit: half the operations completed.
    Ok((reads.0 as f64 / reads.1, writes.0 as f64 / 2.0 / writes.1))
}

/// Reads through `store` on a store thread of its own as a node runs it: submitted from a task
/// on a two-worker tokio runtime (as `t3fs serve` builds), completions handed back through a
/// tokio channel that task awaits (as the node's driver does), one at a time for about `each`
/// apiece: reads of absent chunks, then 4 KiB reads at random blocks of the chunks [`measure`]
/// wrote. Their latencies, sorted: what the hand-off costs alone, and with the store's I/O.
///
/// Why a tokio waiter, not a blocking one: the answer to a present read comes after the store's
/// I/O, when the runtime's workers have parked; waking a parked worker is part of what a node's
/// read costs and a thread blocked on a channel does not pay it the same way.
pub fn measure_threaded(
    store: Box<dyn ChunkStore + Send>,
    each: Duration,
) -> Result<(Vec<Duration>, Vec<Duration>), String> {
    use t3fs_services::chunk_store::StoreThread;
    let rt = t3fs_client::client::bench_runtime()?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let done = Box::new(
        move |id: IoId, r: Result<ChunkDone, t3fs_core::chunk::ChunkError>| {
            let _ = tx.send((id, r));
        },
    );
    let handle =
        StoreThread::spawn("store-probe", store, done).map_err(|e| format!("store thread: {e}"))?;
    let run = async move {
        let (mut x, mut id) = (0x1234_5678_9ABC_DEF1u64, 0u64);
        let mut out = (Vec::new(), Vec::new());
        for absent in [true, false] {
            let stop = Instant::now() + each;
            while Instant::now() < stop {
                let r = next(&mut x);
                let chunk = if absent {
                    ChunkId::new(1 << 41, r as u32)
                } else {
                    ChunkId::new(1 << 40, r as u32 % CHUNKS)
                };
                let op = ChunkOp::Read {
                    chunk,
                    offset: (r >> 32) as u32 % (MIB / 4096) * 4096,
                    len: 4096,
                    uncommitted: false,
                    unverified: false,
                };
                id += 1;
                let t = Instant::now();
                handle.submit(IoId(id), op);
                let (got, r) = rx.recv().await.ok_or("the store thread ended")?;
                let lat = t.elapsed();
                match (got == IoId(id), r, absent) {
                    (true, Ok(ChunkDone::Read(None)), true) => out.0.push(lat),
                    (true, Ok(ChunkDone::Read(Some(_))), false) => out.1.push(lat),
                    (_, r, _) => return Err(format!("threaded read {id}: {r:?}")),
                }
            }
        }
        handle.shutdown();
        Ok(out)
    };
    let mut out = rt.block_on(async move {
        tokio::spawn(run)
            .await
            .map_err(|e| format!("threaded reads: {e}"))?
    })?;
    out.0.sort();
    out.1.sort();
    Ok(out)
}

/// Keeps one operation in flight per slot (on its store) for about `each`, each slot's next
/// made by `next_op` from the one it just completed (`None` for its first): how many
/// completed, over how many seconds (the in-flight ones drained at the end count).
fn in_flight(
    stores: &mut [&mut dyn ChunkStore],
    slots: &[(usize, ChunkId)],
    each: Duration,
    mut next_op: impl FnMut(usize, Option<&ChunkOp>) -> ChunkOp,
    ids: &mut u64,
) -> Result<(usize, f64), String> {
    let t = Instant::now();
    let mut running: BTreeMap<u64, (usize, ChunkOp)> = BTreeMap::new();
    let mut submit = |stores: &mut [&mut dyn ChunkStore],
                      running: &mut BTreeMap<u64, (usize, ChunkOp)>,
                      slot: usize,
                      op: ChunkOp| {
        *ids += 1;
        let store: usize = slots[slot].0;
        stores[store].submit(IoId(*ids), ChunkOp::clone(&op));
        running.insert(*ids, (slot, op));
    };
    for slot in 0..slots.len() {
        let op = next_op(slot, None);
        submit(stores, &mut running, slot, op);
    }
    let (mut done_ops, mut done) = (0, Vec::new());
    while !running.is_empty() {
        let mut progressed = false;
        for s in 0..stores.len() {
            done.clear();
            stores[s].poll_completions(&mut done);
            for (id, r) in done.drain(..) {
                let (slot, op) = running
                    .remove(&id.0)
                    .ok_or("a completion nobody submitted")?;
                if let Err(e) = r {
                    return Err(format!("store probe at depth: {e:?}"));
                }
                done_ops += 1;
                progressed = true;
                if t.elapsed() < each {
                    let next = next_op(slot, Some(&op));
                    submit(stores, &mut running, slot, next);
                }
            }
        }
        if !progressed {
            std::hint::spin_loop();
        }
    }
    Ok((done_ops, t.elapsed().as_secs_f64()))
}

/// xorshift64.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Submits `op` to `store` and waits for it: its latency and this process's CPU seconds over
/// it, or why it failed.
fn run(store: &mut dyn ChunkStore, next: &mut u64, op: ChunkOp) -> Result<(Duration, f64), String> {
    *next += 1;
    let id = IoId(*next);
    // Named before it moves; not by its Debug form, which prints a payload's every byte.
    let what = match &op {
        ChunkOp::Update { chunk, .. } => format!("update of {chunk:?}"),
        ChunkOp::Commit { chunk, .. } => format!("commit of {chunk:?}"),
        ChunkOp::Read { chunk, len, .. } => format!("{len}-byte read of {chunk:?}"),
        _ => "operation".to_string(),
    };
    let (t, cpu) = (Instant::now(), crate::cpu::self_cpu());
    store.submit(id, op);
    let mut done = Vec::new();
    loop {
        store.poll_completions(&mut done);
        if let Some((_, r)) = done.iter().find(|(i, _)| *i == id) {
            let lat = t.elapsed();
            let cpu = crate::cpu::self_cpu().saturating_sub(cpu).as_secs_f64();
            return match r {
                Ok(ChunkDone::Read(Some(_)) | ChunkDone::Updated(_) | ChunkDone::Committed(_)) => {
                    Ok((lat, cpu))
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
        let each = Duration::from_millis(20);
        let l = measure(&mut [&mut a, &mut b], each).expect("probe");
        let (read, write) = measure_depth(&mut [&mut a, &mut b], each, DEPTH).expect("at depth");
        drop(a);
        let a = t3fs_services::chunk_store::FileChunkStore::open(&dir.join("0")).expect("reopen");
        let (null, read_4k) = measure_threaded(Box::new(a), each).expect("threaded");
        std::fs::remove_dir_all(&dir).expect("cleanup");
        assert!(!null.is_empty() && !read_4k.is_empty());
        assert!(null.windows(2).all(|w| w[0] <= w[1]) && read_4k.windows(2).all(|w| w[0] <= w[1]));
        assert!(read > 0.0 && write > 0.0, "{read} {write} MiB/s");
        let writes = 2 * CHUNKS as usize;
        assert!(l.update_1m.len() >= writes && l.commit.len() == l.update_1m.len());
        for v in [&l.read_4k, &l.read_1m, &l.update_1m, &l.commit] {
            assert!(!v.is_empty() && v.windows(2).all(|w| w[0] <= w[1]));
        }
        // Every 1 MiB update checksums its megabyte in this process.
        let per_op = l.cpu_per_op();
        assert!(per_op[2] > 0.0, "CPU per update {:?}", per_op);
    }
}
