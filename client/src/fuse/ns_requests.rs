//! The namespace requests: setattr, readlink, mkdir, mknod, symlink, rename, link, unlink and
//! rmdir,
//! statfs and forget. Each is a method of the mount's state answering `Result<_, Errno>`, so
//! the unit tests run it over the in-memory client; fs.rs only hands it the kernel's arguments
//! and replies.
//!
//! Invariants: a request naming an inode or a directory's entry checks that meta finds that
//! inode (or directory) where this mount last saw it, else answers ESTALE (inner.rs); a reply
//! that hands the kernel an entry counts one lookup before it goes (`entered`); a rename or
//! removal made through this mount moves or drops the name in the inode table (names.rs)
//! once meta did it. Not here: lookup and getattr (inner.rs), files and handles
//! (file_requests.rs), directories' listings (dir_handles.rs, dir_plus.rs).

use std::ffi::OsStr;
use std::future::Future;
use std::sync::Arc;

use fuser::{Errno, FileAttr, INodeNo, RenameFlags};
use t3fs_core::meta::{Inode, InodeKind, SetAttr};
use t3fs_core::wire::SpecialKind;

use super::attr::BLKSIZE;
use super::errno::errno;
use super::inner::{lock, stale, Inner};
use super::mount_client::{Answer, MountClient};
use super::names::ino_of;

/// The mode bits a mkdir or create asks for: `mode` less the caller's `umask`.
pub(super) fn perm_of(mode: u32, umask: u32) -> u32 {
    mode & !umask & 0o7777
}

impl<C: MountClient> Inner<C> {
    /// setattr of `ino`: a truncate to `size` (through `fh` if given) first, then `attr`'s
    /// changes; the attributes after.
    pub async fn setattr(
        self: &Arc<Self>,
        ino: INodeNo,
        fh: Option<u64>,
        size: Option<u64>,
        attr: SetAttr,
    ) -> Result<FileAttr, Errno> {
        if let Some(len) = size {
            self.truncate(ino, fh, len).await?;
        }
        // Nothing to change but the length (ftruncate of a held file another client renamed
        // needs no path). A setattr of nothing at all is the kernel's chown(-1, -1): meta
        // moves ctime, as Linux does.
        if attr.changes_nothing() && size.is_some() {
            return self.stat(ino).await;
        }
        // The kernel names the inode itself: lchown and utimensat of a link reach here, and
        // change the link.
        let attr = SetAttr {
            nofollow: true,
            ..attr
        };
        // Meta's setattr is by path: the inode is checked there first, and its answer after
        // (a rename between the two is answered ESTALE, the change made).
        let (path, before) = self.verified(ino).await?;
        let after = self
            .client
            .set_attr(&path, attr)
            .await
            .map_err(|e| stale(&e))?;
        if after.id == before.id {
            Ok(self.attr(&after))
        } else {
            tracing::warn!("setattr of {path}: inode {ino:?} was replaced meanwhile");
            Err(Errno::ESTALE)
        }
    }

    /// readlink of `ino`: its target (EINVAL if it is no symlink).
    pub async fn readlink(&self, ino: INodeNo) -> Result<Vec<u8>, Errno> {
        let (_, i) = self.verified(ino).await?;
        match i.kind {
            InodeKind::Symlink { target } => Ok(target),
            _ => Err(Errno::EINVAL),
        }
    }

    /// mkdir of `name` in `parent` with mode `perm`: the entry.
    pub async fn mkdir(&self, parent: INodeNo, name: &OsStr, perm: u32) -> Result<FileAttr, Errno> {
        let make = |path: String| async move { self.client.mkdir_mode(&path, perm).await };
        let sent = std::time::Instant::now();
        let a = self.make(parent, name, make).await?;
        self.fresh.made(a.ino.0, sent);
        Ok(a)
    }

    /// symlink `name` in `parent` to `target` (`None`: not UTF-8, EINVAL): the entry.
    pub async fn symlink(
        &self,
        parent: INodeNo,
        name: &OsStr,
        target: Option<&str>,
    ) -> Result<FileAttr, Errno> {
        let target = target.ok_or(Errno::EINVAL)?;
        let make = |path: String| async move { self.client.symlink(&path, target).await };
        self.make(parent, name, make).await
    }

    /// mknod of `name` in `parent`: a FIFO, device or socket by `mode`'s file type, or a
    /// regular file (made, not opened; EEXIST if the name exists); the entry.
    pub async fn mknod(
        &self,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        perm: u32,
        rdev: u32,
    ) -> Result<FileAttr, Errno> {
        // A regular file (S_IFREG, or no type at all), else one of the special kinds.
        let kind = match mode & 0o170000 {
            0 | 0o100000 => None,
            _ => Some(SpecialKind::from_mode(mode).ok_or(Errno::EINVAL)?),
        };
        let make = |path: String| async move {
            match kind {
                Some(k) => self.client.mknod(&path, k, perm, u64::from(rdev)).await,
                None => self.client.create_file(&path, perm, true).await,
            }
        };
        self.make(parent, name, make).await
    }

    /// Makes `name` in `parent` with `make` (given its path, the directory checked): the
    /// entry.
    async fn make<F, Fut>(&self, parent: INodeNo, name: &OsStr, make: F) -> Result<FileAttr, Errno>
    where
        F: FnOnce(String) -> Fut,
        Fut: Future<Output = Answer<Inode>>,
    {
        let path = self.child_path(parent, name)?;
        self.fresh.adding(parent.0, name);
        let i = make(path).await.map_err(|e| errno(&e))?;
        Ok(self.entered(&i, parent, name))
    }

    /// rename of `name` in `parent` to `newname` in `newparent`.
    pub async fn rename(
        &self,
        (parent, name): (INodeNo, &OsStr),
        (newparent, newname): (INodeNo, &OsStr),
        flags: RenameFlags,
    ) -> Result<(), Errno> {
        if flags.contains(RenameFlags::RENAME_EXCHANGE) {
            return Err(Errno::ENOTSUP);
        }
        let (from, to) = (
            self.child_path(parent, name)?,
            self.child_path(newparent, newname)?,
        );
        // RENAME_NOREPLACE checks first: another client can still create the name in between
        // (meta's rename replaces; a compare-and-rename is not in its API).
        if flags.contains(RenameFlags::RENAME_NOREPLACE) && self.client.lstat(&to).await.is_ok() {
            return Err(Errno::EEXIST);
        }
        self.fresh.adding(newparent.0, newname);
        self.client
            .rename(&from, &to)
            .await
            .map_err(|e| errno(&e))?;
        let replaced = lock(&self.names).renamed(parent, name, newparent, newname);
        self.unlinked(replaced);
        Ok(())
    }

    /// link: `name` in `newparent` becomes another name of `ino`; the entry.
    pub async fn link(
        &self,
        ino: INodeNo,
        newparent: INodeNo,
        name: &OsStr,
    ) -> Result<FileAttr, Errno> {
        let path = self.child_path(newparent, name)?;
        self.fresh.adding(newparent.0, name);
        let (existing, _) = self.verified(ino).await?;
        let i = self
            .client
            .link(&existing, &path)
            .await
            .map_err(|e| stale(&e))?;
        if ino_of(i.id) != ino {
            tracing::warn!("link {existing} {path}: inode {ino:?} was replaced meanwhile");
            return Err(Errno::ESTALE);
        }
        Ok(self.entered(&i, newparent, name))
    }

    /// unlink or rmdir of `name` in `parent`.
    pub async fn remove(&self, parent: INodeNo, name: &OsStr) -> Result<(), Errno> {
        let path = self.child_path(parent, name)?;
        self.client.remove(&path).await.map_err(|e| errno(&e))?;
        let gone = lock(&self.names).removed(parent, name);
        self.unlinked(gone);
        Ok(())
    }

    /// This mount took a name of `ino` away: the handles holding it open count one link
    /// fewer, so fstat of a file unlinked while open says 0 (another client's unlink is seen
    /// only at its next lookup).
    fn unlinked(&self, ino: Option<INodeNo>) {
        let Some(id) = ino.map(super::names::id_of) else {
            return;
        };
        for o in lock(&self.files).values_mut().filter(|o| o.inode.id == id) {
            o.inode.nlink = o.inode.nlink.saturating_sub(1);
        }
    }

    /// statfs: (blocks, free blocks) of [`BLKSIZE`] bytes.
    pub async fn statfs(&self) -> Result<(u64, u64), Errno> {
        let st = self.client.statfs().await.map_err(|e| errno(&e))?;
        let b = u64::from(BLKSIZE);
        Ok((st.capacity / b, st.free / b))
    }

    /// The kernel dropped `nlookup` lookups of `ino`.
    pub fn forget(&self, ino: INodeNo, nlookup: u64) {
        lock(&self.names).forget(ino, nlookup);
    }
}
