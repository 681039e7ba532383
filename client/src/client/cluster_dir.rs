//! A client's options from a cluster directory (what `t3fs cluster up` writes): mgmtd's
//! address and standbys, the token and the timeout profile, read from the nodes' own configs,
//! so a user names a cluster by its directory (`T3FS_CLUSTER`) rather than copying them.
//!
//! Not here: starting or inspecting a cluster (the lab's `cluster.rs`).

use std::path::Path;

use t3fs_services::config::NodeConfig;

use super::ClientOptions;

/// The mgmtd nodes listed in `DIR/nodes` (`name role` lines), with their configs, by id.
fn mgmtd_configs(dir: &Path) -> Result<Vec<NodeConfig>, String> {
    let list = dir.join("nodes");
    let text = std::fs::read_to_string(&list).map_err(|e| {
        format!(
            "{}: {e} (not a `t3fs cluster up` directory?)",
            list.display()
        )
    })?;
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (name, role) = line
            .split_once(' ')
            .ok_or_else(|| format!("{}: bad line `{line}`", list.display()))?;
        if role.trim() == "mgmtd" {
            let config = dir.join(name).join("node.toml");
            out.push(NodeConfig::load(&config).map_err(|e| e.to_string())?);
        }
    }
    out.sort_by_key(|c| c.node.id);
    Ok(out)
}

impl ClientOptions {
    /// Options for the cluster in directory `dir`: the first mgmtd (by id) as the one asked
    /// first, the others as standbys, the cluster's token, timeout profile and transport.
    pub fn from_cluster_dir(dir: &Path) -> Result<Self, String> {
        let mgmtd = mgmtd_configs(dir)?;
        let first = mgmtd
            .first()
            .ok_or_else(|| format!("no mgmtd in {}", dir.display()))?;
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
