//! Builds the world of a scenario and a seed: the tuned layout, every node with its drawn
//! clock skew and its disks, the shared simulation state, and the first events (each node's
//! start, every scripted step, the end of the safety phase).
//!
//! Invariant: the draws from the seeded generator happen in the same order for the same
//! scenario (BUGGIFY sites, then each node's clock in role order, then each node's start).
//! Not here: running events (mod.rs), node restarts (lifecycle.rs).

use std::collections::BTreeMap;

use t3fs_core::ids::NodeId;
use t3fs_core::time::Instant;
use t3fs_scenario::{Faults, Rng, Scenario};

use super::node::{Ctx, Layout, Life, Node, Process, Role};
use super::{buggify, clock, disk, kv, net, ns_client, queue, resources};
use super::{Audit, Ev, Reach, Sim, World};
use crate::history::History;

impl World {
    /// Builds the cluster of `scenario` for `seed` and schedules its steps and phases.
    pub fn new(scenario: Scenario, seed: u64, log: bool) -> Result<Self, String> {
        let layout = layout_of(&scenario)?;
        let mut rng = Rng::new(seed);
        let check_rng = Rng::new(seed ^ 0x5EED_C4EC_1A55_0001);
        let faults = scenario.faults.clone();
        let buggify = buggify::Buggify::new(faults.buggify, &mut rng);
        let nodes = new_nodes(&layout, &faults, &mut rng);
        let resources = scenario
            .hardware
            .clone()
            .map(|h| resources::Resources::new(h, nodes.len()));
        let sim = Sim {
            queue: queue::Queue::default(),
            resources,
            net: net::Net::new(&faults),
            kv: kv::SimKv::new(&layout.initial, &faults),
            rng,
            faults,
            trace: 0xCBF2_9CE4_8422_2325,
            events: 0,
            history: History::default(),
            ns_history: Default::default(),
            file_io: Default::default(),
            notes: Vec::new(),
            audit: Audit::default(),
            reach: Reach::default(),
            log,
            workload_stopped: false,
            atlas_off: scenario.expect.loss_allowed,
            halts: Vec::new(),
            retired: BTreeMap::new(),
            samples: Vec::new(),
            buggify,
            check_rng,
        };
        let mut w = Self {
            scenario,
            layout,
            nodes,
            sim,
        };
        w.start_run();
        Ok(w)
    }

    /// Seeds the namespace and the chain audit, starts every node, and schedules every
    /// scripted step and the end of the safety phase.
    fn start_run(&mut self) {
        if !self.layout.meta.is_empty() {
            let dirs = self.scenario.namespace.as_ref().map_or(0, |n| n.dirs);
            ns_client::seed_namespace(&mut self.sim.kv.kv, dirs);
        }
        for c in self.layout.initial.chains.values() {
            self.sim.audit.chains.insert(c.chain, c.clone());
            self.sim.audit.timeline.push((0, c.clone()));
        }
        for i in 0..self.nodes.len() {
            self.start_node(i, true);
        }
        for (i, s) in self.scenario.steps.iter().enumerate() {
            self.sim
                .queue
                .push(Instant(s.at.as_nanos() as u64), Ev::Step(i));
        }
        self.sim.queue.push(
            Instant(self.scenario.duration.as_nanos() as u64),
            Ev::SafetyEnd,
        );
    }
}

/// The layout of `scenario`'s cluster (with its planted bugs), tuned by its namespace workload
/// and its clock drift.
fn layout_of(scenario: &Scenario) -> Result<Layout, String> {
    let bugs = crate::bugs::parse(scenario.bug.as_deref())?;
    let mut layout = Layout::new(&scenario.cluster, bugs);
    layout.tuning.gc_delay = scenario.namespace.as_ref().and_then(|n| n.gc_delay);
    layout.tuning.idem_expire = scenario.namespace.as_ref().and_then(|n| n.idem_expire);
    layout.tuning.drift_ppm_max = layout
        .tuning
        .drift_ppm_max
        .max(scenario.faults.clock_drift_ppm);
    Ok(layout)
}

/// Every node of `layout`, down, in role order (mgmtd, storage, clients, meta), each with a
/// clock drawn from `rng`; storage nodes get an empty disk per target.
fn new_nodes(layout: &Layout, faults: &Faults, rng: &mut Rng) -> Vec<Node> {
    let mut nodes = Vec::new();
    let mut add = |role: Role, index: u32, name: String, rng: &mut Rng| {
        let id = NodeId(nodes.len() as u64);
        let clock = draw_clock(faults, rng);
        nodes.push(new_node(id, name, role, index, clock));
    };
    for i in 0..layout.mgmtd.len() as u32 {
        add(Role::Mgmtd, i, format!("mgmtd-{i}"), rng);
    }
    for i in 0..layout.storage.len() as u32 {
        add(Role::Storage, i, format!("storage-{i}"), rng);
    }
    for i in 0..layout.clients.len() as u32 {
        add(Role::Client, i, format!("client-{i}"), rng);
    }
    for i in 0..layout.meta.len() as u32 {
        add(Role::Meta, i, format!("meta-{i}"), rng);
    }
    for n in &mut nodes {
        if n.ctx.role == Role::Storage {
            for t in &layout.targets_of[&n.ctx.id] {
                n.ctx.disks.insert(*t, disk::Disk::default());
            }
        }
    }
    nodes
}

/// A node's clock: an offset and a drift drawn within the scenario's bounds (none when zero).
fn draw_clock(faults: &Faults, rng: &mut Rng) -> clock::Clock {
    let max = faults.clock_offset.as_nanos() as i64;
    clock::Clock {
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
    }
}

/// A node that has not started yet: down, with no disks, process or driver.
fn new_node(id: NodeId, name: String, role: Role, index: u32, clock: clock::Clock) -> Node {
    Node {
        ctx: Ctx {
            id,
            name,
            role,
            index,
            life: Life::Down,
            incarnation: 0,
            clock,
            base_clock: clock,
            ops: t3fs_core::vec_map::VecMap::new(),
            disks: BTreeMap::new(),
            crash_after_forward: false,
            pause_on_commit: false,
            drop_heartbeats_until: Instant::ZERO,
            deferred: Vec::new(),
            driver: None,
            ns: None,
        },
        proc: Process::None,
        tables: Default::default(),
    }
}
