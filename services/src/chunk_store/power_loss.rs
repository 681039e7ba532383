//! Power-loss tests of the file store on [`LazyFs`]: a random workload runs in lockstep with
//! the in-memory reference store until the power fails at a random call; the file system then
//! keeps what was synced plus a random, possibly torn, prefix of what was not; the store is
//! reopened and checked:
//! - every commit the store reported is there (committed version at least the reported one);
//! - every committed or pending version it lists reads back exactly the bytes the reference
//!   computed for that (chunk, version) — versions are unique per chunk in this workload, so a
//!   version names one content;
//! - on a disk that ignores the data file's flushes, lost data reads as `Corrupt`, never as
//!   other bytes.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use t3fs_core::chunk::{ChunkDone, ChunkError, ChunkMeta, ChunkOp, ChunkStore, UpdateKind};
use t3fs_core::ids::{ChainVersion, ChunkId, ChunkVersion, IoId};
use t3fs_core::testing::MemChunkStore;

use super::{FileChunkStore, Options};
use crate::durable::lazy_fs::LazyFs;
use crate::durable::power_loss::XorShift;

/// 1 to `max` bytes counting up from a random one.
fn bytes(rng: &mut XorShift, max: u64) -> Vec<u8> {
    let n = 1 + rng.below(max);
    let b = rng.below(256) as u8;
    (0..n).map(|i| b.wrapping_add(i as u8)).collect()
}

type Versions = BTreeMap<(ChunkId, u32), Vec<u8>>;

/// Picks the next op for `c` from the reference's state: commit a pending version, else
/// (rarely) install, else update to committed + 1.
fn next_op(rng: &mut XorShift, model: &MemChunkStore, c: ChunkId) -> ChunkOp {
    let m = model.chunks().get(&c);
    let committed = m.map_or(0, |m| m.committed.0);
    if let Some((v, _)) = m.and_then(|m| m.pending.as_ref()) {
        return ChunkOp::Commit {
            chunk: c,
            version: *v,
            chain_version: ChainVersion(1),
        };
    }
    let version = ChunkVersion(committed + 1);
    if rng.below(10) == 0 {
        return ChunkOp::Install {
            chunk: c,
            version,
            chain_version: ChainVersion(2),
            data: Some(bytes(rng, 9000).into()),
        };
    }
    let kind = match rng.below(5) {
        0 => UpdateKind::Replace {
            data: bytes(rng, 12000).into(),
        },
        1 => UpdateKind::Truncate {
            len: rng.below(9000) as u32,
        },
        2 => UpdateKind::Extend {
            len: rng.below(16000) as u32,
        },
        _ => UpdateKind::Write {
            offset: rng.below(10000) as u32,
            data: bytes(rng, 5000).into(),
        },
    };
    ChunkOp::Update {
        chunk: c,
        version,
        kind,
        tag: None,
    }
}

/// Runs one workload and crash; returns how many reads answered `Corrupt` after it.
/// `lie`: files whose fdatasyncs do nothing; `Corrupt` reads are accepted when it is not empty.
fn run(seed: u64, lie: &[&str]) -> usize {
    let mut rng = XorShift::new(seed);
    let fs = LazyFs::new();
    fs.state().lie_sync = lie.iter().map(|s| s.to_string()).collect();
    let lie_data = !lie.is_empty();
    let dir = Path::new("/s");
    let opts = Options { compact_min: 8 };
    let open = || FileChunkStore::open_with(Arc::new(fs.clone()), dir, opts);
    let mut store = open().expect("open");
    let w = run_workload(&mut rng, &fs, &mut store, seed);
    drop(store);
    fs.crash_writes(|n| rng.below(n as u64) as usize);
    let store = open().unwrap_or_else(|e| panic!("seed {seed}: reopen: {e}"));
    let mut r = Reopened {
        store,
        next_id: w.next_id,
    };
    let metas = r.check_acked(&w.acked, seed);
    let corrupt = r.check_reads(&metas, &w, lie_data, seed);
    // The reopened store takes new work (after a cut torn tail, too).
    r.check_new_work(seed);
    corrupt
}

/// What the workload before the crash left behind.
struct Workload {
    /// The bytes the reference computed for every committed version.
    committed: Versions,
    /// The bytes the reference computed for every pending version.
    pending: Versions,
    /// The newest commit the store acknowledged, by chunk.
    acked: BTreeMap<ChunkId, u32>,
    /// The last I/O id used.
    next_id: u64,
}

/// Runs batches of random ops on `store` in lockstep with the reference until the power fails
/// (at a random call) or 400 ops ran.
fn run_workload(
    rng: &mut XorShift,
    fs: &LazyFs,
    store: &mut FileChunkStore,
    seed: u64,
) -> Workload {
    let mut model = MemChunkStore::new();
    let (mut committed, mut pending) = (Versions::new(), Versions::new());
    let mut acked: BTreeMap<ChunkId, u32> = BTreeMap::new();
    fs.fail_after(rng.below(300));
    let mut next_id = 0;
    while !fs.is_down() && next_id < 400 {
        let expect = submit_batch(
            rng,
            &mut model,
            store,
            &mut committed,
            &mut pending,
            &mut next_id,
        );
        let mut done = Vec::new();
        store.poll_completions(&mut done);
        assert_eq!(done.len(), expect.len(), "one completion per op");
        for (id, got) in done {
            let (c, want) = &expect[&id];
            match got {
                Err(ChunkError::Failed) if fs.is_down() => {}
                ref got => assert_eq!(got, want, "seed {seed}: {id:?} differs from the reference"),
            }
            if let Ok(ChunkDone::Committed(m)) = got {
                acked.insert(*c, m.committed.0);
            }
        }
    }
    Workload {
        committed,
        pending,
        acked,
        next_id,
    }
}

/// Submits one to four random ops to `store`, each applied to the reference first, recording
/// the bytes of the versions they make; returns each op's chunk and expected answer by id.
fn submit_batch(
    rng: &mut XorShift,
    model: &mut MemChunkStore,
    store: &mut FileChunkStore,
    committed: &mut Versions,
    pending: &mut Versions,
    next_id: &mut u64,
) -> BTreeMap<IoId, (ChunkId, Result<ChunkDone, ChunkError>)> {
    let mut expect = BTreeMap::new();
    for _ in 0..1 + rng.below(4) {
        let c = ChunkId::new(1, rng.below(4) as u32);
        let op = next_op(rng, model, c);
        let want = model.apply(&op);
        let mc = model.chunks().get(&c);
        match &want {
            Ok(ChunkDone::Committed(m)) => {
                let data = mc.map(|mc| mc.data.clone()).unwrap_or_default();
                committed.insert((c, m.committed.0), data.to_vec());
            }
            Ok(ChunkDone::Updated(m)) => {
                let p = m.pending.as_ref().expect("pending").version.0;
                let data = mc.and_then(|mc| mc.pending.clone()?.1).unwrap_or_default();
                pending.insert((c, p), data.to_vec());
            }
            other => panic!("reference answered {other:?}"),
        }
        *next_id += 1;
        expect.insert(IoId(*next_id), (c, want));
        store.submit(IoId(*next_id), op);
    }
    expect
}

/// The store reopened after the crash, with the I/O ids it goes on from.
struct Reopened {
    store: FileChunkStore,
    next_id: u64,
}

impl Reopened {
    /// Runs `op` to its completion.
    fn run1(&mut self, op: ChunkOp) -> Result<ChunkDone, ChunkError> {
        let mut done = Vec::new();
        self.next_id += 1;
        self.store.submit(IoId(self.next_id), op);
        self.store.poll_completions(&mut done);
        done.pop().expect("one completion").1
    }

    /// Lists the chunks and checks that every acknowledged commit is there; returns the list.
    fn check_acked(&mut self, acked: &BTreeMap<ChunkId, u32>, seed: u64) -> Vec<ChunkMeta> {
        let metas = match self.run1(ChunkOp::List) {
            Ok(ChunkDone::Listed(m)) => m,
            other => panic!("list: {other:?}"),
        };
        let listed: BTreeMap<ChunkId, _> = metas.iter().map(|m| (m.chunk, m)).collect();
        for (c, v) in acked {
            let got = listed.get(c).map_or(0, |m| m.committed.0);
            assert!(
                got >= *v,
                "seed {seed}: acknowledged {c} v{v} lost (v{got} after crash)"
            );
        }
        metas
    }

    /// Reads back every committed and pending version listed in `metas` and checks its bytes;
    /// returns how many reads answered `Corrupt` (accepted only when `lie_data`).
    fn check_reads(
        &mut self,
        metas: &[ChunkMeta],
        w: &Workload,
        lie_data: bool,
        seed: u64,
    ) -> usize {
        let mut corrupt = 0;
        for m in metas {
            let mut reads = vec![];
            if m.committed.0 > 0 {
                reads.push((false, m.committed.0, &w.committed));
            }
            if let Some(p) = m.pending.as_ref().filter(|p| !p.removes) {
                reads.push((true, p.version.0, &w.pending));
            }
            for (uncommitted, v, versions) in reads {
                let op = ChunkOp::Read {
                    chunk: m.chunk,
                    offset: 0,
                    len: u32::MAX,
                    uncommitted,
                    unverified: false,
                };
                match self.run1(op) {
                    Ok(ChunkDone::Read(Some(r))) => {
                        let want = versions.get(&(m.chunk, v)).expect("a version written");
                        assert_eq!(r.version.0, v);
                        assert!(
                            &r.data == want,
                            "seed {seed}: {} v{v}: wrong bytes",
                            m.chunk
                        );
                    }
                    Err(ChunkError::Corrupt) if lie_data => corrupt += 1,
                    other => panic!("seed {seed}: read {} v{v}: {other:?}", m.chunk),
                }
            }
        }
        corrupt
    }

    /// Checks that the store takes new work: an install of a fresh chunk.
    fn check_new_work(&mut self, seed: u64) {
        let c = ChunkId::new(2, 0);
        let data = b"after".to_vec();
        let op = ChunkOp::Install {
            chunk: c,
            version: ChunkVersion(1),
            chain_version: ChainVersion(1),
            data: Some(data.clone().into()),
        };
        assert!(self.run1(op).is_ok(), "seed {seed}: install after reopen");
    }
}

#[test]
fn power_loss_keeps_every_acknowledged_commit() {
    for seed in 0..300 {
        assert_eq!(run(seed, &[]), 0);
    }
}

#[test]
fn the_power_loss_check_catches_a_disk_ignoring_metadata_flushes() {
    // The check has teeth: when `meta`'s syncs are lies, acknowledged commits vanish and it
    // says so for some seed.
    let caught = (0..100).any(|seed| {
        std::panic::catch_unwind(|| run(seed, &["meta", "data"])).is_err_and(|e| {
            e.downcast_ref::<String>()
                .is_some_and(|m| m.contains("acknowledged"))
        })
    });
    assert!(caught, "a lost acknowledged commit went unnoticed");
}

#[test]
fn a_disk_ignoring_data_flushes_is_caught_by_checksums() {
    let corrupt: usize = (0..100).map(|seed| run(seed, &["data"])).sum();
    assert!(corrupt > 0, "the lying disk lost data that a read caught");
}
