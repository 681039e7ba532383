//! Deliberately broken protocol variants ("planted bugs").
//!
//! Each variant breaks one rule the CRAQ protocol relies on (3FS §3.9). The model checker and
//! the simulator must catch every one of them with a counterexample; tests assert that they do,
//! which proves the checkers can fail. A machine consults its configured bug at the one place
//! the rule is enforced; `None` is the correct protocol.

use core::fmt;

/// A planted bug, selected with `--bug NAME`.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum PlantedBug {
    /// The tail acknowledges an update upstream before its own commit is durable, so the client
    /// can be acknowledged while the tail still serves the old version.
    TailAckBeforeCommit,
    /// Reads are served from the pending (uncommitted) version.
    ReadPending,
    /// The exactly-once filter is skipped: a retried update with the same channel and seqnum is
    /// executed again as a new version instead of being answered from the cache.
    ReplayAppliedTwice,
    /// Replicas accept updates and reads whatever chain version the sender used.
    SkipChainVersionCheck,
    /// A predecessor commits as soon as its local write is done, before the successor
    /// acknowledges (commit is no longer tail to head).
    CommitBeforeSuccessorAck,
    /// 3FS's resync decision table verbatim (`storage::resync::decide_3fs`): an identical
    /// successor copy stamped with a newer chain version aborts every round (3FS issue #229,
    /// stuck SYNCING), and a chunk with a write in flight is skipped even when that write will
    /// never reach the successor (promoted with a stale chunk).
    Resync3fsTable,
    /// A predecessor abandons a forwarded update when its retry budget runs out, releasing the
    /// chunk with the version possibly committed downstream; the next write reuses the version
    /// for other bytes and the replicas diverge.
    AbandonForwardOnTimeout,
    /// With the storage-side lease on, reads are served whether or not the node's lease holds
    /// (updates still check it): the Appendix B #1/#4 stale read comes back.
    LeaseIgnored,
    /// Reads skip the store's check of the stored bytes against their checksum: bytes rotted
    /// at rest are returned with a fresh checksum of the rotten bytes, which end-to-end CRC32C
    /// then cannot catch.
    ReadCrcSkipped,
}

impl PlantedBug {
    /// Every planted bug.
    pub const ALL: [Self; 9] = [
        Self::TailAckBeforeCommit,
        Self::ReadPending,
        Self::ReplayAppliedTwice,
        Self::SkipChainVersionCheck,
        Self::CommitBeforeSuccessorAck,
        Self::Resync3fsTable,
        Self::AbandonForwardOnTimeout,
        Self::LeaseIgnored,
        Self::ReadCrcSkipped,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::TailAckBeforeCommit => "tail-ack-before-commit",
            Self::ReadPending => "read-pending",
            Self::ReplayAppliedTwice => "replay-applied-twice",
            Self::SkipChainVersionCheck => "skip-chain-version-check",
            Self::CommitBeforeSuccessorAck => "commit-before-successor-ack",
            Self::Resync3fsTable => "resync-3fs-table",
            Self::AbandonForwardOnTimeout => "abandon-forward-on-timeout",
            Self::LeaseIgnored => "lease-ignored",
            Self::ReadCrcSkipped => "read-crc-skipped",
        }
    }

    /// One line saying what is broken.
    pub fn about(self) -> &'static str {
        match self {
            Self::TailAckBeforeCommit => "tail acknowledges upstream before its commit is durable",
            Self::ReadPending => "reads return the pending (uncommitted) version",
            Self::ReplayAppliedTwice => "exactly-once cache ignored: a retried write runs twice",
            Self::SkipChainVersionCheck => "replicas accept any chain version",
            Self::CommitBeforeSuccessorAck => {
                "predecessor commits before its successor acknowledges"
            }
            Self::Resync3fsTable => {
                "3FS's resync decision table verbatim (issue #229; skips chunks with writes in flight)"
            }
            Self::AbandonForwardOnTimeout => {
                "a forward that ran out of retries is abandoned; the version is reused"
            }
            Self::LeaseIgnored => "reads are served without a storage-side lease (lease on)",
            Self::ReadCrcSkipped => "reads skip the stored-checksum check: rotten bytes are served",
        }
    }

    /// Parses a command-line name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }
}

impl fmt::Display for PlantedBug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A planted bug in mgmtd's chain management, selected with `t3fs check mgmtd --bug NAME`.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum MgmtdBug {
    /// A SYNCING target whose local state is merely ONLINE is promoted to SERVING: it becomes the
    /// tail and serves reads before its resync copied the chunks it missed.
    PromoteBeforeSyncDone,
    /// Every returning ONLINE target starts syncing at once: two SYNCING targets in one chain.
    TwoSyncing,
    /// mgmtd writes chain changes without re-validating its lease in the transaction, so a
    /// deposed primary can still commit.
    UnfencedWrites,
    /// A SERVING target whose local state is OFFLINE stays SERVING: the chain never moves a
    /// failed replica out, writes stall on it, and a restarted replica serves without a resync.
    KeepFailedTarget,
    /// With the storage-side lease on, mgmtd renews a node's lease while a chain update that
    /// takes one of its SERVING targets out is being committed (swarm seed 4000194): the
    /// exclusion is published while the node holds a fresh lease and serves old values. Caught
    /// by the mgmtd model with commits in flight and the lease (`t3fs check mgmtd --bug
    /// lease-during-demotion`, a 15-step counterexample); the simulator's catalog scenario
    /// `lease_race_pending_demotion` replays the seed with real clocks.
    LeaseDuringDemotion,
}

impl MgmtdBug {
    /// Every mgmtd bug.
    pub const ALL: [Self; 5] = [
        Self::PromoteBeforeSyncDone,
        Self::TwoSyncing,
        Self::UnfencedWrites,
        Self::KeepFailedTarget,
        Self::LeaseDuringDemotion,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::PromoteBeforeSyncDone => "promote-before-sync-done",
            Self::TwoSyncing => "two-syncing",
            Self::UnfencedWrites => "unfenced-writes",
            Self::KeepFailedTarget => "keep-failed-target",
            Self::LeaseDuringDemotion => "lease-during-demotion",
        }
    }

    /// One line saying what is broken.
    pub fn about(self) -> &'static str {
        match self {
            Self::PromoteBeforeSyncDone => "a SYNCING target is promoted before its sync is done",
            Self::TwoSyncing => "two targets of one chain sync at the same time",
            Self::UnfencedWrites => "chain writes skip the lease check: a deposed primary commits",
            Self::KeepFailedTarget => "a failed SERVING target is never moved out of its chain",
            Self::LeaseDuringDemotion => {
                "a storage lease is renewed while the node's demotion is being committed"
            }
        }
    }

    /// Parses a command-line name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }
}

impl fmt::Display for MgmtdBug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A planted bug in the meta service, selected with `t3fs sim ... --bug NAME`.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum MetaBug {
    /// Requests never consult or write idempotency records: a retry after a lost reply or an
    /// unknown commit runs the request again (an O_EXCL create answers EEXIST to its own
    /// creator, a remove answers ENOENT, a rename moves a second time).
    SkipIdempotency,
    /// Commits carry no read-conflict ranges: two requests that read the same rows both
    /// commit (two O_EXCL creates of one name both succeed, racing renames lose an entry).
    SnapshotReads,
    /// GC frees unlinked files even while a write session holds them (3FS defers them).
    GcIgnoresSessions,
    /// GC frees inodes without removing their chunks on storage: the data leaks.
    GcSkipsChunks,
    /// A length hint from before a truncate is adopted as if current (§4.4 asks storage):
    /// a writer closing after a truncate makes the file longer than its data.
    StaleLengthHint,
    /// Creates, removes and renames in a directory locked by another client go ahead.
    IgnoresDirLocks,
    /// Users remove and rename other users' entries of sticky directories.
    IgnoresStickyBit,
}

impl MetaBug {
    /// Every meta bug.
    pub const ALL: [Self; 7] = [
        Self::SkipIdempotency,
        Self::SnapshotReads,
        Self::GcIgnoresSessions,
        Self::GcSkipsChunks,
        Self::StaleLengthHint,
        Self::IgnoresDirLocks,
        Self::IgnoresStickyBit,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::SkipIdempotency => "meta-skip-idempotency",
            Self::SnapshotReads => "meta-snapshot-reads",
            Self::GcIgnoresSessions => "meta-gc-ignores-sessions",
            Self::GcSkipsChunks => "meta-gc-skips-chunks",
            Self::StaleLengthHint => "meta-stale-length-hint",
            Self::IgnoresDirLocks => "meta-ignores-dir-locks",
            Self::IgnoresStickyBit => "meta-ignores-sticky-bit",
        }
    }

    /// One line saying what is broken.
    pub fn about(self) -> &'static str {
        match self {
            Self::SkipIdempotency => {
                "meta retries re-run requests instead of answering from their record"
            }
            Self::SnapshotReads => {
                "meta commits without read conflicts (snapshot isolation, write skew)"
            }
            Self::GcIgnoresSessions => "GC frees unlinked files still held by write sessions",
            Self::GcSkipsChunks => "GC frees inodes without removing their chunks on storage",
            Self::StaleLengthHint => "meta adopts length hints from before a truncate",
            Self::IgnoresDirLocks => "meta lets anyone change a locked directory",
            Self::IgnoresStickyBit => "meta ignores the sticky bit on remove and rename",
        }
    }

    /// Parses a command-line name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }
}
