//! Node lifecycle: fail-stop crashes (volatile state and unsynced disk operations lost) and
//! restarts from the disks, replacing damaged disks when the fault atlas allows.
//!
//! Invariant: a crashed node holds no process, timers or in-flight I/O, and its incarnation
//! moves on. Not here: the atlas rule itself (atlas.rs).

use std::collections::BTreeMap;

use t3fs_core::ids::TargetId;

use super::node::{self, Life, Proc, Role};
use super::{disk, World};

impl World {
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
}
