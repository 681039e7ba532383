//! The node-local chunk store contract (3FS §3.8 abstracted): committed and pending versions of
//! chunks, copy-on-write updates, atomic commit, ranged reads and metadata listing.
//!
//! The contract is completion-based so that io_uring, the simulator's faulty disk and the
//! in-memory reference share it: [`ChunkStore::submit`] queues an operation and
//! [`ChunkStore::poll_completions`] reports finished ones. Machines never call a store; they
//! emit `IoOp::Chunk` actions and the driver routes them to the target's store.
//!
//! To ensure correctness, every implementation guarantees (and `testing::chunk_store_suite`
//! checks):
//! - `Update` builds the pending version from the committed content plus the update, leaving the
//!   committed content readable and unchanged; a newer `Update` replaces an older pending one.
//! - `Commit` atomically replaces the committed version with the pending one and is durable when
//!   reported. A commit at or below the committed version is a successful no-op (replays are
//!   safe); a commit with no matching pending version is `VersionConflict`.
//! - Mutations (update, commit, install) of one chunk complete in submission order; different
//!   chunks may complete in any order. A read may complete before a mutation of its chunk that
//!   was submitted earlier, and then returns the state before that mutation (an engine serving
//!   reads from committed metadata while a commit is in flight); machines must not rely on
//!   read-after-submit ordering.
//! - Checksums are kept with the data. A read, and an update that builds on the committed
//!   content ([`UpdateKind::builds_on_base`]: not a remove, a replace, or a write covering the
//!   whole content), first checks the stored bytes it uses against their checksum (the whole
//!   chunk in the in-memory store, the blocks covered in the real stores) and answers `Corrupt`
//!   on a mismatch (rot at rest, a misdirected or torn write): damaged bytes are never returned
//!   or laundered into a fresh checksum.
//! - After a crash, an operation without a reported completion may or may not have happened, but
//!   it is atomic at this API.
//!
//! Not here: allocation, block layout, torn-write handling below the API (the real stores' own
//! concern) and fault injection (the simulator's disk model).

use crate::ids::{ChainVersion, ChannelId, ChunkId, ChunkVersion, ClientId, IoId, SeqNum};
use crate::payload::Payload;

/// What an update does to a chunk (3FS update types; COMMIT is its own op).
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum UpdateKind {
    /// Writes `data` at `offset`, growing the chunk if needed.
    Write {
        /// Byte offset within the chunk.
        offset: u32,
        /// The bytes.
        data: Payload,
    },
    /// Removes the chunk at commit (idempotent: removing an absent chunk succeeds).
    Remove,
    /// Sets the chunk length to `len` (shrinks or zero-extends).
    Truncate {
        /// New length.
        len: u32,
    },
    /// Grows the chunk to `len` with zeros; never shrinks.
    Extend {
        /// Minimum length.
        len: u32,
    },
    /// Replaces the whole content (resync and writes to a syncing successor, §3.5 #5, §3.6).
    Replace {
        /// The full chunk content.
        data: Payload,
    },
}

impl UpdateKind {
    /// Applies this update to `content` (the committed bytes; `None` if absent). Returns the new
    /// content, `None` meaning "removed". Every store uses this one definition of the effect.
    pub fn apply(&self, content: Option<&[u8]>) -> Option<Payload> {
        // The committed bytes are copied only when the result is built on them: a whole
        // overwrite shares its payload and reads nothing of the old content.
        let len = content.map_or(0, <[u8]>::len);
        let base = u32::try_from(len)
            .map_or(true, |len| self.builds_on_base(len))
            .then(|| content.map(<[u8]>::to_vec))
            .flatten();
        self.clone().apply_owned(base)
    }

    /// [`apply`](Self::apply) taking the update and the committed content by value, so that
    /// their buffers are reused instead of copied: a write replacing the whole content hands
    /// its payload over as the new content (shared, not copied), and a partial write patches
    /// the base in place.
    pub fn apply_owned(self, content: Option<Vec<u8>>) -> Option<Payload> {
        let old_len = content.as_ref().map_or(0, Vec::len);
        let mut bytes = match self {
            Self::Remove => return None,
            Self::Replace { data } => return Some(data),
            Self::Write { offset: 0, data } if data.len() >= old_len => return Some(data),
            _ => content.unwrap_or_default(),
        };
        match self {
            Self::Write { offset, data } => {
                let start = offset as usize;
                let end = start + data.len();
                if bytes.len() < end {
                    bytes.resize(end, 0);
                }
                bytes[start..end].copy_from_slice(&data);
            }
            Self::Truncate { len } => bytes.resize(len as usize, 0),
            Self::Extend { len } => {
                if bytes.len() < len as usize {
                    bytes.resize(len as usize, 0);
                }
            }
            Self::Remove | Self::Replace { .. } => unreachable!("returned above"),
        }
        Some(bytes.into())
    }

    /// Whether the result depends on the committed content of `len` bytes, which a store must
    /// then read and verify first (building on rotten bytes would give them a fresh, matching
    /// checksum). A remove, a replace and a write from offset 0 covering all `len` bytes do not.
    pub fn builds_on_base(&self, len: u32) -> bool {
        match self {
            Self::Remove | Self::Replace { .. } => false,
            Self::Write { offset, data } => *offset > 0 || (data.len() as u64) < u64::from(len),
            Self::Truncate { .. } | Self::Extend { .. } => true,
        }
    }
}

/// One chunk-store operation on one target.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum ChunkOp {
    /// Atomically publishes pending `version`, recording the chain version of the commit.
    Commit {
        /// The chunk.
        chunk: ChunkId,
        /// The pending version to publish.
        version: ChunkVersion,
        /// Chain version recorded with the commit (3FS `chainVer`).
        chain_version: ChainVersion,
    },
    /// Atomically sets the committed version and content, whatever the chunk held before,
    /// dropping any pending version; `data: None` removes the chunk. Used on a SYNCING target
    /// for resync and full-chunk replaces (3FS §3.6: "updateVer taken as given, content
    /// replaced, then committed").
    Install {
        /// The chunk.
        chunk: ChunkId,
        /// The committed version to record.
        version: ChunkVersion,
        /// The chain version to record.
        chain_version: ChainVersion,
        /// The full content, or `None` to remove the chunk.
        data: Option<Payload>,
    },
    /// Lists the metadata of every chunk on the target (committed or pending).
    List,
    /// Reads `len` bytes at `offset` of the committed version (or the pending one when
    /// `uncommitted`, 3FS ALLOW_READ_UNCOMMITTED).
    Read {
        /// The chunk.
        chunk: ChunkId,
        /// Byte offset.
        offset: u32,
        /// Byte count (trimmed at the chunk's length).
        len: u32,
        /// Read the pending version if there is one.
        uncommitted: bool,
        /// Skip checking the stored bytes against the checksum kept with them. Only the planted
        /// bug `read-crc-skipped` sets it; every store verifies otherwise.
        unverified: bool,
    },
    /// Writes pending `version` = the committed content with `kind` applied.
    Update {
        /// The chunk.
        chunk: ChunkId,
        /// The pending version; must exceed the committed version.
        version: ChunkVersion,
        /// The change.
        kind: UpdateKind,
        /// The client channel and seqnum the update answers, kept with the pending version and,
        /// once committed, with the chunk (`ChunkMeta::applied`); `None` for resync items.
        tag: Option<UpdateTag>,
    },
}

impl ChunkOp {
    /// The operation's kind as metrics and reports name it (`chunk_read`, `chunk_update`, ...),
    /// the same in a real node's histograms and the simulator's.
    pub fn kind(&self) -> &'static str {
        match self {
            ChunkOp::Read { .. } => "chunk_read",
            ChunkOp::Update { .. } => "chunk_update",
            ChunkOp::Commit { .. } => "chunk_commit",
            ChunkOp::Install { .. } => "chunk_install",
            ChunkOp::List => "chunk_list",
        }
    }
}

/// Metadata of one chunk on one target (3FS `ChunkMetadata`, reduced).
///
/// Invariant: `pending`, when present, is greater than `committed`; correct machines keep it at
/// exactly `committed + 1`.
#[derive(Clone, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct ChunkMeta {
    /// The chunk.
    pub chunk: ChunkId,
    /// Committed version; 0 if the chunk has never been committed.
    pub committed: ChunkVersion,
    /// Chain version recorded at the last commit.
    pub chain_version: ChainVersion,
    /// Committed length in bytes.
    pub len: u32,
    /// CRC32C of the committed content.
    pub checksum: u32,
    /// The pending (uncommitted) version, if any.
    pub pending: Option<PendingMeta>,
    /// Exactly-once records of committed client updates to this chunk, the most recent per
    /// client channel (at most [`APPLIED_PER_CHUNK_MAX`]): a restarted target rebuilds its
    /// channel table from them, so a retry of a write it already applied is answered, not
    /// applied again (t3fs; 3FS forgets them on restart, §3.5 #9).
    pub applied: Vec<Applied>,
}

impl ChunkMeta {
    /// §3.1's version rule: a pending version, when there is one, is the committed version
    /// plus one (the storage machine asserts it wherever it takes a chunk's metadata in).
    pub fn versions_hold(&self) -> bool {
        self.pending
            .as_ref()
            .is_none_or(|p| p.version.0 == self.committed.0 + 1)
    }
}

/// Records kept per chunk in [`ChunkMeta::applied`]; the oldest go first.
pub const APPLIED_PER_CHUNK_MAX: usize = 16;

/// Which client request an update answers (the exactly-once key of §3.2 and its seqnum).
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct UpdateTag {
    /// Client.
    pub client: ClientId,
    /// Its channel.
    pub channel: ChannelId,
    /// The seqnum on that channel.
    pub seqnum: SeqNum,
}

/// A committed client update: its tag and the result its client was (or will be) given.
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct Applied {
    /// The update's tag.
    pub tag: UpdateTag,
    /// The chunk version it committed.
    pub version: ChunkVersion,
    /// The chain version of that commit.
    pub chain_version: ChainVersion,
    /// The chunk's length after it.
    pub len: u32,
    /// The chunk's CRC32C after it.
    pub checksum: u32,
}

impl Applied {
    /// Adds `a` to `list`, replacing an older record of the same channel and dropping the
    /// oldest beyond [`APPLIED_PER_CHUNK_MAX`].
    pub fn record(list: &mut Vec<Applied>, a: Applied) {
        list.retain(|r| (r.tag.client, r.tag.channel) != (a.tag.client, a.tag.channel));
        list.push(a);
        if list.len() > APPLIED_PER_CHUNK_MAX {
            list.remove(0);
        }
    }
}

/// The pending version of a chunk.
#[derive(Clone, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct PendingMeta {
    /// Pending version.
    pub version: ChunkVersion,
    /// Pending length (0 for a pending remove).
    pub len: u32,
    /// CRC32C of the pending content.
    pub checksum: u32,
    /// Whether the pending update removes the chunk.
    pub removes: bool,
    /// The client request the pending version answers (`None`: a resync item).
    pub tag: Option<UpdateTag>,
}

/// Successful completion of a [`ChunkOp`].
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum ChunkDone {
    /// `Commit` finished; the chunk's metadata afterwards (`committed == 0` if it was removed).
    Committed(ChunkMeta),
    /// `List` finished.
    Listed(Vec<ChunkMeta>),
    /// `Read` finished; `None` if the chunk does not exist (a hole: clients zero-fill).
    Read(Option<ChunkRead>),
    /// `Update` finished; the metadata with the new pending version.
    Updated(ChunkMeta),
}

/// The bytes and versions returned by a read.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct ChunkRead {
    /// The bytes read (a whole-chunk read shares the stored content).
    pub data: Payload,
    /// The version the bytes belong to.
    pub version: ChunkVersion,
    /// CRC32C of the returned bytes.
    pub checksum: u32,
}

/// Environmental failures of a chunk store, named by the caller's reaction.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum ChunkError {
    /// Stored bytes failed their checksum: fail the request; the target must be resynced.
    Corrupt,
    /// The medium failed (EIO): fail the request and take the target offline.
    Failed,
    /// No space left: fail the request; retrying elsewhere may succeed.
    NoSpace,
    /// The op's version does not fit the chunk's versions (stale update, commit without a
    /// matching pending version): a protocol bug or a replay; the caller decides.
    VersionConflict,
}

/// A target's chunk store. Completion-based: see the module docs for the contract.
pub trait ChunkStore {
    /// Queues `op`; its completion is reported later by `poll_completions`.
    fn submit(&mut self, id: IoId, op: ChunkOp);
    /// Moves finished operations into `done`; never blocks.
    fn poll_completions(&mut self, done: &mut Vec<(IoId, Result<ChunkDone, ChunkError>)>);
    /// Operations submitted whose completion `poll_completions` has not yet reported. A driver
    /// that runs a store on its own thread polls after every batch of submissions and calls
    /// [`ChunkStore::wait`] only while this is non-zero. The default (0) suits stores that finish
    /// every queued operation within the next `poll_completions` call.
    fn in_flight(&self) -> usize {
        0
    }
    /// Blocks until at least one completion may be ready or `timeout` has passed, whichever
    /// comes first (spurious returns are allowed: the caller polls and loops). The default
    /// returns at once, for stores that never need to wait (see [`ChunkStore::in_flight`]).
    fn wait(&mut self, timeout: core::time::Duration) {
        let _ = timeout;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_kinds_apply() {
        let w = UpdateKind::Write {
            offset: 2,
            data: vec![7, 7].into(),
        };
        assert_eq!(w.apply(None), Some(vec![0, 0, 7, 7].into()));
        assert_eq!(
            w.apply(Some(&[1, 1, 1, 1, 1])),
            Some(vec![1, 1, 7, 7, 1].into())
        );
        assert_eq!(UpdateKind::Remove.apply(Some(&[1])), None);
        assert_eq!(
            UpdateKind::Truncate { len: 1 }.apply(Some(&[1, 2])),
            Some(vec![1].into())
        );
        assert_eq!(
            UpdateKind::Extend { len: 1 }.apply(Some(&[1, 2])),
            Some(vec![1, 2].into())
        );
        assert_eq!(
            UpdateKind::Extend { len: 3 }.apply(Some(&[1, 2])),
            Some(vec![1, 2, 0].into())
        );
        assert_eq!(
            UpdateKind::Replace {
                data: vec![9].into()
            }
            .apply(Some(&[1, 2])),
            Some(vec![9].into())
        );
    }

    #[test]
    fn owned_apply_matches_and_whole_writes_need_no_base() {
        let base = [1u8, 2, 3, 4];
        let kinds = [
            UpdateKind::Write {
                offset: 0,
                data: vec![9; 4].into(),
            },
            UpdateKind::Write {
                offset: 0,
                data: vec![9; 6].into(),
            },
            UpdateKind::Write {
                offset: 0,
                data: vec![9; 2].into(),
            },
            UpdateKind::Write {
                offset: 3,
                data: vec![9; 2].into(),
            },
            UpdateKind::Truncate { len: 2 },
            UpdateKind::Extend { len: 6 },
            UpdateKind::Replace {
                data: vec![7].into(),
            },
            UpdateKind::Remove,
        ];
        for k in kinds {
            let want = k.apply(Some(&base));
            assert_eq!(k.clone().apply_owned(Some(base.to_vec())), want, "{k:?}");
            if !k.builds_on_base(base.len() as u32) {
                assert_eq!(k.clone().apply_owned(None), want, "{k:?} needs no base");
            }
        }
        let short = UpdateKind::Write {
            offset: 0,
            data: vec![9; 2].into(),
        };
        assert!(short.builds_on_base(4) && !short.builds_on_base(2));
        assert!(UpdateKind::Write {
            offset: 1,
            data: vec![9; 8].into()
        }
        .builds_on_base(0));
    }
}
