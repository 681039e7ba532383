//! The CRAQ model's actors: the routing oracle, storage nodes (machine + reference chunk store
//! + audit trails) and clients (machine + script), driven through [`super::super::adapter`].
//!
//! Invariant: a halted storage node ignores everything; a stopped client too. Not here: the
//! properties (`model.rs`), the clients' scripts (`client.rs`), the history recorder
//! (`history.rs`), the storage lease's clocks and lapses (`lease.rs`).

use std::borrow::Cow;
use std::collections::BTreeMap;

use stateright::actor::{model_timeout, Actor, Id, Out};
use t3fs_core::chunk::{ChunkDone, ChunkOp};
use t3fs_core::client::Client;
use t3fs_core::ids::{ChainVersion, ChunkVersion, NodeId, RoutingVersion, TargetId};
use t3fs_core::machine::{Event, EventOf, IoOp, IoResult};
use t3fs_core::msg::Msg;
use t3fs_core::routing::{ChainTarget, PublicState, RoutingInfo};
use t3fs_core::storage::{StorageConfig, StorageNode};
use t3fs_core::testing::MemChunkStore;

use super::client::{client_cfg, client_step, start_op};
use super::{CraqConfig, CraqMsg, CraqTimer, ScriptOp, CHAIN, CHUNK};
use crate::model::adapter;

/// Actors of the CRAQ model.
#[derive(Clone, Debug)]
pub enum CraqActor {
    /// Routing oracle (mgmtd stand-in).
    Oracle,
    /// The real mgmtd.
    Mgmtd,
    /// A storage node.
    Storage,
    /// A client with its script.
    Client(Vec<ScriptOp>),
}

/// A storage actor's state: the machine, its target's store and audit trails for properties.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct StorageState {
    /// The machine.
    pub node: StorageNode,
    /// The target's chunk store (durable state).
    pub store: MemChunkStore,
    /// Fail-stopped.
    pub halted: bool,
    /// Bit `v`: value `v` was committed on this replica (by a commit that raised its
    /// committed version; replays are not commits).
    pub committed: u16,
    /// A value was committed a second time (a client write applied twice).
    pub applied_twice: Option<u8>,
    /// Set if a commit lowered the committed or recorded chain version, or routing regressed.
    pub regression: Option<String>,
    /// Fail-stops so far.
    pub crashes: u8,
    /// Restarts so far.
    pub restarts: u8,
    /// First I/O id of the current incarnation; completions below it belong to a crashed one.
    pub io_base: u64,
    /// The node's clock (ns) under the storage lease: moved only by lease lapses (`lease.rs`).
    pub clock: u64,
    /// Lease lapses so far.
    pub lapses: u8,
}

/// A client actor's state.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct ClientState {
    /// The machine.
    pub client: Client,
    /// Index of the running script operation.
    pub running: Option<usize>,
    /// The script stopped after a failed operation (its outcome is unknown).
    pub stopped: bool,
}

/// State of any actor.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub enum CraqState {
    /// The oracle's current routing and the failed targets.
    Oracle(RoutingInfo),
    /// The mgmtd actor.
    Mgmtd(Box<super::MgmtdState>),
    /// A storage node.
    Storage(Box<StorageState>),
    /// A client.
    Client(Box<ClientState>),
}

pub(super) fn storage_cfg(cfg: &CraqConfig, node: NodeId) -> StorageConfig {
    let mut s = StorageConfig::new(node, vec![(adapter::target_of(node), cfg.read_mode)]);
    s.forward_retries_max = cfg.forward_retries;
    s.forward_timeout = None;
    s.bug = cfg.bug;
    if cfg.mgmtd {
        s.mgmtd = vec![NodeId(0)];
        s.heartbeat_interval = None;
    }
    if cfg.storage_lease {
        s.lease = Some(super::lease::LEASE);
    }
    s
}

/// The actor implementation needs the config; stateright passes none to actors, so it lives in
/// the actor list built by [`build`]. This wrapper pairs them.
#[derive(Clone, Debug)]
pub struct CraqNode {
    /// Role.
    pub role: CraqActor,
    /// Model configuration.
    pub cfg: CraqConfig,
}

impl CraqNode {
    fn script(&self) -> &[ScriptOp] {
        match &self.role {
            CraqActor::Client(script) => script,
            _ => &[],
        }
    }
}

impl Actor for CraqNode {
    type Msg = CraqMsg;
    type State = CraqState;
    type Timer = CraqTimer;
    type Random = ();
    type Storage = ();

    fn on_start(&self, id: Id, _storage: &Option<()>, o: &mut Out<Self>) -> CraqState {
        let routing = if self.cfg.storage_lease {
            super::lease::steady_routing(&self.cfg)
        } else {
            self.cfg.initial_routing()
        };
        match self.role {
            CraqActor::Oracle => CraqState::Oracle(routing),
            CraqActor::Mgmtd => super::mgmtd_actor::start(&self.cfg, id, o),
            CraqActor::Storage => {
                let node = adapter::node_id(id);
                let mut machine = StorageNode::new_in_service(
                    storage_cfg(&self.cfg, node),
                    BTreeMap::new(),
                    routing,
                );
                if self.cfg.storage_lease {
                    super::lease::boot(&self.cfg, id, &mut machine, o);
                } else {
                    adapter::step(id, &mut machine, None, o, CraqTimer::Storage);
                }
                if self.cfg.failures > 0 {
                    o.set_timer(CraqTimer::FailStop, model_timeout());
                }
                let s = StorageState {
                    node: machine,
                    store: MemChunkStore::new(),
                    halted: false,
                    committed: 0,
                    applied_twice: None,
                    regression: None,
                    crashes: 0,
                    restarts: 0,
                    io_base: 0,
                    clock: 0,
                    lapses: 0,
                };
                super::lease::arm(&self.cfg, &s, o);
                CraqState::Storage(Box::new(s))
            }
            CraqActor::Client(ref script) => {
                let node = adapter::node_id(id);
                let mut machine = Client::new(client_cfg(&self.cfg, node), routing);
                adapter::step(id, &mut machine, None, o, CraqTimer::Client);
                let mut c = ClientState {
                    client: machine,
                    running: None,
                    stopped: false,
                };
                match self.cfg.client_index(id) {
                    Some(k) if self.cfg.is_reader(k) => {
                        o.set_timer(CraqTimer::Begin, model_timeout())
                    }
                    _ => start_op(id, &mut c, script, 0, None, o),
                }
                CraqState::Client(Box::new(c))
            }
        }
    }

    fn on_msg(
        &self,
        id: Id,
        state: &mut Cow<'_, CraqState>,
        src: Id,
        msg: CraqMsg,
        o: &mut Out<Self>,
    ) {
        // A delivery that touched the state consumes the message even when nothing changed, so
        // stale messages (an older routing push, a reply to a node that restarted) do not linger
        // in the network and split otherwise equal states; untouched ones (history markers)
        // stay no-ops.
        let mut scratch = Cow::Borrowed(state.as_ref());
        self.msg_step(id, &mut scratch, src, msg, o);
        if let Cow::Owned(new) = scratch {
            *state = Cow::Owned(new);
        }
    }

    fn on_timeout(
        &self,
        id: Id,
        state: &mut Cow<'_, CraqState>,
        timer: &CraqTimer,
        o: &mut Out<Self>,
    ) {
        let mut scratch = Cow::Borrowed(state.as_ref());
        self.timer_step(id, &mut scratch, timer, o);
        let changed = match scratch {
            Cow::Owned(new) if new != *state.as_ref() => Some(new),
            _ => None,
        };
        if let Some(new) = changed {
            *state = Cow::Owned(new);
        }
    }
}

impl CraqNode {
    /// One delivery, run on a borrowed copy by `on_msg`. Timer steps (`on_timeout`) adopt the
    /// result only if it differs, so a timer that changes nothing is no transition at all.
    fn msg_step(
        &self,
        id: Id,
        state: &mut Cow<'_, CraqState>,
        src: Id,
        msg: CraqMsg,
        o: &mut Out<Self>,
    ) {
        match (state.as_ref(), msg) {
            (CraqState::Oracle(routing), CraqMsg::Failed(target)) => {
                let Some(next) = fail_target(routing, target) else {
                    return;
                };
                for n in self.cfg.storage_nodes().chain(self.cfg.client_nodes()) {
                    if adapter::target_of(n) != target {
                        o.send(
                            adapter::actor_id(n),
                            CraqMsg::Wire(adapter::through_codec(&Msg::Routing(next.clone()))),
                        );
                    }
                }
                *state.to_mut() = CraqState::Oracle(next);
            }
            (CraqState::Mgmtd(_), msg) => {
                super::mgmtd_actor::on_msg(&self.cfg, id, state, src, msg, o)
            }
            (CraqState::Storage(s), msg) => {
                if s.halted {
                    return;
                }
                let CraqState::Storage(s) = state.to_mut() else {
                    unreachable!()
                };
                storage_msg(id, s, src, msg, o);
            }
            (CraqState::Client(c), CraqMsg::Wire(msg)) => {
                if c.stopped {
                    return;
                }
                let CraqState::Client(c) = state.to_mut() else {
                    unreachable!()
                };
                let event = EventOf::Recv {
                    from: adapter::node_id(src),
                    msg,
                };
                client_step(id, c, self.script(), event, o);
            }
            // Anything else (a client's history marker, a message to a halted node) leaves the
            // state untouched, so stateright treats its delivery as no step at all: markers do
            // not add interleavings.
            _ => {}
        }
    }

    fn timer_step(
        &self,
        id: Id,
        state: &mut Cow<'_, CraqState>,
        timer: &CraqTimer,
        o: &mut Out<Self>,
    ) {
        // Decided on the borrowed state: a timer that does nothing must not copy the actor.
        let acts = match (state.as_ref(), timer) {
            (CraqState::Storage(s), CraqTimer::FailStop) => !s.halted && s.crashes == 0,
            (CraqState::Storage(s), CraqTimer::Restart) => s.halted && s.restarts == 0,
            (CraqState::Storage(s), CraqTimer::LeaseLapse) => super::lease::may_lapse(&self.cfg, s),
            (CraqState::Storage(s), CraqTimer::Storage(_)) => !s.halted,
            (CraqState::Client(c), CraqTimer::Client(_)) => !c.stopped,
            (CraqState::Client(c), CraqTimer::Begin) => c.running.is_none() && !c.stopped,
            (CraqState::Mgmtd(_), CraqTimer::Mgmtd(_)) => {
                return super::mgmtd_actor::on_timeout(&self.cfg, id, state, timer, o);
            }
            _ => false,
        };
        if !acts {
            return;
        }
        match (state.to_mut(), timer) {
            (CraqState::Storage(s), CraqTimer::FailStop) => fail_stop(&self.cfg, id, s, o),
            (CraqState::Storage(s), CraqTimer::Restart) => restart(&self.cfg, id, s, o),
            (CraqState::Storage(s), CraqTimer::LeaseLapse) => {
                super::lease::lapse(&self.cfg, id, s, o);
            }
            (CraqState::Storage(s), CraqTimer::Storage(t)) => {
                storage_step(id, s, EventOf::Timer(*t), o);
            }
            (CraqState::Client(c), CraqTimer::Client(t)) => {
                client_step(id, c, self.script(), EventOf::Timer(*t), o);
            }
            (CraqState::Client(c), CraqTimer::Begin) => start_op(id, c, self.script(), 0, None, o),
            _ => unreachable!("decided above"),
        }
    }
}

/// Fail-stops a storage node. What a halted node remembers can no longer matter, so it is
/// forgotten and every crash of this node at any moment leaves one state: the machine is reset
/// (a restart builds a new one from the disk anyway); a node that can never restart also drops
/// its disk and audit trails (the properties over them held when it halted, and they cannot
/// change any more). See `super::forget_the_dead` for its messages and timers.
fn fail_stop(cfg: &CraqConfig, id: Id, s: &mut StorageState, o: &mut Out<CraqNode>) {
    let node = adapter::node_id(id);
    s.halted = true;
    s.crashes += 1;
    s.node = StorageNode::new_in_service(
        storage_cfg(cfg, node),
        BTreeMap::new(),
        RoutingInfo::default(),
    );
    if cfg.recoveries == 0 {
        s.store = MemChunkStore::new();
        s.committed = 0;
        s.applied_twice = None;
        s.regression = None;
    }
    o.send(Id::from(0), CraqMsg::Failed(adapter::target_of(node)));
    if cfg.storage_lease {
        o.cancel_timer(CraqTimer::LeaseLapse);
    }
    if cfg.recoveries > 0 {
        o.set_timer(CraqTimer::Restart, model_timeout());
    }
}

/// Restarts a fail-stopped node from its disk: a fresh process that reports its targets
/// OFFLINE until mgmtd has marked them down (§2.6.2). I/Os in flight at the crash are dropped
/// (they "did not happen", one of the outcomes the chunk-store contract allows).
fn restart(cfg: &CraqConfig, id: Id, s: &mut StorageState, o: &mut Out<CraqNode>) {
    let node = adapter::node_id(id);
    let target = adapter::target_of(node);
    let metas = BTreeMap::from([(target, s.store.metas())]);
    s.restarts += 1;
    s.io_base = u64::from(s.restarts) << 32;
    s.node = StorageNode::new(storage_cfg(cfg, node), metas, RoutingInfo::default())
        .with_io_base(s.io_base);
    s.halted = false;
    let now = t3fs_core::time::Instant(s.clock);
    adapter::step_at(now, id, &mut s.node, None, o, CraqTimer::Storage);
    o.send(Id::from(0), CraqMsg::Restarted(target));
    super::lease::arm(cfg, s, o);
}

fn chain_version(routing: &RoutingInfo) -> ChainVersion {
    routing.chain(CHAIN).map(|c| c.version).unwrap_or_default()
}

/// The oracle's chain change for a fail-stopped target: move it to the end as OFFLINE and bump
/// the chain version (3FS §2.6.1 for a SERVING target whose local state became OFFLINE).
fn fail_target(routing: &RoutingInfo, target: TargetId) -> Option<RoutingInfo> {
    let chain = routing.chain(CHAIN)?;
    if chain.state_of(target) != Some(PublicState::Serving) {
        return None;
    }
    let mut next = routing.clone();
    let c = next.chains.get_mut(&CHAIN).expect("chain exists");
    c.targets.retain(|t| t.target != target);
    c.targets.push(ChainTarget {
        target,
        state: PublicState::Offline,
    });
    c.version = ChainVersion(c.version.0 + 1);
    next.version = RoutingVersion(routing.version.0 + 1);
    Some(next)
}

fn storage_msg(id: Id, s: &mut StorageState, src: Id, msg: CraqMsg, o: &mut Out<CraqNode>) {
    let event = match msg {
        CraqMsg::Wire(msg) => EventOf::Recv {
            from: adapter::node_id(src),
            msg,
        },
        CraqMsg::Io { id: io, .. } if io.0 < s.io_base => return, // A crashed incarnation's.
        CraqMsg::Io { id: io, op } => {
            let IoOp::Chunk { op, .. } = op else {
                panic!("storage submits only chunk I/O");
            };
            let old = s
                .store
                .chunks()
                .get(&CHUNK)
                .map(|c| (c.committed, c.chain_version));
            let result = s.store.apply(&op);
            audit_commit(s, &op, &result, old);
            EventOf::IoDone {
                id: io,
                result: IoResult::Chunk(result),
            }
        }
        CraqMsg::Failed(_)
        | CraqMsg::Restarted(_)
        | CraqMsg::Lapsed { .. }
        | CraqMsg::History { .. } => return,
    };
    storage_step(id, s, event, o);
}

/// Runs one storage machine step at the node's clock, flagging a chain-version regression and
/// honouring `Halt`.
pub(super) fn storage_step(
    id: Id,
    s: &mut StorageState,
    event: Event<StorageNode>,
    o: &mut Out<CraqNode>,
) {
    let before = chain_version(s.node.routing());
    let now = t3fs_core::time::Instant(s.clock);
    let effects = adapter::step_at(now, id, &mut s.node, Some(event), o, CraqTimer::Storage);
    s.halted |= effects.halted.is_some();
    let after = chain_version(s.node.routing());
    if after < before && s.regression.is_none() {
        s.regression = Some(format!("chain version went from {before} to {after}"));
    }
}

/// Records committed values and flags regressions of committed or chain versions.
fn audit_commit(
    s: &mut StorageState,
    op: &ChunkOp,
    result: &Result<ChunkDone, t3fs_core::chunk::ChunkError>,
    old: Option<(ChunkVersion, ChainVersion)>,
) {
    let (ChunkOp::Commit { version, .. }, Ok(ChunkDone::Committed(meta))) = (op, result) else {
        return;
    };
    let Some(c) = s.store.chunks().get(&meta.chunk) else {
        return;
    };
    if let Some((old_v, old_cv)) = old {
        if s.regression.is_none() && (c.committed < old_v || c.chain_version < old_cv) {
            s.regression = Some(format!(
                "commit moved {} from {old_v}/{old_cv} to {}/{}",
                meta.chunk, c.committed, c.chain_version
            ));
        }
        if old_v >= *version {
            return; // A replayed commit: nothing new was committed.
        }
    }
    let v = c.data.first().copied().unwrap_or(0);
    if s.committed & 1 << v != 0 {
        s.applied_twice.get_or_insert(v);
    }
    s.committed |= 1 << v;
}
