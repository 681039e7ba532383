//! The RDMA side of `t3fs cluster up`: the software fabric a `soft-rdma` cluster runs on (a
//! process of the cluster, recorded with the nodes so that `down` stops it, last), the pool
//! size that fits the cluster's chunks, and the check that an `rdma` cluster's device opens
//! before anything starts.
//!
//! Not here: the transport (`transport::rdma`), the config keys (`rdma_config`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::cluster_node::NodeEntry;

type R<T> = Result<T, String>;

/// The software fabric's socket in a cluster directory (`--transport soft-rdma`).
pub const FABRIC_SOCKET: &str = "fabric.sock";

/// A pool that holds two frames of `chunk_size` each way (8 MiB at least).
pub fn pool_mib(chunk_size: u32) -> u32 {
    (4 * (u64::from(chunk_size) + (64 << 10)))
        .div_ceil(1 << 20)
        .max(8) as u32
}

/// Starts the software fabric of a `soft-rdma` cluster and waits for its socket.
pub fn start_fabric(exe: &Path, dir: &Path) -> R<i32> {
    let sock = dir.join(FABRIC_SOCKET);
    let _ = std::fs::remove_file(&sock);
    let log = std::fs::File::create(dir.join("fabric.log")).map_err(|e| e.to_string())?;
    use std::os::unix::process::CommandExt;
    let child = Command::new(exe)
        .args(["fabric", "--socket"])
        .arg(&sock)
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("starting the software fabric: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sock.exists() {
        if Instant::now() > deadline {
            return Err(format!(
                "the software fabric did not open {}",
                sock.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(child.id() as i32)
}

/// Checks, before anything starts, that the first node can open its transport's device: a
/// host without RDMA is told what is missing.
pub fn probe_transport(entries: &[NodeEntry]) -> R<()> {
    let Some(n) = entries.first() else {
        return Ok(());
    };
    if n.cfg.node.transport != "rdma" {
        return Ok(());
    }
    n.cfg
        .rdma
        .wire("rdma", "probe")
        .map(drop)
        .map_err(|e| format!("transport rdma: {e}"))
}
