//! `t3fs mount`: the cluster as a FUSE file system, through the native client. The `fuser`
//! crate speaks the kernel's FUSE protocol (no libfuse); mounting and unmounting go through
//! Debian fuse3's `fusermount3`. The kernel checks permissions from the attributes
//! (`default_permissions`), and every request's namespace calls act for its caller's uid and
//! gid (`client::acting_as`), so meta checks the same user and makes it the owner of what it
//! creates.
//!
//! Invariants: a request is answered exactly once, after the cluster answered it, except a
//! write, which is answered once its handle accepted it (write-behind, see write_behind.rs):
//! fsync and close(2) return only after every write of the handle committed on its whole chain,
//! and report the first that failed, as a local file system's writeback does;
//! `write_window = 0` answers each write after its commit. A cluster failure answers EIO, or
//! blocks until the cluster is back (`ClientOptions::outage`). Not here: the requests
//! themselves (fs.rs hands them to ns_requests.rs, file_requests.rs and dir_handles.rs), what
//! they need of the client (mount_client.rs), the errno table (errno.rs).

mod attr;
mod backend;
mod dir_attrs;
mod dir_handles;
mod dir_plus;
pub mod errno;
mod file_requests;
mod fresh_dirs;
mod fs;
#[cfg(test)]
mod gated_backend;
mod groups;
#[cfg(test)]
mod handle_tests;
mod inner;
#[cfg(test)]
mod inode_tests;
#[cfg(test)]
mod mem_chunks;
#[cfg(test)]
mod mem_client;
mod mount_client;
mod names;
#[cfg(test)]
mod ns_request_tests;
mod ns_requests;
mod read_ahead;
mod set_attr;
#[cfg(test)]
mod test_mount;
#[cfg(test)]
mod unwritten_close_tests;
mod unwritten_closes;
mod write_behind;

use std::path::Path;
use std::time::Duration;

use fuser::{Config, MountOption, SessionACL};

pub use fs::T3fs;

use crate::client::{Client, ClientOptions};

/// How to mount.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// Let other users than the mounting one use the mount (needs `user_allow_other` in
    /// /etc/fuse.conf unless root).
    pub allow_other: bool,
    /// How long the kernel caches attributes and entries.
    pub attr_ttl: Duration,
    /// Threads reading requests from the kernel (requests themselves run on the runtime).
    pub threads: usize,
    /// The largest write the kernel sends in one request.
    pub max_write: u32,
    /// The kernel's readahead, bytes (capped by the kernel).
    pub max_readahead: u32,
    /// `direct_io`: every read and write goes to the cluster, the page cache is bypassed (for
    /// benchmarks that must measure the cluster, and for files other clients change).
    pub direct_io: bool,
    /// The kernel's writeback cache: writes are buffered in the page cache and sent in large
    /// batches, so small writes get much faster, but a write returns before it is on any
    /// replica (durable only at fsync or close) and the kernel may read a file's pages to fill
    /// partial writes. Off by default.
    pub writeback_cache: bool,
    /// Chunk writes in flight per open file (write-behind, with coalescing of sequential
    /// writes into whole chunks); 0 answers each write only after its chain committed it.
    pub write_window: usize,
    /// The client's own readahead per open file, bytes, for sequential readers (0: off).
    pub readahead: u64,
}

impl Default for MountOptions {
    fn default() -> Self {
        Self {
            allow_other: false,
            attr_ttl: Duration::from_secs(1),
            threads: 2,
            max_write: 1 << 20,
            max_readahead: 4 << 20,
            direct_io: false,
            writeback_cache: false,
            write_window: 16,
            readahead: 4 << 20,
        }
    }
}

/// Connects to the cluster and serves it at `mountpoint` until it is unmounted
/// (`fusermount3 -u`); blocking.
pub fn mount(client: ClientOptions, mountpoint: &Path, o: &MountOptions) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let c = rt
        .block_on(Client::connect(client))
        .map_err(|e| e.to_string())?;
    let fs = T3fs::new(c, rt.handle().clone(), o.clone());
    let mut options = vec![
        MountOption::FSName("t3fs".into()),
        MountOption::Subtype("t3fs".into()),
        MountOption::DefaultPermissions,
    ];
    let mut cfg = Config::default();
    if o.allow_other {
        cfg.acl = SessionACL::All;
    }
    options.push(MountOption::NoAtime);
    cfg.mount_options = options;
    cfg.n_threads = Some(o.threads.max(1));
    cfg.clone_fd = true;
    fuser::mount2(fs, mountpoint, &cfg).map_err(|e| format!("{}: {e}", mountpoint.display()))
}
