//! Resync of a target holding far more chunks than one reply may list (issue 37): every
//! replica of the chain starts with 200,000 committed chunks (64-byte chunks of a file outside
//! the workload), a storage node crashes, the workload writes on, the node restarts from its
//! disk and its target is resynced through paged `SyncStart` replies (at most
//! `CHUNK_META_PAGE_MAX` chunk metadata each; one reply for all of them would exceed the
//! codec's list limit and be dropped) until the chain is all SERVING and its replicas agree.

use core::time::Duration;

use t3fs_core::chunk::ChunkOp;
use t3fs_core::ids::{ChainVersion, ChunkId, ChunkVersion};
use t3fs_core::limits::{CHUNK_META_PAGE_MAX, LIST_LEN_MAX};
use t3fs_core::time::Instant;
use t3fs_sim::check::{self, Verdict};
use t3fs_sim::run;
use t3fs_sim::world::node::{Life, Process, Role};
use t3fs_sim::world::World;

/// Committed chunks every replica holds before the run.
const CHUNKS: u32 = 200_000;
/// Their file: far from the workload's inode 1.
const INODE: u64 = 1 << 40;

const SCENARIO: &str = r#"
name = "resync_pages"
about = "A target of 200,000 chunks crashes, misses writes, restarts and resyncs page by page."
seeds = [1]
duration = "14s"

[cluster]
mgmtd = 1
storage_nodes = 3
replicas = 3
clients = 2

[workload]
chunks = 16
write_size = 64
read_fraction = 0.3
think = "20ms..40ms"

[[step]]
at = "2s"
do = "crash"
node = "storage-2"

[[step]]
at = "10s"
do = "restart"
node = "storage-2"
"#;

fn at(d: Duration) -> Instant {
    Instant(d.as_nanos() as u64)
}

/// The committed workload chunks (inode 1) of storage node `i`'s disk.
fn workload(w: &World, i: usize) -> Vec<(ChunkId, u32, Vec<u8>)> {
    let d = w.nodes[i].ctx.disks.values().next().expect("one target");
    d.store
        .chunks()
        .iter()
        .filter(|(c, m)| c.inode.0 == 1 && m.committed.0 > 0)
        .map(|(c, m)| (*c, m.committed.0, m.data.to_vec()))
        .collect()
}

#[test]
fn a_target_of_200k_chunks_is_resynced_page_by_page() {
    assert!(CHUNKS as usize > 3 * CHUNK_META_PAGE_MAX && CHUNKS > LIST_LEN_MAX);
    let sc = t3fs_scenario::parse("resync_pages.toml", SCENARIO).unwrap_or_else(|e| panic!("{e}"));
    let mut w = World::new(sc.clone(), 1, false).expect("world");
    let storage: Vec<usize> = (0..w.nodes.len())
        .filter(|&i| w.nodes[i].ctx.role == Role::Storage)
        .collect();
    assert_eq!(storage.len(), 3);
    // Fill every disk, then boot the storage processes again from it. No event has run yet:
    // the first start only armed timers (the new start re-arms them, so the first start's
    // fires go stale) and queued a heartbeat (a repeat that mgmtd takes as such).
    for &i in &storage {
        for d in w.nodes[i].ctx.disks.values_mut() {
            for k in 0..CHUNKS {
                let data = format!("chunk {k:06} of the big file, 64 bytes long, filler .......");
                d.store
                    .apply(&ChunkOp::Install {
                        chunk: ChunkId::new(INODE, k),
                        version: ChunkVersion(1),
                        chain_version: ChainVersion(1),
                        data: Some(data.into_bytes().into()),
                    })
                    .expect("install");
            }
        }
        w.start_node(i, true);
    }
    let down = storage[2];
    // Just before the restart: the crashed replica missed writes the others took.
    w.run_until(at(Duration::from_millis(9_900)), |_| false);
    assert_eq!(w.nodes[down].ctx.life, Life::Down);
    assert_ne!(
        workload(&w, down),
        workload(&w, storage[0]),
        "the workload wrote while storage-2 was down"
    );
    // The rest of the safety phase (the restart), then heal and converge.
    w.run_until(at(sc.duration), |_| false);
    w.heal();
    let deadline = at(sc.duration + sc.converge_within);
    let mut probe = w.sim.now();
    let mut converged = false;
    w.run_until(deadline, |w| {
        if w.sim.now() < probe {
            return false;
        }
        probe = Instant(w.sim.now().0 + 100_000_000);
        converged = run::converged(w).is_ok();
        converged
    });
    assert!(converged, "not converged: {:?}", run::converged(&w).err());
    match check::agreement::check(&w.serving_contents()) {
        Verdict::Pass(_) => {}
        v => panic!("replicas disagree: {v:?}"),
    }
    let held = w.nodes[down]
        .ctx
        .disks
        .values()
        .next()
        .unwrap()
        .store
        .chunks()
        .len();
    assert!(held >= CHUNKS as usize, "{held} chunks");
    assert_eq!(workload(&w, down), workload(&w, storage[0]));
    // The restarted target was resynced (the counters of the live processes).
    let (mut rounds, mut items) = (0, 0);
    for &i in &storage {
        if let Process::Storage(s) = &w.nodes[i].proc {
            rounds += s.counters().resyncs_done;
            items += s.counters().resync_items;
        }
    }
    assert!(rounds >= 1 && items >= 1, "{rounds} rounds, {items} items");
    let malformed = w.counter_totals()["net.malformed"];
    assert_eq!(malformed, 0, "every frame decoded");
}
