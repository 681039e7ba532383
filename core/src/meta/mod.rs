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

pub mod anchor;
mod attrs;
#[cfg(test)]
mod attrs_tests;
mod batch;
mod gc;
pub mod idem;
mod keys;
pub mod length;
mod length_ctx;
pub mod lock;
mod ops;
pub mod perm;
pub mod placement;
pub mod prefetch;
pub mod purge;
#[cfg(test)]
mod purge_tests;
mod rename;
mod replay;
pub mod request;
#[cfg(test)]
mod rules_tests;
pub mod server;
mod server_batch;
mod server_cfg;
mod server_own;
mod server_replay;
#[cfg(test)]
mod server_tests;
mod server_work;
mod session;
#[cfg(test)]
mod session_tests;
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

use crate::ids::InodeId;
pub use crate::wire::{DirEntry, EntryKind, Inode, InodeKind, MetaError};

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
