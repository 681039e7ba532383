//! The §3.6 resync decision per chunk: t3fs's table ([`decide`]) and 3FS's verbatim
//! ([`decide_3fs`], the planted bug `resync-3fs-table`), as pure functions of the predecessor's
//! and successor's chunk metadata.
//!
//! Not here: running a round (`resync.rs`).

use crate::chunk::ChunkMeta;
use crate::ids::ChainVersion;

/// What resync does with one chunk (§3.6 step 3).
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum Decision {
    /// Only on the successor: remove it there.
    Remove,
    /// Ship the predecessor's full chunk.
    Write,
    /// Identical, or an in-flight write will carry it.
    Skip,
    /// The replicas diverged in a way resync cannot repair: abandon the round.
    Fatal,
}

/// The §3.6 decision for one chunk, given the predecessor's (`local`) and the successor's
/// (`remote`) metadata and the chain's current version.
///
/// t3fs departs from 3FS's table (kept as [`decide_3fs`], the planted bug `resync-3fs-table`) in
/// two ways, both found by the simulator's swarm:
/// - 3FS skips a chunk whose local copy has a write in flight, trusting that write to reach the
///   successor. A write admitted while this target was still the tail commits without forwarding
///   even if the routing that makes the successor SYNCING arrives meanwhile, so the successor was
///   promoted with a stale chunk. Here any pending version, on either side, ships the chunk: the
///   item waits for the chunk lock, so it runs after the in-flight write and installs whatever
///   was committed (idempotent if the write did reach the successor).
/// - 3FS declares a committed local chunk fatal when the successor's copy carries a newer chain
///   version, but a resync item or full-chunk replace stamps the *current* chain version, so an
///   identical copy looks "ahead" after one more chain change and every round aborts (the target
///   stays SYNCING forever: 3FS issue #229). Here identical bytes are skipped whatever their chain
///   versions, the predecessor's copy is shipped when it is at least as new, and only a successor
///   really ahead of a committed local copy is fatal.
///
/// One version ahead is not "really ahead": with pipelined forwarding (`pipeline.rs`) a
/// successor may commit an update whose predecessor then crashed before its own local update
/// landed. While that predecessor is in the chain the update is not acknowledged (the head
/// answers only after its own commit, which follows every replica's); the successor may answer
/// a retry of it from its exactly-once record only as head, after the predecessor left the
/// chain, and then mgmtd's LASTSRV rule makes the successor, not the predecessor, the one that
/// resyncs the other. So the predecessor's copy is shipped over it, as 3FS's "the predecessor
/// is authoritative" says; a gap of two or more versions cannot come from one lost in-flight
/// update and stays fatal.
pub fn decide(
    local: Option<&ChunkMeta>,
    remote: Option<&ChunkMeta>,
    current: ChainVersion,
    strict: bool,
) -> Decision {
    if strict {
        return decide_3fs(local, remote, current);
    }
    let (l, r) = match (local, remote) {
        (None, None) => return Decision::Skip,
        (None, Some(_)) => return Decision::Remove,
        (Some(_), None) => return Decision::Write,
        (Some(l), Some(r)) => (l, r),
    };
    if l.pending.is_some() || r.pending.is_some() {
        return Decision::Write;
    }
    if l.committed == r.committed && l.checksum == r.checksum {
        return Decision::Skip;
    }
    if l.committed >= r.committed || r.committed == l.committed.next() {
        Decision::Write
    } else {
        Decision::Fatal
    }
}

/// 3FS's §3.6 decision table verbatim (rules in the reference's order).
pub fn decide_3fs(
    local: Option<&ChunkMeta>,
    remote: Option<&ChunkMeta>,
    current: ChainVersion,
) -> Decision {
    let (l, r) = match (local, remote) {
        (None, None) => return Decision::Skip,
        (None, Some(_)) => return Decision::Remove,
        (Some(_), None) => return Decision::Write,
        (Some(l), Some(r)) => (l, r),
    };
    let local_committed = l.pending.is_none();
    if l.chain_version > r.chain_version || r.pending.is_some() {
        return Decision::Write;
    }
    if l.chain_version < r.chain_version {
        return if local_committed {
            Decision::Fatal
        } else {
            Decision::Skip
        };
    }
    if l.committed != r.committed {
        return if local_committed && l.chain_version != current {
            Decision::Fatal
        } else {
            Decision::Skip
        };
    }
    if l.checksum != r.checksum {
        return if l.chain_version != current {
            Decision::Fatal
        } else {
            Decision::Skip
        };
    }
    Decision::Skip
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ChunkId, ChunkVersion};

    fn meta(committed: u32, cv: u32, checksum: u32, pending: bool) -> ChunkMeta {
        ChunkMeta {
            chunk: ChunkId::new(1, 0),
            committed: ChunkVersion(committed),
            chain_version: ChainVersion(cv),
            len: 1,
            checksum,
            pending: pending.then(|| crate::chunk::PendingMeta {
                version: ChunkVersion(committed + 1),
                ..Default::default()
            }),
            applied: Vec::new(),
        }
    }

    #[test]
    fn decision_table() {
        use Decision::*;
        let cur = ChainVersion(5);
        let d =
            |l: Option<ChunkMeta>, r: Option<ChunkMeta>| decide(l.as_ref(), r.as_ref(), cur, false);
        assert_eq!(d(None, Some(meta(1, 1, 1, false))), Remove);
        assert_eq!(d(Some(meta(1, 1, 1, false)), None), Write);
        assert_eq!(d(None, None), Skip);
        assert_eq!(
            d(Some(meta(2, 4, 1, false)), Some(meta(2, 4, 1, false))),
            Skip,
            "identical"
        );
        assert_eq!(
            d(Some(meta(2, 3, 1, false)), Some(meta(2, 4, 1, false))),
            Skip,
            "identical bytes stamped with a newer chain version by an earlier sync (3FS #229)"
        );
        assert_eq!(
            d(Some(meta(2, 3, 1, true)), Some(meta(2, 4, 1, false))),
            Write,
            "local write in flight: ship under the chunk lock, after it"
        );
        assert_eq!(
            d(Some(meta(3, 5, 1, true)), Some(meta(2, 5, 1, false))),
            Write,
            "in flight at the current chain version: it may never reach the successor"
        );
        assert_eq!(
            d(Some(meta(2, 4, 1, false)), Some(meta(2, 4, 1, true))),
            Write,
            "remote not committed"
        );
        assert_eq!(
            d(Some(meta(3, 3, 1, false)), Some(meta(2, 4, 7, false))),
            Write,
            "the predecessor's copy is newer: ship it"
        );
        assert_eq!(
            d(Some(meta(2, 4, 1, false)), Some(meta(2, 4, 9, false))),
            Write,
            "same version, different bytes: the predecessor's copy wins"
        );
        assert_eq!(
            d(Some(meta(2, 3, 1, false)), Some(meta(3, 4, 1, false))),
            Write,
            "remote one ahead: a pipelined update its crashed predecessor lost, never acknowledged"
        );
        assert_eq!(
            d(Some(meta(2, 3, 1, false)), Some(meta(4, 4, 1, false))),
            Fatal,
            "remote really ahead of a committed local"
        );
        assert_eq!(
            d(Some(meta(0, 0, 0, true)), None),
            Write,
            "pending create: shipped once it commits"
        );
    }

    #[test]
    fn decision_table_3fs() {
        use Decision::*;
        let cur = ChainVersion(5);
        let d =
            |l: Option<ChunkMeta>, r: Option<ChunkMeta>| decide(l.as_ref(), r.as_ref(), cur, true);
        assert_eq!(
            d(Some(meta(2, 4, 1, false)), Some(meta(3, 3, 2, false))),
            Write,
            "newer chain version wins"
        );
        assert_eq!(
            d(Some(meta(2, 4, 1, false)), Some(meta(2, 4, 1, true))),
            Write,
            "remote not committed"
        );
        assert_eq!(
            d(Some(meta(2, 3, 1, false)), Some(meta(2, 4, 1, false))),
            Fatal,
            "issue #229"
        );
        assert_eq!(
            d(Some(meta(2, 3, 1, true)), Some(meta(2, 4, 1, false))),
            Skip,
            "local write in flight"
        );
        assert_eq!(
            d(Some(meta(3, 4, 1, false)), Some(meta(2, 4, 1, false))),
            Fatal,
            "old chain"
        );
        assert_eq!(
            d(Some(meta(3, 5, 1, false)), Some(meta(2, 5, 1, false))),
            Skip,
            "a write carries it"
        );
        assert_eq!(
            d(Some(meta(2, 4, 1, false)), Some(meta(2, 4, 9, false))),
            Fatal,
            "checksum, old chain"
        );
        assert_eq!(
            d(Some(meta(2, 5, 1, false)), Some(meta(2, 5, 9, false))),
            Skip
        );
        assert_eq!(
            d(Some(meta(2, 4, 1, false)), Some(meta(2, 4, 1, false))),
            Skip,
            "identical"
        );
    }
}
