//! The simulated world: every node of a t3fs cluster (several mgmtd, storage nodes with several
//! targets each, clients with workloads) driven by one seeded event queue, with the network,
//! disk, KV and clock fault models in between.
//!
//! One `u64` seed decides everything: the generator is consulted in event order only, events
//! at equal times run in scheduling order, and no map with random iteration order is used. Every
//! message crosses the real wire codec (a frame that fails to decode is dropped and counted).
//! The cost is per event, not per node per tick, so hundreds of nodes are cheap when idle.
//! Invariants checked on every step: each machine's own `check_invariants`, and for every chain
//! a primary publishes, §2.6.1's chain invariants and "a changed chain has a higher chain
//! version" (checker state in `Audit`). Not here: the scenario runner and verdicts (run.rs),
//! the checkers of whole histories (check/).

mod atlas;
mod audit;
pub mod buggify;
mod build;
pub mod client;
pub mod clock;
mod contents;
mod counters;
pub mod disk;
mod drive;
pub mod frame;
pub mod kv;
mod lifecycle;
mod log;
pub mod net;
pub mod node;
pub mod ns_client;
pub use t3fs_scenario::ns_files;
pub mod queue;
mod rearm;
pub mod resources;
mod sim_api;
mod steps;
pub mod store_ops;
pub mod throughput;
pub use steps::REFUSED;

use std::collections::BTreeMap;

use core::time::Duration;

use t3fs_core::ids::{ChainId, IoId, NodeId, TargetId};
use t3fs_core::mgmtd::chain_update::Row;
use t3fs_core::routing::{ChainInfo, RoutingInfo};
use t3fs_core::time::Instant;
use t3fs_scenario::{Faults, Rng, Scenario};

use crate::history::file_io::FileIo;
use crate::history::ns::NsHistory;
use crate::history::History;
pub use frame::Frame;
use node::{AnyTimer, Layout, Life, Node, Process, Role};

/// A scheduled event.
pub enum Ev {
    /// A frame arrives.
    Deliver {
        /// Sender.
        from: NodeId,
        /// Receiver.
        to: NodeId,
        /// Encoded message.
        frame: Frame,
    },
    /// A timer fires (if still armed with this generation).
    Timer {
        /// Node index.
        node: usize,
        /// Timer.
        timer: AnyTimer,
        /// Generation.
        gen: u64,
    },
    /// An I/O completes (if the node's incarnation still matches).
    Io {
        /// Node index.
        node: usize,
        /// Incarnation that submitted it.
        inc: u64,
        /// The I/O.
        id: IoId,
    },
    /// Scenario step `i` runs.
    Step(usize),
    /// Retry replacing the damaged disks a restart had to keep.
    ReplaceDisk {
        /// Node index.
        node: usize,
    },
    /// A client starts its next namespace operation.
    NsNext {
        /// Node index.
        node: usize,
        /// Incarnation.
        inc: u64,
    },
    /// A client starts its next operation.
    ClientNext {
        /// Node index.
        node: usize,
        /// Incarnation.
        inc: u64,
    },
    /// Restart a node (after a scheduled outage or a disk replacement).
    Restart {
        /// Node index.
        node: usize,
        /// Replace damaged disks.
        replace_damaged: bool,
    },
    /// A flapping link changes state.
    Flap {
        /// Node index.
        node: usize,
        /// Cut (true) or restore.
        down: bool,
        /// Cycles left after this one.
        left: u32,
        /// Cut time.
        down_for: Duration,
        /// Restored time.
        up_for: Duration,
    },
    /// End of the safety phase.
    SafetyEnd,
    /// Liveness phase: check convergence.
    Probe,
}

/// A notable event for `events.jsonl` and the report.
#[derive(Clone, Debug)]
pub struct Note {
    /// Simulated ns.
    pub at: u64,
    /// Category: `fault`, `chain`, `phase`, `mgmtd`, `verdict`.
    pub kind: &'static str,
    /// Node name, if any.
    pub node: String,
    /// What happened.
    pub what: String,
}

/// What the world audits while it runs.
#[derive(Default)]
struct Audit {
    /// Latest chain published per chain id (by chain version).
    chains: BTreeMap<ChainId, ChainInfo>,
    /// First invariant violation seen.
    violation: Option<String>,
    /// Chain publications counted.
    routing_changes: u64,
    /// Every published chain with its simulated time, for the chain-state timeline.
    timeline: Vec<(u64, ChainInfo)>,
    /// Targets that may have missed writes: their node crashed, and no chain published since
    /// has promoted them back to SERVING (only a resync or a LASTSRV return does). The fault
    /// atlas does not count them as intact copies, even while routing still lists them SERVING.
    stale: std::collections::BTreeSet<TargetId>,
}

/// Reachability counters: fault classes injected and §2.6.1 rows exercised.
#[derive(Clone, Debug, Default)]
pub struct Reach {
    /// Fault classes by name.
    pub faults: BTreeMap<&'static str, u64>,
    /// Rows of the transition table, summed over mgmtd instances and incarnations.
    pub rows: BTreeMap<Row, u64>,
}

/// The world.
pub struct World {
    /// The scenario.
    pub scenario: Scenario,
    /// Static layout.
    pub layout: Layout,
    /// Nodes, indexed by `NodeId.0`.
    pub nodes: Vec<Node>,
    /// Shared simulation state.
    pub sim: Sim,
}

/// The parts of the world a machine step touches besides its own node. Its fields are the
/// world's alone; code outside reads and steers it through the methods of `sim_api.rs`.
pub struct Sim {
    /// The event queue (and the clock).
    queue: queue::Queue<Ev>,
    /// The seeded generator.
    rng: Rng,
    /// Resources with service times (`[hardware]` scenarios only).
    resources: Option<resources::Resources>,
    /// Network model.
    net: net::Net,
    /// The KV.
    kv: kv::SimKv,
    /// Current background fault rates.
    faults: Faults,
    /// Running hash of every event (the trace hash).
    trace: u64,
    /// Events processed.
    events: u64,
    /// Client history.
    history: History,
    /// Namespace history.
    ns_history: NsHistory,
    /// Writes and reads of namespace writers' files.
    file_io: FileIo,
    /// Notable events.
    notes: Vec<Note>,
    /// Invariant audit.
    audit: Audit,
    /// Reachability.
    reach: Reach,
    /// Print one line per event.
    log: bool,
    /// The safety phase is over: clients issue no new operations.
    workload_stopped: bool,
    /// The fault atlas is off (the scenario expects loss).
    atlas_off: bool,
    /// Halts by reason (assertion-like conditions a machine reported).
    halts: Vec<String>,
    /// Counters of processes that crashed (a report adds the live ones).
    retired: BTreeMap<&'static str, u64>,
    /// Counter totals at every whole simulated second (`SAMPLE_NS`): the report's counters
    /// over time. Taken between events, so they never disturb the run.
    samples: Vec<(u64, BTreeMap<String, u64>)>,
    /// BUGGIFY sites enabled for this run.
    buggify: buggify::Buggify,
    /// Which storage steps walk the whole node in `check_invariants` (see [`STORAGE_CHECK_ONE_IN`]):
    /// a stream of its own, so sampling changes no other draw of the run.
    check_rng: Rng,
}

/// A storage node's `check_invariants` walks every chunk of every target, and running it after
/// every step was a twentieth of the simulator's time; one storage step in this many, drawn
/// from the seed, runs it (a broken state persists until a later step changes the chunk, so a
/// sampled walk still finds it, a few steps later). Every other machine is checked every step.
pub const STORAGE_CHECK_ONE_IN: u64 = 4;

const FNV_PRIME: u64 = 0x0000_0100_0000_01B3;

/// One step of the trace hash: an 8-byte word `w` into `h`.
fn mix_word(h: u64, w: &[u8]) -> u64 {
    let x = u64::from_le_bytes(w.try_into().expect("an 8-byte word"));
    (h ^ x).wrapping_mul(FNV_PRIME).rotate_left(29)
}

/// Interval of the counter samples, simulated nanoseconds.
pub const SAMPLE_NS: u64 = 1_000_000_000;

impl Sim {
    /// Mixes bytes into the trace hash: FNV-1a's xor-multiply over 8-byte words (and the tail
    /// bytes, and the length), since every frame's payload is hashed and byte-wise FNV cost a
    /// quarter of the simulator's time. Inputs of 64 bytes or more run four independent lanes
    /// over 32-byte blocks, folded into the trace at the end: one chain of dependent multiplies
    /// was a seventh of the time again. Only equality of traces matters, not the function.
    fn hash(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        if bytes.len() >= 64 {
            let t = self.trace;
            let mut lanes = [t, t.rotate_left(16), t.rotate_left(32), t.rotate_left(48)];
            let mut blocks = bytes.chunks_exact(32);
            for b in &mut blocks {
                for (lane, w) in lanes.iter_mut().zip(b.chunks_exact(8)) {
                    *lane = mix_word(*lane, w);
                }
            }
            self.trace = lanes[0];
            for l in &lanes[1..] {
                self.trace = mix_word(self.trace, &l.to_le_bytes());
            }
            rest = blocks.remainder();
        }
        let mut words = rest.chunks_exact(8);
        for w in &mut words {
            self.trace = mix_word(self.trace, w);
        }
        for b in words.remainder() {
            self.trace = (self.trace ^ u64::from(*b)).wrapping_mul(FNV_PRIME);
        }
        self.trace = (self.trace ^ bytes.len() as u64).wrapping_mul(FNV_PRIME);
    }

    /// Mixes a delivered frame into the trace hash: its head's bytes, then its payload's
    /// CRC32C in place of the payload's bytes. The receiver verifies that CRC anyway (a replica
    /// before applying, a client before returning) and a payload computes it once, so the
    /// payload's bytes are not read again for the trace.
    fn hash_frame(&mut self, frame: &Frame) {
        self.hash(&frame.head);
        if let Some(p) = &frame.bulk {
            self.hash(&p.checksum().to_le_bytes());
        }
    }

    /// Sends a frame through the network model (also used to re-inject released holds).
    fn transmit(&mut self, from: NodeId, to: NodeId, frame: Frame) {
        match self.net.route(&mut self.rng, from, to, frame.len()) {
            net::Fate::Dropped => {}
            net::Fate::Held => self.net.parked.push((from, to, frame)),
            net::Fate::Deliver(first, replay) => {
                let now = self.now();
                let extra = if self.buggify.fire("buggify: net delay", &mut self.rng) {
                    self.reached("buggify: net delay");
                    self.rng.duration(self.net.spike_latency.clone())
                } else {
                    core::time::Duration::ZERO
                };
                let bytes = frame.len();
                let rng = &mut self.rng;
                let mut arrive = |d: core::time::Duration| match &mut self.resources {
                    Some(r) => r.message(now, (from, to), bytes, d + extra, rng),
                    None => Instant(now.0 + (d + extra).as_nanos() as u64),
                };
                let first = arrive(first);
                // A duplicate gets a copy (the original is scheduled first, as before).
                let replay = replay.map(|d| (arrive(d), frame.clone()));
                self.queue.push(first, Ev::Deliver { from, to, frame });
                if let Some((at, frame)) = replay {
                    self.queue.push(at, Ev::Deliver { from, to, frame });
                }
            }
        }
    }

    /// Schedules `ev` after `d` of simulated time.
    fn schedule_in(&mut self, d: core::time::Duration, ev: Ev) {
        let at = Instant(self.now().0 + d.as_nanos() as u64);
        self.queue.push(at, ev);
    }

    /// Counts a fault class.
    fn reached(&mut self, class: &'static str) {
        *self.reach.faults.entry(class).or_default() += 1;
    }
}

impl World {
    /// Starts (or restarts) node `i` with a fresh process.
    pub fn start_node(&mut self, i: usize, in_service: bool) {
        // Booting lists every chunk's metadata through the store contract, as real stores do.
        let metas = self.nodes[i]
            .ctx
            .disks
            .iter_mut()
            .map(|(t, d)| (*t, d.list()))
            .collect();
        let proc = self.layout.process(&self.nodes[i].ctx, metas, in_service);
        let n = &mut self.nodes[i];
        n.ctx.life = Life::Up;
        n.proc = proc;
        if n.ctx.role == Role::Client && n.ctx.driver.is_none() {
            let w = &self.scenario.workload;
            let rng = self.sim.rng.fork(i as u64);
            n.ctx.driver = Some(client::Driver {
                gen: t3fs_scenario::workload::Generator::new(w, n.ctx.index, rng),
                running: None,
                next_req: 0,
                size: w.write_size,
                chains: self.layout.chains(),
            });
        }
        if n.ctx.role == Role::Client && n.ctx.ns.is_none() {
            if let Some(w) = &self.scenario.namespace {
                let rng = self.sim.rng.fork(0x6e73 << 16 | i as u64);
                n.ctx.ns = Some(ns_client::NsDriver::new(w, rng));
            }
        }
        self.drive(i, t3fs_core::node::Input::Start);
        if self.nodes[i].ctx.role == Role::Client {
            let inc = self.nodes[i].ctx.incarnation;
            let now = self.sim.now();
            self.sim.queue.push(now, Ev::ClientNext { node: i, inc });
            if self.nodes[i].ctx.ns.is_some() {
                self.sim.queue.push(now, Ev::NsNext { node: i, inc });
            }
        }
    }

    /// The routing of the current primary mgmtd, if there is one.
    pub fn primary(&self) -> Option<(usize, &RoutingInfo)> {
        self.nodes
            .iter()
            .enumerate()
            .find_map(|(i, n)| match &n.proc {
                Process::Mgmtd(m)
                    if n.ctx.life == Life::Up
                        && m.is_primary(n.ctx.clock.local(self.sim.now())) =>
                {
                    m.routing().map(|r| (i, r))
                }
                _ => None,
            })
    }

    /// Runs events until the queue is empty or `until` passes; returns false if `stop` asked.
    pub fn run_until(&mut self, until: Instant, mut stop: impl FnMut(&mut Self) -> bool) -> bool {
        let mut same_instant = 0u64;
        let mut last = self.sim.now();
        while let Some(at) = self.sim.queue.peek_time() {
            if at > until {
                return true;
            }
            // Simulated time must move: millions of events at one instant are a livelock (a
            // machine re-arming a zero-delay timer), reported as an assertion failure.
            if at == last {
                same_instant += 1;
                assert!(
                    same_instant < 2_000_000,
                    "livelock: 2,000,000 events at {:.6}s without time advancing",
                    at.0 as f64 / 1e9
                );
            } else {
                same_instant = 0;
                last = at;
            }
            // Totals as of each whole second, before the first event at or after it.
            while self.sim.samples.len() as u64 * SAMPLE_NS <= at.0 {
                let t = self.sim.samples.len() as u64 * SAMPLE_NS;
                let totals = self.counter_totals();
                self.sim.samples.push((t, totals));
            }
            let (_, ev) = self.sim.queue.pop().expect("peeked");
            self.sim.events += 1;
            self.dispatch(ev);
            if stop(self) {
                return false;
            }
        }
        true
    }

    fn dispatch(&mut self, ev: Ev) {
        let now = self.sim.now();
        // An event a resource postponed since it was scheduled comes back later, unseen.
        let Some(ev) = self.rearmed(ev, now) else {
            return;
        };
        self.sim.hash(&now.0.to_le_bytes());
        if self.sim.log {
            self.log_line(&ev);
        }
        match ev {
            Ev::Deliver { from, to, frame } => self.deliver(from, to, frame),
            Ev::Timer { node, timer, gen } => {
                if self.defer_if_paused(node, Ev::Timer { node, timer, gen }) {
                    return;
                }
                if !self.nodes[node].tables.timers.fire(timer, gen) {
                    return; // Cancelled, replaced, or from a crashed incarnation.
                }
                self.sim.hash(&[1, node as u8]);
                self.drive(node, t3fs_core::node::Input::Timer(timer));
            }
            Ev::Io { node, inc, id } => self.io_event(node, inc, id),
            Ev::Step(i) => {
                let step = self.scenario.steps[i].clone();
                self.sim.hash(&[3, i as u8]);
                self.run_step(&step);
            }
            Ev::ClientNext { node, inc } => {
                if self.nodes[node].ctx.incarnation != inc
                    || self.nodes[node].ctx.life == Life::Down
                {
                    return;
                }
                if self.defer_if_paused(node, Ev::ClientNext { node, inc }) {
                    return;
                }
                self.client_next(node);
            }
            Ev::NsNext { node, inc } => {
                if self.nodes[node].ctx.incarnation != inc
                    || self.nodes[node].ctx.life == Life::Down
                {
                    return;
                }
                if self.defer_if_paused(node, Ev::NsNext { node, inc }) {
                    return;
                }
                self.ns_next(node);
            }
            Ev::Restart {
                node,
                replace_damaged,
            } => self.restart(node, replace_damaged, false),
            Ev::ReplaceDisk { node } => self.retry_replacement(node),
            Ev::Flap {
                node,
                down,
                left,
                down_for,
                up_for,
            } => self.flap(node, down, left, down_for, up_for),
            Ev::SafetyEnd | Ev::Probe => {} // Handled by the runner (run.rs) through `stop`.
        }
    }

    fn defer_if_paused(&mut self, node: usize, ev: Ev) -> bool {
        if self.nodes[node].ctx.life == Life::Paused {
            self.nodes[node].ctx.deferred.push(ev);
            return true;
        }
        false
    }

    fn deliver(&mut self, from: NodeId, to: NodeId, frame: Frame) {
        let i = to.0 as usize;
        self.sim.net.dequeued(to);
        match self.nodes[i].ctx.life {
            Life::Down => {
                self.sim.net.counters.to_dead += 1;
                return;
            }
            Life::Paused => {
                self.nodes[i]
                    .ctx
                    .deferred
                    .push(Ev::Deliver { from, to, frame });
                return;
            }
            Life::Up => {}
        }
        self.sim.hash(&[4, from.0 as u8, to.0 as u8]);
        self.sim.hash_frame(&frame);
        match frame.decode() {
            Ok(msg) => {
                self.sim.net.counters.delivered += 1;
                self.drive(i, t3fs_core::node::Input::Recv(from, msg));
            }
            Err(_) => self.sim.net.counters.malformed += 1,
        }
    }
}

impl World {
    /// An I/O completion event (a shared SSD done with it, `rearm.rs`): dropped for a node
    /// restarted since, deferred while the node is paused, else completed.
    fn io_event(&mut self, node: usize, inc: u64, id: t3fs_core::ids::IoId) {
        if self.nodes[node].ctx.incarnation != inc {
            if let Some(r) = &mut self.sim.resources {
                r.ssd_forget((node, inc, id.0));
                r.store_ops.forget((node, inc, id.0));
            }
            return;
        }
        if self.defer_if_paused(node, Ev::Io { node, inc, id }) {
            return;
        }
        let now = self.sim.now().0;
        if let Some(r) = &mut self.sim.resources {
            r.store_ops.completed((node, inc, id.0), now);
        }
        self.sim.hash(&[2, node as u8]);
        self.sim.hash(&id.0.to_le_bytes());
        self.complete_io(node, id);
    }
}
