//! The namespace verdicts of a real run: the real runner's ordered log replayed into the
//! simulator's namespace history and file-data log, the KV rows read after the stop loaded into
//! an in-memory engine for the fsck and the final tree, and the file chunks the serving targets
//! hold as the length bounds; then the simulator's one namespace judge (`check::ns_judge`).
//!
//! Invariant: what could not be read (the KV rows, the targets' chunks) makes the affected
//! verdict UNKNOWN, never PASS. Not here: running the workload (t3fs-real
//! `scenario_run::namespace`).

use std::collections::BTreeMap;

use t3fs_core::kv::mem::MemKv;
use t3fs_core::kv::{CommitReq, KvEngine, Mutation};
use t3fs_real::scenario_run::namespace::{gc_drained, NsEvent};
use t3fs_real::scenario_run::workload::WORKLOAD_INODE;
use t3fs_real::scenario_run::{dump::Contents, NsOutcome};
use t3fs_sim::check::verdicts::NsVerdicts;
use t3fs_sim::check::{file_reads, ns_judge, Verdict};
use t3fs_sim::history::file_io::FileIo;
use t3fs_sim::history::ns::NsHistory;

/// Replays the log, in order, into the history and the file-data log.
pub fn replay(events: &[NsEvent]) -> (NsHistory, FileIo) {
    let (mut h, mut io) = (NsHistory::default(), FileIo::default());
    for e in events {
        match e {
            NsEvent::Invoke {
                client,
                who,
                user,
                op,
                at_ns,
            } => {
                h.invoke(*client, (*who, *user), op.clone(), *at_ns);
            }
            NsEvent::Ret { index, result } => h.ret(*index, result.clone()),
            NsEvent::Called { key, call } => io.called(*key, call),
            NsEvent::Returned { key, ret } => io.returned(*key, ret),
        }
    }
    (h, io)
}

/// Per file, per chunk index, the longest committed length a serving target holds (the
/// register workload's inode left out).
fn file_chunks(c: &Contents) -> BTreeMap<t3fs_core::ids::InodeId, BTreeMap<u32, u32>> {
    let mut out: BTreeMap<_, BTreeMap<u32, u32>> = BTreeMap::new();
    let targets = c.iter().flat_map(|(_, ts)| ts.iter());
    for (chunk, (_, data)) in targets.flat_map(|(_, content)| content.iter()) {
        if chunk.inode.0 != WORKLOAD_INODE {
            let len = out
                .entry(chunk.inode)
                .or_default()
                .entry(chunk.index)
                .or_default();
            *len = (*len).max(data.len() as u32);
        }
    }
    out
}

/// The namespace verdicts of the run (`dirs`: the starting tree's directory count).
pub fn judge(ns: &NsOutcome, contents: &Result<Contents, String>, dirs: u32) -> NsVerdicts {
    let (h, io) = replay(&ns.events);
    let unknown = |why: String| NsVerdicts {
        serializable: Verdict::Unknown(why.clone()),
        integrity: Verdict::Unknown(why.clone()),
        file_reads: match file_reads::check(&io) {
            Ok(s) => Verdict::Pass(s),
            Err(e) => Verdict::Fail(e),
        },
    };
    let rows = match &ns.rows {
        Ok(r) => r.clone(),
        Err(e) => {
            return unknown(format!(
                "the KV's rows could not be read after the stop: {e}"
            ))
        }
    };
    let mut kv = MemKv::new(1);
    let load = CommitReq {
        mutations: rows.into_iter().map(|(k, v)| Mutation::Set(k, v)).collect(),
        ..CommitReq::default()
    };
    if let Err(e) = kv.commit(load) {
        return unknown(format!("loading the KV's rows: {e}"));
    }
    let chunks = match contents {
        Ok(c) => file_chunks(c),
        Err(e) => return unknown(format!("the targets' chunks were not read: {e}")),
    };
    let extents = ns_judge::extents(&h, &io, chunks);
    // The rows after the stop are the final state: GC finished if they hold nothing under the
    // GC root and no write session (the runner waited for that before stopping).
    let drained = gc_drained(&mut kv).unwrap_or(false);
    ns_judge::judge(&h, &io, &mut kv, drained, &extents, dirs, false)
}
