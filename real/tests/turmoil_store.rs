//! The file chunk store on turmoil's simulated file system: a host writes and commits chunk
//! versions, the simulation crashes it (pending, unsynced writes are discarded, files never
//! synced vanish) and restarts it, and the restarted host reopens the store from what its disk
//! kept. Every commit the store acknowledged must be there with its bytes. The metadata log is
//! compacted every few records, so renames and directory syncs are crossed by the crash too.
//!
//! Within one store operation there is no await, so the crash falls between operations; tears
//! inside an operation are the power-loss tests' subject (`chunk_store::power_loss`).
//!
//! Reproduce: `cargo nextest run -p t3fs-real --test turmoil_store`.

#[path = "support/sim_fs.rs"]
mod sim_fs;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use sim_fs::SimFs;
use t3fs_core::chunk::{ChunkDone, ChunkError, ChunkMeta, ChunkOp, ChunkStore, UpdateKind};
use t3fs_core::ids::{ChainVersion, ChunkId, ChunkVersion, IoId};
use t3fs_services::chunk_store::{FileChunkStore, Options};
use turmoil::fs::shim::std::fs as sfs;

const CHUNKS: u32 = 4;
const DIR: &str = "/data/target-1";

fn content(c: u32, v: u32) -> Vec<u8> {
    (0..1000 + 700 * c as usize)
        .map(|i| (i as u32 ^ c.wrapping_mul(31) ^ v.wrapping_mul(131)) as u8)
        .collect()
}

fn run1(store: &mut dyn ChunkStore, op: ChunkOp) -> Result<ChunkDone, ChunkError> {
    store.submit(IoId(1), op);
    let mut done = Vec::new();
    while done.is_empty() {
        store.poll_completions(&mut done);
    }
    done.pop().expect("one completion").1
}

fn open() -> FileChunkStore {
    let opts = Options { compact_min: 8 };
    FileChunkStore::open_with(Arc::new(SimFs), Path::new(DIR), opts).expect("reopen the store")
}

fn list(store: &mut dyn ChunkStore) -> Vec<ChunkMeta> {
    match run1(store, ChunkOp::List) {
        Ok(ChunkDone::Listed(m)) => m,
        other => panic!("list: {other:?}"),
    }
}

/// Committed version and bytes per chunk, as a start of the host found them.
type Found = BTreeMap<u32, (u32, Vec<u8>)>;

/// What the host acknowledged and what each start found.
#[derive(Default)]
struct Log {
    /// Last acknowledged committed version per chunk.
    acked: BTreeMap<u32, u32>,
    /// Per start: committed version and bytes per chunk, and whether the unsynced file lived.
    found: Vec<(Found, bool)>,
}

/// One start of the host: reopen, record what is there, then write and commit forever.
async fn host(log: Rc<RefCell<Log>>) -> turmoil::Result {
    let mut store = open();
    let mut found = BTreeMap::new();
    for m in list(&mut store) {
        let read = ChunkOp::Read {
            chunk: m.chunk,
            offset: 0,
            len: 1 << 20,
            uncommitted: false,
            unverified: false,
        };
        let bytes = match run1(&mut store, read) {
            Ok(ChunkDone::Read(Some(r))) => r.data.to_vec(),
            other => panic!("read {:?}: {other:?}", m.chunk),
        };
        found.insert(m.chunk.index, (m.committed.0, bytes));
    }
    let unsynced = Path::new("/data/unsynced");
    log.borrow_mut()
        .found
        .push((found.clone(), sfs::exists(unsynced)));
    sfs::write(unsynced, b"never synced")?;
    let mut next: Vec<u32> = (0..CHUNKS)
        .map(|c| found.get(&c).map_or(1, |f| f.0 + 1))
        .collect();
    loop {
        for c in 0..CHUNKS {
            let (chunk, v) = (ChunkId::new(7, c), next[c as usize]);
            let kind = UpdateKind::Replace {
                data: content(c, v).into(),
            };
            let version = ChunkVersion(v);
            let up = ChunkOp::Update {
                chunk,
                version,
                kind,
                tag: None,
            };
            run1(&mut store, up).expect("update");
            let commit = ChunkOp::Commit {
                chunk,
                version,
                chain_version: ChainVersion(1),
            };
            match run1(&mut store, commit) {
                Ok(ChunkDone::Committed(m)) => {
                    log.borrow_mut().acked.insert(c, m.committed.0);
                }
                other => panic!("commit: {other:?}"),
            }
            next[c as usize] += 1;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

#[test]
fn a_crashed_host_restarts_from_what_its_disk_kept_with_every_acknowledged_commit() {
    let mut sim = turmoil::Builder::new()
        .rng_seed(21)
        .simulation_duration(Duration::from_secs(5))
        .build();
    let log: Rc<RefCell<Log>> = Rc::default();
    let l = log.clone();
    sim.host("storage", move || host(l.clone()));
    let checked: Rc<RefCell<usize>> = Rc::default();
    let mut crashes = 0;
    let mut last = Duration::ZERO;
    // The host writes forever: the test steps the simulation for three seconds.
    while sim.elapsed() < Duration::from_secs(3) {
        sim.step().expect("simulation step");
        let now = sim.elapsed();
        if crashes < 3 && now >= last + Duration::from_millis(700) {
            let acked = log.borrow().acked.clone();
            sim.crash("storage");
            sim.bounce("storage");
            crashes += 1;
            last = now;
            // Stepping once runs the restarted host up to its first write: it reopened the
            // store and recorded what it found.
            sim.step().expect("restart");
            let l = log.borrow();
            let (found, unsynced_lived) = l.found.last().expect("the host restarted");
            assert!(!unsynced_lived, "a file never synced survived a crash");
            for (c, v) in &acked {
                let (got, bytes) = found.get(c).unwrap_or_else(|| panic!("chunk {c} lost"));
                assert!(got >= v, "chunk {c}: acknowledged {v}, found {got}");
                assert_eq!(bytes, &content(*c, *got), "chunk {c} v{got}: bytes differ");
            }
            *checked.borrow_mut() += acked.values().map(|v| *v as usize).sum::<usize>();
        }
    }
    assert_eq!(crashes, 3);
    assert_eq!(
        log.borrow().found.len(),
        4,
        "one first start and three restarts"
    );
    assert!(
        *checked.borrow() > 3 * CHUNKS as usize * 8,
        "too few commits crossed the crashes to cover compaction: {}",
        checked.borrow()
    );
}
