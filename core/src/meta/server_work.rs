//! What the meta server runs: a client request, a batch of length updates, or a piece of its
//! own work, with the per-attempt state every kind shares (`server.rs` drives them).
//!
//! Invariant: every entry's `now` is fixed per attempt, so each replay of an attempt makes the
//! same writes. Not here: running them.

use crate::ids::{ClientId, IoId, NodeId, RequestId};
use crate::time::Instant;

use super::replay::{Missing, ReplayKv};
use super::request::{MetaOp, MetaResult};

/// A running entry's key: the asking client and its request id (`SELF` for own work).
pub(super) type Key = (ClientId, RequestId);

/// What a running entry does.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub(super) enum Work {
    /// A client's request.
    Request(MetaOp),
    /// The next block of inode ids.
    AllocIds,
    /// One GC step.
    Gc,
    /// Delete a purged file's GC entry and inode.
    Free(Vec<u8>, crate::ids::InodeId),
    /// Delete sessions of clients not in this (sorted) list of live ones.
    Prune(Vec<ClientId>),
    /// The length-updating close of a pruned session's file (3FS `SessionManager`): its
    /// writer may have died between a write and its close, or in the middle of a truncate.
    Sync(crate::ids::InodeId),
    /// One batch of idempotency-record cleaning.
    IdemClean,
    /// Length updates of one file in one transaction (`batch.rs`).
    Batch(Vec<super::batch::Member>),
}

/// The key of the server's own work (no client has this id).
pub(super) const SELF: ClientId = ClientId(u64::MAX);

/// Own-work keys of length-updating closes: the inode id with this bit (frees use the bare
/// inode id; ids stay below 2^56).
pub(super) const SYNC_KEY_BIT: u64 = 1 << 62;

#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub(super) struct Running {
    pub(super) reply_to: Option<NodeId>,
    pub(super) work: Work,
    /// The user a client's request acts for (root for the server's own work).
    pub(super) user: super::perm::User,
    /// Inode ids reserved for the request.
    pub(super) ids: core::ops::Range<u64>,
    /// The layout a file the request creates gets (allocated once, kept over retries).
    pub(super) layout: Option<super::placement::Layout>,
    /// What the server's own work found in its final replay, applied once it commits.
    pub(super) own: Option<Own>,
    /// The attempt's clock reading, fixed so that every replay makes the same writes.
    pub(super) now: u64,
    pub(super) rows: ReplayKv,
    pub(super) attempts: u32,
    pub(super) unknown: bool,
    /// The answer of the final replay, waiting for its commit.
    pub(super) answer: Option<MetaResult>,
    /// Storage's answer to the length query the request needed (`length.rs`).
    pub(super) queried: Option<super::length::QueriedLength>,
    /// The file and its (length, truncate_ver) a length query in flight is for.
    pub(super) querying: Option<(crate::ids::InodeId, (u64, u64))>,
    /// Length queries made.
    pub(super) queries: u32,
    /// The directories the attempt's commit changes, and (once committed) its version.
    pub(super) dirs: crate::msg::meta::DirsChanged,
    /// The KV step in flight: a read of these rows, or a commit (no rows).
    pub(super) io: Option<(IoId, Vec<Missing>)>,
}

/// The result of the server's own work (not sent to anyone).
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub(super) enum Own {
    /// A new block of inode ids.
    Ids(core::ops::Range<u64>),
    /// A GC step.
    Gc(super::GcOutcome),
    /// Sessions pruned, the key to continue after, and the files they held.
    Pruned(u32, Vec<u8>, Vec<crate::ids::InodeId>),
    /// Whether a purged file's inode was freed.
    Freed(bool),
    /// Idempotency records deleted, and the key to continue after.
    IdemCleaned(u32, Vec<u8>),
    /// The answers of a batch's members, in order.
    Batch(Vec<MetaResult>),
}

impl Running {
    pub(super) fn new(reply_to: Option<NodeId>, work: Work, now: Instant) -> Self {
        Self {
            reply_to,
            work,
            user: super::perm::ROOT_USER,
            ids: 0..0,
            layout: None,
            own: None,
            now: now.0 / 1_000_000_000,
            rows: ReplayKv::default(),
            attempts: 1,
            unknown: false,
            answer: None,
            queried: None,
            querying: None,
            queries: 0,
            dirs: Default::default(),
            io: None,
        }
    }
}
