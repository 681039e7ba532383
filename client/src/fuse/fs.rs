//! The FUSE file system: each kernel request becomes a task that calls the native client (meta
//! over TCP, chunk I/O on the chains) and replies when done. The dispatch thread polls it once
//! (a request the mount answers itself is answered there); one that must wait goes to the mount's
//! tokio runtime, so the dispatch threads never wait on the cluster and many requests are in
//! flight at once. They do run each request's work up to its first wait, locks included.
//!
//! Thin by design: a callback only copies the kernel's arguments, takes what a handle holds
//! (on the dispatch thread, so in the order the kernel sent the requests), spawns the task,
//! and turns the `Result<_, Errno>` of a method of the mount's state (`Inner`) into the reply.
//! fuser's `Request` and replies cannot be made outside a mount, so everything worth testing
//! sits in those methods (ns_requests.rs, file_requests.rs, dir_handles.rs, dir_plus.rs,
//! inner.rs), which the unit tests run over an in-memory client.
//!
//! Files: `open` opens a meta session (a write session for a writable open) and keeps it by
//! file handle; writes are accepted by the handle's write-behind; `flush` (which close(2)
//! waits for) and `fsync` wait for them to land and tell meta the length; `release` (which
//! nothing waits for) closes the session with the length hint (the end of this handle's
//! acknowledged writes since its truncate version). A file's size as this mount reports it
//! includes writes of its open handles that meta has not been told of yet. `O_TRUNC` and
//! `truncate(2)` run 3FS's client-driven truncate.
//!
//! Directories: `opendir` takes the whole listing (paged from meta), `readdir` serves it by
//! offset, `releasedir` drops it: a listing is the directory as it was at `opendir`.
//!
//! Inodes: every request about an inode or a directory's entry checks that meta finds that
//! inode (or directory) where this mount last saw it, else answers ESTALE (inner.rs); every
//! reply that hands the kernel an entry counts a lookup, and `forget` (to which fuser's
//! `batch_forget` splits) takes them back (names.rs, which also states the table's bound).
//!
//! Not here: mounting (mod.rs), the requests' logic (the files above), what the mount needs of
//! the client (mount_client.rs), the errno table (errno.rs), inode numbers (names.rs).

use std::ffi::OsStr;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileHandle, Filesystem, FopenFlags, Generation, INodeNo, InitFlags, KernelConfig,
    OpenAccMode, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request,
    TimeOrNow,
};
use t3fs_core::meta::perm::User;
use tokio::runtime::Handle;

use super::attr::BLKSIZE;
use super::dir_handles::dir_entries;
use super::groups::GroupCache;
use super::inner::{lock, Inner};
use super::mount_client::MountClient;
use super::ns_requests::perm_of;
use crate::client::Client;

/// The mounted file system.
pub struct T3fs {
    inner: Arc<Inner<Client>>,
    opts: super::MountOptions,
    groups: GroupCache,
}

impl T3fs {
    /// Serves `client`'s cluster as `opts` say; requests run on `rt`.
    pub fn new(client: Client, rt: Handle, opts: super::MountOptions) -> Self {
        Self {
            inner: Arc::new(Inner::new(client, rt, &opts)),
            opts,
            groups: GroupCache::default(),
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
        F: FnOnce(Arc<Inner<Client>>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let user = User {
            groups: self.groups.of(req.pid(), req.uid(), req.gid()),
            ..User::new(req.uid(), req.gid())
        };
        let mut task = Box::pin(<Client as MountClient>::acting_as(
            user,
            f(self.inner.clone()),
        ));
        // One poll here first: a request answered from what the mount holds (a cached
        // attribute, a fresh directory's negative entry, a flush with nothing in flight) is
        // answered on this thread, and one that goes to the cluster has sent its request before
        // it is handed to a worker. A handed-off request costs the kernel round trip a
        // cross-thread wake-up (45 to 150 us on this 2-core host). The task's later polls run on
        // the runtime, which polls it once when spawned, so what the first poll's waker (a
        // no-op) was registered for is looked at again there.
        // A panic is caught as the runtime would catch it in a task: the request's reply goes
        // unsent (fuser answers EIO when a reply is dropped) and the dispatch thread lives on.
        let _in_runtime = self.inner.rt.enter();
        let mut cx = Context::from_waker(Waker::noop());
        let first = std::panic::catch_unwind(AssertUnwindSafe(|| task.as_mut().poll(&mut cx)));
        match first {
            Ok(Poll::Pending) => {
                self.inner.rt.spawn(task);
            }
            Ok(Poll::Ready(())) => {}
            Err(_) => tracing::error!("a FUSE request panicked; answered EIO"),
        }
    }
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

    fn destroy(&mut self) {
        // The closes still queued go before the runtime stops (unwritten_closes.rs).
        self.inner.rt.block_on(self.inner.send_unwritten());
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
        self.inner.forget(ino, nlookup);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.spawn(req, |s| async move {
            attr(reply, &s.ttl, s.stat(ino).await);
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
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let set = super::set_attr::set_attr_of(mode, uid, gid, atime, mtime, ctime);
        self.spawn(req, |s| async move {
            let r = s.setattr(ino, fh.map(|h| h.0), size, set).await;
            attr(reply, &s.ttl, r);
        });
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        self.spawn(req, |s| async move {
            match s.readlink(ino).await {
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
            let r = s.mkdir(parent, &name, perm_of(mode, umask)).await;
            entry(reply, &s.ttl, r);
        });
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let name = name.to_os_string();
        self.spawn(req, |s| async move {
            let r = s
                .mknod(parent, &name, mode, perm_of(mode, umask), rdev)
                .await;
            entry(reply, &s.ttl, r);
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
            let r = s.symlink(parent, &name, target.as_deref()).await;
            entry(reply, &s.ttl, r);
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
            let r = s.rename((parent, &name), (newparent, &newname), flags);
            answer(reply, r.await);
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
            entry(reply, &s.ttl, s.link(ino, newparent, &name).await);
        });
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let write = flags.acc_mode() != OpenAccMode::O_RDONLY;
        let trunc = flags.0 & libc::O_TRUNC != 0;
        let fopen = self.fopen();
        self.spawn(req, |s| async move {
            match s.open_ino(ino, write, trunc).await {
                Ok(fh) => reply.opened(FileHandle(fh), fopen),
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
        let held = self.inner.reading(fh.0);
        self.spawn(req, |s| async move {
            match s.read(held, offset, size).await {
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
        let data = data.to_vec();
        let writeback = write_flags.contains(fuser::WriteFlags::FUSE_WRITE_CACHE);
        self.spawn(req, |s| async move {
            match s.write(held, offset, data, writeback).await {
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
        let held = self.inner.handle(fh.0);
        self.spawn(req, |s| async move {
            answer(reply, s.flush(held).await);
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
        let held = self.inner.handle(fh.0);
        self.spawn(req, |s| async move {
            answer(reply, s.release(fh.0, held).await);
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
            answer(reply, s.fsync(held).await);
        });
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.spawn(req, |s| async move {
            match s.opendir(ino).await {
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
        let Some(listing) = self.inner.dir_listing(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        for (i, next, kind, name) in dir_entries(ino, &listing, offset) {
            if reply.add(i, next, kind, name) {
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
        let Some(listing) = self.inner.dir_listing(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        self.spawn(req, |s| async move {
            let page = async { s.plus_page(ino, &s.path(ino)?, &listing, offset).await };
            match page.await {
                Ok(page) => {
                    // Each entry in the reply is a lookup to the kernel (the dots are not),
                    // counted before the reply goes.
                    let mut names = lock(&s.names);
                    for (off, name, attr, known) in page {
                        let ttl = if known { s.ttl } else { Duration::ZERO };
                        if reply.add(attr.ino, off, &name, &ttl, &attr, Generation(0)) {
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
        self.inner.releasedir(fh.0);
        reply.ok();
    }

    fn statfs(&self, req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.spawn(req, |s| async move {
            match s.statfs().await {
                Ok((blocks, free)) => {
                    let (files, b) = (u64::MAX / 2, BLKSIZE);
                    reply.statfs(blocks, free, free, files, files, b, 255, b);
                }
                Err(e) => reply.error(e),
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
            let perm = perm_of(mode, umask);
            match s.create(parent, &name, perm, exclusive, trunc).await {
                Ok((fh, a)) => reply.created(&s.ttl, &a, Generation(0), FileHandle(fh), fopen),
                Err(e) => reply.error(e),
            }
        });
    }
}

impl T3fs {
    /// unlink and rmdir: meta's remove takes both.
    fn remove(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.to_os_string();
        self.spawn(req, |s| async move {
            answer(reply, s.remove(parent, &name).await);
        });
    }
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

/// Answers an attribute reply with `r`.
fn attr(reply: ReplyAttr, ttl: &std::time::Duration, r: Result<fuser::FileAttr, Errno>) {
    match r {
        Ok(a) => reply.attr(ttl, &a),
        Err(e) => reply.error(e),
    }
}
