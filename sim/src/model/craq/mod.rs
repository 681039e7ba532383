//! The CRAQ model: one chain of `replicas` storage nodes, `clients` clients each running a script
//! of writes and reads on one chunk, and node n0: a routing oracle that stands in for mgmtd
//! (when a storage node fail-stops, the oracle moves its target to the end of the chain as
//! OFFLINE with a bumped chain version and pushes the new routing info to everyone), or with
//! `mgmtd` set the real mgmtd machine (`mgmtd_actor.rs`), with restarts and resync.
//!
//! Properties (always): reads consistent over a chunk register (linearizable under reject-dirty
//! reads, regular under committed reads, see `consistency.rs`), no acknowledged write lost while
//! a replica survives, pending = committed + 1 on every replica, committed versions and chain
//! versions never decrease, no client write applied twice on a replica. Eventually (terminal
//! states): every client finishes or gives up. Sometimes: a write is acknowledged, a write is
//! acknowledged after a failover, a retried write is acknowledged.
//!
//! Node layout: n0 is the oracle or mgmtd, n1..=nR storage (node i hosts target ti of chain c1),
//! then the clients. Not here: message loss (it is indistinguishable from unbounded delay for
//! safety properties), timeouts (all off: retries follow error replies and routing changes),
//! disk faults, symmetry reduction (clients are interchangeable only up to renaming ids and
//! values inside machine state, which the machines cannot do; replicas are not interchangeable
//! at all). Opt-in with mgmtd (`async_kv`, `storage_lease`, `readers`; off in the standard
//! sets, whose pinned counts they leave alone): KV commits that complete in a later step, the
//! storage-side lease with lapses that let mgmtd suspect a live node (`lease.rs`), and clients
//! that only read, once, starting at any moment.
//!
//! Files: this one holds the configuration and messages; `model.rs` assembles the model with its
//! properties and canonicalizer; `actor.rs` the actors, `client.rs` the clients' scripts,
//! `mgmtd_actor.rs` the mgmtd actor, `lease.rs` the lease's clocks and lapses, `history.rs` the
//! history recorder, `consistency.rs` the read-consistency summaries, `describe.rs`
//! counterexamples.

mod actor;
mod client;
mod consistency;
mod describe;
mod history;
mod lease;
mod mgmtd_actor;
mod model;

use stateright::actor::Id;
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

use super::adapter::{self, ModelMsg};
pub use crate::model::describe::describe_msg;
pub use actor::{ClientState, CraqActor, CraqNode, CraqState, StorageState};
pub use describe::{describe_action, describe_state};
pub use history::CraqHistory;
pub use mgmtd_actor::MgmtdState;
pub use model::{build, CraqModel, CraqModelState};

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
    /// Read mode of every target. It also picks the consistency property of reads:
    /// linearizability under `RejectDirty`, regularity under `Committed` (3FS §3.3: a read may
    /// see a commit at the tail and a later read miss it at a replica the commit has not
    /// reached, a new-old inversion that is real and allowed).
    pub read_mode: ReadMode,
    /// Check reads for linearizability under committed reads too: not a property 3FS has, but
    /// the way to see the inversion above as a counterexample.
    pub strict_reads: bool,
    /// Planted bug in every storage node.
    pub bug: Option<PlantedBug>,
    /// Node n0 runs the real mgmtd (lease, heartbeats, chain updates, over an in-state KV)
    /// instead of the routing oracle; storage nodes report local states and resync.
    pub mgmtd: bool,
    /// Restarts of fail-stopped storage nodes (same disk), each followed by recovery.
    pub recoveries: usize,
    /// Planted bug in mgmtd.
    pub mgmtd_bug: Option<MgmtdBug>,
    /// mgmtd's KV commits complete in a later model step (a self-message), so heartbeats and
    /// everything else interleave with a commit in flight; reads stay synchronous. Off: every
    /// KV transaction completes within the step that started it.
    pub async_kv: bool,
    /// The storage-side lease (`t3fs_core::storage::lease`): mgmtd answers accepted heartbeats
    /// with a grant, storage nodes serve only under one, and each node has a clock that only
    /// lease lapses advance (`lease.rs`).
    pub storage_lease: bool,
    /// Lease lapses in all (with `storage_lease`): each advances one live node's clock past its
    /// leases, sends a heartbeat, and lets mgmtd's deadline for the node fire while it is alive.
    pub lease_lapses: usize,
    /// The last `readers` of the clients only read, once each, starting at any moment (the
    /// others write `writes` times, each write followed by `reads` reads, from the start).
    pub readers: usize,
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
            strict_reads: false,
            bug: None,
            mgmtd: false,
            recoveries: 0,
            mgmtd_bug: None,
            async_kv: false,
            storage_lease: false,
            lease_lapses: 0,
            readers: 0,
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
    /// Client `k`'s script: write a unique value, read, repeated `writes` times; one read for a
    /// reader (the last `readers` clients).
    pub fn script(&self, k: usize) -> Vec<ScriptOp> {
        if self.is_reader(k) {
            return vec![ScriptOp::Read];
        }
        (0..self.writes)
            .flat_map(|j| {
                std::iter::once(ScriptOp::Write((1 + k * self.writes + j) as u8))
                    .chain(std::iter::repeat_n(ScriptOp::Read, self.reads))
            })
            .collect()
    }

    pub(crate) fn storage_nodes(&self) -> impl Iterator<Item = NodeId> {
        (1..=self.replicas as u64).map(NodeId)
    }

    pub(crate) fn client_nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        (0..self.clients as u64).map(|k| NodeId(1 + self.replicas as u64 + k))
    }

    /// Whether client `k` is a reader.
    fn is_reader(&self, k: usize) -> bool {
        k + self.readers >= self.clients
    }

    fn client_index(&self, id: Id) -> Option<usize> {
        usize::from(id)
            .checked_sub(self.replicas + 1)
            .filter(|&k| k < self.clients)
    }

    /// The routing info at start: chain c1 with every target serving, in node order.
    pub fn initial_routing(&self) -> RoutingInfo {
        let targets: Vec<TargetId> = self.storage_nodes().map(adapter::target_of).collect();
        let mut routing = RoutingInfo {
            version: RoutingVersion(1),
            ..RoutingInfo::default()
        };
        routing.chains.insert(
            CHAIN,
            ChainInfo::all_serving(CHAIN, ChainVersion(1), &targets),
        );
        for n in self.storage_nodes() {
            routing.targets.insert(adapter::target_of(n), n);
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
        // This model has a perfect failure detector and no storage-side lease (the mgmtd
        // model's lease shape, `lease.rs`, has both and catches it in its tests).
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
    /// Storage → mgmtd actor (model bookkeeping, `lease.rs`): the node's clock reached `clock`,
    /// past every lease it was granted for heartbeats sent earlier, so mgmtd's deadline for it
    /// may fire until a heartbeat sent at `clock` or later is accepted.
    Lapsed {
        /// The node's target.
        target: TargetId,
        /// The node's clock.
        clock: u64,
    },
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
    /// Time passes for a storage node: its leases lapse (`lease.rs`).
    LeaseLapse,
    /// A reader client begins its script (readers start at any moment).
    Begin,
}
