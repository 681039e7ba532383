//! The CRAQ storage machine (3FS §3): one storage node hosting one or more targets, each a
//! replica in one chain.
//!
//! Purpose: accept client writes at the head, forward updates down the chain under a per-chunk
//! lock, commit tail to head, serve reads of committed data at any serving replica, and survive
//! chain changes (routing info with higher chain versions) without losing or duplicating
//! acknowledged updates.
//!
//! Invariants owned here:
//! - every request is admitted only on an exact chain-version match with this node's routing;
//! - a chunk has at most one running update per target, held from local update to local commit;
//! - pending version = committed version + 1 whenever a pending version exists;
//! - a replica commits only after its successor acknowledged (or it is the tail);
//! - an update with a tag already answered is answered from the exactly-once cache.
//!
//! - a restarted node reports every target OFFLINE until mgmtd has marked them down (§2.6.2), so
//!   no restarted target rejoins a chain without resync;
//! - a SYNCING successor only ever receives full-chunk replaces (resync items and converted
//!   foreground writes), applied with `ChunkOp::Install` under the chunk lock.
//!
//! Not here: chain membership decisions (mgmtd), fatal-divergence forcing of a successor
//! offline (the round is abandoned and counted instead), and background scrubbing.
//!
//! Layout: this file holds the node, dispatch and routing; [`write`] the update path,
//! [`read`] the read path, `target_state.rs` local states and heartbeats (§2.6.2),
//! [`resync`] the §3.6 resync of a SYNCING successor, [`exactly_once`] and [`chunk_lock`] their
//! tables, [`no_space`] the updates refused for want of space.

pub mod chunk_lock;
mod commit;
pub mod exactly_once;
mod forward;
pub mod lease;
pub mod no_space;
mod pipeline;
mod query;
mod read;
pub mod resync;
mod resync_decide;
mod running;
mod target_state;
mod write;

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use core::time::Duration;

use crate::bugs::PlantedBug;
use crate::chunk::{ChunkDone, ChunkError, ChunkMeta, ChunkOp};
use crate::ids::{ChainId, ChainVersion, ChunkId, IoId, NodeId, TargetId, VersionedChain};
use crate::machine::{EventOf, IoOp, IoResult, Machine, NoCall, Outbox};
use crate::msg::{Msg, ReadReq, Status};
use crate::routing::{LocalState, PublicState, RoutingInfo};
use crate::time::Instant;
use chunk_lock::ChunkLocks;
use exactly_once::ExactlyOnce;
pub use running::{Running, Waiter};

/// How a target answers reads of a chunk that has a pending version (3FS §3.3).
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum ReadMode {
    /// New chunk engine (3FS code default): always return the committed version.
    Committed,
    /// Legacy engine: answer `NotCommitted` while the chunk is dirty; the client retries.
    RejectDirty,
}

/// Default capacity of a target: 3.5 TiB, one NVMe SSD of 3FS's reference machines.
pub const TARGET_CAPACITY: u64 = 3_840_000_000_000;

/// Static configuration of a storage node.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct StorageConfig {
    /// This node.
    pub node: NodeId,
    /// Targets hosted here and their read modes.
    pub targets: Vec<(TargetId, ReadMode)>,
    /// Forwarding retries (after a timeout or a transient error status) before an update fails
    /// upstream. Re-sends caused by a routing change are not counted.
    pub forward_retries_max: u32,
    /// How long to wait for the successor's reply before re-sending; `None` disables
    /// timeout-driven retries: an update then re-sends only after a transient error status or a
    /// routing change, which is complete on a reliable network and is what the model checker
    /// uses to keep duplicate forwards out of its state space.
    pub forward_timeout: Option<Range<Duration>>,
    /// Backoff after a transient error status from the successor (jittered by the driver).
    pub forward_retry_wait: Range<Duration>,
    /// A planted bug, or `None` for the correct protocol.
    pub bug: Option<PlantedBug>,
    /// The mgmtd nodes (first = initial primary guess). Empty: no mgmtd; routing arrives as
    /// input and every target stays UPTODATE (the CRAQ model's setting).
    pub mgmtd: Vec<NodeId>,
    /// Heartbeat and routing-poll period (3FS 10 s); `None`: only on local-state changes.
    pub heartbeat_interval: Option<Range<Duration>>,
    /// Capacity reported per target for statfs (3FS: the SSD's size).
    pub capacity: u64,
    /// The storage-side lease's length (`lease.rs`); `None`: no lease (3FS's behaviour).
    pub lease: Option<Duration>,
    /// How long after an update finished its client or predecessor may still retry it: an
    /// exactly-once record is never evicted younger (`exactly_once.rs`).
    pub retry_horizon: Duration,
    /// Forward an update to a SERVING successor as soon as its local update is submitted,
    /// not after it lands (`pipeline.rs`), so a chain's store updates overlap instead of
    /// running one after another. Off: the serial path 3FS §3.2 describes.
    pub pipeline: bool,
}

impl StorageConfig {
    /// A node with the given targets, default limits and no bug.
    pub fn new(node: NodeId, targets: Vec<(TargetId, ReadMode)>) -> Self {
        Self {
            node,
            targets,
            forward_retries_max: crate::limits::FORWARD_RETRIES_MAX,
            forward_timeout: Some(
                crate::limits::FORWARD_RETRY_WAIT_MAX..crate::limits::FORWARD_RETRY_WAIT_MAX * 2,
            ),
            forward_retry_wait: crate::limits::FORWARD_RETRY_WAIT_MIN
                ..crate::limits::FORWARD_RETRY_WAIT_MAX,
            bug: None,
            mgmtd: Vec::new(),
            heartbeat_interval: Some(
                crate::limits::HEARTBEAT_INTERVAL..crate::limits::HEARTBEAT_INTERVAL * 11 / 10,
            ),
            capacity: TARGET_CAPACITY,
            lease: None,
            retry_horizon: crate::limits::RETRY_HORIZON,
            pipeline: true,
        }
    }
}

/// Timers of the storage machine.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum StorageTimer {
    /// Re-resolve the successor and re-send (or give up on) the update running on a chunk.
    ForwardRetry {
        /// The target.
        target: TargetId,
        /// The chunk.
        chunk: ChunkId,
    },
    /// Send a heartbeat and poll routing.
    Heartbeat,
    /// Re-send a heartbeat refused for want of a primary.
    HeartbeatRetry,
    /// Retry a failed resync round, or restart one whose SyncStart/SyncDone went unanswered.
    Resync(TargetId),
}

/// What an outstanding I/O is for.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
enum IoPurpose {
    /// Local update of the running update on `chunk`.
    Update { target: TargetId, chunk: ChunkId },
    /// Local commit of the running update on `chunk`.
    Commit { target: TargetId, chunk: ChunkId },
    /// A read to answer `from`.
    Read {
        target: TargetId,
        from: NodeId,
        req: ReadReq,
    },
    /// Whole-chunk read of the running update's content for a SYNCING successor (§3.5 #5), or
    /// of a resync item's committed content.
    FullRead { target: TargetId, chunk: ChunkId },
    /// Force-commit of a pending version left on a returning LASTSRV (§3.5 #8).
    ForceCommit { target: TargetId, chunk: ChunkId },
}

impl IoPurpose {
    fn target(&self) -> TargetId {
        match self {
            Self::Update { target, .. }
            | Self::Commit { target, .. }
            | Self::Read { target, .. }
            | Self::FullRead { target, .. }
            | Self::ForceCommit { target, .. } => *target,
        }
    }
}

/// A hosted target's place in its chain, as admission checks need it.
#[derive(Clone, Copy, Debug)]
struct LocalView {
    target: TargetId,
    version: ChainVersion,
    state: PublicState,
    is_head: bool,
}

/// One hosted target.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct Target {
    /// The target.
    pub id: TargetId,
    /// Its read mode.
    pub read_mode: ReadMode,
    /// Local state (§2.6.2).
    pub local_state: LocalState,
    /// A medium error took the target OFFLINE until the process restarts.
    pub disk_error: bool,
    /// Came up on an empty store and not yet synced or SERVING: maybe a replaced disk
    /// (reported to mgmtd, which then never picks it as LASTSRV over a target that held data).
    pub fresh: bool,
    /// The chain version of the sync round whose `SyncDone` made this SYNCING target UPTODATE.
    /// That UPTODATE vouches for the data only at that version: see `after_routing`.
    pub synced_at: Option<ChainVersion>,
    /// Cached metadata of every chunk on the target's store, kept in step with completed I/O.
    /// Invariant: mirrors the store's metadata after every completed `Update`/`Commit`.
    pub chunks: BTreeMap<ChunkId, ChunkMeta>,
    /// Running updates and waiters per chunk.
    pub locks: ChunkLocks<Running, Waiter>,
    /// Exactly-once records.
    pub channels: ExactlyOnce,
    /// Forwarded updates answered `NoSpace`, refused again if a copy arrives (`no_space.rs`).
    pub refusals: no_space::NoSpaceRefusals,
}

/// Counters a driver can report.
#[derive(Clone, Debug, Default, Eq, Hash, PartialEq)]
pub struct StorageCounters {
    /// Updates committed locally.
    pub commits: u64,
    /// Forwarded updates refused because the sender does not host this target's predecessor
    /// in the chain version both route by.
    pub updates_from_stranger: u64,
    /// Heartbeat replies ignored because they came from a node that is not an mgmtd.
    pub replies_from_stranger: u64,
    /// Requests rejected for a chain-version mismatch.
    pub stale_chain_version: u64,
    /// Forward retries.
    pub forward_retries: u64,
    /// Late full-chunk installs older than the chunk committed at the same chain version
    /// (answered, never applied).
    pub stale_installs: u64,
    /// Updates answered from the exactly-once cache.
    pub cached_replies: u64,
    /// Heartbeats sent.
    pub heartbeats: u64,
    /// Resync rounds completed (sync done acknowledged).
    pub resyncs_done: u64,
    /// Chunks copied or removed by resync.
    pub resync_items: u64,
    /// Resync rounds abandoned for fatal divergence (3FS forces the successor offline).
    pub resync_fatal: u64,
    /// Pending versions force-committed on a returning LASTSRV.
    pub force_commits: u64,
    /// Reads and updates refused because the storage-side lease had lapsed.
    pub lease_refusals: u64,
    /// Updates on a new channel answered `Busy`: every exactly-once record was younger than
    /// the retry horizon (`exactly_once.rs`).
    pub channels_full: u64,
    /// Updates answered `NoSpace`: this target's store had no room for them, a successor
    /// refused them for want of space, or a copy of one refused before came again.
    pub no_space: u64,
    /// Local commits the store refused for want of space, retried after a backoff.
    pub commits_refused: u64,
}

/// The storage node machine.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct StorageNode {
    /// Shared, never mutated after construction: copies of the machine (the model checker
    /// clones states constantly) share one allocation.
    cfg: Arc<StorageConfig>,
    /// Replaced wholesale on a newer version, so copies of the machine share it.
    routing: Arc<RoutingInfo>,
    targets: BTreeMap<TargetId, Target>,
    /// Chain of each hosted target under the current routing.
    chain_of: BTreeMap<TargetId, ChainId>,
    ios: crate::vec_map::VecMap<IoId, IoPurpose>,
    /// Next I/O id. Not state identity: ids only need to be unique among pending I/Os (which
    /// are compared), so paths that differ only in how many I/Os they ran are one state.
    next_io: crate::machine::Unobserved<u64>,
    /// Reporting every target OFFLINE until mgmtd shows none SERVING/SYNCING/WAITING.
    booting: bool,
    /// Last heartbeat version sent.
    hb_version: u64,
    /// The mgmtd believed primary.
    primary: Option<NodeId>,
    /// Periodic heartbeats sent to `primary` since its last reply; every third silent period
    /// the node probes the next mgmtd (see `on_heartbeat_timer`).
    hb_unanswered: u32,
    /// The storage-side lease (held only with `StorageConfig::lease` set).
    lease: lease::Lease,
    /// Resync rounds this node runs as predecessor, by its target.
    resyncs: BTreeMap<TargetId, resync::Resync>,
    /// The time of the event being handled (for heartbeat timestamps); not state identity.
    now: crate::machine::Unobserved<Instant>,
    counters: crate::machine::Unobserved<StorageCounters>,
}

/// The result a client was given for the committed update `a`.
pub(crate) fn applied_result(a: &crate::chunk::Applied) -> crate::msg::UpdateResult {
    crate::msg::UpdateResult {
        commit_version: a.version,
        commit_chain_version: a.chain_version,
        len: a.len,
        checksum: a.checksum,
    }
}

impl StorageNode {
    /// Boots a node from durable state: the chunk metadata of each hosted target, as listed by
    /// its store, and the routing info known at boot (possibly empty).
    pub fn new(
        cfg: StorageConfig,
        metas: BTreeMap<TargetId, Vec<ChunkMeta>>,
        routing: RoutingInfo,
    ) -> Self {
        assert!(cfg.targets.len() <= crate::limits::TARGETS_PER_NODE_MAX);
        let with_mgmtd = !cfg.mgmtd.is_empty();
        let primary = cfg.mgmtd.first().copied();
        let targets = cfg
            .targets
            .iter()
            .map(|&(id, read_mode)| {
                let chunks: BTreeMap<ChunkId, ChunkMeta> = metas
                    .get(&id)
                    .map(|ms| ms.iter().map(|m| (m.chunk, m.clone())).collect())
                    .unwrap_or_default();
                // Exactly-once records come back from the chunks (t3fs, see exactly_once.rs): a
                // committed update answers its retries. A pending one records nothing: its
                // predecessor's forward retries must still get through (locking its channel
                // wedged resyncs in the swarm), and a force commit records it when it lands.
                let mut channels = ExactlyOnce::default();
                for m in chunks.values() {
                    for a in &m.applied {
                        channels.adopt(&a.tag, applied_result(a), None);
                    }
                }
                let t = Target {
                    fresh: chunks.is_empty(),
                    id,
                    read_mode,
                    // Loaded from disk: ONLINE under mgmtd (§2.6.2); without mgmtd, trusted.
                    local_state: if with_mgmtd {
                        LocalState::Online
                    } else {
                        LocalState::UpToDate
                    },
                    disk_error: false,
                    synced_at: None,
                    chunks,
                    locks: ChunkLocks::default(),
                    channels,
                    refusals: Default::default(),
                };
                (id, t)
            })
            .collect();
        let mut node = Self {
            cfg: Arc::new(cfg),
            routing: Arc::default(),
            targets,
            chain_of: BTreeMap::new(),
            ios: crate::vec_map::VecMap::new(),
            next_io: Default::default(),
            booting: with_mgmtd,
            hb_version: 0,
            primary,
            hb_unanswered: 0,
            lease: lease::Lease::default(),
            resyncs: BTreeMap::new(),
            now: Default::default(),
            counters: Default::default(),
        };
        node.install_routing(routing);
        node
    }

    /// A node that was already serving when the run began (the initial cluster of a model or
    /// simulation): its targets are UPTODATE and it skips the restart rule. Restarted processes
    /// use [`StorageNode::new`].
    pub fn new_in_service(
        cfg: StorageConfig,
        metas: BTreeMap<TargetId, Vec<ChunkMeta>>,
        routing: RoutingInfo,
    ) -> Self {
        let mut node = Self::new(cfg, metas, routing);
        node.booting = false;
        for t in node.targets.values_mut() {
            t.local_state = LocalState::UpToDate;
            t.fresh = false;
        }
        node
    }

    /// Numbers this incarnation's I/Os from `base`, so completions addressed to a previous
    /// incarnation (I/Os in flight when it crashed) can never match one of this one's.
    pub fn with_io_base(mut self, base: u64) -> Self {
        *self.next_io = base;
        self
    }

    /// The node id.
    pub fn node(&self) -> NodeId {
        self.cfg.node
    }

    /// The routing info this node acts on.
    pub fn routing(&self) -> &RoutingInfo {
        &self.routing
    }

    /// A hosted target.
    pub fn target(&self, id: TargetId) -> Option<&Target> {
        self.targets.get(&id)
    }

    /// Hosted targets.
    pub fn targets(&self) -> impl Iterator<Item = &Target> {
        self.targets.values()
    }

    /// Whether the storage-side lease holds now for the routing this node has applied.
    pub fn lease_holds(&self) -> bool {
        self.lease.holds(*self.now, self.routing.version)
    }

    /// Counters.
    pub fn counters(&self) -> &StorageCounters {
        &self.counters
    }

    fn bug(&self, bug: PlantedBug) -> bool {
        self.cfg.bug == Some(bug)
    }

    fn install_routing(&mut self, routing: RoutingInfo) {
        self.chain_of.clear();
        for chain in routing.chains.values() {
            for t in &chain.targets {
                if self.targets.contains_key(&t.target) {
                    self.chain_of.insert(t.target, chain.chain);
                }
            }
        }
        self.routing = Arc::new(routing);
    }

    /// This node's place in `chain` under the current routing, if it hosts a target of it.
    /// The chain hosted `target` is in, as current routing has it.
    fn chain_info(&self, target: TargetId) -> Option<&crate::routing::ChainInfo> {
        self.chain_of
            .get(&target)
            .and_then(|c| self.routing.chain(*c))
    }

    fn local_view(&self, chain: ChainId) -> Option<LocalView> {
        let info = self.routing.chain(chain)?;
        let t = info
            .targets
            .iter()
            .find(|t| self.targets.contains_key(&t.target))?;
        Some(LocalView {
            target: t.target,
            version: info.version,
            state: t.state,
            is_head: info.head() == Some(t.target),
        })
    }

    /// The admission check every request passes first: this node hosts a target of the chain
    /// and the request's chain version matches this node's exactly (3FS §3.2 step 1).
    /// Whether this node may serve reads and accept updates now: always without the lease
    /// switch; with it, only while the lease holds. A refusal also asks mgmtd for routing, since
    /// a lapsed lease usually means this node has fallen out of the chain.
    fn leased(&mut self, out: &mut Outbox<Self>) -> bool {
        if self.cfg.lease.is_none() || self.lease.holds(*self.now, self.routing.version) {
            return true;
        }
        self.counters.lease_refusals += 1;
        self.poll_routing(out);
        false
    }

    fn admit_chain(&mut self, chain: VersionedChain) -> Result<LocalView, Status> {
        let view = self.local_view(chain.chain).ok_or(Status::NoTarget)?;
        if view.version != chain.version && !self.bug(PlantedBug::SkipChainVersionCheck) {
            self.counters.stale_chain_version += 1;
            return Err(Status::StaleChainVersion {
                current: view.version,
            });
        }
        Ok(view)
    }

    fn alloc_io(&mut self, purpose: IoPurpose) -> IoId {
        *self.next_io += 1;
        let id = IoId(*self.next_io);
        self.ios.insert(id, purpose);
        id
    }

    fn submit(&mut self, out: &mut Outbox<Self>, purpose: IoPurpose, op: ChunkOp) {
        let target = purpose.target();
        let id = self.alloc_io(purpose);
        out.io(id, IoOp::Chunk { target, op });
    }

    fn on_routing(&mut self, routing: RoutingInfo, out: &mut Outbox<Self>) {
        // Routing only moves forward: an older or equal version (a delayed or duplicated push)
        // is ignored, so chain versions seen by this node never decrease.
        if routing.version <= self.routing.version {
            return;
        }
        let old = self.install_routing_keep_old(routing);
        // Updates waiting on a successor under an older chain version are re-sent at once under
        // the new one (3FS re-reads its target map every 100 ms while retrying; reacting to the
        // change itself is the same rule without the polling delay). If this target is now the
        // tail, `forward` commits locally.
        let mut stale = Vec::new();
        for (tid, t) in &self.targets {
            let current = self.chain_info(*tid).map(|c| c.version);
            for (chunk, running, _) in t.locks.iter() {
                if let running::Phase::Forwarding { chain_version, .. } = running.phase {
                    if Some(chain_version) != current {
                        stale.push((*tid, *chunk, running.sync_item));
                    }
                }
            }
        }
        for (target, chunk, sync_item) in stale {
            if sync_item {
                self.end_sync_item(target, chunk, false, out);
            } else {
                self.forward(target, chunk, out);
            }
        }
        self.after_routing(&old, out);
    }

    /// Installs `routing` and returns the previous one.
    fn install_routing_keep_old(&mut self, routing: RoutingInfo) -> Arc<RoutingInfo> {
        let old = self.routing.clone();
        self.install_routing(routing);
        old
    }

    fn on_io_done(&mut self, id: IoId, result: IoResult, out: &mut Outbox<Self>) {
        let Some(purpose) = self.ios.remove(&id) else {
            return; // Not ours (an I/O from before a restart): ignore.
        };
        let IoResult::Chunk(result) = result else {
            panic!("storage submits only chunk I/O");
        };
        // A checksum failure means the medium can no longer be trusted either: the target goes
        // OFFLINE like on EIO, and comes back only with a replaced (then resynced) disk, since a
        // resync by versions would not notice bytes that rotted under an unchanged version.
        if let Err(crate::chunk::ChunkError::Failed | crate::chunk::ChunkError::Corrupt) = result {
            self.disk_failed(purpose.target(), out);
        }
        match purpose {
            IoPurpose::Update { target, chunk } => {
                let meta = expect_done(result, |d| match d {
                    ChunkDone::Updated(meta) => Ok(meta),
                    other => Err(other),
                });
                self.update_done(target, chunk, meta, out)
            }
            IoPurpose::Commit { target, chunk } => {
                self.commit_done(target, chunk, expect_committed(result), out)
            }
            IoPurpose::Read { target, from, req } => {
                self.read_done(target, from, req, expect_read(result), out)
            }
            IoPurpose::FullRead { target, chunk } => {
                self.full_read_done(target, chunk, expect_read(result), out)
            }
            IoPurpose::ForceCommit { target, chunk } => {
                self.force_commit_done(target, chunk, expect_committed(result), out)
            }
        }
    }
}

fn expect_read(
    result: Result<ChunkDone, ChunkError>,
) -> Result<Option<crate::chunk::ChunkRead>, ChunkError> {
    expect_done(result, |d| match d {
        ChunkDone::Read(read) => Ok(read),
        other => Err(other),
    })
}

fn expect_committed(result: Result<ChunkDone, ChunkError>) -> Result<ChunkMeta, ChunkError> {
    expect_done(result, |d| match d {
        ChunkDone::Committed(meta) => Ok(meta),
        other => Err(other),
    })
}

/// Unwraps the completion variant an op must produce; any other variant means the store broke
/// the `ChunkStore` contract, which is a bug, not an environmental failure.
fn expect_done<T>(
    result: Result<ChunkDone, ChunkError>,
    pick: impl FnOnce(ChunkDone) -> Result<T, ChunkDone>,
) -> Result<T, ChunkError> {
    result.map(|done| {
        pick(done).unwrap_or_else(|other| panic!("chunk store answered {other:?}: contract broken"))
    })
}

impl Machine for StorageNode {
    type Msg = Msg;
    type Timer = StorageTimer;
    type Call = NoCall;
    type Ret = NoCall;

    fn start(&mut self, now: Instant, out: &mut Outbox<Self>) {
        *self.now = now;
        self.start_reporting(out);
    }

    fn handle(
        &mut self,
        now: Instant,
        event: EventOf<Msg, StorageTimer, NoCall>,
        out: &mut Outbox<Self>,
    ) {
        *self.now = now;
        match event {
            EventOf::Recv { from, msg } => match msg {
                Msg::Write(req) => self.on_update_req(from, req, true, out),
                Msg::Update(req) => self.on_update_req(from, req, false, out),
                Msg::UpdateReply(reply) => self.on_update_reply(from, reply, out),
                Msg::Read(req) => self.on_read(from, req, out),
                Msg::QueryLastChunk(req) => self.on_query_last_chunk(from, req, out),
                Msg::SpaceInfo => self.on_space_info(from, out),
                Msg::DumpChunkMeta { cursor } => self.on_dump_chunk_meta(from, cursor, out),
                Msg::Routing(routing) => self.on_routing(routing, out),
                Msg::HeartbeatReply(rep) => self.on_heartbeat_reply(from, rep.status, out),
                Msg::NotPrimary { primary } => self.on_not_primary(primary, out),
                Msg::SyncStart(req) => self.on_sync_start(from, req, out),
                Msg::SyncStartReply(rep) => self.on_sync_start_reply(rep, out),
                Msg::SyncDone(req) => self.on_sync_done(from, req, out),
                Msg::SyncDoneReply(rep) => self.on_sync_done_reply(rep, out),
                // Replies meant for clients and requests meant for mgmtd: not ours, ignore.
                _ => {}
            },
            EventOf::Timer(StorageTimer::Heartbeat) => self.on_heartbeat_timer(out),
            EventOf::Timer(StorageTimer::HeartbeatRetry) => self.on_heartbeat_retry(out),
            EventOf::Timer(StorageTimer::Resync(target)) => self.on_resync_timer(target, out),
            EventOf::Timer(StorageTimer::ForwardRetry { target, chunk }) => {
                self.on_forward_retry(target, chunk, out)
            }
            EventOf::IoDone { id, result } => self.on_io_done(id, result, out),
            EventOf::Call { call, .. } => match call {},
        }
    }

    fn check_invariants(&self) {
        for t in self.targets.values() {
            for (chunk, meta) in &t.chunks {
                assert_eq!(*chunk, meta.chunk);
                if let Some(p) = &meta.pending {
                    // ReplayAppliedTwice and CommitBeforeSuccessorAck break this on purpose;
                    // the checkers, not this assertion, must catch them.
                    assert!(
                        p.version > meta.committed,
                        "{}: pending {} <= committed",
                        chunk,
                        p.version
                    );
                }
            }
            for (chunk, running, waiters) in t.locks.iter() {
                assert_eq!(*chunk, running.chunk());
                assert!(waiters <= crate::limits::CHUNK_LOCK_WAITERS_MAX);
            }
            assert!(t.refusals.len() <= crate::limits::NO_SPACE_REFUSALS_PER_TARGET_MAX);
        }
        assert!(
            self.ios.len() <= crate::limits::OUTBOX_ACTIONS_MAX * 4,
            "unbounded pending I/O"
        );
    }
}

#[cfg(test)]
mod tests;
