//! Executes scenario steps on the world: resolving node references (`storage-1`, `primary`,
//! `head:1`) at the moment the step runs, and applying each verb to the network, node, disk,
//! clock or KV model.
//!
//! Invariant: a step naming a node in the wrong condition (restarting a running node, pausing a
//! crashed one) is a logged no-op, not an error: scenarios race the cluster by design.
//! `restart_empty` and `corrupt_chunk` go through the fault atlas unless the scenario expects
//! loss. Not here: background faults drawn per message or I/O (net.rs, disk.rs, kv.rs).

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
        let one = |w: &Self, r: &NodeRef| w.resolve(r);
        let name = |w: &Self, i: usize| w.nodes[i].ctx.name.clone();
        let mut note = verb.to_string();
        if let Some(i) = self
            .taken_down(&step.action)
            .into_iter()
            .find(|&i| self.protected(i))
        {
            // See `protected`: this would leave a damaged replica as the last copy.
            self.sim.reached(REFUSED);
            let who = name(self, i);
            self.sim.note(
                "fault",
                "",
                format!(
                    "atlas: {verb} refused: {who} holds the intact replica of a chain with damage"
                ),
            );
            return;
        }
        match &step.action {
            Action::Crash(r) => {
                if let Some(i) = one(self, r) {
                    self.crash(i, "step");
                    note = format!("crash {}", name(self, i));
                }
            }
            Action::CrashAfterForward(r) => {
                if let Some(i) = one(self, r) {
                    self.nodes[i].ctx.crash_after_forward = true;
                    note = format!("crash {} after its next forward", name(self, i));
                }
            }
            Action::PauseOnCommit(r) => {
                if let Some(i) = one(self, r) {
                    self.nodes[i].ctx.pause_on_commit = true;
                    note = format!("pause {} at its next KV commit", name(self, i));
                }
            }
            Action::Restart(r) => {
                if let Some(i) = one(self, r) {
                    self.restart(i, true, false);
                    return;
                }
            }
            Action::RestartEmpty(r) => {
                if let Some(i) = one(self, r) {
                    if self.nodes[i].ctx.life == Life::Down {
                        // The atlas: a replaced disk loses its data, so some other replica must
                        // hold an intact serving copy.
                        let allowed = self.may_damage_node(i);
                        if !allowed {
                            self.sim.reached(REFUSED);
                            self.sim.note(
                                "fault",
                                &name(self, i),
                                "atlas: disk kept (no other intact replica)".into(),
                            );
                        }
                        self.restart(i, true, allowed);
                    }
                    return;
                }
            }
            Action::Pause(r) => {
                if let Some(i) = one(self, r) {
                    if self.nodes[i].ctx.life == Life::Up {
                        self.nodes[i].ctx.life = Life::Paused;
                        note = format!("pause {}", name(self, i));
                    }
                }
            }
            Action::Resume(r) => {
                if let Some(i) = one(self, r) {
                    // The freeze window is over: a pause armed for a commit that never came is
                    // disarmed too.
                    self.nodes[i].ctx.pause_on_commit = false;
                    self.resume(i);
                    note = format!("resume {}", name(self, i));
                }
            }
            Action::Link {
                a,
                b,
                latency,
                spike,
                loss,
            } => {
                let (a, b) = (self.resolve_all(a), self.resolve_all(b));
                let profile = super::net::LinkProfile {
                    latency: latency.clone(),
                    spike: *spike,
                    loss: *loss,
                };
                for &x in &a {
                    for &y in &b {
                        let (p, q) = (self.nodes[x].ctx.id, self.nodes[y].ctx.id);
                        self.sim.net.set_link(p, q, profile.clone());
                        self.sim.net.set_link(q, p, profile.clone());
                    }
                }
                self.sim.reached("per-link latency");
                note = format!(
                    "link {:?} <-> {:?}: {:?}..{:?}, spike {spike}, loss {loss}",
                    self.names(&a),
                    self.names(&b),
                    latency.start,
                    latency.end
                );
            }
            Action::Partition { a, b, oneway } => {
                let (a, b) = (self.resolve_all(a), self.resolve_all(b));
                for &x in &a {
                    for &y in &b {
                        self.sim.net.cut(self.nodes[x].ctx.id, self.nodes[y].ctx.id);
                        if !oneway {
                            self.sim.net.cut(self.nodes[y].ctx.id, self.nodes[x].ctx.id);
                        }
                    }
                }
                note = format!(
                    "partition {:?} {} {:?}",
                    self.names(&a),
                    if *oneway { "->" } else { "<->" },
                    self.names(&b)
                );
            }
            Action::Isolate(r) => {
                if let Some(i) = one(self, r) {
                    self.isolate(i, true);
                    note = format!("isolate {}", name(self, i));
                }
            }
            Action::Repair { a, b } => {
                let (a, b) = (self.resolve_all(a), self.resolve_all(b));
                for &x in &a {
                    for &y in &b {
                        self.sim
                            .net
                            .repair(self.nodes[x].ctx.id, self.nodes[y].ctx.id);
                        self.sim
                            .net
                            .repair(self.nodes[y].ctx.id, self.nodes[x].ctx.id);
                    }
                }
                note = format!("repair {:?} <-> {:?}", self.names(&a), self.names(&b));
            }
            Action::Hold { a, b } => {
                let (a, b) = (self.resolve_all(a), self.resolve_all(b));
                for &x in &a {
                    for &y in &b {
                        self.sim
                            .net
                            .hold(self.nodes[x].ctx.id, self.nodes[y].ctx.id);
                    }
                }
                note = format!("hold {:?} -> {:?}", self.names(&a), self.names(&b));
            }
            Action::Release { a, b } => {
                let (a, b) = (self.resolve_all(a), self.resolve_all(b));
                for &x in &a {
                    for &y in &b {
                        let frames = self
                            .sim
                            .net
                            .release(self.nodes[x].ctx.id, self.nodes[y].ctx.id);
                        for (f, t, frame) in frames {
                            self.sim.transmit(f, t, frame);
                        }
                    }
                }
                note = format!("release {:?} -> {:?}", self.names(&a), self.names(&b));
            }
            Action::Heal => self.heal(),
            Action::SetLoss(r) => self.sim.net.loss = *r,
            Action::SetDuplicate(r) => self.sim.net.duplicate = *r,
            Action::SetLatency(l) => self.sim.net.latency = l.clone(),
            Action::Flap {
                node,
                down,
                up,
                count,
            } => {
                if let Some(i) = one(self, node) {
                    self.flap(i, true, *count, *down, *up);
                    note = format!("flap {} x{count}", name(self, i));
                }
            }
            Action::SkewClock {
                node,
                offset_ms,
                drift_ppm,
            } => {
                if let Some(i) = one(self, node) {
                    let c = &mut self.nodes[i].ctx.clock;
                    c.offset_ns = offset_ms * 1_000_000;
                    c.drift_ppm = *drift_ppm;
                    note = format!(
                        "skew clock of {} by {offset_ms}ms, drift {drift_ppm}ppm",
                        name(self, i)
                    );
                }
            }
            Action::StepClock { node, by_ms } => {
                if let Some(i) = one(self, node) {
                    self.nodes[i].ctx.clock.step(by_ms * 1_000_000);
                    note = format!("step clock of {} by {by_ms}ms", name(self, i));
                }
            }
            Action::CorruptChunk(r) => {
                if let Some(i) = one(self, r) {
                    note = self.corrupt_one(i);
                }
            }
            Action::FailDisk(r) => {
                if let Some(i) = one(self, r) {
                    if self.may_damage_node(i) {
                        for d in self.nodes[i].ctx.disks.values_mut() {
                            d.eio = true;
                        }
                        note = format!("fail disks of {}", name(self, i));
                    } else {
                        self.sim.reached(REFUSED);
                        note = format!(
                            "atlas: disks of {} kept (no other intact replica)",
                            name(self, i)
                        );
                    }
                }
            }
            Action::HealDisk(r) => {
                if let Some(i) = one(self, r) {
                    for d in self.nodes[i].ctx.disks.values_mut() {
                        d.eio = false;
                        d.full = false;
                        d.slow = None;
                    }
                    note = format!("heal disks of {}", name(self, i));
                }
            }
            Action::SlowDisk { node, latency } => {
                if let Some(i) = one(self, node) {
                    for d in self.nodes[i].ctx.disks.values_mut() {
                        d.slow = Some(latency.clone());
                    }
                    note = format!("slow disks of {}", name(self, i));
                }
            }
            Action::FillDisk(r) => {
                if let Some(i) = one(self, r) {
                    for d in self.nodes[i].ctx.disks.values_mut() {
                        d.full = true;
                    }
                    note = format!("fill disks of {}", name(self, i));
                }
            }
            Action::DropHeartbeats { node, duration } => {
                if let Some(i) = one(self, node) {
                    let until = Instant(self.sim.now().0 + duration.as_nanos() as u64);
                    self.nodes[i].ctx.drop_heartbeats_until = until;
                    note = format!("drop heartbeats of {}", name(self, i));
                }
            }
            Action::KvUnavailable => self.sim.kv.unavailable = true,
            Action::KvAvailable => self.sim.kv.unavailable = false,
            Action::KvFaults {
                conflict,
                commit_unknown,
            } => {
                self.sim.kv.conflict = *conflict;
                self.sim.kv.commit_unknown = *commit_unknown;
            }
        }
        self.sim.note("fault", "", note);
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
