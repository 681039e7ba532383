//! What the mount needs from the client: the namespace verbs the kernel's requests become,
//! file sessions (open, truncate, length sync, close), chunk I/O of an open file, and acting
//! for a request's caller. The file system (`Inner<C>`, fs.rs and the request files) is
//! generic over it: in production `C` is the native [`Client`] (the impl below only forwards
//! to its methods of the same names, so the mount behaves exactly as when it held the client
//! itself); the unit tests give an in-memory one (mem_client.rs), so the mount's logic is
//! tested without a cluster or `/dev/fuse`, as mountpoint-s3 tests its file system over a
//! mock object client.
//!
//! Why generic and not `dyn`: the methods return `impl Future + Send` (no box, no extra
//! allocation per request on the production path, which stays monomorphic), and
//! [`MountClient::acting_as`] is generic over the future it scopes; neither is object-safe,
//! and the mount never needs two kinds of client at once. write-behind and readahead keep
//! their own object-safe `Backend` (backend.rs), which `Inner<C>` implements on top of this.
//!
//! Invariants an implementation keeps (the mount relies on them): paths are absolute; errors
//! are [`ClientError`]s as the native client returns them (a namespace status as
//! `ClientError::Meta`, so errno.rs maps both the same); `lstat` does not follow a final
//! symlink, `batch_stat` and `set_attr` do; a namespace call made inside `acting_as(user, ..)`
//! is checked and owned as `user`'s. A leaf: it names no other module of the mount. Not here:
//! errno mapping (errno.rs), what the mount does with the answers (inner.rs, fs.rs).

use std::future::Future;

use t3fs_core::ids::InodeId;
use t3fs_core::meta::perm::User;
use t3fs_core::meta::request::FsStat;
use t3fs_core::meta::{DirEntry, Inode, MetaError, SetAttr};
use t3fs_core::wire::SpecialKind;

use crate::client::dirs_watch::DirsWatcher;
use crate::client::{Client, ClientError, File};

/// The answer of one client call.
pub(super) type Answer<T> = Result<T, ClientError>;

/// The client operations the mount makes. Each is what the native client's method of the
/// same name does (see its docs there); only `remove` is narrowed (never recursive).
pub(super) trait MountClient: Send + Sync + 'static {
    /// stat without following a final symlink.
    fn lstat(&self, path: &str) -> impl Future<Output = Answer<Inode>> + Send;
    /// Has `watcher` told of the directories each namespace answer says its request changed
    /// (`Client::watch_dirs`); a client without such answers never calls it.
    fn watch_dirs(&self, watcher: DirsWatcher) {
        let _ = watcher;
    }
    /// stat of many paths at once (final symlinks followed), each answered on its own.
    fn batch_stat(
        &self,
        paths: Vec<String>,
    ) -> impl Future<Output = Answer<Vec<Result<Inode, MetaError>>>> + Send;
    /// At most `limit` names of directory `path` after `after`, in name order.
    fn list_after(
        &self,
        path: &str,
        after: Vec<u8>,
        limit: u32,
    ) -> impl Future<Output = Answer<Vec<(Vec<u8>, DirEntry)>>> + Send;
    /// Opens `path` (symlinks followed), with a write session when `write`; the file and its
    /// inode as meta answered the open.
    fn open_with_inode(
        &self,
        path: &str,
        write: bool,
    ) -> impl Future<Output = Answer<(File, Inode)>> + Send;
    /// Creates a file (O_CREAT, with O_EXCL when `exclusive`) without opening it.
    fn create_file(
        &self,
        path: &str,
        perm: u32,
        exclusive: bool,
    ) -> impl Future<Output = Answer<Inode>> + Send;
    /// Creates a file and opens it for write in one meta transaction (`Client::create_open`).
    fn create_open(
        &self,
        path: &str,
        perm: u32,
        exclusive: bool,
    ) -> impl Future<Output = Answer<(File, Inode)>> + Send;
    /// Makes a directory with mode `perm`.
    fn mkdir_mode(&self, path: &str, perm: u32) -> impl Future<Output = Answer<Inode>> + Send;
    /// symlink(2): `path` → `target`.
    fn symlink(&self, path: &str, target: &str) -> impl Future<Output = Answer<Inode>> + Send;
    /// mknod(2) of a FIFO, device or socket.
    fn mknod(
        &self,
        path: &str,
        kind: SpecialKind,
        perm: u32,
        rdev: u64,
    ) -> impl Future<Output = Answer<Inode>> + Send;
    /// link(2): `path` becomes another name of what `existing` names (not a directory).
    fn link(&self, existing: &str, path: &str) -> impl Future<Output = Answer<Inode>> + Send;
    /// rename(2), replacing what `to` names as POSIX allows.
    fn rename(&self, from: &str, to: &str) -> impl Future<Output = Answer<()>> + Send;
    /// unlink(2) or rmdir(2) of `path` (an empty directory only).
    fn remove(&self, path: &str) -> impl Future<Output = Answer<()>> + Send;
    /// chmod, chown and utimes of `path` (symlinks followed).
    fn set_attr(&self, path: &str, attr: SetAttr) -> impl Future<Output = Answer<Inode>> + Send;
    /// The cluster's capacity and use.
    fn statfs(&self) -> impl Future<Output = Answer<FsStat>> + Send;
    /// Writes `data` at `offset` of `f`; resolves once its chains committed it.
    fn write(
        &self,
        f: &File,
        offset: u64,
        data: Vec<u8>,
    ) -> impl Future<Output = Answer<()>> + Send;
    /// Reads `len` bytes at `offset` of `f` (holes and what lies past the data read as zeros).
    fn read(&self, f: &File, offset: u64, len: u64)
        -> impl Future<Output = Answer<Vec<u8>>> + Send;
    /// Cuts or zero-extends the file open for write as `f` (opened as `inode`) to `len`;
    /// `f`'s truncate version and length move to the truncate's.
    fn truncate(
        &self,
        f: &mut File,
        inode: &Inode,
        len: u64,
    ) -> impl Future<Output = Answer<()>> + Send;
    /// Tells meta that `f`'s writes since its truncate version reach `written`.
    fn sync_length(&self, f: &File, written: u64) -> impl Future<Output = Answer<()>> + Send;
    /// Closes `f`'s session with the length hint `length`.
    fn close_file(&self, f: &File, length: u64) -> impl Future<Output = Answer<()>> + Send;
    /// Closes write sessions `(inode, session)` that wrote nothing (no length changes).
    fn close_unwritten(
        &self,
        sessions: &[(InodeId, u64)],
    ) -> impl Future<Output = Answer<()>> + Send;
    /// Runs `f` with every namespace call made in it acting for `user` (a scope of the task
    /// that runs it, so no client is borrowed and the future can be spawned).
    fn acting_as<F>(user: User, f: F) -> impl Future<Output = F::Output> + Send
    where
        F: Future + Send;
}

impl MountClient for Client {
    fn watch_dirs(&self, watcher: DirsWatcher) {
        Client::watch_dirs(self, watcher);
    }

    fn lstat(&self, path: &str) -> impl Future<Output = Answer<Inode>> + Send {
        Client::lstat(self, path)
    }

    fn batch_stat(
        &self,
        paths: Vec<String>,
    ) -> impl Future<Output = Answer<Vec<Result<Inode, MetaError>>>> + Send {
        Client::batch_stat(self, paths)
    }

    fn list_after(
        &self,
        path: &str,
        after: Vec<u8>,
        limit: u32,
    ) -> impl Future<Output = Answer<Vec<(Vec<u8>, DirEntry)>>> + Send {
        Client::list_after(self, path, after, limit)
    }

    fn open_with_inode(
        &self,
        path: &str,
        write: bool,
    ) -> impl Future<Output = Answer<(File, Inode)>> + Send {
        Client::open_with_inode(self, path, write)
    }

    fn create_file(
        &self,
        path: &str,
        perm: u32,
        exclusive: bool,
    ) -> impl Future<Output = Answer<Inode>> + Send {
        Client::create_file(self, path, perm, exclusive)
    }

    fn create_open(
        &self,
        path: &str,
        perm: u32,
        exclusive: bool,
    ) -> impl Future<Output = Answer<(File, Inode)>> + Send {
        Client::create_open(self, path, perm, exclusive)
    }

    fn mkdir_mode(&self, path: &str, perm: u32) -> impl Future<Output = Answer<Inode>> + Send {
        Client::mkdir_mode(self, path, perm)
    }

    fn symlink(&self, path: &str, target: &str) -> impl Future<Output = Answer<Inode>> + Send {
        Client::symlink(self, path, target)
    }

    fn mknod(
        &self,
        path: &str,
        kind: SpecialKind,
        perm: u32,
        rdev: u64,
    ) -> impl Future<Output = Answer<Inode>> + Send {
        Client::mknod(self, path, kind, perm, rdev)
    }

    fn link(&self, existing: &str, path: &str) -> impl Future<Output = Answer<Inode>> + Send {
        Client::link(self, existing, path)
    }

    fn rename(&self, from: &str, to: &str) -> impl Future<Output = Answer<()>> + Send {
        Client::rename(self, from, to)
    }

    fn remove(&self, path: &str) -> impl Future<Output = Answer<()>> + Send {
        Client::remove(self, path, false)
    }

    fn set_attr(&self, path: &str, attr: SetAttr) -> impl Future<Output = Answer<Inode>> + Send {
        Client::set_attr(self, path, attr)
    }

    fn statfs(&self) -> impl Future<Output = Answer<FsStat>> + Send {
        Client::statfs(self)
    }

    fn write(
        &self,
        f: &File,
        offset: u64,
        data: Vec<u8>,
    ) -> impl Future<Output = Answer<()>> + Send {
        Client::write(self, f, offset, data)
    }

    fn read(
        &self,
        f: &File,
        offset: u64,
        len: u64,
    ) -> impl Future<Output = Answer<Vec<u8>>> + Send {
        Client::read(self, f, offset, len)
    }

    fn truncate(
        &self,
        f: &mut File,
        inode: &Inode,
        len: u64,
    ) -> impl Future<Output = Answer<()>> + Send {
        Client::truncate(self, f, inode, len)
    }

    fn sync_length(&self, f: &File, written: u64) -> impl Future<Output = Answer<()>> + Send {
        Client::sync_length(self, f, written)
    }

    fn close_file(&self, f: &File, length: u64) -> impl Future<Output = Answer<()>> + Send {
        Client::close_file(self, f, length)
    }

    fn close_unwritten(
        &self,
        sessions: &[(InodeId, u64)],
    ) -> impl Future<Output = Answer<()>> + Send {
        Client::close_unwritten(self, sessions)
    }

    fn acting_as<F>(user: User, f: F) -> impl Future<Output = F::Output> + Send
    where
        F: Future + Send,
    {
        crate::client::acting_as(user, f)
    }
}
