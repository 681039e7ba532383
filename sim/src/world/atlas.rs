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
                    c.life == Life::Up
                        && c.disks
                            .get(&ct.target)
                            .is_some_and(|d| !d.damaged && !d.eio && d.corrupt.is_empty())
                })
        })
    }
}
