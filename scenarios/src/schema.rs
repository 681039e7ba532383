//! A validated scenario: cluster shape, workload, background fault rates, timed steps and
//! expectations. `load.rs` builds it from a TOML file; the simulator executes it; real runs
//! (`t3fs cluster run`) execute the steps they can and say which they cannot before starting.
//!
//! Invariants: steps are sorted by `at` (stable, file order within one instant); every node
//! reference names a node the cluster has; rates are within [0, 1]. Not here: parsing (load.rs)
//! and execution (t3fs-sim).

use core::ops::Range;
use core::time::Duration;

/// A whole scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Short name (the file stem by convention).
    pub name: String,
    /// One line saying what the scenario shows.
    pub about: String,
    /// Seeds the scenario is run with by default (the first is `sim run`'s default).
    pub seeds: Vec<u64>,
    /// Length of the safety phase: workload, background faults and steps.
    pub duration: Duration,
    /// Bound for the liveness phase: after healing and restarting everything, every chain
    /// must be all-SERVING and replicas must agree within this simulated time.
    pub converge_within: Duration,
    /// Cluster shape.
    pub cluster: Cluster,
    /// Client workload.
    pub workload: Workload,
    /// Namespace workload of every client (needs meta servers).
    pub namespace: Option<crate::namespace::NsWorkload>,
    /// Background fault rates during the safety phase.
    pub faults: Faults,
    /// Resources with service times (NICs, SSDs, CPUs); `None`: size-blind latencies only.
    pub hardware: Option<crate::hardware::Hardware>,
    /// Timed steps, sorted by `at`.
    pub steps: Vec<Step>,
    /// What the run must show.
    pub expect: Expect,
    /// A planted bug to run with (by name; the simulator validates it).
    pub bug: Option<String>,
}

/// Timeout profile of the simulated services.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Timeouts {
    /// 3FS defaults (10 s heartbeats, 60 s failure detection, 60 s leases).
    ThreeFs,
    /// Scaled down ten-fold so scenarios stay short (1 s heartbeats, 6 s detection, 6 s leases).
    Fast,
}

/// Cluster shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Cluster {
    /// mgmtd instances (one becomes primary).
    pub mgmtd: u32,
    /// Storage nodes.
    pub storage_nodes: u32,
    /// Targets per storage node.
    pub targets_per_node: u32,
    /// Replicas per chain.
    pub replicas: u32,
    /// Chains (every target belongs to exactly one).
    pub chains: u32,
    /// Client machines.
    pub clients: u32,
    /// Meta servers (0: no meta service).
    pub meta: u32,
    /// Timeout profile.
    pub timeouts: Timeouts,
    /// Targets answer "not committed" on dirty chunks (3FS's legacy read mode).
    pub reject_dirty_reads: bool,
    /// Storage-side lease (a t3fs improvement over 3FS, off by default = 3FS's behaviour): a
    /// storage node serves reads and accepts updates only while the primary mgmtd's heartbeat
    /// replies keep its lease current, so no stale read of Appendix B #1/#4 is possible.
    pub storage_lease: bool,
    /// Storage forwards an update only after its local update landed (3FS §3.2's serial path)
    /// instead of beside it (pipelined, the default). Catalog scenarios recorded from swarm
    /// seeds before pipelining keep the interleaving they were found with this way.
    pub serial_forwarding: bool,
    /// Clients boot from empty routing info and learn it from mgmtd, as real clients do (the
    /// default hands them the deployed routing, like a client started from a cached copy).
    pub client_boot_empty: bool,
}

/// Client workload: each client runs one operation at a time with think time between them.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// Chunks the workload touches (spread over the chains).
    pub chunks: u32,
    /// Bytes per write (whole-chunk register writes at offset 0).
    pub write_size: u32,
    /// Fraction of operations that are reads.
    pub read_fraction: f64,
    /// Think time between a client's operations.
    pub think: Range<Duration>,
    /// Operations per client (`None`: until the safety phase ends).
    pub ops_per_client: Option<u64>,
    /// Each client first writes every chunk once, in order, then runs the mix (so a read-only
    /// mix reads data, not holes).
    pub prefill: bool,
}

/// Background fault rates (per message, per I/O, per commit) and latencies.
#[derive(Clone, Debug, PartialEq)]
pub struct Faults {
    /// One-way network latency.
    pub net_latency: Range<Duration>,
    /// Probability that a message takes a latency spike.
    pub net_spike: f64,
    /// Latency of a spike.
    pub net_spike_latency: Range<Duration>,
    /// Message loss probability.
    pub loss: f64,
    /// Message duplication probability (the copy arrives later: a replay).
    pub duplicate: f64,
    /// Disk operation latency.
    pub disk_latency: Range<Duration>,
    /// Probability that a disk operation takes a latency spike (SSD GC).
    pub disk_spike: f64,
    /// Probability that a disk operation fails with EIO (takes the target offline).
    pub disk_eio: f64,
    /// Probability that a read finds silently corrupted bytes (caught by CRC32C).
    pub disk_corrupt: f64,
    /// Probability that an unsynced (in-flight) disk operation is torn by a crash.
    pub torn_write: f64,
    /// Probability that a crash loses one recently acknowledged write of the disk (a volatile
    /// write cache that lied): the chunk is back to its prior, self-consistent state.
    pub lost_write: f64,
    /// KV commit latency.
    pub kv_latency: Range<Duration>,
    /// Probability of a spurious KV conflict.
    pub kv_conflict: f64,
    /// Probability that a KV commit applies but reports CommitUnknown.
    pub kv_commit_unknown: f64,
    /// Probability that a storage heartbeat is lost on its way (unreliable failure detector).
    pub heartbeat_loss: f64,
    /// Time until a failed disk is replaced (the node restarts with an empty disk).
    pub restart_after: Range<Duration>,
    /// Largest per-node clock offset drawn at start.
    pub clock_offset: Duration,
    /// Largest per-node clock drift drawn at start, parts per million.
    pub clock_drift_ppm: u32,
    /// Two-tier BUGGIFY: shrunk timeouts and forced error paths at random sites.
    pub buggify: bool,
}

impl Default for Faults {
    fn default() -> Self {
        let us = Duration::from_micros;
        let ms = Duration::from_millis;
        Self {
            net_latency: us(50)..us(500),
            net_spike: 0.0,
            net_spike_latency: ms(100)..ms(2000),
            loss: 0.0,
            duplicate: 0.0,
            disk_latency: us(20)..us(200),
            disk_spike: 0.0,
            disk_eio: 0.0,
            disk_corrupt: 0.0,
            torn_write: 0.0,
            lost_write: 0.0,
            kv_latency: us(500)..ms(3),
            kv_conflict: 0.0,
            kv_commit_unknown: 0.0,
            heartbeat_loss: 0.0,
            restart_after: ms(500)..Duration::from_secs(10),
            clock_offset: Duration::ZERO,
            clock_drift_ppm: 0,
            buggify: false,
        }
    }
}

/// A node a step refers to, resolved when the step runs.
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum NodeRef {
    /// `mgmtd-N`.
    Mgmtd(u32),
    /// `storage-N`.
    Storage(u32),
    /// `client-N`.
    Client(u32),
    /// `meta-N`.
    Meta(u32),
    /// `primary`: the mgmtd holding the lease when the step runs.
    Primary,
    /// `head:N`, `middle:N`, `tail:N`: the storage node hosting that position of chain N (1-based
    /// chain ids) in the primary's routing when the step runs.
    ChainPos(ChainPos, u32),
}

/// A position in a chain.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum ChainPos {
    /// First serving target.
    Head,
    /// Second serving target.
    Middle,
    /// Last serving target.
    Tail,
}

impl ChainPos {
    /// The target at this position among a chain's serving targets, in chain order (a middle
    /// needs three). The simulator and real runs resolve `head:N`, `middle:N` and `tail:N` with it.
    pub fn pick<T>(self, serving: &[T]) -> Option<&T> {
        match self {
            Self::Head => serving.first(),
            Self::Middle if serving.len() >= 3 => serving.get(1),
            Self::Middle => None,
            Self::Tail => serving.last(),
        }
    }
}

/// A timed step.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// Simulated time at which the step runs.
    pub at: Duration,
    /// Line of the step in its file (0 for generated steps).
    pub line: usize,
    /// What to do.
    pub action: Action,
}

/// Step verbs (turmoil/madsim vocabulary plus storage and KV faults).
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Fail-stop a node (volatile state and in-flight disk writes lost).
    Crash(NodeRef),
    /// Crash a storage node right after it next forwards an update downstream (the 3FS
    /// design-note case: the write is half-way down the chain).
    CrashAfterForward(NodeRef),
    /// Freeze an mgmtd right after it next submits a KV commit that writes chain rows (the
    /// commit lands when it resumes: a process pause in the middle of a chain update).
    PauseOnCommit(NodeRef),
    /// Restart a crashed node with its disk.
    Restart(NodeRef),
    /// Restart a crashed storage node with empty, replaced disks (full resync).
    RestartEmpty(NodeRef),
    /// Freeze a node: it processes nothing until resumed (then acts on a stale view).
    Pause(NodeRef),
    /// Resume a paused node.
    Resume(NodeRef),
    /// Cut links between the groups (both ways unless `oneway`: then only a → b).
    Partition {
        /// One side.
        a: Vec<NodeRef>,
        /// The other side.
        b: Vec<NodeRef>,
        /// Cut only a → b.
        oneway: bool,
    },
    /// Links between the groups (both directions) get their own latency distribution: uniform
    /// in `latency`, with a `spike` probability of the scenario's spike latency, and their own
    /// `loss` rate (a far rack, a congested uplink), until `heal` or another `link` step.
    Link {
        /// One side.
        a: Vec<NodeRef>,
        /// The other side.
        b: Vec<NodeRef>,
        /// One-way latency on these links.
        latency: Range<Duration>,
        /// Probability that a frame takes a spike.
        spike: f64,
        /// Loss rate on these links.
        loss: f64,
    },
    /// Cut every link to and from a node.
    Isolate(NodeRef),
    /// Restore links between groups (both directions).
    Repair {
        /// One side.
        a: Vec<NodeRef>,
        /// The other side.
        b: Vec<NodeRef>,
    },
    /// Hold messages a → b in flight (delivered on release).
    Hold {
        /// Senders.
        a: Vec<NodeRef>,
        /// Receivers.
        b: Vec<NodeRef>,
    },
    /// Release held messages a → b.
    Release {
        /// Senders.
        a: Vec<NodeRef>,
        /// Receivers.
        b: Vec<NodeRef>,
    },
    /// Heal everything: repair all links, release holds, resume paused nodes, reset rates.
    Heal,
    /// Set the message loss rate.
    SetLoss(f64),
    /// Set the message duplication rate.
    SetDuplicate(f64),
    /// Set the one-way latency range (larger ranges reorder more).
    SetLatency(Range<Duration>),
    /// Flap the links of a node: `count` cycles of `down` cut, `up` restored.
    Flap {
        /// The node.
        node: NodeRef,
        /// Cut time per cycle.
        down: Duration,
        /// Restored time per cycle.
        up: Duration,
        /// Cycles.
        count: u32,
    },
    /// Set a node's clock offset (signed milliseconds) and drift (ppm).
    SkewClock {
        /// The node.
        node: NodeRef,
        /// Offset from true time, ms.
        offset_ms: i64,
        /// Drift, parts per million.
        drift_ppm: i64,
    },
    /// Step a node's clock by signed milliseconds (forward or backward jump).
    StepClock {
        /// The node.
        node: NodeRef,
        /// Jump, ms.
        by_ms: i64,
    },
    /// Silently corrupt one committed chunk on a storage node's first target.
    CorruptChunk(NodeRef),
    /// Every disk operation on a storage node's targets fails with EIO until healed.
    FailDisk(NodeRef),
    /// Undo `fail_disk`, `slow_disk` and `fill_disk`.
    HealDisk(NodeRef),
    /// Disk latency on a node becomes this range.
    SlowDisk {
        /// The node.
        node: NodeRef,
        /// Latency.
        latency: Range<Duration>,
    },
    /// A storage node's disks report ENOSPC on updates.
    FillDisk(NodeRef),
    /// Heartbeats from a node are lost for a while (the node stays alive).
    DropHeartbeats {
        /// The node.
        node: NodeRef,
        /// How long.
        duration: Duration,
    },
    /// The KV becomes unavailable.
    KvUnavailable,
    /// The KV becomes available.
    KvAvailable,
    /// Change KV fault rates.
    KvFaults {
        /// Spurious conflicts.
        conflict: f64,
        /// CommitUnknown on applied commits.
        commit_unknown: f64,
    },
}

impl Action {
    /// The verb as written in files.
    pub fn verb(&self) -> &'static str {
        match self {
            Self::Crash(_) => "crash",
            Self::CrashAfterForward(_) => "crash_after_forward",
            Self::PauseOnCommit(_) => "pause_on_commit",
            Self::Restart(_) => "restart",
            Self::RestartEmpty(_) => "restart_empty",
            Self::Pause(_) => "pause",
            Self::Resume(_) => "resume",
            Self::Partition { .. } => "partition",
            Self::Link { .. } => "link",
            Self::Isolate(_) => "isolate",
            Self::Repair { .. } => "repair",
            Self::Hold { .. } => "hold",
            Self::Release { .. } => "release",
            Self::Heal => "heal",
            Self::SetLoss(_) => "set_loss",
            Self::SetDuplicate(_) => "set_duplicate",
            Self::SetLatency(_) => "set_latency",
            Self::Flap { .. } => "flap",
            Self::SkewClock { .. } => "skew_clock",
            Self::StepClock { .. } => "step_clock",
            Self::CorruptChunk(_) => "corrupt_chunk",
            Self::FailDisk(_) => "fail_disk",
            Self::HealDisk(_) => "heal_disk",
            Self::SlowDisk { .. } => "slow_disk",
            Self::FillDisk(_) => "fill_disk",
            Self::DropHeartbeats { .. } => "drop_heartbeats",
            Self::KvUnavailable => "kv_unavailable",
            Self::KvAvailable => "kv_available",
            Self::KvFaults { .. } => "kv_faults",
        }
    }
}

/// Expectations checked at the end of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Expect {
    /// Client histories must be linearizable (false only for scenarios that expect loss).
    pub linearizable: bool,
    /// Acknowledged writes may be lost (every replica of a chunk was destroyed on purpose).
    pub loss_allowed: bool,
    /// The cluster must converge in the liveness phase.
    pub converges: bool,
    /// A verdict that could not be decided (UNKNOWN) does not fail the run.
    pub undecided_ok: bool,
}

impl Default for Expect {
    fn default() -> Self {
        Self {
            linearizable: true,
            loss_allowed: false,
            converges: true,
            undecided_ok: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ChainPos;

    #[test]
    fn chain_positions_pick_among_serving_targets() {
        let three = [1, 2, 3];
        assert_eq!(ChainPos::Head.pick(&three), Some(&1));
        assert_eq!(ChainPos::Middle.pick(&three), Some(&2));
        assert_eq!(ChainPos::Tail.pick(&three), Some(&3));
        assert_eq!(
            ChainPos::Middle.pick(&[1, 3]),
            None,
            "two targets have no middle"
        );
        assert_eq!(ChainPos::Tail.pick::<u32>(&[]), None);
    }
}
