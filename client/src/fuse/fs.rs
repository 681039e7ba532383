//! The FUSE file system: each kernel request becomes a task on the mount's tokio runtime that
//! calls the native client (meta over TCP, chunk I/O on the chains) and replies when done, so
//! the dispatch threads never wait and many requests are in flight at once.
//!
//! Files: `open` opens a meta session (a write session for a writable open) and keeps it by
//! file handle; writes commit on the whole chain before they are answered; `flush` (which
//! close(2) waits for) and `fsync` tell meta the length; `release` (which nothing waits for)
//! closes the session with the length hint (the end of this handle's acknowledged writes since
//! its truncate version). A
//! file's size as this mount reports it includes writes of its open handles that meta has not
//! been told of yet. `O_TRUNC` and `truncate(2)` run 3FS's client-driven truncate.
//!
//! Directories: `opendir` takes the whole listing (paged from meta), `readdir` serves it by
//! offset, `releasedir` drops it: a listing is the directory as it was at `opendir`.
//!
//! Inodes: every request about an inode or a directory's entry checks that meta finds that
//! inode (or directory) where this mount last saw it, else answers ESTALE (inner.rs); every
//! reply that hands the kernel an entry counts a lookup, and `forget` (to which fuser's
//! `batch_forget` splits) takes them back (names.rs, which also states the table's bound).
//!
//! Not here: mounting (mod.rs), the mount's state and shared steps (inner.rs), the errno table
//! (errno.rs), inode numbers (names.rs).

use std::ffi::OsStr;
use std::future::Future;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite,
    Request, TimeOrNow,
};
use t3fs_core::meta::perm::User;
use t3fs_core::meta::{InodeKind, SetAttr};
use tokio::runtime::Handle;

use super::attr::BLKSIZE;
use super::errno::errno;
use super::inner::{lock, stale, Inner};
use super::names::{id_of, ino_of};
use super::write_behind::{fitting, WriteBehind};
use crate::client::{Client, File};

/// The mounted file system.
pub struct T3fs {
    inner: Arc<Inner>,
    opts: super::MountOptions,
}

impl T3fs {
    /// Serves `client`'s cluster as `opts` say; requests run on `rt`.
    pub fn new(client: Client, rt: Handle, opts: super::MountOptions) -> Self {
        Self {
            inner: Arc::new(Inner::new(client, rt, &opts)),
            opts,
        }
    }

    /// How file handles are opened: through the page cache, or `direct_io`.
    fn fopen(&self) -> FopenFlags {
        if self.opts.direct_io {
            FopenFlags::FOPEN_DIRECT_IO
        } else {
            FopenFlags::empty()
        }
    }

    /// The client, for closing it after the unmount.
    pub fn into_client(self) -> Option<Client> {
        Arc::into_inner(self.inner).map(|i| i.client)
    }

    /// Runs `f` on the runtime, its namespace requests acting for `req`'s caller.
    fn spawn<F, Fut>(&self, req: &Request, f: F)
    where
        F: FnOnce(Arc<Inner>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let user = User {
            uid: req.uid(),
            gid: req.gid(),
        };
        let fut = f(self.inner.clone());
        self.inner.rt.spawn(crate::client::acting_as(user, fut));
    }
}

fn secs(t: TimeOrNow) -> u64 {
    let at = match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    };
    at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs()
}

impl Filesystem for T3fs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // 1 MiB requests (3FS's chunk size, and what `max_write` allows at most by default),
        // readahead as the kernel allows, lookups and listings of one directory in parallel,
        // O_TRUNC handed to open; the writeback cache only when asked (see MountOptions).
        let _ = config.set_max_write(self.opts.max_write);
        let _ = config.set_max_readahead(self.opts.max_readahead);
        // readdirplus when the kernel finds it pays (a listing followed by lookups).
        let mut want = InitFlags::FUSE_PARALLEL_DIROPS
            | InitFlags::FUSE_ATOMIC_O_TRUNC
            | InitFlags::FUSE_DO_READDIRPLUS
            | InitFlags::FUSE_READDIRPLUS_AUTO;
        if self.opts.writeback_cache {
            want |= InitFlags::FUSE_WRITEBACK_CACHE;
        }
        if let Err(missing) = config.add_capabilities(want) {
            tracing::warn!("the kernel lacks FUSE capabilities {missing:?}");
        }
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let name = name.to_os_string();
        self.spawn(req, |s| async move {
            entry(reply, &s.ttl, s.lookup(parent, &name).await);
        });
    }

    /// The kernel dropped `nlookup` lookups of `ino` (fuser's `batch_forget` comes here once
    /// per inode: its `ForgetOne` is not exported to implement it).
    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        lock(&self.inner.names).forget(ino, nlookup);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.spawn(req, |s| async move {
            match s.stat(ino).await {
                Ok(a) => reply.attr(&s.ttl, &a),
                Err(e) => reply.error(e),
            }
        });
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let attr = SetAttr {
            perm: mode.map(|m| m & 0o7777),
            uid,
            gid,
            mtime: mtime.map(secs),
            layout: None,
        };
        self.spawn(req, |s| async move {
            let r = async {
                if let Some(len) = size {
                    s.truncate(ino, fh.map(|h| h.0), len).await?;
                }
                if attr == SetAttr::default() {
                    return s.stat(ino).await;
                }
                // Meta's setattr is by path: the inode is checked there first, and its answer
                // after (a rename between the two is answered ESTALE, the change made).
                let (path, before) = s.verified(ino).await?;
                let after = s
                    .client
                    .set_attr(&path, attr)
                    .await
                    .map_err(|e| stale(&e))?;
                if after.id == before.id {
                    Ok(s.attr(&after))
                } else if matches!(before.kind, InodeKind::Symlink { .. }) {
                    // Meta's setattr follows a final symlink (lchown and utimes of a link
                    // change its target); the link's own attributes are as they were.
                    Ok(s.attr(&before))
                } else {
                    tracing::warn!("setattr of {path}: inode {ino:?} was replaced meanwhile");
                    Err(Errno::ESTALE)
                }
            };
            match r.await {
                Ok(a) => reply.attr(&s.ttl, &a),
                Err(e) => reply.error(e),
            }
        });
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        self.spawn(req, |s| async move {
            let r = async {
                let (_, i) = s.verified(ino).await?;
                match i.kind {
                    InodeKind::Symlink { target } => Ok(target),
                    _ => Err(Errno::EINVAL),
                }
            };
            match r.await {
                Ok(t) => reply.data(&t),
                Err(e) => reply.error(e),
            }
        });
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let name = name.to_os_string();
        self.spawn(req, |s| async move {
            let r = async {
                let path = s.child_path(parent, &name).await?;
                let perm = mode & !umask & 0o7777;
                let i = s
                    .client
                    .mkdir_mode(&path, perm)
                    .await
                    .map_err(|e| errno(&e))?;
                Ok(s.entered(&i, parent, &name))
            };
            entry(reply, &s.ttl, r.await);
        });
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(req, parent, name, reply);
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(req, parent, name, reply);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &std::path::Path,
        reply: ReplyEntry,
    ) {
        let name = link_name.to_os_string();
        let target = target.to_str().map(str::to_string);
        self.spawn(req, |s| async move {
            let r = async {
                let target = target.ok_or(Errno::EINVAL)?;
                let path = s.child_path(parent, &name).await?;
                let i = s
                    .client
                    .symlink(&path, &target)
                    .await
                    .map_err(|e| errno(&e))?;
                Ok(s.entered(&i, parent, &name))
            };
            entry(reply, &s.ttl, r.await);
        });
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (name, newname) = (name.to_os_string(), newname.to_os_string());
        self.spawn(req, |s| async move {
            let r = async {
                if flags.contains(RenameFlags::RENAME_EXCHANGE) {
                    return Err(Errno::ENOTSUP);
                }
                let (from, to) = tokio::join!(
                    s.child_path(parent, &name),
                    s.child_path(newparent, &newname)
                );
                let (from, to) = (from?, to?);
                // RENAME_NOREPLACE checks first: another client can still create the name in
                // between (meta's rename replaces; a compare-and-rename is not in its API).
                if flags.contains(RenameFlags::RENAME_NOREPLACE)
                    && s.client.lstat(&to).await.is_ok()
                {
                    return Err(Errno::EEXIST);
                }
                s.client.rename(&from, &to).await.map_err(|e| errno(&e))?;
                lock(&s.names).renamed(parent, &name, newparent, &newname);
                Ok(())
            };
            match r.await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            }
        });
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let name = newname.to_os_string();
        self.spawn(req, |s| async move {
            let r = async {
                let (existing, path) =
                    tokio::join!(s.verified(ino), s.child_path(newparent, &name));
                let ((existing, _), path) = (existing?, path?);
                let i = s
                    .client
                    .link(&existing, &path)
                    .await
                    .map_err(|e| stale(&e))?;
                if ino_of(i.id) != ino {
                    tracing::warn!("link {existing} {path}: inode {ino:?} was replaced meanwhile");
                    return Err(Errno::ESTALE);
                }
                Ok(s.entered(&i, newparent, &name))
            };
            entry(reply, &s.ttl, r.await);
        });
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let write = flags.acc_mode() != OpenAccMode::O_RDONLY;
        let trunc = flags.0 & libc::O_TRUNC != 0;
        let fopen = self.fopen();
        self.spawn(req, |s| async move {
            let opened = async { s.open(&s.path(ino)?, id_of(ino), write, trunc).await };
            match opened.await {
                Ok((fh, _)) => reply.opened(FileHandle(fh), fopen),
                Err(e) => reply.error(e),
            }
        });
    }

    fn read(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        let held = lock(&self.inner.files)
            .get(&fh.0)
            .map(|o| (o.file.clone(), o.inode.clone(), o.ra.clone()));
        self.spawn(req, |s| async move {
            let r = async {
                let (file, inode, ra) = held.ok_or(Errno::EBADF)?;
                // A read sees every write this mount accepted before it, and stops at the end
                // of the file as this mount sees it (holes inside read as zeros, as the chains
                // answer them).
                s.settle_writes(inode.id.0).await;
                let end = s.size_of(&inode).unwrap_or(file.length);
                let len = u64::from(size).min(end.saturating_sub(offset));
                if len == 0 {
                    return Ok(Vec::new());
                }
                ra.read(&s, offset, len, end).await
            };
            match r.await {
                Ok(d) => reply.data(&d),
                Err(e) => reply.error(e),
            }
        });
    }

    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: fuser::WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyWrite,
    ) {
        let held = self.inner.handle(fh.0);
        let mut data = data.to_vec();
        let writeback = write_flags.contains(fuser::WriteFlags::FUSE_WRITE_CACHE);
        self.spawn(req, |s| async move {
            let r = async {
                let (file, wb) = held.ok_or(Errno::EBADF)?;
                // Past the layout's largest file: short, or EFBIG with nothing written.
                let n = fitting(offset, data.len(), file.layout.size_max())?;
                let short = n < data.len();
                data.truncate(n);
                s.forget_reads(file.inode.0);
                wb.write(&s, offset, data).await?;
                // The kernel's writeback (the writeback cache) drops the rest of a short write
                // silently: it gets EFBIG, which fsync and close report, once the bytes that
                // fit are written.
                if short && writeback {
                    return Err(Errno::EFBIG);
                }
                Ok(n)
            };
            match r.await {
                Ok(n) => reply.written(n as u32),
                Err(e) => reply.error(e),
            }
        });
    }

    fn flush(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: fuser::LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2) waits for this (the kernel does not wait for `release`): the handle's
        // writes land on their chains, then meta learns the length, so that the next open
        // anywhere sees them.
        let held = self.inner.handle(fh.0);
        self.spawn(req, |s| async move {
            answer(reply, sync(&s, held).await);
        });
    }

    fn release(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // The kernel does not wait for this answer: until meta has the length hint, the
        // handle's writes stay in the size this mount reports (`size_of`).
        let held = self.inner.handle(fh.0);
        self.spawn(req, |s| async move {
            let r = match held {
                Some((f, wb)) if f.session != 0 => {
                    // A failure was reported at flush; the hint covers what landed.
                    let _ = wb.drain(&s).await;
                    s.client
                        .close_file(&f, wb.acked())
                        .await
                        .map_err(|e| errno(&e))
                }
                _ => Ok(()),
            };
            lock(&s.files).remove(&fh.0);
            answer(reply, r);
        });
    }

    fn fsync(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let held = self.inner.handle(fh.0);
        self.spawn(req, |s| async move {
            match held {
                Some(h) => answer(reply, sync(&s, Some(h)).await),
                None => reply.error(Errno::EBADF),
            }
        });
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.spawn(req, |s| async move {
            let r = async {
                let l = s.open_dir(ino).await?;
                let fh = s.fh();
                lock(&s.dirs).insert(fh, Arc::new(l));
                Ok(fh)
            };
            match r.await {
                Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
                Err(e) => reply.error(e),
            }
        });
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(listing) = lock(&self.inner.dirs).get(&fh.0).cloned() else {
            return reply.error(Errno::EBADF);
        };
        // Offsets: 1 is ".", 2 is "..", 3 + k the k-th entry; each entry carries the offset
        // of the one after it.
        let dots = [
            (".".to_string(), ino, FileType::Directory),
            ("..".to_string(), ino, FileType::Directory),
        ];
        let all = dots.iter().chain(listing.iter());
        for (k, (name, i, kind)) in all.enumerate().skip(offset as usize) {
            if reply.add(*i, k as u64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let Some(listing) = lock(&self.inner.dirs).get(&fh.0).cloned() else {
            return reply.error(Errno::EBADF);
        };
        self.spawn(req, |s| async move {
            let page = async { s.plus_page(ino, &s.path(ino)?, &listing, offset).await };
            match page.await {
                Ok(page) => {
                    // Each entry in the reply is a lookup to the kernel (the dots are not),
                    // counted before the reply goes.
                    let mut names = lock(&s.names);
                    for (off, name, attr) in page {
                        if reply.add(attr.ino, off, &name, &s.ttl, &attr, Generation(0)) {
                            break;
                        }
                        if name != "." && name != ".." {
                            names.looked_up(attr.ino, ino, OsStr::new(&name));
                        }
                    }
                    drop(names);
                    reply.ok();
                }
                Err(e) => reply.error(e),
            }
        });
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        lock(&self.inner.dirs).remove(&fh.0);
        reply.ok();
    }

    fn statfs(&self, req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.spawn(req, |s| async move {
            match s.client.statfs().await {
                Ok(st) => {
                    let b = u64::from(BLKSIZE);
                    let (blocks, free) = (st.capacity / b, st.free / b);
                    reply.statfs(
                        blocks,
                        free,
                        free,
                        u64::MAX / 2,
                        u64::MAX / 2,
                        BLKSIZE,
                        255,
                        BLKSIZE,
                    );
                }
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: fuser::ReplyXattr,
    ) {
        reply.error(Errno::ENOTSUP);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: fuser::ReplyXattr) {
        reply.error(Errno::ENOTSUP);
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let name = name.to_os_string();
        let exclusive = flags & libc::O_EXCL != 0;
        let trunc = flags & libc::O_TRUNC != 0;
        let fopen = self.fopen();
        self.spawn(req, |s| async move {
            let r = async {
                let path = s.child_path(parent, &name).await?;
                let perm = mode & !umask & 0o7777;
                let made = s
                    .client
                    .create_file(&path, perm, exclusive)
                    .await
                    .map_err(|e| errno(&e))?;
                // What was made (or found) is what is opened, else ESTALE (a rename between).
                let (fh, inode) = s.open(&path, made.id, true, trunc).await?;
                Ok((fh, s.entered(&inode, parent, &name)))
            };
            match r.await {
                Ok((fh, a)) => reply.created(&s.ttl, &a, Generation(0), FileHandle(fh), fopen),
                Err(e) => reply.error(e),
            }
        });
    }
}

impl T3fs {
    fn remove(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.to_os_string();
        self.spawn(req, |s| async move {
            let r = async {
                let path = s.child_path(parent, &name).await?;
                s.client.remove(&path, false).await.map_err(|e| errno(&e))?;
                lock(&s.names).removed(parent, &name);
                Ok(())
            };
            match r.await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            }
        });
    }
}

/// flush and fsync of a handle: its writes land (or their first failure is reported), then
/// meta learns the length they reach.
async fn sync(s: &Arc<Inner>, held: Option<(File, Arc<WriteBehind>)>) -> Result<(), Errno> {
    let Some((f, wb)) = held.filter(|(f, _)| f.session != 0) else {
        return Ok(());
    };
    let end = wb.drain(s).await?;
    if end == 0 {
        return Ok(());
    }
    s.client.sync_length(&f, end).await.map_err(|e| errno(&e))
}

/// Answers an empty reply with `r`'s outcome.
fn answer(reply: ReplyEmpty, r: Result<(), Errno>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

/// Answers an entry reply (a name looked up or made) with `r`.
fn entry(reply: ReplyEntry, ttl: &std::time::Duration, r: Result<fuser::FileAttr, Errno>) {
    match r {
        Ok(a) => reply.entry(ttl, &a, Generation(0)),
        Err(e) => reply.error(e),
    }
}
