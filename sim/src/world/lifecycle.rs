//! Node lifecycle: fail-stop crashes (volatile state and unsynced disk operations lost) and
//! restarts from the disks, replacing damaged disks when the fault atlas allows.
//!
//! Invariant: a crashed node holds no process, timers or in-flight I/O, and its incarnation
//! moves on. Not here: the atlas rule itself (atlas.rs).

use std::collections::BTreeMap;

use t3fs_core::ids::TargetId;

use super::node::{self, Life, Process, Role};
use super::{disk, Ev, World};

impl World {
    /// Fail-stops node `i`: the process, its timers and unsynced I/O are gone; disks stay.
    pub fn crash(&mut self, i: usize, why: &str) {
        if self.nodes[i].ctx.life == Life::Down {
            return;
        }
        let may_damage = self.may_damage_node(i);
        let n = &mut self.nodes[i];
        let inflight = std::mem::take(&mut n.ctx.ops);
        let mut per_target: BTreeMap<TargetId, Vec<t3fs_core::chunk::ChunkOp>> = BTreeMap::new();
        for (_, p) in inflight {
            if let node::Pending::Chunk(t, op) = p {
                per_target.entry(t).or_default().push(op);
            }
        }
        // Every disk crashes, not only those with operations in flight: a lost write was
        // acknowledged earlier.
        let (mut torn, mut lost) = (0, 0);
        for (t, d) in n.ctx.disks.iter_mut() {
            let ops = per_target.remove(t).unwrap_or_default();
            let before = (d.counters.torn, d.counters.lost_writes);
            d.crash(&ops, &mut self.sim.rng, &self.sim.faults, may_damage);
            torn += d.counters.torn - before.0;
            lost += d.counters.lost_writes - before.1;
        }
        if torn > 0 {
            self.sim.reached("disk torn write");
        }
        if lost > 0 {
            self.sim.reached("disk lost write");
        }
        let n = &mut self.nodes[i];
        if n.ctx.role == Role::Storage {
            self.sim.audit.stale.extend(n.ctx.disks.keys().copied());
        }
        n.ctx.life = Life::Down;
        n.ctx.incarnation += 1;
        // The dead incarnation's timers never fire (their generations are refused anyway).
        for h in n.tables.timers.handles() {
            self.sim.queue.cancel(super::queue::Handle::from_bits(h));
        }
        n.tables.clear();
        n.ctx.deferred.clear();
        n.ctx.crash_after_forward = false;
        let (counters, rows) = node::counters_of(&n.proc);
        for (k, v) in counters {
            *self.sim.retired.entry(k).or_default() += v;
        }
        for (r, v) in rows {
            *self.sim.reach.rows.entry(r).or_default() += v;
        }
        n.proc = Process::None;
        if let Some(d) = &mut n.ctx.driver {
            // The running call's outcome is unknown: it stays open in the history.
            if let Some((_, _, index)) = d.running.take() {
                self.sim.history.fail(index);
            }
        }
        if let Some(d) = &mut n.ctx.ns {
            d.running = None; // Likewise open in the namespace history.
                              // Its write sessions belong to the dead incarnation: only pruning (not modelled)
                              // could end them, so they hold their files back from GC for good.
            d.open.clear();
        }
        let name = n.ctx.name.clone();
        self.sim.note("fault", &name, format!("crash ({why})"));
        self.sim.reached("node crash");
    }

    /// Restarts node `i` from its disks. A damaged disk (EIO, corruption) is replaced with an
    /// empty one when `replace_damaged` and the fault atlas allows it (another intact SERVING
    /// copy exists). Otherwise the disk comes back as it is, damage and all: bytes are never
    /// restored (replacing the last good copy would turn a recoverable fault into data loss,
    /// and pretending damage away would hide it), and the replacement is retried once another
    /// copy serves. `replace_all` replaces every disk unconditionally (a scenario's
    /// `restart_empty` already consulted the atlas).
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
            if replace_all || (replace_damaged && (d.damaged || !d.corrupt.is_empty()) && ok) {
                let counters = d.counters.clone();
                *d = disk::Disk::default();
                d.counters = counters; // The slot's history stays in the report.
                replaced.push(t.to_string());
            } else {
                if d.damaged || !d.corrupt.is_empty() {
                    kept.push(t.to_string());
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
                "; atlas: {} kept damaged (no other intact copy yet), replacement retried",
                kept.join(",")
            ));
            let d = self.sim.rng.duration(self.sim.faults.restart_after.clone());
            self.sim.schedule_in(d, Ev::ReplaceDisk { node: i });
        }
        self.sim.note("fault", &name, what);
        self.sim.reached(if replaced.is_empty() {
            "node restart"
        } else {
            "disk replaced"
        });
        self.start_node(i, false);
    }

    /// Whether a disk of node `i` holds damage that awaits replacement.
    pub fn holds_damage(&self, i: usize) -> bool {
        self.nodes[i]
            .ctx
            .disks
            .values()
            .any(|d| d.damaged || !d.corrupt.is_empty())
    }

    /// Retries replacing the damaged disks of node `i` that a restart had to keep: once the
    /// atlas allows it (another copy serves intact), the node is crashed and restarted with
    /// fresh disks; until then, retried after another restart delay.
    pub(super) fn retry_replacement(&mut self, i: usize) {
        if !self.holds_damage(i) || self.nodes[i].ctx.life != Life::Up {
            return; // Healed, or down: its restart replaces or schedules another retry.
        }
        let damaged: Vec<TargetId> = self.nodes[i]
            .ctx
            .disks
            .iter()
            .filter(|(_, d)| d.damaged || !d.corrupt.is_empty())
            .map(|(t, _)| *t)
            .collect();
        let wait = self.sim.rng.duration(self.sim.faults.restart_after.clone());
        if damaged
            .iter()
            .all(|t| self.sim.atlas_off || self.other_intact_replica(*t))
        {
            self.crash(i, "disk replacement");
            self.sim.schedule_in(
                wait,
                Ev::Restart {
                    node: i,
                    replace_damaged: true,
                },
            );
        } else {
            self.sim.schedule_in(wait, Ev::ReplaceDisk { node: i });
        }
    }
}
