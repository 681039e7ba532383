//! `t3fs mount`: the cluster as a FUSE file system, through the native client. The `fuser`
//! crate speaks the kernel's FUSE protocol (no libfuse); mounting and unmounting go through
//! Debian fuse3's `fusermount3`. The kernel checks permissions from the attributes
//! (`default_permissions`), so mode bits apply to every caller; meta itself sees the mount's
//! own user.
//!
//! Invariants: a request is answered exactly once, after the cluster answered it (nothing is
//! acknowledged before it is durable on its chain); a cluster failure answers EIO. Not here:
//! the requests themselves (fs.rs), the errno table (errno.rs).

mod attr;
pub mod errno;
mod fs;
mod inner;
mod names;

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
}

impl Default for MountOptions {
    fn default() -> Self {
        Self {
            allow_other: false,
            attr_ttl: Duration::from_secs(1),
            threads: 2,
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
    let fs = T3fs::new(c, rt.handle().clone(), o.attr_ttl);
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
