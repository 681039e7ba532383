//! Attribute operations of §4.3: setattr (chmod, chown, utimes) and batch stat.
//!
//! Invariant: setattr changes only the attributes it is given and stamps ctime with the
//! caller's clock (mtime only when asked: utimes); a batch stat answers each path on its own,
//! all from one snapshot. Not here: permission checks (no users yet), iflags, directory
//! layouts.

use super::ops::Namespace;
use super::{Inode, MetaError, PathOp};
use crate::kv::KvEngine;
pub use crate::wire::{SetAttr, BATCH_STAT_MAX};

type R<T> = Result<T, MetaError>;

impl<E: KvEngine + ?Sized> Namespace<'_, '_, E> {
    /// setattr on `path` (symlinks followed).
    pub fn setattr(&mut self, path: &str, attr: SetAttr, op: PathOp) -> R<Inode> {
        let mut i = self.resolve(path, true)?;
        let user = self.user();
        // chmod and utimes: the owner or root; chown: root (perm.rs).
        let owner = user.is_root() || user.uid == i.uid;
        if (attr.perm.is_some() || attr.mtime.is_some() || attr.layout.is_some()) && !owner {
            return Err(MetaError::NotPermitted);
        }
        if (attr.uid.is_some() || attr.gid.is_some()) && !user.is_root() {
            return Err(MetaError::NotPermitted);
        }
        if let Some(l) = attr.layout {
            match &mut i.kind {
                super::InodeKind::Directory { layout, .. } if l.valid() => *layout = Some(l),
                _ => return Err(MetaError::Invalid("invalid argument")),
            }
        }
        if let Some(p) = attr.perm {
            i.perm = p & 0o7777;
        }
        if let Some(u) = attr.uid {
            i.uid = u;
        }
        if let Some(g) = attr.gid {
            i.gid = g;
        }
        if let Some(m) = attr.mtime {
            i.mtime = m;
        }
        i.ctime = op.now;
        self.put_inode(&i);
        Ok(i)
    }

    /// stat of every path (symlinks followed), each answered on its own.
    pub fn batch_stat(&mut self, paths: &[String]) -> R<Vec<R<Inode>>> {
        if paths.len() > BATCH_STAT_MAX {
            return Err(MetaError::Invalid("invalid argument"));
        }
        let mut out = Vec::with_capacity(paths.len());
        for p in paths {
            match self.resolve(p, true) {
                Err(MetaError::Kv(e)) => return Err(MetaError::Kv(e)),
                Err(MetaError::Corrupt) => return Err(MetaError::Corrupt),
                r => out.push(r),
            }
        }
        Ok(out)
    }
}
