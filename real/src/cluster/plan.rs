//! Planning a new cluster for `cluster up`: the shape from the options, a node id, name, role
//! and ports for every server, and one config per node written under `DIR`. Not here:
//! starting and stopping the processes (cluster.rs).

use std::collections::BTreeMap;

use t3fs_services::config::{ClusterSection, NodeConfig, NodeSection};

use super::{UpOptions, R};

/// A fresh cluster token; an error where the OS gives no randomness (zeros would make every
/// cluster's token the same).
fn token() -> R<String> {
    let mut b = [0u8; 24];
    getrandom::fill(&mut b).map_err(|e| format!("no randomness for the cluster token: {e}"))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Plans the cluster `o` asks for and writes its node configs, its `nodes` list and (with
/// `--hosts netns`) its `hosts` file under `o.dir`.
pub(super) fn write_configs(o: &UpOptions) -> R<()> {
    if o.hosts == "netns" && !crate::netns::Net::permitted() {
        return Err("--hosts netns needs root (network namespaces)".into());
    }
    let configs = plan_configs(o)?;
    if o.hosts == "netns" {
        let hosts = format!("netns {}\n", configs.len());
        std::fs::write(o.dir.join("hosts"), hosts).map_err(|e| e.to_string())?;
    }
    let mut list = String::new();
    for (name, role, cfg) in configs {
        let d = o.dir.join(&name);
        std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
        let text = format!(
            "# t3fs node config written by `t3fs cluster up` (keys: see t3fs_services::config)\n{}",
            cfg.to_toml()
        );
        std::fs::write(d.join("node.toml"), text).map_err(|e| e.to_string())?;
        list.push_str(&format!("{name} {role}\n"));
    }
    std::fs::write(o.dir.join("nodes"), list).map_err(|e| e.to_string())?;
    Ok(())
}

/// Every node's name, role and config for the cluster `o` asks for.
fn plan_configs(o: &UpOptions) -> R<Vec<(String, String, NodeConfig)>> {
    let chains = t3fs_scenario::plan::Shape::max_chains(o.storage, o.targets_per_node, o.replicas);
    let section = cluster_section(o, chains)?;
    let shape = t3fs_scenario::plan::Shape {
        mgmtd: o.mgmtd,
        storage_nodes: o.storage,
        targets_per_node: o.targets_per_node,
        replicas: o.replicas,
        chains,
        clients: 0,
        meta: o.meta,
    };
    shape.validate()?;
    let plan = t3fs_scenario::plan::Plan::new(shape);
    let named = named_servers(o, &plan)?;
    let ports = assign_ports(&named)?;
    let dir = std::fs::canonicalize(&o.dir).map_err(|e| e.to_string())?;
    let net = (o.hosts == "netns").then(|| crate::netns::Net::of(&dir, named.len() as u32));
    let host_of = |id: u32| match &net {
        Some(n) => n.host_ip(id),
        None => "127.0.0.1".to_string(),
    };
    let addresses: BTreeMap<String, String> = ports
        .iter()
        .map(|(id, (p, _))| (id.to_string(), format!("{}:{p}", host_of(*id))))
        .collect();
    Ok(named
        .into_iter()
        .map(|(id, name, role)| {
            let (p, m) = ports[&id];
            let host = host_of(id);
            let cfg = NodeConfig {
                node: NodeSection {
                    id,
                    name: name.clone(),
                    listen: format!("{host}:{p}"),
                    metrics: format!("{host}:{m}"),
                    data: dir.join(&name).join("data"),
                    store: o.store.clone(),
                    transport: o.transport.clone(),
                    chunk_io_deadline_ms: o.chunk_io_deadline_ms,
                    fault_injection: o.fault_injection,
                    worker_threads: o.worker_threads,
                },
                cluster: section.clone(),
                addresses: addresses.clone(),
                rdma: t3fs_services::rdma_config::RdmaSection {
                    fabric: (o.transport == "soft-rdma")
                        .then(|| dir.join(crate::cluster_rdma::FABRIC_SOCKET)),
                    pool_mib: crate::cluster_rdma::pool_mib(o.chunk_size),
                    ..Default::default()
                },
            };
            (name, role, cfg)
        })
        .collect())
}

/// The `[cluster]` section every node shares, with a fresh token.
fn cluster_section(o: &UpOptions, chains: u32) -> R<ClusterSection> {
    Ok(ClusterSection {
        token: token()?,
        kv: o.kv.clone(),
        mgmtd: o.mgmtd,
        storage_nodes: o.storage,
        targets_per_node: o.targets_per_node,
        replicas: o.replicas,
        chains,
        meta: o.meta,
        timeouts: o.timeouts.clone(),
        chunk_size: o.chunk_size,
        stripe: chains.max(1),
        storage_lease: o.storage_lease,
        serial_forwarding: o.serial_forwarding,
        bug: o.bug.clone(),
    })
}

/// Every server of `plan` (and the `kv` service for the embedded KV) as (id, name, role).
fn named_servers(o: &UpOptions, plan: &t3fs_scenario::plan::Plan) -> R<Vec<(u32, String, String)>> {
    let mut named: Vec<(u32, String, String)> = Vec::new();
    // A node config names its id in 4 bytes; validate keeps a plan's servers below 2^24.
    let id = |n: &t3fs_core::ids::NodeId| {
        u32::try_from(n.0).map_err(|_| format!("server id {n} too large"))
    };
    for (i, n) in plan.mgmtd.iter().enumerate() {
        named.push((id(n)?, format!("mgmtd-{i}"), "mgmtd".into()));
    }
    for (i, n) in plan.storage.iter().enumerate() {
        named.push((id(n)?, format!("storage-{i}"), "storage".into()));
    }
    for (i, n) in plan.meta.iter().enumerate() {
        named.push((id(n)?, format!("meta-{i}"), "meta".into()));
    }
    if o.kv == "embedded" {
        named.push((o.mgmtd + o.storage + o.meta, "kv".into(), "kv".into()));
    }
    Ok(named)
}

/// A free (listen, metrics) port pair for every server in `named`, by id.
fn assign_ports(named: &[(u32, String, String)]) -> R<BTreeMap<u32, (u16, u16)>> {
    let mut free = crate::ports::free_ports(2 * named.len())?.into_iter();
    let mut ports = BTreeMap::new();
    for (id, _, _) in named {
        let (p, m) = (free.next(), free.next());
        ports.insert(*id, (p.ok_or("ports")?, m.ok_or("ports")?));
    }
    Ok(ports)
}
