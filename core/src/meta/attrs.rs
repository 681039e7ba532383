//! Attribute operations of §4.3: setattr (chmod, chown, utimes) and batch stat.
//!
//! Invariant: setattr changes only the attributes it is given (and, as Linux, the setuid and
//! setgid bits a chown of a non-directory drops) and stamps ctime with the caller's clock
//! (mtime only when asked: utimes); a batch stat answers each path on its own, all from one
//! snapshot. Not here: the permission rules themselves (perm.rs), iflags, access times.

use super::ops::Namespace;
use super::{perm, Inode, MetaError, PathOp};
use crate::kv::KvEngine;
pub use crate::wire::{SetAttr, BATCH_STAT_MAX};

type R<T> = Result<T, MetaError>;

impl<E: KvEngine + ?Sized> Namespace<'_, '_, E> {
    /// setattr on `path` (a final symlink followed unless `attr.nofollow`).
    pub fn setattr(&mut self, path: &str, attr: SetAttr, op: PathOp) -> R<Inode> {
        let mut i = self.resolve(path, !attr.nofollow)?;
        let user = self.user();
        // chmod and explicit times: the owner or root; chown: perm.rs's rule; a touch, or a
        // chmod that only drops setuid/setgid (a writer's): also anyone who may write the
        // file (EACCES otherwise, as utimensat answers).
        let owner = user.is_root() || user.uid == i.uid;
        let writers = attr.perm.is_none_or(|p| perm::drops_only_setid(i.perm, p));
        let owners = attr.perm.is_some() && !writers;
        if (owners || attr.mtime.is_some() || attr.layout.is_some()) && !owner {
            return Err(MetaError::NotPermitted);
        }
        if attr.uid.is_some() || attr.gid.is_some() {
            perm::check_chown(&i, user, attr.uid, attr.gid)?;
        }
        if (attr.touch || attr.perm.is_some()) && !owner {
            perm::check(&i, user, perm::MAY_WRITE)?;
        }
        if let Some(l) = attr.layout {
            match &mut i.kind {
                super::InodeKind::Directory { layout, .. } if l.valid() => *layout = Some(l),
                _ => return Err(MetaError::Invalid("invalid argument")),
            }
        }
        if let Some(p) = attr.perm {
            i.perm = perm::chmod_bits(&i, user, p);
        }
        chown(&mut i, attr.uid, attr.gid);
        if let Some(m) = attr.mtime {
            i.mtime = m;
        }
        if attr.touch {
            i.mtime = op.now;
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

/// chown's changes: the new owner and group, and, on anything but a directory, the setuid bit
/// and a group-executable setgid bit dropped (Linux does so for every chown, root's too).
fn chown(i: &mut Inode, uid: Option<u32>, gid: Option<u32>) {
    if uid.is_none() && gid.is_none() {
        return;
    }
    if let Some(u) = uid {
        i.uid = u;
    }
    if let Some(g) = gid {
        i.gid = g;
    }
    if !i.is_dir() {
        i.perm &= !0o4000;
        if i.perm & 0o010 != 0 {
            i.perm &= !perm::SETGID;
        }
    }
}
