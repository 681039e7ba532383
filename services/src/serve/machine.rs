//! Serving a machine role (mgmtd, storage, meta): its machine built from the plan and its
//! durable state (a storage node's stores listed at boot), run on the node driver until a
//! signal or a halt. Not here: the start every role shares and the `kv` service (serve.rs).

use std::collections::BTreeMap;
use std::sync::Arc;

use t3fs_core::chunk::ChunkStore;
use t3fs_core::ids::{NodeId, TargetId};
use t3fs_core::meta::server::MetaServer;
use t3fs_core::mgmtd::Mgmtd;
use t3fs_core::node::{client_id, Process, Role};
use t3fs_core::routing::RoutingInfo;
use t3fs_core::storage::StorageNode;
use t3fs_scenario::plan::Plan;

use super::{driver_outcome, kv_backend, list, open_store, seed, shutdown_signal, BoxError};
use crate::config::NodeConfig;
use crate::node::{self, KvBackend, NodeParts};
use crate::transport::Transport;

/// Builds machine `r` from the plan and its durable state, then runs it until shutdown or halt.
pub(super) async fn serve_machine(
    r: Role,
    cfg: &NodeConfig,
    me: NodeId,
    inc: u64,
    transport: Transport,
    inbound: tokio::sync::mpsc::Receiver<crate::transport::Inbound>,
    metrics: tokio::net::TcpListener,
) -> Result<(), BoxError> {
    let plan = cfg.plan();
    let tuning = cfg.tuning();
    let (storage_bug, mgmtd_bug, meta_bug) = crate::config::bugs(cfg.cluster.bug.as_deref())
        .ok_or("cluster.bug: unknown planted bug")?;
    if let Some(b) = &cfg.cluster.bug {
        tracing::warn!(node = %cfg.node.name, "running with the planted bug `{b}`");
    }
    let kv = open_kv_backend(r, cfg).await?;
    let mut stores: BTreeMap<TargetId, Box<dyn ChunkStore + Send>> = BTreeMap::new();
    // Every target of a storage node obeys the node's disk faults, and its machine reads time
    // through its clock fault (both set by the control RPC).
    let clock = Arc::new(crate::node::clock::ClockLayer::default());
    let disk =
        matches!(r, Role::Storage).then(|| Arc::new(crate::chunk_store::DiskFaultLayer::default()));
    let process = match r {
        Role::Mgmtd => mgmtd_process(cfg, &plan, me, &tuning, mgmtd_bug),
        Role::Storage => {
            let metas = open_targets(cfg, &plan, me, &disk, &mut stores)?;
            let mut scfg = plan.storage_cfg(me, &tuning);
            scfg.bug = storage_bug;
            // What is new is mgmtd's call (serve.rs module docs), never a file of ours.
            let node = StorageNode::new(scfg, metas, RoutingInfo::default());
            Process::Storage(Box::new(node.with_io_base(inc << 40)))
        }
        Role::Meta => {
            let mut m = plan.meta_cfg(me, client_id(me, inc), &tuning);
            m.bug = meta_bug;
            Process::Meta(Box::new(MetaServer::new(m, inc << 40)))
        }
        Role::Client => return Err("clients are not served: use the native client".into()),
    };
    let parts = NodeParts {
        id: me,
        name: cfg.node.name.clone(),
        process,
        stores,
        kv,
        transport: transport.clone(),
        inbound,
        clock: clock.clone(),
        env: node::NodeEnv {
            chunk_io_deadline: (cfg.node.chunk_io_deadline_ms > 0)
                .then(|| std::time::Duration::from_millis(cfg.node.chunk_io_deadline_ms)),
            ..Default::default()
        },
    };
    run_node(cfg, parts, transport, clock, disk, metrics).await
}

/// Opens the KV backend of machine `r`; a mgmtd on an engine seeds it first.
async fn open_kv_backend(r: Role, cfg: &NodeConfig) -> Result<KvBackend, BoxError> {
    let kv = {
        let c = cfg.clone();
        tokio::task::spawn_blocking(move || kv_backend(&c)).await??
    };
    if let (Role::Mgmtd, KvBackend::Engine(e)) = (r, &kv) {
        // No kv service to seed an external KV: the first mgmtd to start does it.
        let (e, plan) = (e.clone(), cfg.plan());
        tokio::task::spawn_blocking(move || {
            seed(
                &plan,
                e.lock()
                    .map_err(|_| "kv lock poisoned".to_string())?
                    .as_mut(),
            )
        })
        .await??;
    }
    Ok(kv)
}

/// The mgmtd machine of node `me`, with the cluster's addresses and meta nodes.
fn mgmtd_process(
    cfg: &NodeConfig,
    plan: &Plan,
    me: NodeId,
    tuning: &t3fs_scenario::plan_cfg::Tuning,
    mgmtd_bug: Option<t3fs_core::bugs::MgmtdBug>,
) -> Process {
    let mut m = plan.mgmtd_cfg(me, tuning);
    m.bug = mgmtd_bug;
    m.addresses = cfg
        .addresses
        .iter()
        .filter_map(|(k, v)| Some((NodeId(k.parse().ok()?), v.clone())))
        .collect();
    m.meta_nodes = plan.meta.clone();
    Process::Mgmtd(Box::new(Mgmtd::new(m)))
}

/// Opens and lists the store of each of node `me`'s targets, wrapped in its disk faults.
fn open_targets(
    cfg: &NodeConfig,
    plan: &Plan,
    me: NodeId,
    disk: &Option<Arc<crate::chunk_store::DiskFaultLayer>>,
    stores: &mut BTreeMap<TargetId, Box<dyn ChunkStore + Send>>,
) -> Result<BTreeMap<TargetId, Vec<t3fs_core::chunk::ChunkMeta>>, BoxError> {
    let mut metas = BTreeMap::new();
    for t in plan.targets_of.get(&me).cloned().unwrap_or_default() {
        let mut s = open_store(
            &cfg.node.store,
            &cfg.node.data.join(format!("target-{}", t.0)),
        )?;
        metas.insert(t, list(s.as_mut())?);
        let layer = disk.clone().unwrap_or_default();
        stores.insert(t, Box::new(crate::chunk_store::FaultyStore::new(s, layer)));
    }
    Ok(metas)
}

/// Spawns the node and its metrics endpoint, waits for a signal or the driver's end, and stops.
async fn run_node(
    cfg: &NodeConfig,
    parts: NodeParts,
    transport: Transport,
    clock: Arc<crate::node::clock::ClockLayer>,
    disk: Option<Arc<crate::chunk_store::DiskFaultLayer>>,
    metrics: tokio::net::TcpListener,
) -> Result<(), BoxError> {
    let (handle, mut join) = node::spawn(parts)?;
    let mut resources: crate::fault_query::Resources =
        vec![("/fault", Arc::new(transport.clone())), ("/clock", clock)];
    if let Some(d) = disk {
        resources.push(("/disk", d));
    }
    let http = tokio::spawn(crate::metrics::serve(
        metrics,
        handle.snapshot.clone(),
        cfg.cluster.token.clone(),
        cfg.node.fault_injection.then_some(resources),
    ));
    let ended = tokio::select! {
        _ = shutdown_signal() => {
            tracing::info!(node = %cfg.node.name, "shutting down");
            handle.shutdown().await;
            Ok(None)
        }
        r = &mut join => r,
    };
    http.abort();
    transport.shutdown().await;
    driver_outcome(&cfg.node.name, ended)
}
