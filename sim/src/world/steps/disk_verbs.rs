//! The step verbs that act on a storage node's disks: failing, healing, slowing and filling
//! them (corrupting a chunk is `corrupt_one`, in steps.rs).
//!
//! Each resolves its node reference when the step runs and returns the note to log, or `None`
//! when the reference names no node now. Failing disks goes through the fault atlas. Not here:
//! faults drawn per I/O (disk.rs).

use core::ops::Range;
use core::time::Duration;

use t3fs_scenario::schema::NodeRef;

use super::super::World;
use super::REFUSED;

impl World {
    /// `fail_disk`: every disk of the node fails with EIO, atlas permitting.
    pub(super) fn step_fail_disk(&mut self, r: &NodeRef) -> Option<String> {
        let i = self.resolve(r)?;
        if self.may_damage_node(i) {
            for d in self.nodes[i].ctx.disks.values_mut() {
                d.eio = true;
            }
            Some(format!("fail disks of {}", self.node_name(i)))
        } else {
            self.sim.reached(REFUSED);
            Some(format!(
                "atlas: disks of {} kept (no other intact replica)",
                self.node_name(i)
            ))
        }
    }

    /// `heal_disk`: undoes `fail_disk`, `slow_disk` and `fill_disk` on the node.
    pub(super) fn step_heal_disk(&mut self, r: &NodeRef) -> Option<String> {
        let i = self.resolve(r)?;
        for d in self.nodes[i].ctx.disks.values_mut() {
            d.eio = false;
            d.full = false;
            d.slow = None;
        }
        Some(format!("heal disks of {}", self.node_name(i)))
    }

    /// `slow_disk`: every disk of the node takes `latency` per I/O.
    pub(super) fn step_slow_disk(
        &mut self,
        node: &NodeRef,
        latency: &Range<Duration>,
    ) -> Option<String> {
        let i = self.resolve(node)?;
        for d in self.nodes[i].ctx.disks.values_mut() {
            d.slow = Some(latency.clone());
        }
        Some(format!("slow disks of {}", self.node_name(i)))
    }

    /// `fill_disk`: every disk of the node reports ENOSPC on updates.
    pub(super) fn step_fill_disk(&mut self, r: &NodeRef) -> Option<String> {
        let i = self.resolve(r)?;
        for d in self.nodes[i].ctx.disks.values_mut() {
            d.full = true;
        }
        Some(format!("fill disks of {}", self.node_name(i)))
    }
}
