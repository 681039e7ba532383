//! rename(2) of §4.3 as the body of one KV transaction: POSIX's replace rules, the loop check,
//! the sticky rule for both names, and the link counts of the directories involved (a
//! directory's nlink is 2 plus its subdirectories, as Linux counts it).
//!
//! Invariant: as every namespace operation (ops.rs): an error leaves nothing written that
//! matters; every row the decision depends on is read with a conflict range, so a concurrent
//! move of an ancestor aborts one of the two. Not here: RENAME_NOREPLACE and RENAME_EXCHANGE
//! (the mount answers them), retries (`request::execute`).

use super::keys::dirent_key;
use super::ops::{Namespace, PathOp};
use super::perm::{self, MAY_EXEC, MAY_WRITE};
use super::{DirEntry, Inode, InodeKind, MetaError, DEPTH_MAX, NLINK_MAX, ROOT};
use crate::ids::InodeId;
use crate::kv::KvEngine;

type R<T> = Result<T, MetaError>;

impl<E: KvEngine + ?Sized> Namespace<'_, '_, E> {
    /// rename `from` → `to` with POSIX replace rules: a file may replace a file, a directory an
    /// empty directory; never a directory into itself or a descendant.
    pub fn rename(&mut self, from: &str, to: &str, op: PathOp) -> R<()> {
        let (mut src_parent, src_name) = self.parent_of(from)?;
        let (mut dst_parent, dst_name) = self.parent_of(to)?;
        perm::check(&src_parent, self.user(), MAY_EXEC)?;
        let src_entry = self
            .entry(src_parent.id, src_name)?
            .ok_or(MetaError::NotFound)?;
        perm::check(&dst_parent, self.user(), MAY_EXEC)?;
        perm::check(&src_parent, self.user(), MAY_WRITE | MAY_EXEC)?;
        perm::check(&dst_parent, self.user(), MAY_WRITE | MAY_EXEC)?;
        self.check_lock(&src_parent, op.client)?;
        self.check_lock(&dst_parent, op.client)?;
        let mut src = self.inode(src_entry.inode)?;
        self.check_sticky(&src_parent, &src)?;
        // The loop check: the destination's ancestors must not include the source.
        if src.is_dir() && self.is_ancestor(src.id, &dst_parent)? {
            return Err(MetaError::Invalid("a directory cannot move into itself"));
        }
        let dst = match self.entry(dst_parent.id, dst_name)? {
            Some(e) if e.inode == src.id => return Ok(()), // Two names of one inode: POSIX says do nothing.
            Some(e) => Some(self.inode(e.inode)?),
            None => None,
        };
        if let Some(dst) = &dst {
            self.check_replace(&src, dst, &dst_parent, &src_parent)?;
        }
        // A directory moving to another parent is one more link of that parent's (its "..");
        // one it replaces is one fewer.
        let across = src.is_dir() && src_parent.id != dst_parent.id;
        let replaces_dir = dst.as_ref().is_some_and(Inode::is_dir);
        if across && !replaces_dir && dst_parent.nlink >= NLINK_MAX {
            return Err(MetaError::TooManyLinks);
        }
        if let Some(dst) = dst {
            self.unlink_inode(dst, op.now);
        }
        self.txn().clear(&dirent_key(src_parent.id, src_name));
        let entry = DirEntry {
            request: op.request,
            ..src_entry
        };
        self.put_entry(dst_parent.id, dst_name, &entry);
        if let InodeKind::Directory { parent, name, .. } = &mut src.kind {
            *parent = dst_parent.id;
            *name = dst_name.to_vec();
        }
        src.ctime = op.now;
        self.put_inode(&src);
        // Both directories' entries changed: mtime and ctime move, as Linux moves them.
        let src_links = -i64::from(across);
        let dst_links = i64::from(across) - i64::from(replaces_dir);
        if dst_parent.id == src_parent.id {
            stamp(&mut src_parent, src_links + dst_links, op.now);
            self.put_inode(&src_parent);
            return Ok(());
        }
        stamp(&mut src_parent, src_links, op.now);
        self.put_inode(&src_parent);
        dst_parent = self.inode(dst_parent.id)?; // Unchanged by the writes above.
        stamp(&mut dst_parent, dst_links, op.now);
        self.put_inode(&dst_parent);
        Ok(())
    }

    /// Whether `dst` may be replaced by `src` (POSIX's and Linux's rules, in Linux's order).
    fn check_replace(
        &mut self,
        src: &Inode,
        dst: &Inode,
        dst_parent: &Inode,
        src_parent: &Inode,
    ) -> R<()> {
        self.check_sticky(dst_parent, dst)?;
        // Linux's order: a destination that is an ancestor of the source is ENOTEMPTY before
        // any type check (it cannot be empty: the source is inside it).
        if dst.is_dir() && self.is_ancestor(dst.id, src_parent)? {
            return Err(MetaError::NotEmpty);
        }
        match (src.is_dir(), dst.is_dir()) {
            (true, false) => Err(MetaError::NotDir),
            (false, true) => Err(MetaError::IsDir),
            (true, true) if !self.is_empty_dir(dst.id)? => Err(MetaError::NotEmpty),
            _ => Ok(()),
        }
    }

    /// Whether `id` is `dir` or one of its ancestors (walking parent pointers, each read with
    /// a conflict range so a concurrent move of an ancestor aborts this transaction).
    fn is_ancestor(&mut self, id: InodeId, dir: &Inode) -> R<bool> {
        let mut at = dir.clone();
        for _ in 0..=DEPTH_MAX {
            if at.id == id {
                return Ok(true);
            }
            let InodeKind::Directory { parent, .. } = at.kind else {
                return Ok(false);
            };
            if at.id == ROOT {
                return Ok(false);
            }
            at = self.inode(parent)?;
        }
        Err(MetaError::Loop)
    }
}

/// A directory whose entries changed: its mtime and ctime move, and its link count by `links`.
fn stamp(dir: &mut Inode, links: i64, now: u64) {
    dir.stamp_mtime(now);
    dir.nlink = (i64::from(dir.nlink) + links).max(0) as u32;
}
