//! The fault atlas: destructive faults (replaced disks, corruption, EIO, torn writes) may hit a
//! target only while another replica of its chain holds an intact, current, serving copy, so a
//! run's faults stay recoverable unless the scenario expects loss.
//!
//! Not here: which faults are destructive (their call sites ask).

use t3fs_core::ids::TargetId;
use t3fs_core::routing::PublicState;

use super::node::{Life, Role};
use super::World;

impl World {
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

    /// While a chain holds damage (a replica's disk is damaged, has rotten, torn or misdirected
    /// chunks not yet rewritten, or lost a write and was not resynced since), its other
    /// replicas are protected: a scripted
    /// crash, pause or cut of their node is refused. Otherwise a later fault that destroys
    /// nothing by itself would leave the damaged replica as the last copy of the chain's
    /// newest data, a double fault no protocol survives (found by swarm seed 2353 once the
    /// atlas stopped restoring damaged bytes). Scenarios that set `loss_allowed` are not
    /// protected.
    pub fn protected(&self, i: usize) -> bool {
        let n = &self.nodes[i];
        if self.sim.atlas_off || n.ctx.role != Role::Storage {
            return false;
        }
        n.ctx.disks.keys().any(|t| {
            self.sim
                .audit
                .chains
                .values()
                .find(|c| c.state_of(*t).is_some())
                .is_some_and(|c| {
                    c.targets
                        .iter()
                        .any(|ct| ct.target != *t && self.holds_damage_on(ct.target))
                })
        })
    }

    /// Whether the disk of `target` holds damage awaiting repair.
    fn holds_damage_on(&self, target: TargetId) -> bool {
        self.layout.initial.node_of(target).is_some_and(|node| {
            self.nodes[node.0 as usize]
                .ctx
                .disks
                .get(&target)
                .is_some_and(|d| d.damaged || !d.corrupt.is_empty() || d.regressed)
        })
    }

    pub(super) fn other_intact_replica(&self, target: TargetId) -> bool {
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
                    // In good standing too: a node the primary cannot hear is about to be moved
                    // out of its chain, so its copy will not serve (found by swarm seed 170).
                    let primary = self.primary().map(|(p, _)| self.nodes[p].ctx.id);
                    let heard = primary.is_none_or(|m| !self.sim.net.is_cut(node, m))
                        && c.drop_heartbeats_until <= self.sim.now();
                    c.life == Life::Up
                        && heard
                        && c.disks.get(&ct.target).is_some_and(|d| {
                            !d.damaged && !d.eio && d.corrupt.is_empty() && !d.regressed
                        })
                })
        })
    }
}
