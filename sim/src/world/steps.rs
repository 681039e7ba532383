//! Executes scenario steps on the world: resolving node references (`storage-1`, `primary`,
//! `head:1`) at the moment the step runs, and applying each verb to the network, node, disk,
//! clock or KV model.
//!
//! Invariant: a step naming a node in the wrong condition (restarting a running node, pausing a
//! crashed one) is a logged no-op, not an error: scenarios race the cluster by design.
//! `restart_empty` and `corrupt_chunk` go through the fault atlas unless the scenario expects
//! loss. Not here: background faults drawn per message or I/O (net.rs, disk.rs, kv.rs).

mod disk_verbs;
mod net_verbs;
mod node_verbs;

use core::time::Duration;

use t3fs_core::ids::ChainId;
use t3fs_core::routing::PublicState;
use t3fs_core::time::Instant;
use t3fs_scenario::schema::{Action, NodeRef, Step};

use super::node::Life;
use super::{Ev, World};

/// The reachability class of a scripted destructive fault the atlas refused: counted in the
/// manifest and shown in the report, so a scenario that meant to destroy data and did not says
/// so.
pub const REFUSED: &str = "scripted fault refused by the atlas";

impl World {
    /// Resolves a node reference to a node index, if it currently names one.
    pub fn resolve(&self, r: &NodeRef) -> Option<usize> {
        let idx =
            |ids: &[t3fs_core::ids::NodeId], i: u32| ids.get(i as usize).map(|n| n.0 as usize);
        match r {
            NodeRef::Mgmtd(i) => idx(&self.layout.mgmtd, *i),
            NodeRef::Storage(i) => idx(&self.layout.storage, *i),
            NodeRef::Client(i) => idx(&self.layout.clients, *i),
            NodeRef::Meta(i) => idx(&self.layout.meta, *i),
            NodeRef::Primary => self.primary().map(|(i, _)| i),
            NodeRef::ChainPos(pos, chain) => {
                let c = self.sim.audit.chains.get(&ChainId(*chain))?;
                let serving: Vec<_> = c
                    .targets
                    .iter()
                    .filter(|t| t.state == PublicState::Serving)
                    .map(|t| t.target)
                    .collect();
                let t = pos.pick(&serving)?;
                self.layout.initial.node_of(*t).map(|n| n.0 as usize)
            }
        }
    }

    fn resolve_all(&self, rs: &[NodeRef]) -> Vec<usize> {
        rs.iter().filter_map(|r| self.resolve(r)).collect()
    }

    /// Runs one step.
    pub(super) fn run_step(&mut self, step: &Step) {
        let verb = step.action.verb();
        self.sim.reached(verb);
        if self.refused_by_atlas(&step.action, verb) {
            return;
        }
        if self.restart_by_step(&step.action) {
            return;
        }
        let note = self.apply_step(&step.action);
        self.sim
            .note("fault", "", note.unwrap_or_else(|| verb.to_string()));
    }

    /// Refuses a step that would take down a node the atlas protects: true if refused (counted
    /// and noted, and the step does nothing else).
    fn refused_by_atlas(&mut self, action: &Action, verb: &'static str) -> bool {
        if let Some(i) = self
            .taken_down(action)
            .into_iter()
            .find(|&i| self.protected(i))
        {
            // See `protected`: this would leave a damaged replica as the last copy.
            self.sim.reached(REFUSED);
            let who = self.node_name(i);
            self.sim.note(
                "fault",
                "",
                format!(
                    "atlas: {verb} refused: {who} holds the intact replica of a chain with damage"
                ),
            );
            return true;
        }
        false
    }

    /// Restarts the node a `restart` or `restart_empty` step names: true if it names one now
    /// (such a step writes no note of its own).
    fn restart_by_step(&mut self, action: &Action) -> bool {
        match action {
            Action::Restart(r) => {
                if let Some(i) = self.resolve(r) {
                    self.restart(i, true, false);
                    return true;
                }
            }
            Action::RestartEmpty(r) => {
                if let Some(i) = self.resolve(r) {
                    if self.nodes[i].ctx.life == Life::Down {
                        self.restart_empty(i);
                    }
                    return true;
                }
            }
            _ => {}
        }
        false
    }

    /// Applies a step's verb: the note to log for it, or `None` to log the bare verb (a node
    /// reference that names no node now, a verb whose note is its name).
    fn apply_step(&mut self, action: &Action) -> Option<String> {
        match action {
            Action::Crash(r) => self.step_crash(r),
            Action::CrashAfterForward(r) => self.step_crash_after_forward(r),
            Action::PauseOnCommit(r) => self.step_pause_on_commit(r),
            // A restart that names a node ran in `restart_by_step`.
            Action::Restart(_) | Action::RestartEmpty(_) => None,
            Action::Pause(r) => self.step_pause(r),
            Action::Resume(r) => self.step_resume(r),
            Action::Link {
                a,
                b,
                latency,
                spike,
                loss,
            } => Some(self.step_link(a, b, latency, *spike, *loss)),
            Action::Partition { a, b, oneway } => Some(self.step_partition(a, b, *oneway)),
            Action::Isolate(r) => self.step_isolate(r),
            Action::Repair { a, b } => Some(self.step_repair(a, b)),
            Action::Hold { a, b } => Some(self.step_hold(a, b)),
            Action::Release { a, b } => Some(self.step_release(a, b)),
            Action::Heal
            | Action::SetLoss(_)
            | Action::SetDuplicate(_)
            | Action::SetLatency(_)
            | Action::KvUnavailable
            | Action::KvAvailable
            | Action::KvFaults { .. } => {
                self.apply_cluster_wide(action);
                None
            }
            Action::Flap {
                node,
                down,
                up,
                count,
            } => self.step_flap(node, *down, *up, *count),
            Action::SkewClock {
                node,
                offset_ms,
                drift_ppm,
            } => self.step_skew_clock(node, *offset_ms, *drift_ppm),
            Action::StepClock { node, by_ms } => self.step_step_clock(node, *by_ms),
            Action::CorruptChunk(r) => self.resolve(r).map(|i| self.corrupt_one(i)),
            Action::FailDisk(r) => self.step_fail_disk(r),
            Action::HealDisk(r) => self.step_heal_disk(r),
            Action::SlowDisk { node, latency } => self.step_slow_disk(node, latency),
            Action::FillDisk(r) => self.step_fill_disk(r),
            Action::DropHeartbeats { node, duration } => self.step_drop_heartbeats(node, *duration),
        }
    }

    /// Applies a verb that names no node (network-wide rates, the KV, `heal`); its note is
    /// its name.
    fn apply_cluster_wide(&mut self, action: &Action) {
        match action {
            Action::Heal => self.heal(),
            Action::SetLoss(r) => self.sim.net.loss = *r,
            Action::SetDuplicate(r) => self.sim.net.duplicate = *r,
            Action::SetLatency(l) => self.sim.net.latency = l.clone(),
            Action::KvUnavailable => self.sim.kv.unavailable = true,
            Action::KvAvailable => self.sim.kv.unavailable = false,
            Action::KvFaults {
                conflict,
                commit_unknown,
            } => {
                self.sim.kv.conflict = *conflict;
                self.sim.kv.commit_unknown = *commit_unknown;
            }
            _ => {} // Verbs naming nodes: `apply_step` applies them.
        }
    }

    /// The name of node `i`, for notes.
    fn node_name(&self, i: usize) -> String {
        self.nodes[i].ctx.name.clone()
    }

    /// The storage nodes a step would take out of service (crash, pause, cut from mgmtd,
    /// silence its heartbeats), for the atlas's degraded-chain rule.
    fn taken_down(&self, action: &Action) -> Vec<usize> {
        let nodes = match action {
            Action::Crash(r)
            | Action::CrashAfterForward(r)
            | Action::Pause(r)
            | Action::Isolate(r)
            | Action::DropHeartbeats { node: r, .. }
            | Action::Flap { node: r, .. } => self.resolve(r).into_iter().collect(),
            Action::Partition { a, b, .. } | Action::Hold { a, b } => {
                let mut v = self.resolve_all(a);
                v.extend(self.resolve_all(b));
                v
            }
            _ => Vec::new(),
        };
        nodes
            .into_iter()
            .filter(|&i| self.nodes[i].ctx.role == super::node::Role::Storage)
            .collect()
    }

    fn names(&self, ids: &[usize]) -> Vec<String> {
        ids.iter()
            .map(|i| self.nodes[*i].ctx.name.clone())
            .collect()
    }

    /// Cuts (or restores) every link of node `i`.
    pub fn isolate(&mut self, i: usize, cut: bool) {
        let me = self.nodes[i].ctx.id;
        for n in 0..self.nodes.len() {
            let other = self.nodes[n].ctx.id;
            if cut {
                self.sim.net.cut(me, other);
                self.sim.net.cut(other, me);
            } else {
                self.sim.net.repair(me, other);
                self.sim.net.repair(other, me);
            }
        }
    }

    /// Resumes a paused node: its deferred events run now, in arrival order.
    pub fn resume(&mut self, i: usize) {
        if self.nodes[i].ctx.life != Life::Paused {
            return;
        }
        self.nodes[i].ctx.life = Life::Up;
        let now = self.sim.now();
        for ev in std::mem::take(&mut self.nodes[i].ctx.deferred) {
            self.sim.queue.push(now, ev);
        }
    }

    pub(super) fn flap(
        &mut self,
        i: usize,
        down: bool,
        left: u32,
        down_for: Duration,
        up_for: Duration,
    ) {
        self.isolate(i, down);
        self.sim.reached("link flap");
        let (next_in, next_down, next_left) = if down {
            (down_for, false, left)
        } else if left > 1 {
            (up_for, true, left - 1)
        } else {
            return;
        };
        self.sim.schedule_in(
            next_in,
            Ev::Flap {
                node: i,
                down: next_down,
                left: next_left,
                down_for,
                up_for,
            },
        );
    }

    /// Corrupts one committed chunk on storage node `i` (atlas permitting).
    fn corrupt_one(&mut self, i: usize) -> String {
        let name = self.nodes[i].ctx.name.clone();
        if !self.may_damage_node(i) {
            self.sim.reached(REFUSED);
            return format!("atlas: no corruption on {name} (no other intact replica)");
        }
        for (t, d) in self.nodes[i].ctx.disks.iter_mut() {
            let committed: Vec<_> = d
                .store
                .chunks()
                .iter()
                .filter(|(_, c)| c.committed.0 > 0)
                .map(|(id, _)| *id)
                .collect();
            if let Some(&c) = self.sim.rng.pick(&committed) {
                d.rot(c, &mut self.sim.rng);
                return format!("corrupt {c} on {t} ({name}): one bit flipped at rest");
            }
        }
        format!("corrupt: {name} holds no committed chunk")
    }

    /// Heals everything for the liveness phase (or a `heal` step): links, holds, pauses, rates,
    /// and clocks back to their background skew (steps and scripted skews end, as after NTP).
    pub fn heal(&mut self) {
        self.sim.net.repair_all();
        self.sim.net.reset_links();
        for (f, t, frame) in self.sim.net.release_all() {
            self.sim.transmit(f, t, frame);
        }
        for i in 0..self.nodes.len() {
            self.resume(i);
            let c = &mut self.nodes[i].ctx;
            c.drop_heartbeats_until = Instant::ZERO;
            c.crash_after_forward = false;
            c.pause_on_commit = false;
            c.clock = c.base_clock;
            for d in c.disks.values_mut() {
                d.slow = None;
                d.full = false;
            }
        }
        let f = &self.scenario.faults;
        let calm = t3fs_scenario::Faults {
            net_latency: f.net_latency.clone(),
            disk_latency: f.disk_latency.clone(),
            kv_latency: f.kv_latency.clone(),
            restart_after: f.restart_after.clone(),
            ..t3fs_scenario::Faults::default()
        };
        self.sim.net.set_rates(&calm);
        self.sim.faults = calm;
        self.sim.kv.unavailable = false;
        self.sim.kv.conflict = 0.0;
        self.sim.kv.commit_unknown = 0.0;
    }
}
