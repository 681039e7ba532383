//! The model's answer to each kind of namespace request that inspects or changes the tree:
//! one method of [`Tree`] per request, checking permissions, directory locks and the sticky
//! rule in the kernel's order before the change.
//!
//! Each returns the abstract answer or the POSIX error. Not here: path resolution and the
//! tree's own helpers (ns_model.rs), the dispatch over requests (`Tree::run`), and the
//! requests answered there without a helper (stat, symlink, close, batch stat, statfs).

use std::collections::BTreeMap;

use t3fs_core::meta::lock::LockAction;
use t3fs_core::meta::perm::{User, MAY_EXEC, MAY_READ, MAY_WRITE};
use t3fs_core::meta::{prefix_path, split_path, EntryKind, MetaError, SetAttr, NLINK_MAX};
use t3fs_core::wire::SpecialKind;

use super::{Abstract, Node, Tree, R, ROOT};

impl Tree {
    /// `List`: a page of the directory's names after `after`, with their kinds.
    pub(super) fn list(&self, path: &str, after: &[u8], limit: u32, u: User) -> R<Abstract> {
        let id = self.dir_for(path, u, MAY_READ)?;
        let Some(Node::Dir { entries, .. }) = self.nodes.get(&id) else {
            return Err(MetaError::NotDir);
        };
        let names = entries
            .iter()
            .filter(|(n, _)| n.as_slice() > after)
            // The server answers a page at most `DIR_LIST_PAGE_MAX` long.
            .take(limit.min(t3fs_core::limits::DIR_LIST_PAGE_MAX) as usize)
            .map(|(n, id)| (n.clone(), self.kind(*id)))
            .collect();
        Ok(Abstract::Names(names))
    }

    /// `Create`: the file at `path`, made unless it exists (an error if `exclusive`).
    /// `(exclusive, open)`: O_EXCL, and opened for write in the same request (what it made
    /// whatever its mode, what it found if `u` may write it).
    pub(super) fn create(
        &mut self,
        path: &str,
        (exclusive, open): (bool, bool),
        perm: u32,
        who: u64,
        u: User,
    ) -> R<Abstract> {
        let (id, ours) = self.make(path, Node::File { nlink: 1 }, perm, who, u)?;
        if exclusive && !ours {
            return Err(MetaError::Exists);
        }
        if !open {
            return match self.kind(id) {
                EntryKind::Directory => Err(MetaError::IsDir),
                k => Ok(Abstract::Kind(k)),
            };
        }
        // Opened: an existing name as open opens it; what it made is a new file.
        if !ours {
            return self.open(path, true, u);
        }
        Ok(Abstract::Kind(self.kind(id)))
    }

    /// `Mkdirs`: the directory at `path`, and with `recursive` every missing one above it.
    pub(super) fn mkdirs(
        &mut self,
        path: &str,
        recursive: bool,
        perm: u32,
        who: u64,
        u: User,
    ) -> R<Abstract> {
        let dir = || Node::Dir {
            entries: BTreeMap::new(),
            parent: ROOT,
            lock: None,
        };
        let parts = split_path(path)?;
        let upto = if recursive { 1 } else { parts.len() };
        let mut made = None;
        for n in upto..=parts.len() {
            let sub = prefix_path(&parts, n);
            let (id, ours) = self.make(&sub, dir(), perm, who, u)?;
            let last = n == parts.len();
            match (self.is_dir(id), ours) {
                (false, _) if last => return Err(MetaError::Exists),
                (false, _) => return Err(MetaError::NotDir),
                (true, false) if last && !recursive => return Err(MetaError::Exists),
                _ => made = Some(id),
            }
        }
        made.map(|_| Abstract::Kind(EntryKind::Directory))
            .ok_or(MetaError::Exists)
    }

    /// `Hardlink`: a new name `path` for the file `existing` names.
    pub(super) fn hardlink(
        &mut self,
        existing: &str,
        path: &str,
        who: u64,
        u: User,
    ) -> R<Abstract> {
        let target = self.resolve(existing, false, u)?;
        let (parent, name) = self.parent_of(path, u)?;
        self.may(parent, u, MAY_EXEC)?;
        if self.entry(parent, name).is_some() {
            return Err(MetaError::Exists);
        }
        self.may(parent, u, MAY_WRITE | MAY_EXEC)?;
        self.check_lock(parent, who)?;
        let kind = self.kind(target);
        let Some(nlink) = self.nodes.get_mut(&target).and_then(Node::nlink_mut) else {
            return Err(MetaError::NotPermitted);
        };
        if *nlink >= NLINK_MAX {
            return Err(MetaError::TooManyLinks);
        }
        *nlink += 1;
        self.entries_mut(parent).insert(name.to_vec(), target);
        Ok(Abstract::Kind(kind))
    }

    /// `Mknod`: a new FIFO, device (root only) or socket at `path`.
    pub(super) fn mknod(
        &mut self,
        path: &str,
        kind: SpecialKind,
        perm: u32,
        who: u64,
        u: User,
    ) -> R<Abstract> {
        match self.make(path, Node::Special { kind, nlink: 1 }, perm, who, u)? {
            (_, true) => Ok(Abstract::Kind(EntryKind::Special(kind))),
            _ => Err(MetaError::Exists),
        }
    }

    /// Owner, group and mode of a new inode in `parent`: the caller's, except that a setgid
    /// parent gives its group (and its setgid bit to a new directory), and a group-executable
    /// setgid file made there by a non-member, non-root caller loses the bit (Linux).
    pub(super) fn new_attrs(&self, parent: u32, dir: bool, perm: u32, u: User) -> (u32, u32, u32) {
        let (_, pgid, pperm) = self.attrs.get(&parent).copied().unwrap_or((0, 0, 0));
        let mut perm = perm & 0o7777;
        if pperm & 0o2000 == 0 {
            return (u.uid, u.gid, perm);
        }
        if dir {
            perm |= 0o2000;
        } else if perm & 0o2010 == 0o2010 && !u.is_root() && !u.in_group(pgid) {
            perm &= !0o2000;
        }
        (u.uid, pgid, perm)
    }

    /// `Remove`: drops the name `path` (a non-empty directory only if `recursive`).
    pub(super) fn remove(&mut self, path: &str, recursive: bool, who: u64, u: User) -> R<Abstract> {
        let (parent, name) = self.parent_of(path, u)?;
        self.may(parent, u, MAY_EXEC)?;
        let id = self.entry(parent, name).ok_or(MetaError::NotFound)?;
        self.may(parent, u, MAY_WRITE | MAY_EXEC)?;
        self.check_lock(parent, who)?;
        self.sticky(parent, id, u)?;
        if self.is_dir(id) && !recursive && !self.is_empty_dir(id) {
            return Err(MetaError::NotEmpty);
        }
        self.entries_mut(parent).remove(name);
        self.unlink(id);
        Ok(Abstract::Done)
    }

    /// `Open`: the kind of what `path` names, if `u` may read it (or write it, with `write`).
    pub(super) fn open(&self, path: &str, write: bool, u: User) -> R<Abstract> {
        let id = self.resolve(path, true, u)?;
        if !write {
            self.may(id, u, MAY_READ)?;
        }
        if write && self.is_dir(id) {
            return Err(MetaError::IsDir);
        }
        if write {
            self.may(id, u, MAY_WRITE)?;
        }
        // A special file's data is its opener's kernel's, never the file system's.
        if let EntryKind::Special(_) = self.kind(id) {
            return Err(MetaError::Invalid(t3fs_core::wire::NO_DATA));
        }
        Ok(Abstract::Kind(self.kind(id)))
    }

    /// `SetAttr`: new owner and mode bits for what `path` names, if `u` may set them.
    pub(super) fn set_attr(&mut self, path: &str, attr: &SetAttr, u: User) -> R<Abstract> {
        let id = self.resolve(path, !attr.nofollow, u)?;
        let (uid, gid, perm) = self.attrs.get(&id).copied().unwrap_or((0, 0, 0));
        let owner = u.is_root() || u.uid == uid;
        // Dropping only setuid/setgid is a writer's change (the kernel's, for a write by a
        // non-owner); any other mode change is the owner's.
        let drops_setid = attr.perm.is_some_and(|p| {
            let p = p & 0o7777;
            p != perm && p & !perm == 0 && (perm & !p) & !0o6000 == 0
        });
        let owners = attr.perm.is_some() && !drops_setid;
        let explicit_times = attr.mtime.is_some() || attr.atime.is_some();
        if (owners || explicit_times || attr.layout.is_some()) && !owner {
            return Err(MetaError::NotPermitted);
        }
        // chown: root; or the owner, keeping the owner, to a group it is in.
        let chown = attr.uid.is_some() || attr.gid.is_some();
        let keeps_owner = attr.uid.is_none_or(|n| n == uid) && u.uid == uid;
        let group_ok = attr.gid.is_none_or(|g| g == gid || u.in_group(g));
        if chown && !u.is_root() && !(keeps_owner && group_ok) {
            return Err(MetaError::NotPermitted);
        }
        // Times to now or a writer's mode change: the owner, or anyone who may write.
        if (attr.touch || attr.atime_now || drops_setid) && !owner {
            self.may(id, u, MAY_WRITE)?;
        }
        // Layouts are not modelled, only where they may be set.
        if attr.layout.is_some_and(|l| !l.valid() || !self.is_dir(id)) {
            return Err(MetaError::Invalid("invalid argument"));
        }
        // A chmod by someone outside the file's group drops setgid; a chown of a non-directory
        // drops setuid and a group-executable setgid.
        let mut bits = match attr.perm {
            Some(p) if u.is_root() || u.in_group(gid) => p & 0o7777,
            Some(p) => p & 0o5777,
            None => perm,
        };
        if chown && !self.is_dir(id) {
            bits &= !0o4000;
            if bits & 0o010 != 0 {
                bits &= !0o2000;
            }
        }
        let new = (attr.uid.unwrap_or(uid), attr.gid.unwrap_or(gid), bits);
        self.attrs.insert(id, new);
        Ok(Abstract::Kind(self.kind(id)))
    }

    /// `LockDirectory`: takes, preempts, releases or clears the directory's lock for `who`.
    pub(super) fn lock_directory(
        &mut self,
        path: &str,
        action: &LockAction,
        who: u64,
        u: User,
    ) -> R<Abstract> {
        let id = self.dir_for(path, u, MAY_WRITE)?;
        let Some(Node::Dir { lock, .. }) = self.nodes.get_mut(&id) else {
            return Err(MetaError::NotDir);
        };
        *lock = match (action, *lock) {
            (LockAction::TryLock | LockAction::Unlock, Some(h)) if h != who => {
                return Err(MetaError::NoLock)
            }
            (LockAction::TryLock | LockAction::PreemptLock, _) => Some(who),
            (LockAction::Unlock | LockAction::Clear, _) => None,
        };
        Ok(Abstract::Kind(EntryKind::Directory))
    }

    /// `Rename`: moves the name `from` to `to`, replacing what `to` names if compatible.
    pub(super) fn rename(&mut self, from: &str, to: &str, who: u64, u: User) -> R<Abstract> {
        let (sp, sn) = self.parent_of(from, u)?;
        let (dp, dn) = self.parent_of(to, u)?;
        self.may(sp, u, MAY_EXEC)?;
        let src = self.entry(sp, sn).ok_or(MetaError::NotFound)?;
        self.may(dp, u, MAY_EXEC)?;
        self.may(sp, u, MAY_WRITE | MAY_EXEC)?;
        self.may(dp, u, MAY_WRITE | MAY_EXEC)?;
        self.check_lock(sp, who)?;
        self.check_lock(dp, who)?;
        self.sticky(sp, src, u)?;
        if self.is_dir(src) && self.is_ancestor(src, dp)? {
            return Err(MetaError::Invalid("a directory cannot move into itself"));
        }
        if let Some(dst) = self.entry(dp, dn) {
            if dst == src {
                return Ok(Abstract::Done);
            }
            self.sticky(dp, dst, u)?;
            if self.is_dir(dst) && self.is_ancestor(dst, sp)? {
                return Err(MetaError::NotEmpty);
            }
            match (self.is_dir(src), self.is_dir(dst)) {
                (true, false) => return Err(MetaError::NotDir),
                (false, true) => return Err(MetaError::IsDir),
                (true, true) if !self.is_empty_dir(dst) => return Err(MetaError::NotEmpty),
                _ => {}
            }
            self.unlink(dst);
        }
        self.entries_mut(sp).remove(sn);
        self.entries_mut(dp).insert(dn.to_vec(), src);
        if let Some(Node::Dir { parent, .. }) = self.nodes.get_mut(&src) {
            *parent = dp;
        }
        Ok(Abstract::Done)
    }
}
