//! The cluster manager (3FS §2): primary election by a lease row in the KV, heartbeats and
//! failure detection, the chain update loop, versioned routing info, client sessions and admin
//! operations.
//!
//! Purpose: watch targets (local states from heartbeats) and rewrite chains (§2.6.1) so that
//! storage and clients route around failures and returning targets are resynced and promoted.
//!
//! Invariants owned here:
//! - only a primary whose lease is trusted (`lease::trusted`) and whose state is loaded answers
//!   heartbeats, routing requests and admin calls; the others redirect with `NotPrimary`;
//! - every persisted change runs in one KV transaction that re-reads the lease row and the
//!   routing version (read conflicts on both): a deposed primary cannot commit (§2.2);
//! - the routing version stored in the KV increases by one with every persisted change and once
//!   more per new tenure, so it is monotonic across failovers; the in-memory copy changes only
//!   after a commit succeeded;
//! - one writer transaction at a time (3FS serialises writers with one mutex);
//! - chain versions increase by one on every change of a chain's (target, public state) list.
//!
//! Not here: the storage side of target states and resync (`storage/`), the KV engine (driver),
//! the optional preferred-order rotation, metrics, config distribution, and routing-version
//! bumps for volatile changes (t3fs routing carries no node statuses, so none are needed).
//!
//! Files: [`chain_update`] the pure §2.6.1 function, [`lease`] the election rule, [`store`] the
//! KV rows, `writer.rs` the transaction pipeline, `heartbeat.rs` heartbeats, failure detection,
//! the chain updater and sessions, `admin.rs` admin operations.

mod admin;
pub mod chain_update;
mod heartbeat;
pub mod lease;
pub mod store;
mod writer;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use core::ops::Range;
use core::time::Duration;

use crate::bugs::MgmtdBug;
use crate::ids::{ChainId, ClientId, IoId, NodeId, RoutingVersion, TargetId};
use crate::kv::KvError;
use crate::machine::{EventOf, Machine, Outbox, Unobserved};
use crate::msg::Msg;
use crate::routing::{LocalState, RoutingInfo};
use crate::time::Instant;
use store::LeaseInfo;
pub use writer::WriterOp;

/// Static configuration (3FS `MgmtdConfig`; defaults from Appendix A).
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct MgmtdConfig {
    /// This mgmtd.
    pub node: NodeId,
    /// This binary's release; an older release never takes the lease from a newer one.
    pub release_version: u32,
    /// Lease length (60 s).
    pub lease_length: Duration,
    /// Lease extension period (10 s).
    pub extend_interval: Range<Duration>,
    /// The lease is not trusted within this interval of its end (20 s).
    pub suspicious_interval: Duration,
    /// A node without heartbeat for this long is failed and its targets go OFFLINE (60 s).
    pub heartbeat_fail_interval: Duration,
    /// The largest clock skew between any node and the primary mgmtd the protocol tolerates
    /// (3FS's heartbeat timestamp window, 30 s): heartbeats whose timestamp is further than this
    /// from mgmtd's clock are refused. Instants of different nodes are comparable because every
    /// node counts from one cluster-wide epoch (see `crate::time`); this is the bound on how far
    /// their clocks may disagree. The storage-side lease needs no skew bound (it measures only
    /// its own clock, with a drift bound), and mgmtd's own lease tolerates skew up to its
    /// suspicious interval, which must exceed this.
    pub max_clock_skew: Duration,
    /// Server addresses (`host:port`) published to everyone with routing info, so that a client
    /// that knows only mgmtd finds the rest (empty in simulation: nodes are addressed by id).
    pub addresses: Vec<(NodeId, String)>,
    /// The meta servers among `addresses`.
    pub meta_nodes: Vec<NodeId>,
    /// Chain update loop period (1 s).
    pub chain_update_interval: Range<Duration>,
    /// After a new tenure or chain creation, chains are frozen this long or until every one of
    /// their targets has reported (2 min).
    pub bootstrap_length: Duration,
    /// Client sessions idle this long are dropped (20 min).
    pub session_timeout: Duration,
    /// Re-check the lease inside every write transaction (3FS `validate_lease_on_write`).
    pub validate_lease_on_write: bool,
    /// Refuse to take a lease held by a newer release.
    pub check_release_version: bool,
    /// Ignore heartbeat reports carrying a chain version older than mgmtd's.
    pub ignore_stale_targets: bool,
    /// Nodes that get every new routing info pushed (the simulator and the model checker use it
    /// to avoid modelling polls; 3FS itself only answers polls, which mgmtd always does too).
    pub push_routing_to: Vec<NodeId>,
    /// Backoff before retrying a failed writer transaction.
    pub writer_retry_wait: Range<Duration>,
    /// Run the lease, session and chain-update loops on timers (3FS). `false` is event-driven
    /// mode for the model checker: no periodic timers (so quiescent states are terminal and
    /// liveness is checkable), the lease is taken once, and chains are updated after every
    /// event that could change them.
    pub periodic: bool,
    /// Answer accepted heartbeats with `MgmtdStatus::Accepted`, which renews the storage-side
    /// lease (`storage/lease.rs`). Off: 3FS's behaviour (accepted heartbeats get no reply).
    pub storage_lease: bool,
    /// A planted bug, or `None`.
    pub bug: Option<MgmtdBug>,
}

impl MgmtdConfig {
    /// 3FS's defaults for mgmtd `node`.
    pub fn new(node: NodeId) -> Self {
        let s = Duration::from_secs;
        Self {
            node,
            release_version: 1,
            lease_length: s(60),
            extend_interval: s(10)..s(11),
            suspicious_interval: s(20),
            heartbeat_fail_interval: s(60),
            max_clock_skew: s(30),
            chain_update_interval: crate::limits::CHAIN_UPDATE_INTERVAL
                ..crate::limits::CHAIN_UPDATE_INTERVAL * 11 / 10,
            bootstrap_length: s(120),
            session_timeout: s(20 * 60),
            validate_lease_on_write: true,
            check_release_version: true,
            ignore_stale_targets: true,
            push_routing_to: Vec::new(),
            addresses: Vec::new(),
            meta_nodes: Vec::new(),
            writer_retry_wait: Duration::from_millis(100)..s(1),
            periodic: true,
            storage_lease: false,
            bug: None,
        }
    }
}

/// Timers of mgmtd.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum MgmtdTimer {
    /// Run `extendLease`.
    ExtendLease,
    /// Run the chain update loop.
    UpdateChains,
    /// `node` sent no heartbeat for the fail interval (re-armed by every heartbeat).
    HeartbeatDeadline(NodeId),
    /// Drop idle client sessions.
    CheckSessions,
    /// Retry the writer transaction after a transient KV failure.
    WriterRetry,
}

/// Admin operations (3FS admin_cli verbs), answered by one [`AdminRet`].
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum AdminCall {
    /// Create chains (all targets SERVING at chain version 1); re-submitting an existing chain is
    /// accepted only with the identical target list.
    SetChains(Vec<(ChainId, Vec<TargetId>)>),
    /// Set a chain table's chain list; a different list creates the next table version.
    SetChainTable {
        /// Table id.
        table: u32,
        /// Ordered chains; all must exist and have equal length.
        chains: Vec<ChainId>,
    },
    /// Append a new target to a chain as OFFLINE (it syncs in): expansion and migration.
    AddTarget {
        /// The chain.
        chain: ChainId,
        /// A target in no chain.
        target: TargetId,
    },
    /// Drop an OFFLINE target from its chain.
    RemoveTarget {
        /// The chain.
        chain: ChainId,
        /// The target.
        target: TargetId,
    },
    /// Treat a target as locally OFFLINE whatever it reports, until `OnlineTarget`.
    OfflineTarget(TargetId),
    /// Undo `OfflineTarget`.
    OnlineTarget(TargetId),
    /// Move the LASTSRV to the end as OFFLINE and make the next target LASTSRV ("on risk of
    /// losing some data", §2.7).
    RotateLastSrv(ChainId),
    /// Enable or disable a node (a disabled node's heartbeats are refused).
    SetNodeDisabled {
        /// The node.
        node: NodeId,
        /// Disabled?
        disabled: bool,
    },
}

/// Why an admin call failed.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum AdminError {
    /// This mgmtd is not the primary.
    NotPrimary(Option<NodeId>),
    /// The request contradicts the current state (the message says how).
    Invalid(String),
    /// Too many queued operations.
    Busy,
    /// The KV failed; `CommitUnknown` means the change may or may not have been applied.
    Kv(KvError),
}

/// Result of an admin call.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum AdminRet {
    /// Done; the routing version that includes the change.
    Ok(RoutingVersion),
    /// Refused.
    Failed(AdminError),
}

/// What the primary knows about a node (volatile).
#[derive(Clone, Debug, Default, Eq, Hash, PartialEq)]
pub struct NodeRec {
    /// Last accepted heartbeat version.
    pub hb_version: u64,
    /// Heartbeats arrive (3FS HEARTBEAT_CONNECTED); false after the deadline passed.
    pub connected: bool,
    /// Targets the node reported.
    pub reported: BTreeSet<TargetId>,
    /// The node's clock minus mgmtd's at its last heartbeat (ns; includes the one-way delay):
    /// the measured offset `cluster status` shows. Observability only.
    pub clock_offset_ns: crate::machine::Unobserved<i64>,
}

/// State held only while this mgmtd is primary (rebuilt on every new tenure).
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct Primary {
    /// The lease of this tenure.
    pub lease: LeaseInfo,
    /// Rows are loaded (until then the primary answers nothing).
    pub loaded: bool,
    /// Persisted state as of the last commit.
    pub routing: Arc<RoutingInfo>,
    /// Disabled nodes (persisted node rows).
    pub disabled: BTreeSet<NodeId>,
    /// Local state of every known target (OFFLINE until reported).
    pub local: BTreeMap<TargetId, LocalState>,
    /// Targets reported since this tenure began.
    pub reported: BTreeSet<TargetId>,
    /// Targets an admin took offline.
    pub admin_offline: BTreeSet<TargetId>,
    /// Nodes seen by heartbeat.
    pub nodes: BTreeMap<NodeId, NodeRec>,
    /// Chains whose targets' local states changed since the last chain update run.
    pub dirty: BTreeSet<ChainId>,
    /// New-born chains: no automatic update before this time unless every target reported.
    pub frozen: BTreeMap<ChainId, Instant>,
    /// Client sessions and their last extension.
    pub sessions: BTreeMap<ClientId, Instant>,
    /// Reported targets that belong to no chain (3FS's orphan table).
    pub orphans: BTreeSet<TargetId>,
    /// Targets last reported fresh (empty store, never synced since): never LASTSRV while a
    /// target that held data can be.
    pub fresh: BTreeSet<TargetId>,
}

/// Counters a driver can report.
#[derive(Clone, Debug, Default, Eq, Hash, PartialEq)]
pub struct MgmtdCounters {
    /// Committed writer transactions.
    pub commits: u64,
    /// Writer transactions that failed (conflict, unavailable, unknown, too old).
    pub kv_failures: u64,
    /// Chain updates persisted (chains changed).
    pub chain_updates: u64,
    /// Heartbeats refused (stale, bad timestamp, disabled, invalid).
    pub heartbeats_refused: u64,
    /// Accepted heartbeats that renewed no storage lease because a chain update taking one of
    /// the node's SERVING targets out was being committed (`heartbeat.rs`).
    pub leases_withheld: u64,
    /// KV rows that failed to decode (skipped).
    pub corrupt_rows: u64,
    /// Tenures begun.
    pub tenures: u64,
    /// §2.6.1 table rows that decided a target's state in a chain that changed (computed, not
    /// necessarily committed): the simulator's reachability counters.
    pub rows: BTreeMap<chain_update::Row, u64>,
}

/// The mgmtd machine.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct Mgmtd {
    cfg: Arc<MgmtdConfig>,
    /// The last lease row learned (mine or another's).
    lease: Option<LeaseInfo>,
    primary: Option<Box<Primary>>,
    /// Released after being disabled: never re-acquires.
    released: bool,
    writer: writer::Writer,
    /// Next I/O id. Not state identity: ids only need to be unique among pending I/Os (which
    /// are compared), so paths that differ only in how many I/Os they ran are one state.
    next_io: crate::machine::Unobserved<u64>,
    counters: Unobserved<MgmtdCounters>,
}

impl Mgmtd {
    /// A mgmtd that will try to become primary as soon as it starts.
    pub fn new(cfg: MgmtdConfig) -> Self {
        Self {
            cfg: Arc::new(cfg),
            lease: None,
            primary: None,
            released: false,
            writer: writer::Writer::default(),
            next_io: Default::default(),
            counters: Unobserved::default(),
        }
    }

    /// The node id.
    pub fn node(&self) -> NodeId {
        self.cfg.node
    }

    /// The primary state, if this mgmtd is in a tenure.
    pub fn primary(&self) -> Option<&Primary> {
        self.primary.as_deref()
    }

    /// What the primary knows about every node (primary only).
    pub fn nodes(&self) -> Option<&BTreeMap<NodeId, NodeRec>> {
        self.primary.as_ref().map(|p| &p.nodes)
    }

    /// The routing info this primary serves (`None` unless primary and loaded).
    pub fn routing(&self) -> Option<&RoutingInfo> {
        self.primary
            .as_ref()
            .filter(|p| p.loaded)
            .map(|p| &*p.routing)
    }

    /// The last lease row learned.
    pub fn lease(&self) -> Option<&LeaseInfo> {
        self.lease.as_ref()
    }

    /// Counters.
    pub fn counters(&self) -> &MgmtdCounters {
        &self.counters
    }

    /// Whether this mgmtd acts as primary at `now`.
    pub fn is_primary(&self, now: Instant) -> bool {
        self.primary.as_ref().is_some_and(|p| {
            p.loaded && lease::trusted(&p.lease, self.cfg.node, now, self.cfg.suspicious_interval)
        })
    }

    /// The primary to redirect callers to.
    fn primary_hint(&self) -> Option<NodeId> {
        self.lease
            .map(|l| l.primary)
            .filter(|p| *p != self.cfg.node)
    }

    fn alloc_io(&mut self) -> IoId {
        *self.next_io += 1;
        IoId(*self.next_io)
    }
}

impl Machine for Mgmtd {
    type Msg = Msg;
    type Timer = MgmtdTimer;
    type Call = AdminCall;
    type Ret = AdminRet;

    fn start(&mut self, now: Instant, out: &mut Outbox<Self>) {
        self.writer.enqueue(WriterOp::ExtendLease);
        self.pump(now, out);
        if self.cfg.periodic {
            out.set_timer(MgmtdTimer::ExtendLease, self.cfg.extend_interval.clone());
            out.set_timer(
                MgmtdTimer::UpdateChains,
                self.cfg.chain_update_interval.clone(),
            );
            out.set_timer(MgmtdTimer::CheckSessions, self.cfg.extend_interval.clone());
        }
    }

    fn handle(
        &mut self,
        now: Instant,
        event: EventOf<Msg, MgmtdTimer, AdminCall>,
        out: &mut Outbox<Self>,
    ) {
        match event {
            EventOf::Recv { from, msg } => match msg {
                Msg::Heartbeat(hb) => self.on_heartbeat(now, from, hb, out),
                Msg::GetRouting { known } => self.on_get_routing(now, from, known, out),
                Msg::ExtendSession(s) => self.on_extend_session(now, s.client),
                Msg::GetClientSessions => self.on_get_client_sessions(now, from, out),
                // Messages for other roles: not ours.
                _ => {}
            },
            EventOf::Timer(timer) => match timer {
                MgmtdTimer::ExtendLease => {
                    self.writer.enqueue_once(WriterOp::ExtendLease);
                    out.set_timer(MgmtdTimer::ExtendLease, self.cfg.extend_interval.clone());
                }
                MgmtdTimer::UpdateChains => {
                    self.update_chains(now);
                    out.set_timer(
                        MgmtdTimer::UpdateChains,
                        self.cfg.chain_update_interval.clone(),
                    );
                }
                MgmtdTimer::HeartbeatDeadline(node) => self.on_heartbeat_deadline(now, node, out),
                MgmtdTimer::CheckSessions => {
                    self.check_sessions(now);
                    out.set_timer(MgmtdTimer::CheckSessions, self.cfg.extend_interval.clone());
                }
                MgmtdTimer::WriterRetry => self.writer.unblock(),
            },
            EventOf::IoDone { id, result } => self.on_kv_done(now, id, result, out),
            EventOf::Call { req, call } => self.on_admin(now, req, call, out),
        }
        if !self.cfg.periodic {
            self.update_chains(now);
        }
        self.pump(now, out);
    }

    fn check_invariants(&self) {
        if let Some(p) = &self.primary {
            assert!(p.sessions.len() <= crate::limits::CLIENT_SESSIONS_MAX);
            assert!(p.nodes.len() <= crate::limits::MGMTD_NODES_MAX);
            // The chain invariants of §2.6.1 are checked by the checkers, not asserted here:
            // planted bugs break them on purpose and must surface as counterexamples.
        }
        self.writer.check();
    }
}

#[cfg(test)]
mod tests;
