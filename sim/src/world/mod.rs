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

pub mod buggify;
pub mod client;
pub mod clock;
pub mod disk;
mod drive;
pub mod kv;
pub mod net;
pub mod node;
pub mod queue;
mod steps;

use std::collections::BTreeMap;

use core::time::Duration;

use t3fs_core::ids::{ChainId, IoId, NodeId, TargetId};
use t3fs_core::mgmtd::chain_update::{check_chain, Row};
use t3fs_core::routing::{ChainInfo, PublicState, RoutingInfo};
use t3fs_core::time::Instant;
use t3fs_scenario::{Faults, Rng, Scenario};

use crate::check::history::History;
use node::{AnyTimer, Ctx, Layout, Life, Node, Proc, Role};

/// A scheduled event.
pub enum Ev {
    /// A frame arrives.
    Deliver {
        /// Sender.
        from: NodeId,
        /// Receiver.
        to: NodeId,
        /// Encoded message.
        frame: Vec<u8>,
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
pub struct Audit {
    /// Latest chain published per chain id (by chain version).
    pub chains: BTreeMap<ChainId, ChainInfo>,
    /// First invariant violation seen.
    pub violation: Option<String>,
    /// Chain publications counted.
    pub routing_changes: u64,
    /// Every published chain with its simulated time, for the chain-state timeline.
    pub timeline: Vec<(u64, ChainInfo)>,
    /// Targets that may have missed writes: their node crashed, and no chain published since
    /// has promoted them back to SERVING (only a resync or a LASTSRV return does). The fault
    /// atlas does not count them as intact copies, even while routing still lists them SERVING.
    pub stale: std::collections::BTreeSet<TargetId>,
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

/// The parts of the world a machine step touches besides its own node.
pub struct Sim {
    /// The event queue (and the clock).
    pub queue: queue::Queue<Ev>,
    /// The seeded generator.
    pub rng: Rng,
    /// Network model.
    pub net: net::Net,
    /// The KV.
    pub kv: kv::SimKv,
    /// Current background fault rates.
    pub faults: Faults,
    /// Timer generations.
    pub gen: u64,
    /// Running hash of every event (the trace hash).
    pub trace: u64,
    /// Events processed.
    pub events: u64,
    /// Client history.
    pub history: History,
    /// Notable events.
    pub notes: Vec<Note>,
    /// Invariant audit.
    pub audit: Audit,
    /// Reachability.
    pub reach: Reach,
    /// Print one line per event.
    pub log: bool,
    /// The safety phase is over: clients issue no new operations.
    pub workload_stopped: bool,
    /// The fault atlas is off (the scenario expects loss).
    pub atlas_off: bool,
    /// Halts by reason (assertion-like conditions a machine reported).
    pub halts: Vec<String>,
    /// Counters of processes that crashed (a report adds the live ones).
    pub retired: BTreeMap<&'static str, u64>,
    /// BUGGIFY sites enabled for this run.
    pub buggify: buggify::Buggify,
}

const FNV_PRIME: u64 = 0x0000_0100_0000_01B3;

impl Sim {
    /// Mixes bytes into the trace hash (FNV-1a).
    pub fn hash(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.trace ^= u64::from(*b);
            self.trace = self.trace.wrapping_mul(FNV_PRIME);
        }
    }

    /// Simulated time now.
    pub fn now(&self) -> Instant {
        self.queue.now()
    }

    /// Records a notable event.
    pub fn note(&mut self, kind: &'static str, node: &str, what: String) {
        let at = self.now().0;
        self.notes.push(Note {
            at,
            kind,
            node: node.to_string(),
            what,
        });
    }

    /// Sends a frame through the network model (also used to re-inject released holds).
    pub fn transmit(&mut self, from: NodeId, to: NodeId, frame: Vec<u8>) {
        match self.net.route(&mut self.rng, from, to, frame.len()) {
            net::Fate::Dropped => {}
            net::Fate::Held => self.net.parked.push((from, to, frame)),
            net::Fate::Deliver(delays) => {
                let now = self.now();
                let extra = if self.buggify.fire("buggify: net delay", &mut self.rng) {
                    self.reached("buggify: net delay");
                    self.rng.duration(self.net.spike_latency.clone())
                } else {
                    core::time::Duration::ZERO
                };
                for d in delays {
                    let d = d + extra;
                    let at = Instant(now.0 + d.as_nanos() as u64);
                    self.queue.push(
                        at,
                        Ev::Deliver {
                            from,
                            to,
                            frame: frame.clone(),
                        },
                    );
                }
            }
        }
    }

    /// Counts a fault class.
    pub fn reached(&mut self, class: &'static str) {
        *self.reach.faults.entry(class).or_default() += 1;
    }
}

impl World {
    /// Builds the cluster of `scenario` for `seed` and schedules its steps and phases.
    pub fn new(scenario: Scenario, seed: u64, log: bool) -> Result<Self, String> {
        let (bug, mgmtd_bug) = crate::bugs::parse(scenario.bug.as_deref())?;
        let layout = Layout::new(&scenario.cluster, bug, mgmtd_bug);
        let mut rng = Rng::new(seed);
        let faults = scenario.faults.clone();
        let buggify = buggify::Buggify::new(faults.buggify, &mut rng);
        let mut nodes = Vec::new();
        let mut add = |role: Role, index: u32, name: String, rng: &mut Rng| {
            let id = NodeId(nodes.len() as u32);
            let max = faults.clock_offset.as_nanos() as i64;
            let clock = clock::Clock {
                offset_ns: if max > 0 {
                    rng.range(0..2 * max as u64) as i64 - max
                } else {
                    0
                },
                drift_ppm: if faults.clock_drift_ppm > 0 {
                    let d = i64::from(faults.clock_drift_ppm);
                    rng.range(0..2 * d as u64 + 1) as i64 - d
                } else {
                    0
                },
            };
            nodes.push(Node {
                ctx: Ctx {
                    id,
                    name,
                    role,
                    index,
                    life: Life::Down,
                    incarnation: 0,
                    clock,
                    base_clock: clock,
                    timers: BTreeMap::new(),
                    inflight: BTreeMap::new(),
                    disks: BTreeMap::new(),
                    crash_after_forward: false,
                    pause_on_commit: false,
                    drop_heartbeats_until: Instant::ZERO,
                    deferred: Vec::new(),
                    driver: None,
                },
                proc: Proc::None,
            });
        };
        for i in 0..layout.mgmtd.len() as u32 {
            add(Role::Mgmtd, i, format!("mgmtd-{i}"), &mut rng);
        }
        for i in 0..layout.storage.len() as u32 {
            add(Role::Storage, i, format!("storage-{i}"), &mut rng);
        }
        for i in 0..layout.clients.len() as u32 {
            add(Role::Client, i, format!("client-{i}"), &mut rng);
        }
        for n in &mut nodes {
            if n.ctx.role == Role::Storage {
                for t in &layout.targets_of[&n.ctx.id] {
                    n.ctx.disks.insert(*t, disk::Disk::default());
                }
            }
        }
        let sim = Sim {
            queue: queue::Queue::default(),
            net: net::Net::new(&faults),
            kv: kv::SimKv::new(&layout.initial, &faults),
            rng,
            faults,
            gen: 0,
            trace: 0xCBF2_9CE4_8422_2325,
            events: 0,
            history: History::default(),
            notes: Vec::new(),
            audit: Audit::default(),
            reach: Reach::default(),
            log,
            workload_stopped: false,
            atlas_off: scenario.expect.loss_allowed,
            halts: Vec::new(),
            retired: BTreeMap::new(),
            buggify,
        };
        let mut w = Self {
            scenario,
            layout,
            nodes,
            sim,
        };
        for c in w.layout.initial.chains.values() {
            w.sim.audit.chains.insert(c.chain, c.clone());
            w.sim.audit.timeline.push((0, c.clone()));
        }
        for i in 0..w.nodes.len() {
            w.start_node(i, true);
        }
        for (i, s) in w.scenario.steps.iter().enumerate() {
            w.sim
                .queue
                .push(Instant(s.at.as_nanos() as u64), Ev::Step(i));
        }
        w.sim.queue.push(
            Instant(w.scenario.duration.as_nanos() as u64),
            Ev::SafetyEnd,
        );
        Ok(w)
    }

    /// Starts (or restarts) node `i` with a fresh process.
    pub fn start_node(&mut self, i: usize, in_service: bool) {
        let proc = self.layout.process(&self.nodes[i].ctx, in_service);
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
        self.drive(i, drive::Input::Start);
        if self.nodes[i].ctx.role == Role::Client {
            let inc = self.nodes[i].ctx.incarnation;
            let now = self.sim.now();
            self.sim.queue.push(now, Ev::ClientNext { node: i, inc });
        }
    }

    /// Fail-stops node `i`: the process, its timers and unsynced I/O are gone; disks stay.
    pub fn crash(&mut self, i: usize, why: &str) {
        if self.nodes[i].ctx.life == Life::Down {
            return;
        }
        let may_damage = self.may_damage_node(i);
        let n = &mut self.nodes[i];
        let inflight = std::mem::take(&mut n.ctx.inflight);
        let mut per_target: BTreeMap<TargetId, Vec<t3fs_core::chunk::ChunkOp>> = BTreeMap::new();
        for (_, p) in inflight {
            if let node::Pending::Chunk(t, op) = p {
                per_target.entry(t).or_default().push(op);
            }
        }
        for (t, ops) in per_target {
            if let Some(d) = n.ctx.disks.get_mut(&t) {
                d.crash(&ops, &mut self.sim.rng, &self.sim.faults, may_damage);
            }
        }
        if n.ctx.role == Role::Storage {
            self.sim.audit.stale.extend(n.ctx.disks.keys().copied());
        }
        n.ctx.life = Life::Down;
        n.ctx.incarnation += 1;
        n.ctx.timers.clear();
        n.ctx.deferred.clear();
        n.ctx.crash_after_forward = false;
        let (counters, rows) = node::counters_of(&n.proc);
        for (k, v) in counters {
            *self.sim.retired.entry(k).or_default() += v;
        }
        for (r, v) in rows {
            *self.sim.reach.rows.entry(r).or_default() += v;
        }
        n.proc = Proc::None;
        if let Some(d) = &mut n.ctx.driver {
            // The running call's outcome is unknown: it stays open in the history.
            if let Some((_, _, index)) = d.running.take() {
                self.sim.history.fail(index);
            }
        }
        let name = n.ctx.name.clone();
        self.sim.note("fault", &name, format!("crash ({why})"));
        self.sim.reached("node crash");
    }

    /// Restarts node `i` from its disks. A damaged disk (EIO, corruption) is replaced with an
    /// empty one when `replace_damaged` and the fault atlas allows it (another intact SERVING
    /// copy exists); otherwise the damage is treated as transient and cleared in place, since
    /// replacing the last good copy would turn a recoverable fault into data loss (an empty
    /// LASTSRV target returns as SERVING, §2.6.1). `replace_all` replaces every disk
    /// unconditionally (a scenario's `restart_empty` already consulted the atlas).
    pub fn restart(&mut self, i: usize, replace_damaged: bool, replace_all: bool) {
        if self.nodes[i].ctx.life != Life::Down {
            return;
        }
        let targets: Vec<TargetId> = self.nodes[i].ctx.disks.keys().copied().collect();
        let replaceable: Vec<bool> = targets
            .iter()
            .map(|t| self.sim.atlas_off || self.other_intact_replica(*t))
            .collect();
        let n = &mut self.nodes[i];
        let mut replaced = Vec::new();
        let mut kept = Vec::new();
        for ((t, d), ok) in n.ctx.disks.iter_mut().zip(replaceable) {
            if replace_all || (replace_damaged && d.damaged && ok) {
                let counters = d.counters.clone();
                *d = disk::Disk::default();
                d.counters = counters; // The slot's history stays in the report.
                replaced.push(t.to_string());
            } else {
                if d.damaged || !d.corrupt.is_empty() {
                    kept.push(t.to_string());
                    d.damaged = false;
                    d.corrupt.clear();
                }
                // The medium's transient modes end with the process (a healed disk).
                d.eio = false;
                d.full = false;
                d.slow = None;
            }
        }
        let name = n.ctx.name.clone();
        let mut what = if replaced.is_empty() {
            "restart".to_string()
        } else {
            format!("restart with replaced disks {}", replaced.join(","))
        };
        if !kept.is_empty() {
            what.push_str(&format!(
                "; atlas: damage on {} cleared in place (no other intact copy)",
                kept.join(",")
            ));
        }
        self.sim.note("fault", &name, what);
        self.sim.reached(if replaced.is_empty() {
            "node restart"
        } else {
            "disk replaced"
        });
        self.start_node(i, false);
    }

    /// The fault atlas: may a destructive fault hit a target of storage node `i`? Only if, for
    /// each of its chains, some other target is SERVING in the latest published chain, on a live
    /// node, with an undamaged disk — so every chunk keeps an intact serving copy.
    pub fn may_damage_node(&self, i: usize) -> bool {
        if self.sim.atlas_off {
            return true;
        }
        let n = &self.nodes[i];
        if n.ctx.role != Role::Storage {
            return true;
        }
        n.ctx.disks.keys().all(|t| self.other_intact_replica(*t))
    }

    fn other_intact_replica(&self, target: TargetId) -> bool {
        let Some(chain) = self
            .sim
            .audit
            .chains
            .values()
            .find(|c| c.state_of(target).is_some())
        else {
            return false;
        };
        chain.targets.iter().any(|ct| {
            ct.target != target
                && ct.state == PublicState::Serving
                && !self.sim.audit.stale.contains(&ct.target)
                && self.layout.initial.node_of(ct.target).is_some_and(|node| {
                    let c = &self.nodes[node.0 as usize].ctx;
                    c.life == Life::Up
                        && c.disks
                            .get(&ct.target)
                            .is_some_and(|d| !d.damaged && !d.eio && d.corrupt.is_empty())
                })
        })
    }

    /// The routing of the current primary mgmtd, if there is one.
    pub fn primary(&self) -> Option<(usize, &RoutingInfo)> {
        self.nodes
            .iter()
            .enumerate()
            .find_map(|(i, n)| match &n.proc {
                Proc::Mgmtd(m)
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
                if self.nodes[node].ctx.timers.get(&timer) != Some(&gen) {
                    return; // Cancelled, replaced, or from a crashed incarnation.
                }
                self.nodes[node].ctx.timers.remove(&timer);
                self.sim.hash(&[1, node as u8]);
                self.drive(node, drive::Input::Timer(timer));
            }
            Ev::Io { node, inc, id } => {
                if self.nodes[node].ctx.incarnation != inc {
                    return;
                }
                if self.defer_if_paused(node, Ev::Io { node, inc, id }) {
                    return;
                }
                self.sim.hash(&[2, node as u8]);
                self.sim.hash(&id.0.to_le_bytes());
                self.complete_io(node, id);
            }
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
            Ev::Restart {
                node,
                replace_damaged,
            } => self.restart(node, replace_damaged, false),
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

    /// One status line per event: time, node, event, then the published chains.
    fn log_line(&self, ev: &Ev) {
        let name = |i: usize| self.nodes[i].ctx.name.as_str();
        let (node, what) = match ev {
            Ev::Deliver { from, to, frame } => {
                let msg = match t3fs_core::msg::Msg::decode(frame) {
                    Ok(m) => format!("{m:?}"),
                    Err(e) => format!("malformed frame ({e})"),
                };
                (
                    name(to.0 as usize),
                    format!("recv from {}: {}", name(from.0 as usize), msg),
                )
            }
            Ev::Timer { node, timer, .. } => (name(*node), format!("timer {timer:?}")),
            Ev::Io { node, id, .. } => {
                let what = match self.nodes[*node].ctx.inflight.get(id) {
                    Some(node::Pending::Chunk(t, op)) => format!("disk {t} done: {op:?}"),
                    Some(node::Pending::Kv(op)) => format!("kv done: {op:?}"),
                    None => format!("stale io {id}"),
                };
                (name(*node), what)
            }
            Ev::Step(i) => (
                "",
                format!("step {}", self.scenario.steps[*i].action.verb()),
            ),
            Ev::ClientNext { node, .. } => (name(*node), "next operation".to_string()),
            Ev::Restart { node, .. } => (name(*node), "restart".to_string()),
            Ev::Flap { node, down, .. } => (
                name(*node),
                format!("flap {}", if *down { "down" } else { "up" }),
            ),
            Ev::SafetyEnd => ("", "safety phase ends".to_string()),
            Ev::Probe => ("", "probe".to_string()),
        };
        let mut what = what;
        if what.len() > 900 {
            let mut cut = 900;
            while !what.is_char_boundary(cut) {
                cut -= 1;
            }
            what.truncate(cut);
            what.push('…');
        }
        let chains: Vec<String> = self
            .sim
            .audit
            .chains
            .values()
            .take(4)
            .map(|c| {
                format!(
                    "{}@{}{}",
                    c.chain,
                    c.version,
                    t3fs_core::mgmtd::chain_update::render(&c.targets)
                )
            })
            .collect();
        println!(
            "{:>12.6} {:<10} {what} | {}",
            self.sim.now().0 as f64 / 1e9,
            node,
            chains.join(" ")
        );
    }

    fn defer_if_paused(&mut self, node: usize, ev: Ev) -> bool {
        if self.nodes[node].ctx.life == Life::Paused {
            self.nodes[node].ctx.deferred.push(ev);
            return true;
        }
        false
    }

    fn deliver(&mut self, from: NodeId, to: NodeId, frame: Vec<u8>) {
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
        self.sim.hash(&frame);
        match t3fs_core::msg::Msg::decode(&frame) {
            Ok(msg) => {
                self.sim.net.counters.delivered += 1;
                self.drive(i, drive::Input::Recv(from, msg));
            }
            Err(_) => self.sim.net.counters.malformed += 1,
        }
    }

    /// Records a chain published by a primary and checks §2.6.1's invariants on it.
    pub fn audit_routing(&mut self, who: usize) {
        let Proc::Mgmtd(m) = &self.nodes[who].proc else {
            return;
        };
        let Some(routing) = m.routing() else { return };
        let mut changes = Vec::new();
        for (id, c) in &routing.chains {
            let old = self.sim.audit.chains.get(id);
            if old == Some(c) {
                continue;
            }
            if let Some(old) = old {
                if c.version < old.version {
                    // A deposed or lagging mgmtd may hold an older view; a primary must not
                    // publish one (chain versions only grow: a stale row written by a deposed
                    // primary and loaded by a later tenure would show up here).
                    let primary = m.is_primary(self.nodes[who].ctx.clock.local(self.sim.now()));
                    if primary {
                        let v = format!(
                            "chain {id} went back from {} to {} (published by primary {})",
                            old.version, c.version, self.nodes[who].ctx.name
                        );
                        self.sim.audit.violation.get_or_insert(v);
                    }
                    continue;
                }
                if c.version == old.version {
                    let v = format!(
                        "chain {id} published twice at {} with different members: {} vs {}",
                        c.version,
                        t3fs_core::mgmtd::chain_update::render(&old.targets),
                        t3fs_core::mgmtd::chain_update::render(&c.targets)
                    );
                    self.sim.audit.violation.get_or_insert(v);
                    continue;
                }
            }
            for t in &c.targets {
                let was = old.and_then(|o| o.state_of(t.target));
                if t.state == PublicState::Serving && was != Some(PublicState::Serving) {
                    self.sim.audit.stale.remove(&t.target);
                }
            }
            if let Err(e) = check_chain(&c.targets) {
                let v = format!("chain {id}@{}: {e}", c.version);
                self.sim.audit.violation.get_or_insert(v);
            }
            changes.push(c.clone());
        }
        let name = self.nodes[who].ctx.name.clone();
        for c in changes {
            self.sim.audit.routing_changes += 1;
            self.sim.note(
                "chain",
                &name,
                format!(
                    "{}@{} {}",
                    c.chain,
                    c.version,
                    t3fs_core::mgmtd::chain_update::render(&c.targets)
                ),
            );
            let now = self.sim.now().0;
            self.sim.audit.timeline.push((now, c.clone()));
            self.sim.audit.chains.insert(c.chain, c);
        }
    }
}
