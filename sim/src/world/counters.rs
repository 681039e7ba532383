//! Totals of every counter in the world (network, KV, history, disks, live and retired
//! processes), for the manifest and for the samples taken every simulated second that the
//! report draws over time; and, at the end of a run, the §2.6.1 rows the live mgmtd counted,
//! summed into the reachability counters.
//!
//! Invariant: totals only grow within a run (retired processes keep their counts). Not here:
//! the counters themselves (each lives with what it counts).

use std::collections::BTreeMap;

use super::node::{Process, Role};
use super::World;

impl World {
    /// Every counter's total now, by name.
    pub fn counter_totals(&self) -> BTreeMap<String, u64> {
        let mut c = BTreeMap::new();
        let n = &self.sim.net.counters;
        for (k, v) in [
            ("net.sent", n.sent),
            ("net.delivered", n.delivered),
            ("net.lost", n.lost),
            ("net.cut", n.cut),
            ("net.duplicated", n.duplicated),
            ("net.spiked", n.spiked),
            ("net.held", n.held),
            ("net.overflow", n.overflow),
            ("net.malformed", n.malformed),
            ("net.to_dead", n.to_dead),
            ("net.bytes", n.bytes),
            ("kv.ops", self.sim.kv.counters.ops),
            ("kv.commits", self.sim.kv.counters.commits),
            ("kv.conflicts_injected", self.sim.kv.counters.conflicts),
            ("kv.unknown_applied", self.sim.kv.counters.unknown_applied),
            ("kv.unknown_dropped", self.sim.kv.counters.unknown_dropped),
            ("kv.unavailable", self.sim.kv.counters.unavailable),
            ("history.operations", self.sim.history.ops.len() as u64),
            ("history.completed", self.sim.history.completed() as u64),
        ] {
            c.insert(k.into(), v);
        }
        for node in &self.nodes {
            for d in node.ctx.disks.values() {
                let dc = &d.counters;
                for (k, v) in [
                    ("disk.ops", dc.ops),
                    ("disk.spikes", dc.spikes),
                    ("disk.eio", dc.eio),
                    ("disk.corrupt", dc.corrupt),
                    ("disk.nospace", dc.nospace),
                    ("disk.misdirected", dc.misdirected),
                    ("disk.lost_on_crash", dc.lost_on_crash),
                    ("disk.applied_on_crash", dc.applied_on_crash),
                    ("disk.torn", dc.torn),
                    ("disk.rotted", dc.rotted),
                    ("disk.lost_writes", dc.lost_writes),
                    ("disk.reads_overtaking", dc.overtaken),
                ] {
                    *c.entry(k.into()).or_default() += v;
                }
            }
            for (k, v) in crate::world::node::counters_of(&node.proc).0 {
                *c.entry(k.into()).or_default() += v;
            }
        }
        for (k, v) in &self.sim.retired {
            *c.entry(k.to_string()).or_default() += v;
        }
        c
    }

    /// Sums the §2.6.1 rows of every live mgmtd into the reachability counters (once, when
    /// the run ends).
    pub fn sum_mgmtd_rows(&mut self) {
        for n in &self.nodes {
            if let (Role::Mgmtd, Process::Mgmtd(m)) = (n.ctx.role, &n.proc) {
                for (row, c) in &m.counters().rows {
                    *self.sim.reach.rows.entry(*row).or_default() += c;
                }
            }
        }
    }
}
