//! The mgmtd actor of the CRAQ model (when `CraqConfig::mgmtd`): the real mgmtd machine over an
//! in-state KV, plus the model's failure-detector environment and an audit of every chain
//! change it publishes.
//!
//! The KV starts holding the deployed cluster (chain c1 at chain version 1, all SERVING; target
//! rows; routing version 1), so the run begins in steady state: mgmtd takes the lease, loads,
//! and waits for every target to report before the chain may change. Failure detection: a
//! heartbeat deadline armed by the machine is delivered only for a node that really crashed
//! (an eventually-perfect detector); the crash notice re-arms it, so a crash is always
//! detected unless the node restarts first.
//!
//! Opt-in (`CraqConfig::async_kv`): a KV commit leaves the step that issued it as a self-message
//! and is applied to the KV only when that message is delivered, so heartbeats, deadlines and
//! everything else interleave with a commit in flight (reads, and every transaction of the
//! start, still complete at once; the KV has no other writer, so a commit never conflicts).
//! Opt-in (`CraqConfig::storage_lease`): mgmtd answers accepted heartbeats with lease grants,
//! and the deadline of a *live* node may fire once its lease has lapsed (`lease.rs`): a false
//! suspicion, after which the node is demoted, resynced and promoted while it keeps running.
//!
//! Not here: false suspicions without the lease (the simulator's unreliable detector), several
//! mgmtds (lease takeover is covered by handler tests), KV failures (conflicts, unknown
//! commits: handler tests and the simulator).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use stateright::actor::{model_timeout, Command, Id, Out};
use t3fs_core::ids::{NodeId, TargetId};
use t3fs_core::kv::mem::MemKv;
use t3fs_core::kv::{self, KvEngine, KvOp};
use t3fs_core::machine::{EventOf, IoOp, IoResult};
use t3fs_core::mgmtd::chain_update::check_chain;
use t3fs_core::mgmtd::{Mgmtd, MgmtdConfig, MgmtdTimer};
use t3fs_core::msg::Msg;
use t3fs_core::routing::{LocalState, PublicState, RoutingInfo};

use super::lease::LeaseBook;
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
    /// The storage nodes' clocks as the failure detector sees them (empty without the lease).
    pub lease: LeaseBook,
    /// A chain that takes a live replica out of SERVING was published (tracked only with the
    /// lease: without it, only crashed replicas are taken out).
    pub demoted_live: bool,
    /// With commits in flight: SYNCING targets seen UPTODATE since they became SYNCING (the
    /// audit of a promotion that lands after a later suspicion, see `audit_change`).
    pub synced: BTreeSet<TargetId>,
}

pub(super) fn start(cfg: &CraqConfig, id: Id, o: &mut Out<CraqNode>) -> CraqState {
    CraqState::Mgmtd(Box::new(settle(cfg, id, o).0))
}

/// mgmtd at the start of a run, which begins in steady state: primary and loaded (the lease and
/// the load complete here even with asynchronous commits); with the storage lease, it has also
/// accepted every storage node's first heartbeat, and its replies are returned (the storage
/// actors take them at their start, `lease::boot`) instead of sent.
pub(super) fn settle(
    cfg: &CraqConfig,
    id: Id,
    o: &mut Out<CraqNode>,
) -> (MgmtdState, BTreeMap<NodeId, Msg>) {
    let mut mc = MgmtdConfig::new(adapter::node_id(id));
    mc.periodic = false;
    mc.bug = cfg.mgmtd_bug;
    mc.storage_lease = cfg.storage_lease;
    mc.push_routing_to = cfg.storage_nodes().chain(cfg.client_nodes()).collect();
    let mut s = MgmtdState {
        machine: Mgmtd::new(mc),
        kv: crate::world::kv::seeded_kv(&cfg.initial_routing()),
        crashed: BTreeSet::new(),
        audit: None,
        promoted: false,
        restarted: BTreeSet::new(),
        lease: LeaseBook::default(),
        demoted_live: false,
        synced: BTreeSet::new(),
    };
    step(cfg, id, &mut s, None, o, true);
    let mut replies = BTreeMap::new();
    if !cfg.storage_lease {
        return (s, replies);
    }
    let routing = s.machine.routing().cloned().expect("loaded at start");
    for node in cfg.storage_nodes() {
        let hb = super::lease::first_heartbeat(cfg, node, &routing);
        let event = EventOf::Recv {
            from: node,
            msg: hb,
        };
        let mut scratch = Out::new();
        step(cfg, id, &mut s, Some(event), &mut scratch, true);
        for c in scratch {
            match c {
                Command::Send(dst, CraqMsg::Wire(m @ Msg::HeartbeatReply(_)))
                    if dst == adapter::actor_id(node) =>
                {
                    replies.insert(node, m);
                }
                Command::Send(dst, m) => o.send(dst, m),
                Command::SetTimer(t, d) => o.set_timer(t, d),
                Command::CancelTimer(t) => o.cancel_timer(t),
                Command::ChooseRandom(..) | Command::Save(_) => {}
            }
        }
    }
    (s, replies)
}

type MgmtdEvent = EventOf<Msg, MgmtdTimer, t3fs_core::mgmtd::AdminCall>;

/// Whether mgmtd's deadline for `node` may fire now: it crashed, or (with the lease) its
/// leases have lapsed since the last heartbeat mgmtd accepted from it.
fn may_expire(cfg: &CraqConfig, s: &MgmtdState, node: NodeId) -> bool {
    s.crashed.contains(&adapter::target_of(node))
        || (cfg.storage_lease && s.lease.may_suspect(node))
}

/// Runs one machine step and audits every chain it changed. KV transactions complete within it,
/// except commits under `async_kv` (unless `sync`): those are sent to this actor and complete
/// when delivered. Deadline timers are dropped at once unless they may expire (`may_expire`):
/// a live node is suspected only with the lease, after a lapse.
fn step(
    cfg: &CraqConfig,
    id: Id,
    s: &mut MgmtdState,
    event: Option<MgmtdEvent>,
    o: &mut Out<CraqNode>,
    sync: bool,
) {
    let before = s.machine.routing().cloned();
    let heartbeat = match &event {
        Some(EventOf::Recv {
            msg: Msg::Heartbeat(hb),
            ..
        }) => Some((hb.node, hb.hb_version, hb.timestamp)),
        _ => None,
    };
    let version = |m: &Mgmtd, n: NodeId| m.nodes().and_then(|ns| ns.get(&n)).map(|r| r.hb_version);
    let was = heartbeat.and_then(|(n, ..)| version(&s.machine, n));
    let defer = cfg.async_kv && !sync;
    let kv = &mut s.kv;
    adapter::step_sync_io(
        id,
        &mut s.machine,
        event,
        o,
        CraqTimer::Mgmtd,
        |op| match op {
            IoOp::Kv(KvOp::Commit(_)) if defer => Err(op),
            IoOp::Kv(op) => Ok(IoResult::Kv(kv::execute(kv as &mut dyn KvEngine, op))),
            other => panic!("mgmtd submitted {other:?}"),
        },
    );
    // An accepted heartbeat (its version recorded) re-armed the node's deadline.
    if let Some((n, v, timestamp)) = heartbeat.filter(|_| cfg.storage_lease) {
        if was != Some(v) && version(&s.machine, n) == Some(v) {
            s.lease.heard(n, timestamp);
        }
    }
    for n in cfg.storage_nodes() {
        if !may_expire(cfg, s, n) {
            o.cancel_timer(CraqTimer::Mgmtd(MgmtdTimer::HeartbeatDeadline(n)));
        }
    }
    audit_step(cfg, s, before);
    if cfg.async_kv {
        note_synced(s);
    }
}

/// Audits every chain the step changed (see [`audit_change`]).
fn audit_step(cfg: &CraqConfig, s: &mut MgmtdState, before: Option<RoutingInfo>) {
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
            s.audit = audit_change(old, new, s.machine.primary(), &s.synced);
        }
        if cfg.storage_lease
            && old
                .serving()
                .any(|t| !s.crashed.contains(&t) && new.state_of(t) != Some(PublicState::Serving))
        {
            s.demoted_live = true;
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

/// Keeps `MgmtdState::synced`: SYNCING targets mgmtd has seen UPTODATE since they became
/// SYNCING (the sync is done), forgotten once they are no longer SYNCING.
fn note_synced(s: &mut MgmtdState) {
    let (Some(routing), Some(p)) = (s.machine.routing(), s.machine.primary()) else {
        return;
    };
    let syncing = |t: &TargetId| {
        routing
            .chain_of_target(*t)
            .and_then(|c| c.state_of(*t))
            .is_some_and(|st| st == PublicState::Syncing)
    };
    s.synced.retain(syncing);
    let done: Vec<TargetId> = p
        .local
        .iter()
        .filter(|(t, l)| **l == LocalState::UpToDate && syncing(t))
        .map(|(t, _)| *t)
        .collect();
    s.synced.extend(done);
}

pub(super) fn on_msg(
    cfg: &CraqConfig,
    id: Id,
    state: &mut Cow<'_, CraqState>,
    src: Id,
    msg: CraqMsg,
    o: &mut Out<CraqNode>,
) {
    let CraqState::Mgmtd(s) = state.to_mut() else {
        unreachable!()
    };
    match msg {
        CraqMsg::Wire(msg) => {
            let event = EventOf::Recv {
                from: adapter::node_id(src),
                msg,
            };
            step(cfg, id, s, Some(event), o, false);
        }
        // A commit in flight (`async_kv`) reaches the KV.
        CraqMsg::Io {
            id: io,
            op: IoOp::Kv(op),
        } => {
            let result = IoResult::Kv(kv::execute(&mut s.kv as &mut dyn KvEngine, op));
            step(
                cfg,
                id,
                s,
                Some(EventOf::IoDone { id: io, result }),
                o,
                false,
            );
        }
        CraqMsg::Lapsed { .. } if !cfg.storage_lease => {}
        CraqMsg::Lapsed { target, clock } => {
            let node = adapter::node_of(target);
            s.lease.lapsed(node, clock);
            let connected = s
                .machine
                .nodes()
                .and_then(|ns| ns.get(&node))
                .is_some_and(|r| r.connected);
            if connected && may_expire(cfg, s, node) {
                o.set_timer(
                    CraqTimer::Mgmtd(MgmtdTimer::HeartbeatDeadline(node)),
                    model_timeout(),
                );
            }
        }
        // Notices may arrive in either order; each node crashes at most once per run.
        CraqMsg::Failed(t) if s.restarted.contains(&t) => {}
        CraqMsg::Failed(t) => {
            s.crashed.insert(t);
            let node = adapter::node_of(t);
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
    let CraqTimer::Mgmtd(timer) = timer else {
        return;
    };
    if let MgmtdTimer::HeartbeatDeadline(node) = timer {
        let CraqState::Mgmtd(s) = state.as_ref() else {
            return;
        };
        if !may_expire(cfg, s, *node) {
            return; // Not yet (see `may_expire`); the timer just lapses.
        }
    }
    let CraqState::Mgmtd(s) = state.to_mut() else {
        return;
    };
    step(cfg, id, s, Some(EventOf::Timer(*timer)), o, false);
}

/// The §2.6.1 checks of one published change: the invariants of the new chain, a strictly
/// larger chain version, and every new SERVING target legitimately sourced (it served before;
/// or it was SYNCING and is locally UPTODATE, i.e. its sync is done, or with commits in flight
/// was seen UPTODATE since it became SYNCING (`synced`: the promotion was decided then, and a
/// suspicion while it was committed does not undo the sync); or it was the LASTSRV and nothing
/// served).
fn audit_change(
    old: &t3fs_core::routing::ChainInfo,
    new: &t3fs_core::routing::ChainInfo,
    primary: Option<&t3fs_core::mgmtd::Primary>,
    synced: &BTreeSet<TargetId>,
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
            Some(PublicState::Syncing) => {
                local == Some(LocalState::UpToDate) || synced.contains(&t)
            }
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
