//! Garbage collection of unlinked inodes (3FS §4.5), as bounded steps a meta server runs
//! periodically: each step is one transaction over at most `batch` entries of the GC root.
//!
//! - a file unlinked less than `file_delay` seconds ago waits (3FS `gc_file_delay`, 5 min):
//!   writes acknowledged before the unlink may still have frames in flight, and a stale
//!   forward landing after the chunk was removed would recreate it (swarm seed 862, with no
//!   delay: a duplicate forward re-created a purged chunk on the tail, since a removed chunk's
//!   version starts again at 1);
//! - a file or symlink entry whose inode has no write session is freed: its GC entry and its
//!   inode row go in one transaction; a file with a write session is busy and skipped (its
//!   writer may still write; the next round looks again). With `purge_files`, a free file is
//!   returned instead, for its chunks to be removed on storage first (`purge.rs`); then
//!   [`Namespace::gc_free`] deletes its entry and inode;
//! - a directory entry moves up to `batch` of its children out, each through the same unlink
//!   as remove (a file whose last name this was gets its own GC entry, a subdirectory too), and
//!   once the directory is empty frees it.
//!
//! Invariant: GC never frees an inode that an entry outside the GC root still names (only
//! unlinked inodes get GC entries, and a hard link elsewhere keeps nlink above 0).
//! Not here: removing chunks (`purge.rs`), the 5-minute delay, trash.

use super::keys::{dirent_key, inode_key, session_range};
use super::ops::Namespace;
use super::{Inode, InodeKind, MetaError, GC_ROOT};
use crate::ids::InodeId;
use crate::kv::KvEngine;

/// What one GC step did.
#[derive(Clone, Copy, Debug, Default, Eq, Hash, PartialEq)]
pub struct GcStats {
    /// File and symlink inodes freed.
    pub freed: u32,
    /// Directories freed.
    pub dirs: u32,
    /// Children moved out of directories under GC.
    pub moved: u32,
    /// Files skipped because a write session holds them.
    pub busy: u32,
    /// Files skipped because they were unlinked less than the delay ago.
    pub young: u32,
}

/// How a GC step behaves.
#[derive(Clone, Copy, Debug, Eq, Hash, PartialEq)]
pub struct GcPolicy {
    /// GC entries (and directory children) one step handles.
    pub batch: usize,
    /// Seconds a file waits after its unlink (its ctime) before it is freed.
    pub file_delay: u64,
    /// Defer files held by write sessions (false only for `meta-gc-ignores-sessions`).
    pub respect_sessions: bool,
    /// Return free files for their chunks to be removed first (`purge.rs`).
    pub purge_files: bool,
}

/// What one GC step decided.
#[derive(Clone, Debug, Default, Eq, Hash, PartialEq)]
pub struct GcOutcome {
    /// Counts.
    pub stats: GcStats,
    /// The name to continue after (empty: start over).
    pub next: Vec<u8>,
    /// Free files whose chunks must go before their inodes (GC entry name and inode).
    pub purge: Vec<(Vec<u8>, Inode)>,
}

impl<E: KvEngine + ?Sized> Namespace<'_, '_, E> {
    /// One GC step over the GC entries after `after` (empty: from the first); returns what it
    /// did and the name to continue after (empty: start over next time).
    pub fn gc_step(
        &mut self,
        after: &[u8],
        now: u64,
        policy: GcPolicy,
    ) -> Result<GcOutcome, MetaError> {
        let batch = policy.batch;
        let mut stats = GcStats::default();
        let mut purge = Vec::new();
        let entries = self.list_dir(GC_ROOT, after, batch)?;
        let next = if entries.len() < batch {
            Vec::new()
        } else {
            entries.last().map(|(n, _)| n.clone()).unwrap_or_default()
        };
        for (name, e) in entries {
            let inode = match self.inode(e.inode) {
                Ok(i) => i,
                Err(MetaError::NotFound) => {
                    self.txn().clear(&dirent_key(GC_ROOT, &name)); // Freed by another step.
                    continue;
                }
                Err(err) => return Err(err),
            };
            match &inode.kind {
                InodeKind::File { .. } if now < inode.ctime.saturating_add(policy.file_delay) => {
                    stats.young += 1;
                }
                InodeKind::File { .. }
                    if policy.respect_sessions
                        && !self.txn().range(&session_range(inode.id), 1)?.is_empty() =>
                {
                    stats.busy += 1;
                }
                InodeKind::File { .. } if policy.purge_files => purge.push((name, inode)),
                InodeKind::File { .. } | InodeKind::Symlink { .. } | InodeKind::Special { .. } => {
                    self.txn().clear(&dirent_key(GC_ROOT, &name));
                    self.txn().clear(&inode_key(inode.id));
                    stats.freed += 1;
                }
                InodeKind::Directory { .. } => {
                    let children = self.list_dir(inode.id, b"", batch)?;
                    if children.is_empty() {
                        self.txn().clear(&dirent_key(GC_ROOT, &name));
                        self.txn().clear(&inode_key(inode.id));
                        stats.dirs += 1;
                    }
                    for (cname, ce) in children {
                        self.txn().clear(&dirent_key(inode.id, &cname));
                        let child = self.inode(ce.inode)?;
                        self.unlink_inode(child, now);
                        stats.moved += 1;
                    }
                }
            }
        }
        Ok(GcOutcome { stats, next, purge })
    }

    /// Frees file `inode` whose chunks are gone: its GC entry `entry` and its inode row. False
    /// (and nothing written) if the entry no longer names it (another server freed it).
    pub fn gc_free(&mut self, entry: &[u8], inode: InodeId) -> Result<bool, MetaError> {
        match self.entry(GC_ROOT, entry)? {
            Some(e) if e.inode == inode => {
                self.txn().clear(&dirent_key(GC_ROOT, entry));
                self.txn().clear(&inode_key(inode));
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
