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
//!
//! Files: this one holds the configuration, messages and the model with its properties;
//! `actor.rs` the actors, `history.rs` the history recorder, `describe.rs` counterexamples.

mod actor;
mod describe;
mod history;
mod mgmtd_actor;

use stateright::actor::{ActorModel, Id, Network};
use stateright::Expectation;
use t3fs_core::bugs::{MgmtdBug, PlantedBug};
use t3fs_core::client::{ClientRet, ClientTimer};
use t3fs_core::ids::{
    ChainId, ChainVersion, ChunkId, InodeId, IoId, NodeId, RoutingVersion, TargetId,
};
use t3fs_core::layout::FileLayout;
use t3fs_core::machine::IoOp;
use t3fs_core::mgmtd::MgmtdTimer;
use t3fs_core::msg::Msg;
use t3fs_core::routing::{ChainInfo, RoutingInfo};
use t3fs_core::storage::{ReadMode, StorageTimer};

use super::adapter::ModelMsg;
pub use crate::model::describe::describe_msg;
pub use actor::{ClientState, CraqActor, CraqNode, CraqState, StorageState};
pub use describe::{describe_action, describe_state};
pub use history::CraqHistory;
pub use mgmtd_actor::MgmtdState;

/// Configuration of the CRAQ model.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct CraqConfig {
    /// Replicas in the chain.
    pub replicas: usize,
    /// Clients.
    pub clients: usize,
    /// Writes per client (each followed by `reads` reads).
    pub writes: usize,
    /// Reads after each write (1 by default; 2 lets one client see a value and then check that
    /// no later read goes back in time, which catches reads of uncommitted data).
    pub reads: usize,
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
    /// Node n0 runs the real mgmtd (lease, heartbeats, chain updates, over an in-state KV)
    /// instead of the routing oracle; storage nodes report local states and resync.
    pub mgmtd: bool,
    /// Restarts of fail-stopped storage nodes (same disk), each followed by recovery.
    pub recoveries: usize,
    /// Planted bug in mgmtd.
    pub mgmtd_bug: Option<MgmtdBug>,
}

impl Default for CraqConfig {
    fn default() -> Self {
        Self {
            replicas: 3,
            clients: 2,
            writes: 2,
            reads: 1,
            failures: 1,
            client_retries: 1,
            forward_retries: 0,
            read_mode: ReadMode::RejectDirty,
            bug: None,
            mgmtd: false,
            recoveries: 0,
            mgmtd_bug: None,
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
                std::iter::once(ScriptOp::Write((1 + k * self.writes + j) as u8))
                    .chain(std::iter::repeat_n(ScriptOp::Read, self.reads))
            })
            .collect()
    }

    pub(crate) fn storage_nodes(&self) -> impl Iterator<Item = NodeId> {
        (1..=self.replicas as u32).map(NodeId)
    }

    pub(crate) fn client_nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
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
        // A client reads another client's in-flight value at the head, then an older one at
        // the middle replica: time goes backwards. Reads rotate over replicas by I/O id, so it
        // takes three reads per write for a head read to precede a middle one.
        PlantedBug::ReadPending => Some("--clients 2 --writes 1 --reads 3 --failures 0"),
        PlantedBug::SkipChainVersionCheck => None,
        // Both need resync or exhausted retry budgets under message loss: the simulator's
        // swarm catches them (tests/sim_bugs.rs).
        PlantedBug::Resync3fsTable | PlantedBug::AbandonForwardOnTimeout => None,
        // The model has a perfect failure detector and no storage-side lease.
        PlantedBug::LeaseIgnored => None,
        // The model's disk never damages bytes.
        PlantedBug::ReadCrcSkipped => None,
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
            ["--reads", n] => cfg.reads = n.parse().ok()?,
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

pub(crate) fn layout() -> FileLayout {
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
    /// Storage → oracle/mgmtd actor: this node's target fail-stopped (model bookkeeping: the
    /// oracle re-orders at once; the mgmtd actor arms the heartbeat deadline of the node).
    Failed(TargetId),
    /// Storage → mgmtd actor: the node restarted (its deadline may no longer expire).
    Restarted(TargetId),
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
    /// A fail-stopped node may restart now (same disk).
    Restart,
    /// A mgmtd machine timer.
    Mgmtd(MgmtdTimer),
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

fn mgmtd_of(state: &CraqModelState) -> Option<&MgmtdState> {
    state.actor_states.iter().find_map(|s| match s.as_ref() {
        CraqState::Mgmtd(m) => Some(m.as_ref()),
        _ => None,
    })
}

/// Properties of the model with the real mgmtd: the §2.6.1 invariants of every published chain,
/// CRAQ's write-all rule for every replica mgmtd and the replica agree is SERVING, and recovery
/// back to an all-SERVING chain once everything is quiet.
fn mgmtd_properties(model: CraqModel) -> CraqModel {
    let recovers = model.cfg.recoveries >= model.cfg.failures;
    let heals = model.cfg.failures > 0 && recovers;
    let model = model
        .property(
            Expectation::Always,
            "chain invariants (§2.6.1) hold",
            |_, s| mgmtd_of(s).is_none_or(|m| m.audit.is_none()),
        )
        .property(
            Expectation::Always,
            "serving replicas hold every acknowledged write",
            |_, s| {
                let Some(current) = mgmtd_of(s).and_then(|m| m.machine.routing()) else {
                    return true;
                };
                let Some(chain) = current.chain(CHAIN) else {
                    return true;
                };
                let acked = s.history.acked.values().max().copied().unwrap_or_default();
                storages(s).filter(|st| !st.halted).all(|st| {
                    let own = st.node.routing().chain(CHAIN);
                    st.node.targets().all(|t| {
                        let serving = own.is_some_and(|c| {
                            c.version == chain.version
                                && c.state_of(t.id)
                                    == Some(t3fs_core::routing::PublicState::Serving)
                        });
                        let committed = st.store.chunks().get(&CHUNK).map(|c| c.committed);
                        !serving
                            || t.local_state != t3fs_core::routing::LocalState::UpToDate
                            || committed.unwrap_or_default() >= acked
                    })
                })
            },
        );
    let model = if recovers {
        model.property(
            Expectation::Eventually,
            "the chain returns to all-SERVING",
            |_, s| {
                mgmtd_of(s)
                    .and_then(|m| m.machine.routing())
                    .and_then(|r| r.chain(CHAIN))
                    .is_some_and(|c| {
                        c.targets
                            .iter()
                            .all(|t| t.state == t3fs_core::routing::PublicState::Serving)
                    })
            },
        )
    } else {
        model
    };
    if heals {
        model.property(
            Expectation::Sometimes,
            "a restarted replica is resynced and promoted",
            |_, s| mgmtd_of(s).is_some_and(|m| m.promoted),
        )
    } else {
        model
    }
}

/// Builds the CRAQ model for `cfg`.
pub fn build(cfg: CraqConfig) -> CraqModel {
    let mut actors = vec![CraqNode {
        role: if cfg.mgmtd {
            CraqActor::Mgmtd
        } else {
            CraqActor::Oracle
        },
        cfg: cfg.clone(),
    }];
    actors.extend((0..cfg.replicas).map(|_| CraqNode {
        role: CraqActor::Storage,
        cfg: cfg.clone(),
    }));
    actors.extend((0..cfg.clients).map(|k| CraqNode {
        role: CraqActor::Client(cfg.script(k)),
        cfg: cfg.clone(),
    }));
    let writes_expected = cfg.clients > 0 && cfg.writes > 0;
    let failover_expected = cfg.failures > 0 && writes_expected;
    let cfg_mgmtd = cfg.mgmtd;
    let retry_expected = cfg.failures > 0 && cfg.client_retries > 0 && writes_expected;
    let model = ActorModel::new(cfg, CraqHistory::default())
        .actors(actors)
        // The mgmtd model delivers each link in order (TCP between live processes): its many
        // concurrent control messages would otherwise multiply interleavings that the protocol
        // treats alike (a stale push after a newer one is ignored by version), and the state
        // space would not fit in memory. The CRAQ model keeps full reordering.
        .init_network(if cfg_mgmtd {
            Network::new_ordered([])
        } else {
            Network::new_unordered_nonduplicating([])
        })
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
                let log = &st.commit_log;
                (0..log.len()).all(|i| !log[i + 1..].contains(&log[i]))
            })
        })
        // Liveness, checked on terminal states: no client is left waiting forever (it finishes
        // its script, or gives up after its retry budget). Stateright's BFS can miss violations
        // that are reached only through already-visited states; it cannot report false ones.
        .property(
            Expectation::Eventually,
            "every client finishes or gives up",
            |_, s| {
                s.actor_states.iter().all(|a| match a.as_ref() {
                    CraqState::Client(c) => c.running.is_none(),
                    _ => true,
                })
            },
        )
        .record_msg_out(history::record_out)
        .within_boundary(|cfg, s| {
            let crashes: usize = storages(s).map(|st| usize::from(st.crashes)).sum();
            let restarts: usize = storages(s).map(|st| usize::from(st.restarts)).sum();
            crashes <= cfg.failures && restarts <= cfg.recoveries
        });
    let model = if model.cfg.mgmtd {
        mgmtd_properties(model)
    } else {
        model
    };
    // Reachability goals that only make sense when the configuration allows them: a model with
    // failures must reach a failover, and one with client retries must reach a retried write.
    let model = if writes_expected {
        model.property(Expectation::Sometimes, "a write is acknowledged", |_, s| {
            !s.history.acked.is_empty()
        })
    } else {
        model
    };
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
