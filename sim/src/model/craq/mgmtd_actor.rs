//! The mgmtd actor of the CRAQ model (when `CraqConfig::mgmtd`): the real mgmtd machine over an
//! in-state KV, plus the model's failure-detector environment and an audit of every chain
//! change it publishes.
//!
//! The KV starts holding the deployed cluster (chain c1 at chain version 1, all SERVING; target
//! rows; routing version 1), so the run begins in steady state: mgmtd takes the lease, loads,
//! and waits for every target to report before the chain may change. Failure detection: a
//! heartbeat deadline armed by the machine is delivered only for a node that really crashed
//! (an eventually-perfect detector); the crash notice re-arms it, so a crash is always
//! detected unless the node restarts first. Not here: false suspicions (the simulator's
//! unreliable detector), several mgmtds (lease takeover is covered by handler tests).

use std::borrow::Cow;
use std::collections::BTreeSet;

use stateright::actor::{model_timeout, Id, Out};
use t3fs_core::ids::{NodeId, TargetId};
use t3fs_core::kv::mem::MemKv;
use t3fs_core::kv::{self, KvEngine};
use t3fs_core::machine::{EventOf, IoOp, IoResult};
use t3fs_core::mgmtd::chain_update::check_chain;
use t3fs_core::mgmtd::{Mgmtd, MgmtdConfig, MgmtdTimer};
use t3fs_core::routing::PublicState;

use super::{CraqConfig, CraqMsg, CraqNode, CraqState, CraqTimer};
use crate::model::adapter;

/// The mgmtd actor's state.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct MgmtdState {
    /// The machine.
    pub machine: Mgmtd,
    /// The KV it runs on.
    pub kv: MemKv,
    /// Targets whose node is crashed now (model bookkeeping for the failure detector).
    pub crashed: BTreeSet<TargetId>,
    /// The first §2.6.1 violation among published chains.
    pub audit: Option<String>,
    /// A SYNCING target was promoted to SERVING (a resync completed).
    pub promoted: bool,
    /// Targets whose restart notice arrived (a crash notice arriving later is stale).
    pub restarted: BTreeSet<TargetId>,
}

pub(super) fn start(cfg: &CraqConfig, id: Id, o: &mut Out<CraqNode>) -> CraqState {
    let mut mc = MgmtdConfig::new(adapter::node_id(id));
    mc.periodic = false;
    mc.bug = cfg.mgmtd_bug;
    mc.push_routing_to = cfg.storage_nodes().chain(cfg.client_nodes()).collect();
    let mut s = MgmtdState {
        machine: Mgmtd::new(mc),
        kv: crate::world::kv::seeded_kv(&cfg.initial_routing()),
        crashed: BTreeSet::new(),
        audit: None,
        promoted: false,
        restarted: BTreeSet::new(),
    };
    let nodes: Vec<NodeId> = cfg.storage_nodes().collect();
    step(id, &nodes, &mut s, None, o);
    CraqState::Mgmtd(Box::new(s))
}

/// Runs one machine step (KV transactions complete within it) and audits every chain it
/// changed. Deadline timers of live nodes are dropped at once: in this model only a crash
/// notice arms a node's deadline, so a live node is never suspected.
fn step(
    id: Id,
    storage_nodes: &[NodeId],
    s: &mut MgmtdState,
    event: Option<EventOf<t3fs_core::msg::Msg, MgmtdTimer, t3fs_core::mgmtd::AdminCall>>,
    o: &mut Out<CraqNode>,
) {
    let before = s.machine.routing().cloned();
    let kv = &mut s.kv;
    adapter::step_sync_io(
        id,
        &mut s.machine,
        event,
        o,
        CraqTimer::Mgmtd,
        |op| match op {
            IoOp::Kv(op) => IoResult::Kv(kv::execute(kv as &mut dyn KvEngine, op)),
            other => panic!("mgmtd submitted {other:?}"),
        },
    );
    for &n in storage_nodes {
        if !s.crashed.contains(&TargetId(n.0)) {
            o.cancel_timer(CraqTimer::Mgmtd(MgmtdTimer::HeartbeatDeadline(n)));
        }
    }
    let (Some(before), Some(after)) = (before, s.machine.routing()) else {
        return;
    };
    for (cid, new) in &after.chains {
        let Some(old) = before.chains.get(cid) else {
            continue;
        };
        if old == new {
            continue;
        }
        if s.audit.is_none() {
            s.audit = audit_change(old, new, s.machine.primary());
        }
        let was_syncing: Vec<TargetId> = old
            .targets
            .iter()
            .filter(|t| t.state == PublicState::Syncing)
            .map(|t| t.target)
            .collect();
        if was_syncing
            .iter()
            .any(|t| new.state_of(*t) == Some(PublicState::Serving))
        {
            s.promoted = true;
        }
    }
}

pub(super) fn on_msg(
    cfg: &CraqConfig,
    id: Id,
    state: &mut Cow<'_, CraqState>,
    src: Id,
    msg: CraqMsg,
    o: &mut Out<CraqNode>,
) {
    let nodes: Vec<NodeId> = cfg.storage_nodes().collect();
    let CraqState::Mgmtd(s) = state.to_mut() else {
        unreachable!()
    };
    match msg {
        CraqMsg::Wire(msg) => {
            let event = EventOf::Recv {
                from: adapter::node_id(src),
                msg,
            };
            step(id, &nodes, s, Some(event), o);
        }
        // Notices may arrive in either order; each node crashes at most once per run.
        CraqMsg::Failed(t) if s.restarted.contains(&t) => {}
        CraqMsg::Failed(t) => {
            s.crashed.insert(t);
            let node = NodeId(t.0);
            o.set_timer(
                CraqTimer::Mgmtd(MgmtdTimer::HeartbeatDeadline(node)),
                model_timeout(),
            );
        }
        CraqMsg::Restarted(t) => {
            s.crashed.remove(&t);
            s.restarted.insert(t);
        }
        CraqMsg::Io { .. } | CraqMsg::History { .. } => {}
    }
}

pub(super) fn on_timeout(
    cfg: &CraqConfig,
    id: Id,
    state: &mut Cow<'_, CraqState>,
    timer: &CraqTimer,
    o: &mut Out<CraqNode>,
) {
    let nodes: Vec<NodeId> = cfg.storage_nodes().collect();
    let CraqTimer::Mgmtd(timer) = timer else {
        return;
    };
    if let MgmtdTimer::HeartbeatDeadline(node) = timer {
        let CraqState::Mgmtd(s) = state.as_ref() else {
            return;
        };
        if !s.crashed.contains(&TargetId(node.0)) {
            return; // A live node's deadline never expires here; the timer just lapses.
        }
    }
    let CraqState::Mgmtd(s) = state.to_mut() else {
        return;
    };
    step(id, &nodes, s, Some(EventOf::Timer(*timer)), o);
}

/// The §2.6.1 checks of one published change: the invariants of the new chain, a strictly
/// larger chain version, and every new SERVING target legitimately sourced (it served before;
/// or it was SYNCING and is locally UPTODATE, i.e. its sync is done; or it was the LASTSRV and
/// nothing served).
fn audit_change(
    old: &t3fs_core::routing::ChainInfo,
    new: &t3fs_core::routing::ChainInfo,
    primary: Option<&t3fs_core::mgmtd::Primary>,
) -> Option<String> {
    let cid = new.chain;
    if let Err(e) = check_chain(&new.targets) {
        return Some(format!("{cid}@{}: {e}", new.version));
    }
    if new.version <= old.version {
        return Some(format!(
            "{cid}: chain version {} -> {}",
            old.version, new.version
        ));
    }
    let old_serving = old.serving().count() > 0;
    for t in new.serving() {
        let local = primary.and_then(|p| p.local.get(&t).copied());
        let ok = match old.state_of(t) {
            Some(PublicState::Serving) => true,
            Some(PublicState::Syncing) => local == Some(t3fs_core::routing::LocalState::UpToDate),
            Some(PublicState::LastSrv) => !old_serving,
            _ => false,
        };
        if !ok {
            return Some(format!(
                "{cid}@{}: {t} became SERVING from {:?} with local state {:?}",
                new.version,
                old.state_of(t),
                local
            ));
        }
    }
    None
}
