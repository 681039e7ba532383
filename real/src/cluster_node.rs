//! One node of a cluster directory as the lab tools see it: its name, role, config file and
//! parsed config. A leaf, so the cluster manager (cluster.rs) and the tools beside it
//! (cluster_rdma.rs, wire_tally.rs, chunk_dump.rs) can all name a node without naming each
//! other. Reading a cluster directory is cluster.rs's job, not this file's.

use std::path::PathBuf;

use t3fs_services::config::NodeConfig;

/// One node of a cluster directory.
#[derive(Clone, Debug)]
pub struct NodeEntry {
    /// Its name (`storage-1`).
    pub name: String,
    /// Its role on the `serve` command line.
    pub role: String,
    /// Its config file.
    pub config: PathBuf,
    /// Its parsed config.
    pub cfg: NodeConfig,
}
