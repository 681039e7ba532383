//! The meta service's namespace (3FS §4): inodes, directory entries and idempotency records kept
//! in the transactional KV, and the namespace operations as functions of one KV transaction.
//!
//! Files: `keys.rs` the key layout, `ops.rs` the operations, [`placement`] §4.2's chain ranges.
//!
//! Purpose: meta is stateless (§4): every operation reads and writes only KV rows inside one
//! optimistic transaction, so any meta server can serve any request and a conflict simply
//! retries. This module is that transaction body; the meta machine that drives it through
//! `IoOp::Kv` (batching, owner routing, sessions, GC workers) builds on it.
//!
//! Invariants owned here:
//! - every directory entry names an inode row; a directory inode records its parent and its own
//!   name, so ancestors can be walked for rename's loop check;
//! - a directory's `nlink` is 1 and it is removed only when empty (or moved to GC recursively);
//!   a file's `nlink` counts its entries, and at 0 the inode goes under the GC root (§4.5)
//!   instead of disappearing (its chunks are freed by GC, which is not here);
//! - non-idempotent operations carry a request id: `request::execute` stores each mutating
//!   request's answer in an idempotency record in the same transaction, and answers a retry
//!   from it (entries also record the request that made them, for debugging).
//!
//! Not here: storing layouts in inodes (the chain-range placement itself is [`placement`]), file
//! length (§4.4), sessions, GC of chunks, permissions beyond the owner's mode bits.

mod attrs;
mod batch;
mod gc;
pub mod idem;
mod keys;
pub mod length;
pub mod lock;
mod ops;
pub mod perm;
pub mod placement;
pub mod purge;
#[cfg(test)]
mod purge_tests;
mod replay;
pub mod request;
#[cfg(test)]
mod rules_tests;
pub mod server;
mod server_cfg;
mod server_own;
#[cfg(test)]
mod server_tests;
mod server_work;
mod session;
#[cfg(test)]
mod tests;

pub use attrs::{SetAttr, BATCH_STAT_MAX};
pub use gc::{GcOutcome, GcPolicy, GcStats};
pub use keys::{
    all_sessions, dirent_key, dirent_range, idem_key, inode_key, parse_dirent_key, parse_inode_key,
    parse_session_key, session_key, session_range,
};
pub use ops::{prefix_path, split_path, transact, Namespace, PathOp};
pub use session::FileSession;

use crate::ids::{ClientId, InodeId, RequestId};
use crate::kv::KvError;
use crate::msg::codec::{DecodeError, Decoder, Encoder, Wire};
use crate::wire_struct;

/// The root directory.
pub const ROOT: InodeId = InodeId(0);
/// The GC root: unlinked inodes wait under it for their chunks to be freed (§4.5).
pub const GC_ROOT: InodeId = InodeId(1);
/// Longest name of one entry, in bytes (POSIX NAME_MAX).
pub const NAME_MAX: usize = 255;
/// Deepest directory nesting a path may walk (3FS: 64).
pub const DEPTH_MAX: usize = 64;
/// Symlinks followed while resolving one path (3FS: 10 in all).
pub const SYMLINKS_MAX: usize = 10;
/// Hard links of one file (3FS: u16).
pub const NLINK_MAX: u32 = 65_535;

/// What an inode is.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum InodeKind {
    /// A regular file.
    File {
        /// Length in bytes (grown by writers' length hints, §4.4).
        length: u64,
        /// Bumped by every truncate.
        truncate_ver: u64,
        /// Where its chunks live (§4.2); `None` when the server had no chain table.
        layout: Option<placement::Layout>,
    },
    /// A directory.
    Directory {
        /// Its parent (the root is its own parent).
        parent: InodeId,
        /// Its own name in the parent (for the loop check and realpath).
        name: Vec<u8>,
        /// The client holding the directory lock, if any (3FS `lockDirectory`, `lock.rs`).
        lock: Option<ClientId>,
        /// The default layout of what is created in it (`None`: the server's policy).
        layout: Option<placement::DirLayout>,
    },
    /// A symbolic link.
    Symlink {
        /// The target path.
        target: Vec<u8>,
    },
}

/// One inode row (3FS `InodeData`, reduced).
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct Inode {
    /// Its id.
    pub id: InodeId,
    /// File, directory or symlink.
    pub kind: InodeKind,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Mode bits (0o7777).
    pub perm: u32,
    /// Entries naming it.
    pub nlink: u32,
    /// Change time, seconds (the caller's clock).
    pub ctime: u64,
    /// Modification time, seconds.
    pub mtime: u64,
}

/// The kind of an entry, cached in it so `list` needs no inode reads.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum EntryKind {
    /// A file.
    File,
    /// A directory.
    Directory,
    /// A symlink.
    Symlink,
}

/// One directory entry (3FS `DirEntryData`, reduced).
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct DirEntry {
    /// The inode it names.
    pub inode: InodeId,
    /// Its kind.
    pub kind: EntryKind,
    /// The request that created it: a retry of that request finds it and is answered as done.
    pub request: RequestId,
}

/// Why a namespace operation failed: POSIX-style statuses, plus the KV's own failures (which a
/// caller retries on conflict and answers carefully on `CommitUnknown`).
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum MetaError {
    /// ENOENT.
    NotFound,
    /// EEXIST.
    Exists,
    /// ENOTDIR: a path component, or a rename target, is not a directory.
    NotDir,
    /// EISDIR.
    IsDir,
    /// ENOTEMPTY.
    NotEmpty,
    /// EINVAL: the message says what (root removal, a move into itself, a bad name).
    Invalid(&'static str),
    /// ELOOP: too many symlinks, or nesting deeper than [`DEPTH_MAX`].
    Loop,
    /// ENAMETOOLONG.
    NameTooLong,
    /// EMLINK.
    TooManyLinks,
    /// EPERM: the operation is not allowed on this inode (e.g. hard-linking a directory).
    NotPermitted,
    /// The KV failed.
    Kv(KvError),
    /// A row failed to decode: the store is damaged (never silently skipped).
    Corrupt,
    /// The directory is locked by another client (3FS `kNoLock`, `lock.rs`).
    NoLock,
    /// EACCES: the mode bits deny the caller (`perm.rs`).
    Access,
    /// A length update needs storage's answer first (`length.rs`). Internal to the meta
    /// server: never recorded, never answered.
    LengthUnknown,
}

impl From<KvError> for MetaError {
    fn from(e: KvError) -> Self {
        Self::Kv(e)
    }
}

impl From<DecodeError> for MetaError {
    fn from(_: DecodeError) -> Self {
        Self::Corrupt
    }
}

impl Wire for InodeKind {
    fn encode(&self, enc: &mut Encoder) {
        match self {
            Self::File {
                length,
                truncate_ver,
                layout,
            } => {
                0u8.encode(enc);
                length.encode(enc);
                truncate_ver.encode(enc);
                layout.encode(enc);
            }
            Self::Directory {
                parent,
                name,
                lock,
                layout,
            } => {
                1u8.encode(enc);
                parent.encode(enc);
                name.encode(enc);
                lock.encode(enc);
                layout.encode(enc);
            }
            Self::Symlink { target } => {
                2u8.encode(enc);
                target.encode(enc);
            }
        }
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(match u8::decode(dec)? {
            0 => Self::File {
                length: Wire::decode(dec)?,
                truncate_ver: Wire::decode(dec)?,
                layout: Wire::decode(dec)?,
            },
            1 => Self::Directory {
                parent: Wire::decode(dec)?,
                name: Wire::decode(dec)?,
                lock: Wire::decode(dec)?,
                layout: Wire::decode(dec)?,
            },
            2 => Self::Symlink {
                target: Wire::decode(dec)?,
            },
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}

impl Wire for EntryKind {
    fn encode(&self, enc: &mut Encoder) {
        (*self as u8).encode(enc);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(match u8::decode(dec)? {
            0 => Self::File,
            1 => Self::Directory,
            2 => Self::Symlink,
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}

wire_struct!(Inode {
    id,
    kind,
    uid,
    gid,
    perm,
    nlink,
    ctime,
    mtime
});
wire_struct!(DirEntry {
    inode,
    kind,
    request
});

impl Inode {
    /// The entry kind naming this inode.
    pub fn entry_kind(&self) -> EntryKind {
        match self.kind {
            InodeKind::File { .. } => EntryKind::File,
            InodeKind::Directory { .. } => EntryKind::Directory,
            InodeKind::Symlink { .. } => EntryKind::Symlink,
        }
    }

    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        matches!(self.kind, InodeKind::Directory { .. })
    }
}
