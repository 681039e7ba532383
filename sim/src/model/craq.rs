//! The CRAQ model: one chain of `replicas` storage nodes, `clients` clients each running a script
//! of writes and reads on one chunk, and a routing oracle that stands in for mgmtd until the
//! mgmtd issue: when a storage node fail-stops, the oracle moves its target to the end of the
//! chain as OFFLINE with a bumped chain version and pushes the new routing info to everyone.
//!
//! Properties (always): reads linearizable over a chunk register, no acknowledged write lost
//! while a replica survives, pending = committed + 1 on every replica, committed versions and
//! chain versions never decrease, no client write applied twice on a replica. Sometimes: a write
//! is acknowledged, a write is acknowledged after a failover, a retried write is acknowledged.
//!
//! Node layout: n0 is the oracle, n1..=nR storage (node i hosts target ti of chain c1),
//! then the clients. Not here: recovery of failed nodes (mgmtd issue), message loss (it is
//! indistinguishable from unbounded delay for safety properties).

use std::borrow::Cow;
use std::collections::BTreeMap;

use stateright::actor::{model_timeout, Actor, ActorModel, Id, Network, Out};
use stateright::semantics::register::{Register, RegisterOp, RegisterRet};
use stateright::semantics::{ConsistencyTester, LinearizabilityTester};
use stateright::Expectation;
use t3fs_core::bugs::PlantedBug;
use t3fs_core::chunk::{ChunkDone, ChunkOp};
use t3fs_core::client::{Client, ClientCall, ClientConfig, ClientRet, ClientTimer};
use t3fs_core::ids::{
    ChainId, ChainVersion, ChunkId, ChunkVersion, ClientId, InodeId, IoId, NodeId, RequestId,
    RoutingVersion, TargetId,
};
use t3fs_core::layout::FileLayout;
use t3fs_core::machine::{EventOf, IoOp, IoResult};
use t3fs_core::msg::Msg;
use t3fs_core::routing::{ChainInfo, ChainTarget, PublicState, RoutingInfo};
use t3fs_core::storage::{ReadMode, StorageConfig, StorageNode, StorageTimer};
use t3fs_core::testing::MemChunkStore;

use super::adapter::{self, ModelMsg};

/// Configuration of the CRAQ model.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct CraqConfig {
    /// Replicas in the chain.
    pub replicas: usize,
    /// Clients.
    pub clients: usize,
    /// Writes per client (each followed by a read).
    pub writes: usize,
    /// Storage nodes that may fail-stop.
    pub failures: usize,
    /// Client retries per chunk I/O.
    pub client_retries: u32,
    /// Forwarding retries per update.
    pub forward_retries: u32,
    /// Read mode of every target.
    pub read_mode: ReadMode,
    /// Planted bug in every storage node.
    pub bug: Option<PlantedBug>,
}

impl Default for CraqConfig {
    fn default() -> Self {
        Self {
            replicas: 3,
            clients: 2,
            writes: 2,
            failures: 1,
            client_retries: 1,
            forward_retries: 0,
            read_mode: ReadMode::RejectDirty,
            bug: None,
        }
    }
}

/// One step of a client's script.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum ScriptOp {
    /// Write this one-byte value at offset 0 of the chunk.
    Write(u8),
    /// Read one byte at offset 0.
    Read,
}

impl CraqConfig {
    /// Client `k`'s script: write a unique value, read, repeated `writes` times.
    pub fn script(&self, k: usize) -> Vec<ScriptOp> {
        (0..self.writes)
            .flat_map(|j| {
                [
                    ScriptOp::Write((1 + k * self.writes + j) as u8),
                    ScriptOp::Read,
                ]
            })
            .collect()
    }

    fn storage_nodes(&self) -> impl Iterator<Item = NodeId> {
        (1..=self.replicas as u32).map(NodeId)
    }

    fn client_nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        (0..self.clients as u32).map(|k| NodeId(1 + self.replicas as u32 + k))
    }

    fn client_index(&self, id: Id) -> usize {
        usize::from(id) - self.replicas - 1
    }

    /// The routing info at start: chain c1 with every target serving, in node order.
    pub fn initial_routing(&self) -> RoutingInfo {
        let targets: Vec<TargetId> = self.storage_nodes().map(|n| TargetId(n.0)).collect();
        let mut routing = RoutingInfo {
            version: RoutingVersion(1),
            ..RoutingInfo::default()
        };
        routing.chains.insert(
            CHAIN,
            ChainInfo::all_serving(CHAIN, ChainVersion(1), &targets),
        );
        for n in self.storage_nodes() {
            routing.targets.insert(TargetId(n.0), n);
        }
        routing
    }
}

/// Command-line flags of a CRAQ model configuration that catches `bug`, or `None` if the small
/// model cannot (the bug needs histories longer than exhaustive checking affords).
pub fn catching_flags(bug: PlantedBug) -> Option<&'static str> {
    match bug {
        // Masked under legacy reads (the tail stays dirty until its late commit), visible as
        // soon as reads return committed data.
        PlantedBug::TailAckBeforeCommit => {
            Some("--clients 1 --writes 2 --failures 1 --read-mode committed")
        }
        PlantedBug::ReplayAppliedTwice => Some("--clients 1 --writes 2 --failures 1"),
        PlantedBug::CommitBeforeSuccessorAck => Some("--clients 2 --writes 1 --failures 0"),
        PlantedBug::ReadPending | PlantedBug::SkipChainVersionCheck => None,
    }
}

/// The configuration `flags` (from [`catching_flags`]) describe, with `bug` planted.
pub fn catching_config(bug: PlantedBug) -> Option<CraqConfig> {
    let flags = catching_flags(bug)?;
    let mut cfg = CraqConfig {
        bug: Some(bug),
        ..CraqConfig::default()
    };
    let words: Vec<&str> = flags.split_whitespace().collect();
    for pair in words.chunks(2) {
        match pair {
            ["--clients", n] => cfg.clients = n.parse().ok()?,
            ["--writes", n] => cfg.writes = n.parse().ok()?,
            ["--failures", n] => cfg.failures = n.parse().ok()?,
            ["--read-mode", "committed"] => cfg.read_mode = ReadMode::Committed,
            _ => return None,
        }
    }
    Some(cfg)
}

/// The modelled chain.
pub const CHAIN: ChainId = ChainId(1);
/// The modelled chunk: chunk 0 of inode 1.
pub const CHUNK: ChunkId = ChunkId {
    inode: InodeId(1),
    index: 0,
};
const CHUNK_SIZE: u32 = 4;

fn layout() -> FileLayout {
    FileLayout {
        chunk_size: CHUNK_SIZE,
        chains: vec![CHAIN],
    }
}

/// Messages of the CRAQ model.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum CraqMsg {
    /// A protocol message.
    Wire(Msg),
    /// A pending disk I/O of the receiving storage node (self-message).
    Io {
        /// I/O id.
        id: IoId,
        /// The operation.
        op: IoOp,
    },
    /// Storage → oracle: this node's target fail-stopped (the failure detector's verdict).
    Failed(TargetId),
    /// Client self-message marking an operation boundary in the history: operation
    /// `returned.0` answered `returned.1`, and operation `invoked` started, both in the step
    /// that sent it. Its delivery is a no-op; it exists so the model's history recorder sees the
    /// boundary at the exact step it happened.
    History {
        /// Script index and result of the operation that returned.
        returned: Option<(usize, ClientRet)>,
        /// Script index of the operation that started.
        invoked: Option<usize>,
    },
}

impl ModelMsg for CraqMsg {
    fn wire(msg: Msg) -> Self {
        Self::Wire(msg)
    }
    fn io(id: IoId, op: IoOp) -> Self {
        Self::Io { id, op }
    }
}

/// Timers of the CRAQ model.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum CraqTimer {
    /// A storage machine timer.
    Storage(StorageTimer),
    /// A client machine timer.
    Client(ClientTimer),
    /// The node may fail-stop now.
    FailStop,
}

/// Actors of the CRAQ model.
#[derive(Clone, Debug)]
pub enum CraqActor {
    /// Routing oracle (mgmtd stand-in).
    Oracle,
    /// A storage node.
    Storage,
    /// A client with its script.
    Client,
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
    /// Values committed on this replica, in commit order (one entry per commit).
    pub commit_log: Vec<u8>,
    /// Set if a commit lowered the committed or recorded chain version, or routing regressed.
    pub regression: Option<String>,
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
    /// A storage node.
    Storage(Box<StorageState>),
    /// A client.
    Client(Box<ClientState>),
}

/// Model history: the linearizability tester plus facts for the other properties.
#[derive(Clone, Debug, Hash, PartialEq)]
pub struct CraqHistory {
    /// Client operations on the chunk register (value 0 = never written).
    pub lin: LinearizabilityTester<Id, Register<u8>>,
    /// Acknowledged writes: value → committed version.
    pub acked: BTreeMap<u8, ChunkVersion>,
    /// Clients whose running write has been re-sent.
    pub retrying: Vec<Id>,
    /// A retried write was acknowledged.
    pub retried_write_acked: bool,
    /// A write was acknowledged with a commit chain version above 1 (after a failover).
    pub acked_after_failover: bool,
}

impl Default for CraqHistory {
    fn default() -> Self {
        Self {
            lin: LinearizabilityTester::new(Register(0)),
            acked: BTreeMap::new(),
            retrying: Vec::new(),
            retried_write_acked: false,
            acked_after_failover: false,
        }
    }
}

fn storage_cfg(cfg: &CraqConfig, node: NodeId) -> StorageConfig {
    let mut s = StorageConfig::new(node, vec![(TargetId(node.0), cfg.read_mode)]);
    s.forward_retries_max = cfg.forward_retries;
    s.bug = cfg.bug;
    s
}

fn client_cfg(cfg: &CraqConfig, node: NodeId) -> ClientConfig {
    let mut c = ClientConfig::new(node, ClientId(u64::from(node.0)));
    c.retries_max = cfg.client_retries;
    c.channels = 1;
    c.io_timeout = None;
    c
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

impl Actor for CraqNode {
    type Msg = CraqMsg;
    type State = CraqState;
    type Timer = CraqTimer;
    type Random = ();
    type Storage = ();

    fn on_start(&self, id: Id, _storage: &Option<()>, o: &mut Out<Self>) -> CraqState {
        let routing = self.cfg.initial_routing();
        match self.role {
            CraqActor::Oracle => CraqState::Oracle(routing),
            CraqActor::Storage => {
                let node = adapter::node_id(id);
                let mut machine =
                    StorageNode::new(storage_cfg(&self.cfg, node), BTreeMap::new(), routing);
                adapter::start(id, &mut machine, o, CraqTimer::Storage);
                if self.cfg.failures > 0 {
                    o.set_timer(CraqTimer::FailStop, model_timeout());
                }
                CraqState::Storage(Box::new(StorageState {
                    node: machine,
                    store: MemChunkStore::new(),
                    halted: false,
                    commit_log: Vec::new(),
                    regression: None,
                }))
            }
            CraqActor::Client => {
                let node = adapter::node_id(id);
                let machine = Client::new(client_cfg(&self.cfg, node), routing);
                let mut c = ClientState {
                    client: machine,
                    running: None,
                    stopped: false,
                };
                let script = self.cfg.script(self.cfg.client_index(id));
                start_op(id, &mut c, &script, 0, None, o);
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
        match (state.as_ref(), msg) {
            (CraqState::Oracle(routing), CraqMsg::Failed(target)) => {
                let Some(next) = fail_target(routing, target) else {
                    return;
                };
                for n in self.cfg.storage_nodes().chain(self.cfg.client_nodes()) {
                    if TargetId(n.0) != target {
                        o.send(
                            adapter::actor_id(n),
                            CraqMsg::Wire(adapter::through_codec(&Msg::Routing(next.clone()))),
                        );
                    }
                }
                *state.to_mut() = CraqState::Oracle(next);
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
            (CraqState::Client(c), msg) => {
                if c.stopped {
                    return;
                }
                let script = self.cfg.script(self.cfg.client_index(id));
                let CraqState::Client(c) = state.to_mut() else {
                    unreachable!()
                };
                client_msg(id, c, &script, src, msg, o);
            }
            _ => {}
        }
    }

    fn on_timeout(
        &self,
        id: Id,
        state: &mut Cow<'_, CraqState>,
        timer: &CraqTimer,
        o: &mut Out<Self>,
    ) {
        match (state.to_mut(), timer) {
            (CraqState::Storage(s), CraqTimer::FailStop) if !s.halted => {
                s.halted = true;
                o.send(
                    Id::from(0),
                    CraqMsg::Failed(TargetId(usize::from(id) as u32)),
                );
            }
            (CraqState::Storage(s), CraqTimer::Storage(t)) if !s.halted => {
                let before = chain_version(s.node.routing());
                adapter::step(id, &mut s.node, EventOf::Timer(*t), o, CraqTimer::Storage);
                check_routing(s, before);
            }
            (CraqState::Client(c), CraqTimer::Client(t)) if !c.stopped => {
                let script = self.cfg.script(self.cfg.client_index(id));
                let effects =
                    adapter::step(id, &mut c.client, EventOf::Timer(*t), o, CraqTimer::Client);
                finish_ops(id, c, &script, effects.returns, o);
            }
            _ => {}
        }
    }
}

fn chain_version(routing: &RoutingInfo) -> ChainVersion {
    routing.chain(CHAIN).map(|c| c.version).unwrap_or_default()
}

fn check_routing(s: &mut StorageState, before: ChainVersion) {
    let after = chain_version(s.node.routing());
    if after < before && s.regression.is_none() {
        s.regression = Some(format!("chain version went from {before} to {after}"));
    }
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
    let before = chain_version(s.node.routing());
    match msg {
        CraqMsg::Wire(msg) => {
            let event = EventOf::Recv {
                from: adapter::node_id(src),
                msg,
            };
            adapter::step(id, &mut s.node, event, o, CraqTimer::Storage);
        }
        CraqMsg::Io { id: io, op } => {
            let IoOp::Chunk { op, .. } = op;
            let old = s
                .store
                .chunks()
                .get(&CHUNK)
                .map(|c| (c.committed, c.chain_version));
            let result = s.store.apply(&op);
            audit_commit(s, &op, &result, old);
            let event = EventOf::IoDone {
                id: io,
                result: IoResult::Chunk(result),
            };
            adapter::step(id, &mut s.node, event, o, CraqTimer::Storage);
        }
        CraqMsg::Failed(_) | CraqMsg::History { .. } => {}
    }
    check_routing(s, before);
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
    s.commit_log.push(c.data.first().copied().unwrap_or(0));
}

fn client_msg(
    id: Id,
    c: &mut ClientState,
    script: &[ScriptOp],
    src: Id,
    msg: CraqMsg,
    o: &mut Out<CraqNode>,
) {
    if let CraqMsg::Wire(msg) = msg {
        let event = EventOf::Recv {
            from: adapter::node_id(src),
            msg,
        };
        let effects = adapter::step(id, &mut c.client, event, o, CraqTimer::Client);
        finish_ops(id, c, script, effects.returns, o);
    }
}

/// Starts script operation `index` (if any) and marks the boundary in the history.
fn start_op(
    id: Id,
    c: &mut ClientState,
    script: &[ScriptOp],
    index: usize,
    returned: Option<(usize, ClientRet)>,
    o: &mut Out<CraqNode>,
) {
    let invoked = (index < script.len()).then_some(index);
    o.send(id, CraqMsg::History { returned, invoked });
    let Some(index) = invoked else { return };
    c.running = Some(index);
    let call = match script[index] {
        ScriptOp::Write(v) => ClientCall::Write {
            inode: CHUNK.inode,
            layout: layout(),
            offset: 0,
            data: vec![v],
        },
        ScriptOp::Read => ClientCall::Read {
            inode: CHUNK.inode,
            layout: layout(),
            offset: 0,
            len: 1,
        },
    };
    let event = EventOf::Call {
        req: RequestId(index as u64 + 1),
        call,
    };
    let effects = adapter::step(id, &mut c.client, event, o, CraqTimer::Client);
    finish_ops(id, c, script, effects.returns, o);
}

fn finish_ops(
    id: Id,
    c: &mut ClientState,
    script: &[ScriptOp],
    returns: Vec<(RequestId, ClientRet)>,
    o: &mut Out<CraqNode>,
) {
    for (_req, ret) in returns {
        let index = c
            .running
            .take()
            .expect("a return answers the running operation");
        if matches!(ret, ClientRet::Failed { .. } | ClientRet::Rejected(_)) {
            // The outcome is unknown: the operation stays open in the history and the script
            // stops (a thread may not start another operation while one is open).
            c.stopped = true;
            return;
        }
        start_op(id, c, script, index + 1, Some((index, ret)), o);
    }
}

fn record_out(
    cfg: &CraqConfig,
    history: &CraqHistory,
    env: stateright::actor::Envelope<&CraqMsg>,
) -> Option<CraqHistory> {
    match env.msg {
        CraqMsg::History { returned, invoked } => {
            let mut h = history.clone();
            let script = cfg.script(cfg.client_index(env.src));
            if let Some((index, ret)) = returned {
                match ret {
                    ClientRet::Updated { results } => {
                        let _ = h.lin.on_return(env.src, RegisterRet::WriteOk);
                        if let (Some((_, r)), Some(ScriptOp::Write(v))) =
                            (results.first(), script.get(*index))
                        {
                            if r.commit_chain_version > ChainVersion(1) {
                                h.acked_after_failover = true;
                            }
                            h.acked.insert(*v, r.commit_version);
                        }
                        if h.retrying.contains(&env.src) {
                            h.retried_write_acked = true;
                        }
                    }
                    ClientRet::Read { data, .. } => {
                        let _ = h.lin.on_return(
                            env.src,
                            RegisterRet::ReadOk(data.first().copied().unwrap_or(0)),
                        );
                    }
                    _ => {}
                }
            }
            h.retrying.retain(|&c| c != env.src);
            if let Some(op) = invoked.and_then(|i| script.get(i)) {
                let op = match op {
                    ScriptOp::Write(v) => RegisterOp::Write(*v),
                    ScriptOp::Read => RegisterOp::Read,
                };
                let _ = h.lin.on_invoke(env.src, op);
            }
            Some(h)
        }
        CraqMsg::Wire(Msg::Write(req)) if req.retry > 0 && !history.retrying.contains(&env.src) => {
            let mut h = history.clone();
            h.retrying.push(env.src);
            Some(h)
        }
        _ => None,
    }
}

/// The state type of the CRAQ model.
pub type CraqModelState = stateright::actor::ActorModelState<CraqNode, CraqHistory>;
/// The CRAQ model.
pub type CraqModel = ActorModel<CraqNode, CraqConfig, CraqHistory>;

fn storages(state: &CraqModelState) -> impl Iterator<Item = &StorageState> {
    state.actor_states.iter().filter_map(|s| match s.as_ref() {
        CraqState::Storage(s) => Some(s.as_ref()),
        _ => None,
    })
}

/// Builds the CRAQ model for `cfg`.
pub fn build(cfg: CraqConfig) -> CraqModel {
    let mut actors = vec![CraqNode {
        role: CraqActor::Oracle,
        cfg: cfg.clone(),
    }];
    actors.extend((0..cfg.replicas).map(|_| CraqNode {
        role: CraqActor::Storage,
        cfg: cfg.clone(),
    }));
    actors.extend((0..cfg.clients).map(|_| CraqNode {
        role: CraqActor::Client,
        cfg: cfg.clone(),
    }));
    let failover_expected = cfg.failures > 0;
    let retry_expected = cfg.failures > 0 && cfg.client_retries > 0;
    let model = ActorModel::new(cfg, CraqHistory::default())
        .actors(actors)
        .init_network(Network::new_unordered_nonduplicating([]))
        .property(Expectation::Always, "linearizable", |_, s| {
            s.history.lin.serialized_history().is_some()
        })
        .property(Expectation::Always, "no acknowledged write lost", |_, s| {
            let live: Vec<&StorageState> = storages(s).filter(|st| !st.halted).collect();
            let top = live
                .iter()
                .filter_map(|st| st.store.chunks().get(&CHUNK).map(|c| c.committed))
                .max()
                .unwrap_or_default();
            live.is_empty() || s.history.acked.values().all(|v| *v <= top)
        })
        .property(Expectation::Always, "pending = committed + 1", |_, s| {
            storages(s).all(|st| {
                st.store.chunks().values().all(|c| {
                    c.pending
                        .as_ref()
                        .is_none_or(|(v, _)| *v == c.committed.next())
                })
            })
        })
        .property(Expectation::Always, "versions never decrease", |_, s| {
            storages(s).all(|st| st.regression.is_none())
        })
        .property(Expectation::Always, "no write applied twice", |_, s| {
            storages(s).all(|st| {
                let mut seen = st.commit_log.clone();
                seen.sort_unstable();
                seen.windows(2).all(|w| w[0] != w[1])
            })
        })
        .property(Expectation::Sometimes, "a write is acknowledged", |_, s| {
            !s.history.acked.is_empty()
        })
        .record_msg_out(record_out)
        .within_boundary(|cfg, s| storages(s).filter(|st| st.halted).count() <= cfg.failures);
    // Reachability goals that only make sense when the configuration allows them: a model with
    // failures must reach a failover, and one with client retries must reach a retried write.
    let model = if failover_expected {
        model.property(
            Expectation::Sometimes,
            "a write is acknowledged after a failover",
            |_, s| s.history.acked_after_failover,
        )
    } else {
        model
    };
    if retry_expected {
        model.property(
            Expectation::Sometimes,
            "a retried write is acknowledged",
            |_, s| s.history.retried_write_acked,
        )
    } else {
        model
    }
}

/// One line per model step, in 3FS nouns, for counterexamples.
pub fn describe_action(
    action: &stateright::actor::ActorModelAction<CraqMsg, CraqTimer, ()>,
) -> String {
    use stateright::actor::ActorModelAction as A;
    let n = |id: &Id| format!("n{}", usize::from(*id));
    match action {
        A::Deliver { src, dst, msg } => match msg {
            CraqMsg::Wire(m) => format!("{} -> {}: {}", n(src), n(dst), describe_msg(m)),
            CraqMsg::Io {
                op: IoOp::Chunk { target, op },
                ..
            } => format!("{}: disk {target} completes {}", n(dst), describe_op(op)),
            CraqMsg::Failed(t) => format!(
                "oracle learns {t} failed; moves it to the end as OFFLINE, bumps the chain version"
            ),
            CraqMsg::History { .. } => format!("{}: (history marker, no effect)", n(dst)),
        },
        A::Timeout(id, CraqTimer::FailStop) => format!("{}: FAIL-STOP (crash)", n(id)),
        A::Timeout(id, CraqTimer::Storage(t)) => format!("{}: timer {t:?} fires", n(id)),
        A::Timeout(id, CraqTimer::Client(t)) => format!("{}: client timer {t:?} fires", n(id)),
        other => format!("{other:?}"),
    }
}

fn describe_op(op: &ChunkOp) -> String {
    match op {
        ChunkOp::Update {
            chunk,
            version,
            kind,
        } => format!("update {chunk} pending {version} {}", describe_kind(kind)),
        ChunkOp::Commit {
            chunk,
            version,
            chain_version,
        } => format!("commit {chunk} {version} at chain {chain_version}"),
        ChunkOp::Read {
            chunk, uncommitted, ..
        } => format!(
            "read {chunk}{}",
            if *uncommitted { " (uncommitted)" } else { "" }
        ),
        ChunkOp::List => "list".into(),
    }
}

fn describe_kind(kind: &t3fs_core::chunk::UpdateKind) -> String {
    match kind {
        t3fs_core::chunk::UpdateKind::Write { offset, data } => format!("write@{offset}={data:?}"),
        other => format!("{other:?}"),
    }
}

/// A compact description of a protocol message.
pub fn describe_msg(msg: &Msg) -> String {
    match msg {
        Msg::Write(r) | Msg::Update(r) => format!(
            "{} {} {} {} u={} tag={}/{}{} retry={}",
            if matches!(msg, Msg::Write(_)) {
                "Write"
            } else {
                "Update"
            },
            r.chain,
            r.chunk,
            describe_kind(&r.kind),
            r.update_version,
            r.tag.channel,
            r.tag.seqnum,
            if r.is_syncing { " syncing" } else { "" },
            r.retry
        ),
        Msg::UpdateReply(r) => format!(
            "UpdateReply {} {} u={} {:?}{}",
            r.chain,
            r.chunk,
            r.update_version,
            r.status,
            r.result
                .map(|x| format!(" committed {}", x.commit_version))
                .unwrap_or_default()
        ),
        Msg::Read(r) => format!("Read {} {} retry={}", r.chain, r.chunk, r.retry),
        Msg::ReadReply(r) => format!(
            "ReadReply {} {:?} data={:?} {}",
            r.chunk, r.status, r.data, r.version
        ),
        Msg::Routing(r) => {
            let chain = r.chain(CHAIN).map(|c| {
                let ts: Vec<String> = c
                    .targets
                    .iter()
                    .map(|t| format!("{}:{:?}", t.target, t.state))
                    .collect();
                format!("{} [{}]", c.versioned(), ts.join(" "))
            });
            format!("Routing {} {}", r.version, chain.unwrap_or_default())
        }
        Msg::GetRouting { known } => format!("GetRouting known={known}"),
    }
}

/// A summary of the replicas and clients in a state, printed after a counterexample.
pub fn describe_state(state: &CraqModelState) -> Vec<String> {
    let mut lines = Vec::new();
    for (i, s) in state.actor_states.iter().enumerate() {
        match s.as_ref() {
            CraqState::Oracle(r) => lines.push(format!(
                "n{i} oracle: {}",
                describe_msg(&Msg::Routing(r.clone()))
            )),
            CraqState::Storage(st) => {
                let chunk = st.store.chunks().get(&CHUNK).map(|c| {
                    format!(
                        "committed {} data={:?} chain {}{}",
                        c.committed,
                        c.data,
                        c.chain_version,
                        c.pending
                            .as_ref()
                            .map(|(v, d)| format!(", pending {v} data={d:?}"))
                            .unwrap_or_default()
                    )
                });
                lines.push(format!(
                    "n{i} storage{}: {} commits={:?}{}",
                    if st.halted { " (HALTED)" } else { "" },
                    chunk.unwrap_or_else(|| "no chunk".into()),
                    st.commit_log,
                    st.regression
                        .as_ref()
                        .map(|r| format!(" REGRESSION: {r}"))
                        .unwrap_or_default()
                ));
            }
            CraqState::Client(c) => lines.push(format!(
                "n{i} client: running op {:?}{}",
                c.running,
                if c.stopped {
                    ", stopped after a failed op"
                } else {
                    ""
                }
            )),
        }
    }
    lines.push(format!("history: {:?}", state.history.lin));
    lines
}
