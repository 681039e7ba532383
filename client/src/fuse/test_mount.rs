//! The harness of the file system's unit tests: the mount's state over the in-memory client
//! (mem_client.rs) on a current-thread runtime, and the kernel's side of a few requests in
//! one call each (what fs.rs's callbacks do before they reply). A test drives requests as
//! the kernel would and checks both the answers and what reached the client. Test-only.
//!
//! Nothing here depends on timing: spawned tasks (write-behind pieces, readahead units) run
//! only while the test awaits, and `run_tasks` lets every one of them run until it waits.

use std::ffi::OsStr;
use std::sync::Arc;

use fuser::{Errno, FileAttr, INodeNo};
use t3fs_core::meta::perm::User;
use tokio::runtime::Runtime;

use super::gated_backend::runtime;
use super::inner::Inner;
use super::mem_client::MemClient;
use super::mount_client::MountClient;
use super::MountOptions;

pub(super) use super::gated_backend::run_tasks;

/// The root's FUSE inode number.
pub(super) const ROOT: INodeNo = INodeNo(1);

/// Bytes per chunk of the files the tests make (small, so that writes and readahead units
/// cross chunk boundaries with a few bytes).
pub(super) const CHUNK: u32 = 16;

/// An ordinary user (the tests' `acting_as`).
pub(super) const ALICE: User = User::new(1000, 1000);

/// A mount over an in-memory cluster.
pub(super) struct Mount {
    pub rt: Runtime,
    pub s: Arc<Inner<MemClient>>,
}

/// A mount with the default options but `CHUNK`-byte files and a readahead of two chunks.
pub(super) fn mount() -> Mount {
    mount_with(MountOptions {
        readahead: u64::from(CHUNK) * 2,
        ..MountOptions::default()
    })
}

/// A mount with options `o` (files of `CHUNK`-byte chunks).
pub(super) fn mount_with(o: MountOptions) -> Mount {
    let rt = runtime();
    let s = Arc::new(Inner::new(MemClient::new(CHUNK), rt.handle().clone(), &o));
    Mount { rt, s }
}

/// A name as the kernel sends it.
pub(super) fn n(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// An answer with its errno as a number (`Errno` has no `PartialEq`).
pub(super) fn code<T>(r: Result<T, Errno>) -> Result<T, i32> {
    r.map_err(|e| e.code())
}

/// Runs `f` acting for `user`, as fs.rs runs a request for its caller.
pub(super) async fn as_user<F: std::future::Future + Send>(user: User, f: F) -> F::Output {
    MemClient::acting_as(user, f).await
}

impl Mount {
    /// Runs `f` to its end on the mount's runtime.
    pub fn run<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// The client under the mount (also "another client" of the same cluster, whose changes
    /// this mount learns of only by asking meta).
    pub fn client(&self) -> &MemClient {
        &self.s.client
    }

    /// write through handle `fh`, as the kernel's write request.
    pub async fn write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<usize, i32> {
        code(
            self.s
                .write(self.s.handle(fh), offset, data.to_vec(), false)
                .await,
        )
    }

    /// read through handle `fh`, as the kernel's read request.
    pub async fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, i32> {
        code(self.s.read(self.s.reading(fh), offset, size).await)
    }

    /// flush of handle `fh` (what close(2) waits for).
    pub async fn flush(&self, fh: u64) -> Result<(), i32> {
        code(self.s.flush(self.s.handle(fh)).await)
    }

    /// release of handle `fh`.
    pub async fn release(&self, fh: u64) -> Result<(), i32> {
        code(self.s.release(fh, self.s.handle(fh)).await)
    }

    /// A new file `name` in `parent` (mode 0644), open for write: its handle and attributes
    /// (one lookup).
    pub async fn created(&self, parent: INodeNo, name: &str) -> (u64, FileAttr) {
        let made = self.s.create(parent, n(name), 0o644, true, false).await;
        made.expect("created")
    }

    /// A new file `name` in `parent` holding `data`, closed: its attributes (one lookup).
    pub async fn file(&self, parent: INodeNo, name: &str, data: &[u8]) -> FileAttr {
        let (fh, a) = self.created(parent, name).await;
        assert_eq!(self.write(fh, 0, data).await, Ok(data.len()));
        assert_eq!(self.flush(fh).await, Ok(()));
        assert_eq!(self.release(fh).await, Ok(()));
        // flush reported the writes, so the release queued its close (unwritten_closes.rs):
        // sent now, as its timer would, so that tests count only their own sessions.
        self.s.send_unwritten().await;
        a
    }

    /// A new directory `name` in `parent`, mode 0755.
    pub async fn dir(&self, parent: INodeNo, name: &str) -> FileAttr {
        self.s.mkdir(parent, n(name), 0o755).await.expect("made")
    }
}
