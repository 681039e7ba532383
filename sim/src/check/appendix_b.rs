//! When a stale read is 3FS's documented behaviour rather than a t3fs defect: Appendix B #1/#4.
//! 3FS has no storage-side lease, so a storage node cut off from mgmtd for longer than the
//! failure detector's interval keeps serving reads under its old chain version after mgmtd has
//! moved it out of the chain; a client whose routing refresh has not yet run reads from it.
//! (`core/src/appendix_b.rs` shows the hazard at handler level; swarm seed 160 hit it.)
//!
//! This module finds, from a scenario's steps alone, the storage nodes cut off from mgmtd
//! (isolated, partitioned or held away from any mgmtd) for at least the failure detection
//! interval. The runner then reports a linearizability or regularity failure of such a run as
//! EXPECTED, naming the window, instead of FAIL. Invariant: over-approximates (a cut from one
//! standby counts too), so it can only excuse runs that had such a window; every other run's
//! stale read still fails. Not here: a storage-side lease (a possible t3fs variant).

use std::collections::BTreeMap;

use core::time::Duration;

use t3fs_scenario::schema::{Action, NodeRef, Scenario};

fn is_storage(n: &NodeRef) -> bool {
    matches!(n, NodeRef::Storage(_) | NodeRef::ChainPos(..))
}

fn is_mgmtd(n: &NodeRef) -> bool {
    matches!(n, NodeRef::Mgmtd(_) | NodeRef::Primary)
}

/// The longest window in which a storage node was cut off from mgmtd, if it reached `fail`.
pub fn cutoff_window(sc: &Scenario, fail: Duration) -> Option<(String, Duration)> {
    let mut since: BTreeMap<String, Duration> = BTreeMap::new();
    let mut longest: Option<(String, Duration)> = None;
    let mut close = |name: &str, start: Duration, end: Duration| {
        let d = end.saturating_sub(start);
        if d >= fail && longest.as_ref().is_none_or(|(_, l)| d > *l) {
            longest = Some((name.to_string(), d));
        }
    };
    let key = |n: &NodeRef| format!("{n:?}");
    for st in &sc.steps {
        let cut_pairs = |a: &[NodeRef], b: &[NodeRef]| -> Vec<String> {
            if b.iter().any(is_mgmtd) {
                a.iter().filter(|n| is_storage(n)).map(key).collect()
            } else {
                Vec::new()
            }
        };
        match &st.action {
            Action::Isolate(n) if is_storage(n) => {
                since.entry(key(n)).or_insert(st.at);
            }
            Action::Partition { a, b, oneway } => {
                let mut cut = cut_pairs(a, b);
                if !oneway {
                    cut.extend(cut_pairs(b, a));
                }
                for k in cut {
                    since.entry(k).or_insert(st.at);
                }
            }
            Action::Hold { a, b } => {
                for k in cut_pairs(a, b) {
                    since.entry(k).or_insert(st.at);
                }
            }
            Action::Repair { a, b } | Action::Release { a, b } => {
                let mut healed = cut_pairs(a, b);
                healed.extend(cut_pairs(b, a));
                for k in healed {
                    if let Some(start) = since.remove(&k) {
                        close(&k, start, st.at);
                    }
                }
            }
            Action::Heal => {
                for (k, start) in std::mem::take(&mut since) {
                    close(&k, start, st.at);
                }
            }
            _ => {}
        }
    }
    for (k, start) in since {
        close(&k, start, sc.duration);
    }
    longest
}
