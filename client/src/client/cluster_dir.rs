//! A cluster directory (what `t3fs cluster up` writes) as a client reads it: its nodes, from the
//! `nodes` list and each node's own config, and from them a client's options — mgmtd's address
//! and standbys, the token and the timeout profile — so a user names a cluster by its directory
//! (`T3FS_CLUSTER`) rather than copying them. The lab's tools read the directory through here
//! too.
//!
//! Not here: starting or inspecting a cluster (the lab's `cluster.rs`).

use std::path::{Path, PathBuf};

use t3fs_services::config::NodeConfig;

use super::ClientOptions;

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

/// The nodes listed in `DIR/nodes` (`name role` lines) with their configs, in list order;
/// empty if the directory has no list (no cluster was written there).
pub fn nodes(dir: &Path) -> Result<Vec<NodeEntry>, String> {
    let list = dir.join("nodes");
    let Ok(text) = std::fs::read_to_string(&list) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (name, role) = line
            .split_once(' ')
            .ok_or_else(|| format!("{}: bad line `{line}`", list.display()))?;
        let config = dir.join(name).join("node.toml");
        let cfg = NodeConfig::load(&config).map_err(|e| e.to_string())?;
        out.push(NodeEntry {
            name: name.into(),
            role: role.into(),
            config,
            cfg,
        });
    }
    Ok(out)
}

impl ClientOptions {
    /// Options for the cluster in directory `dir`: the first mgmtd (by id) as the one asked
    /// first, the others as standbys, the cluster's token, timeout profile and transport.
    pub fn from_cluster_dir(dir: &Path) -> Result<Self, String> {
        let mut mgmtd: Vec<NodeConfig> = nodes(dir)?
            .into_iter()
            .filter(|n| n.role == "mgmtd")
            .map(|n| n.cfg)
            .collect();
        mgmtd.sort_by_key(|c| c.node.id);
        let first = mgmtd.first().ok_or_else(|| {
            format!(
                "no cluster in {} (not a `t3fs cluster up` directory?)",
                dir.display()
            )
        })?;
        let addr = first
            .node
            .listen
            .parse()
            .map_err(|e| format!("mgmtd address {}: {e}", first.node.listen))?;
        let mut o = ClientOptions::new(addr, first.cluster.token.clone());
        o.standby = mgmtd[1..]
            .iter()
            .filter_map(|c| c.node.listen.parse().ok())
            .collect();
        if first.cluster.timeouts == "3fs" {
            o.timeouts = t3fs_scenario::Timeouts::ThreeFs;
        }
        let me = format!("client-{}", std::process::id());
        o.rdma = first.rdma.wire(&first.node.transport, &me)?;
        Ok(o)
    }
}
