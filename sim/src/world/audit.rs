//! The chain audit run on every step: each chain a primary publishes is checked against
//! §2.6.1's invariants, a chain version is never reused with other members, and a primary never
//! publishes an older version; promotions clear the atlas's stale marks.
//!
//! Not here: the whole-history checkers (check/).

use t3fs_core::mgmtd::chain_update::check_chain;
use t3fs_core::routing::PublicState;

use super::node::Process;
use super::World;

impl World {
    /// Records a chain published by a primary and checks §2.6.1's invariants on it.
    pub fn audit_routing(&mut self, who: usize) {
        let Process::Mgmtd(m) = &self.nodes[who].proc else {
            return;
        };
        let Some(routing) = m.routing() else { return };
        let mut changes = Vec::new();
        let mut changes_resynced = Vec::new();
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
                if t.state == PublicState::Serving && was == Some(PublicState::Syncing) {
                    // Resynced from its predecessor: a write it lost is back.
                    changes_resynced.push(t.target);
                }
            }
            if let Err(e) = check_chain(&c.targets) {
                let v = format!("chain {id}@{}: {e}", c.version);
                self.sim.audit.violation.get_or_insert(v);
            }
            changes.push(c.clone());
        }
        for t in changes_resynced {
            if let Some(node) = self.layout.initial.node_of(t) {
                if let Some(d) = self.nodes[node.0 as usize].ctx.disks.get_mut(&t) {
                    d.regressed = false;
                }
            }
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
