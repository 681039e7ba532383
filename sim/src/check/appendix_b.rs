//! When a stale read is 3FS's documented behaviour rather than a t3fs defect: Appendix B #1/#4.
//! 3FS has no storage-side lease, so a storage node that mgmtd has moved out of a chain (it
//! missed heartbeats: cut off, paused, or its heartbeats were late) keeps serving reads under
//! its old chain version until it learns the new routing; a client whose routing is as old
//! reads from it. (`core/src/appendix_b.rs` shows the hazard at handler level.)
//!
//! Attribution is per read. The client records, for every read, the target that answered and
//! the chain version the answered attempt carried (`t3fs_core::client::Served`); the world
//! records every chain a primary published, with its time (`audit.timeline`). A read is
//! *stale-served* when, at its invocation, the latest published version of its chain was newer
//! than the version the read carried and did not have the serving target SERVING. The runner
//! then re-checks the history without the stale-served reads: only if the rest passes is the
//! violation EXPECTED, and the verdict names the target, both chain versions and the window.
//!
//! Invariant: never excuses a read that no publication explains, so any other stale read (and
//! every stale read with `storage_lease` on, where the runner does not call this) still fails.
//! Not here: the lease itself (`t3fs_core::storage::lease`).

use std::collections::BTreeMap;

use t3fs_core::client::Served;
use t3fs_core::ids::ChainVersion;
use t3fs_core::routing::{ChainInfo, PublicState};

use crate::history::{OpKind, OpRec};

/// One read served by a replica that mgmtd had already moved out of its chain.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct StaleRead {
    /// Who served it, the chunk's chain and the version the read carried.
    pub served: Served,
    /// The chain version mgmtd had published when the read began.
    pub published: ChainVersion,
    /// The target's state in that publication.
    pub state: Option<PublicState>,
    /// When mgmtd first published a version newer than the read's without the target SERVING.
    pub since_ns: u64,
    /// When the read returned.
    pub until_ns: u64,
    /// The client that read.
    pub client: u32,
}

impl StaleRead {
    /// One line for a verdict.
    pub fn describe(&self) -> String {
        let state = self
            .state
            .map_or("absent".to_string(), |s| format!("{s:?}").to_uppercase());
        format!(
            "{} served client-{} a read of chunk {} under {}@{} while mgmtd had published {}@{} with {} {state} (window {:.3}s..{:.3}s)",
            self.served.target,
            self.client,
            self.served.chunk.index,
            self.served.chain,
            self.served.chain_version,
            self.served.chain,
            self.published,
            self.served.target,
            self.since_ns as f64 / 1e9,
            self.until_ns as f64 / 1e9
        )
    }
}

/// Every stale-served read of `ops` (by index), given the chains published over the run as
/// `(time ns, chain)` in time order.
pub fn stale_reads(ops: &[OpRec], timeline: &[(u64, ChainInfo)]) -> BTreeMap<usize, StaleRead> {
    let mut out = BTreeMap::new();
    for (i, o) in ops.iter().enumerate() {
        if !matches!(o.kind, OpKind::Read(Some(_))) {
            continue;
        }
        let (Some(s), Some(until)) = (o.served, o.ret_ns) else {
            continue;
        };
        if let Some(stale) = judge(&s, o.invoke_ns, timeline) {
            out.insert(
                i,
                StaleRead {
                    until_ns: until,
                    client: o.client,
                    ..stale
                },
            );
        }
    }
    out
}

/// The read served as `s`, begun at `at`, if it was stale-served.
fn judge(s: &Served, at: u64, timeline: &[(u64, ChainInfo)]) -> Option<StaleRead> {
    let of_chain = || {
        timeline
            .iter()
            .take_while(|(t, _)| *t <= at)
            .filter(|(_, c)| c.chain == s.chain)
    };
    let (_, latest) = of_chain().last()?;
    let state = latest.state_of(s.target);
    if latest.version <= s.chain_version || state == Some(PublicState::Serving) {
        return None;
    }
    // The window opens at the first newer publication that had the target out of SERVING.
    let since = of_chain()
        .find(|(_, c)| {
            c.version > s.chain_version && c.state_of(s.target) != Some(PublicState::Serving)
        })
        .map(|(t, _)| *t)?;
    Some(StaleRead {
        served: *s,
        published: latest.version,
        state,
        since_ns: since,
        until_ns: 0,
        client: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use t3fs_core::ids::{ChainId, ChunkId, InodeId, TargetId};
    use t3fs_core::routing::ChainTarget;
    use t3fs_scenario::workload::Payload;

    fn chain(version: u32, targets: &[(u32, PublicState)]) -> ChainInfo {
        ChainInfo {
            chain: ChainId(1),
            version: ChainVersion(version),
            targets: targets
                .iter()
                .map(|&(t, state)| ChainTarget {
                    target: TargetId(t),
                    state,
                })
                .collect(),
        }
    }

    fn read(invoke_ns: u64, target: u32, version: u32) -> OpRec {
        OpRec {
            client: 2,
            chunk: 0,
            invoke: invoke_ns,
            ret: Some(invoke_ns + 1),
            kind: OpKind::Read(Some(Payload::Value(7))),
            failed: false,
            invoke_ns,
            ret_ns: Some(invoke_ns + 1_000),
            served: Some(Served {
                chunk: ChunkId {
                    inode: InodeId(1),
                    index: 0,
                },
                chain: ChainId(1),
                target: TargetId(target),
                chain_version: ChainVersion(version),
            }),
        }
    }

    #[test]
    fn a_read_from_a_target_moved_out_at_a_newer_version_is_attributed() {
        use PublicState::{Offline, Serving};
        let timeline = vec![
            (0, chain(1, &[(1, Serving), (2, Serving)])),
            (5_000, chain(2, &[(1, Serving), (2, Offline)])),
        ];
        // Served by t2 under v1 after v2 (t2 OFFLINE) was published: stale-served.
        let ops = vec![read(6_000, 2, 1)];
        let stale = stale_reads(&ops, &timeline);
        let s = &stale[&0];
        assert_eq!((s.published, s.since_ns), (ChainVersion(2), 5_000));
        let d = s.describe();
        assert!(
            d.contains("t2 served client-2")
                && d.contains("c1@v1")
                && d.contains("c1@v2 with t2 OFFLINE"),
            "{d}"
        );
    }

    #[test]
    fn reads_that_no_publication_explains_are_not_attributed() {
        use PublicState::{Offline, Serving};
        let timeline = vec![
            (0, chain(1, &[(1, Serving), (2, Serving)])),
            (5_000, chain(2, &[(1, Serving), (2, Offline)])),
        ];
        let ops = vec![
            read(4_000, 2, 1), // Before the change was published.
            read(6_000, 1, 1), // From a target still SERVING at v2.
            read(6_000, 2, 2), // Under the current version.
        ];
        assert!(stale_reads(&ops, &timeline).is_empty());
        // A read with no served record (a failed one, or the model) is never excused.
        let mut unknown = read(6_000, 2, 1);
        unknown.served = None;
        assert!(stale_reads(&[unknown], &timeline).is_empty());
    }
}
