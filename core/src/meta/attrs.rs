//! Attribute operations of §4.3: setattr (chmod, chown, utimes) and batch stat.
//!
//! Invariant: setattr changes only the attributes it is given (and, as Linux, the setuid and
//! setgid bits a chown of a non-directory drops) and stamps ctime with the caller's clock
//! (mtime and atime only when asked: utimensat); a batch stat answers each path on its own,
//! all from one snapshot. Not here: the permission rules themselves (perm.rs), iflags, access
//! times moved by reads (the mount is `noatime`).

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
        check_setattr(&i, user, &attr)?;
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
        set_times(&mut i, &attr, op.now);
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

/// Who may make the changes `attr` asks of `i`: chmod and explicit times, the owner or root;
/// chown, perm.rs's rule; times set to now, or a chmod that only drops setuid/setgid (a
/// writer's), also anyone who may write the file (EACCES otherwise, as utimensat answers).
fn check_setattr(i: &Inode, user: perm::User, attr: &SetAttr) -> R<()> {
    let owner = user.is_root() || user.uid == i.uid;
    let writers = attr.perm.is_none_or(|p| perm::drops_only_setid(i.perm, p));
    let owners = attr.perm.is_some() && !writers;
    let explicit = attr.mtime.is_some() || attr.atime.is_some();
    if (owners || explicit || attr.layout.is_some()) && !owner {
        return Err(MetaError::NotPermitted);
    }
    if attr.uid.is_some() || attr.gid.is_some() {
        perm::check_chown(i, user, attr.uid, attr.gid)?;
    }
    if (attr.touch || attr.atime_now || attr.perm.is_some()) && !owner {
        perm::check(i, user, perm::MAY_WRITE)?;
    }
    Ok(())
}

/// utimensat's changes: each time explicit (with its nanoseconds), to the server's now, or
/// left as it is.
fn set_times(i: &mut Inode, attr: &SetAttr, now: u64) {
    if let Some(m) = attr.mtime {
        (i.mtime, i.mtime_ns) = (m, attr.mtime_ns.min(999_999_999));
    }
    if attr.touch {
        (i.mtime, i.mtime_ns) = (now, 0);
    }
    if let Some(a) = attr.atime {
        (i.atime, i.atime_ns) = (a, attr.atime_ns.min(999_999_999));
    }
    if attr.atime_now {
        (i.atime, i.atime_ns) = (now, 0);
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
