//! The step verbs that act on one node's process, clock or heartbeats: crash, pause, resume,
//! isolate, flap, clock skews and steps, dropped heartbeats, and a restart onto replaced disks.
//!
//! Each resolves its node reference when the step runs and returns the note to log, or `None`
//! when the reference names no node now (or the node is in the wrong condition). Not here:
//! the atlas's refusal of a step (steps.rs), links between groups (net_verbs.rs), disks
//! (disk_verbs.rs).

use core::time::Duration;

use t3fs_core::time::Instant;
use t3fs_scenario::schema::NodeRef;

use super::super::node::Life;
use super::super::World;
use super::REFUSED;

impl World {
    /// `crash`: fail-stops the node.
    pub(super) fn step_crash(&mut self, r: &NodeRef) -> Option<String> {
        let i = self.resolve(r)?;
        self.crash(i, "step");
        Some(format!("crash {}", self.node_name(i)))
    }

    /// `crash_after_forward`: arms a crash right after the node's next forward.
    pub(super) fn step_crash_after_forward(&mut self, r: &NodeRef) -> Option<String> {
        let i = self.resolve(r)?;
        self.nodes[i].ctx.crash_after_forward = true;
        Some(format!(
            "crash {} after its next forward",
            self.node_name(i)
        ))
    }

    /// `pause_on_commit`: arms a pause at the node's next KV commit.
    pub(super) fn step_pause_on_commit(&mut self, r: &NodeRef) -> Option<String> {
        let i = self.resolve(r)?;
        self.nodes[i].ctx.pause_on_commit = true;
        Some(format!("pause {} at its next KV commit", self.node_name(i)))
    }

    /// `restart_empty` of down node `i`: replaces its disks if the atlas allows it, else
    /// restarts it on the disks it has.
    pub(super) fn restart_empty(&mut self, i: usize) {
        // The atlas: a replaced disk loses its data, so some other replica must
        // hold an intact serving copy.
        let allowed = self.may_damage_node(i);
        if !allowed {
            self.sim.reached(REFUSED);
            self.sim.note(
                "fault",
                &self.node_name(i),
                "atlas: disk kept (no other intact replica)".into(),
            );
        }
        self.restart(i, true, allowed);
    }

    /// `pause`: freezes the node if it runs.
    pub(super) fn step_pause(&mut self, r: &NodeRef) -> Option<String> {
        let i = self.resolve(r)?;
        if self.nodes[i].ctx.life == Life::Up {
            self.nodes[i].ctx.life = Life::Paused;
            return Some(format!("pause {}", self.node_name(i)));
        }
        None
    }

    /// `resume`: ends the node's freeze window.
    pub(super) fn step_resume(&mut self, r: &NodeRef) -> Option<String> {
        let i = self.resolve(r)?;
        // The freeze window is over: a pause armed for a commit that never came is
        // disarmed too.
        self.nodes[i].ctx.pause_on_commit = false;
        self.resume(i);
        Some(format!("resume {}", self.node_name(i)))
    }

    /// `isolate`: cuts every link of the node.
    pub(super) fn step_isolate(&mut self, r: &NodeRef) -> Option<String> {
        let i = self.resolve(r)?;
        self.isolate(i, true);
        Some(format!("isolate {}", self.node_name(i)))
    }

    /// `flap`: starts `count` cycles of cutting and restoring the node's links.
    pub(super) fn step_flap(
        &mut self,
        node: &NodeRef,
        down: Duration,
        up: Duration,
        count: u32,
    ) -> Option<String> {
        let i = self.resolve(node)?;
        self.flap(i, true, count, down, up);
        Some(format!("flap {} x{count}", self.node_name(i)))
    }

    /// `skew_clock`: sets the node's clock offset and drift.
    pub(super) fn step_skew_clock(
        &mut self,
        node: &NodeRef,
        offset_ms: i64,
        drift_ppm: i64,
    ) -> Option<String> {
        let i = self.resolve(node)?;
        let c = &mut self.nodes[i].ctx.clock;
        c.offset_ns = offset_ms * 1_000_000;
        c.drift_ppm = drift_ppm;
        Some(format!(
            "skew clock of {} by {offset_ms}ms, drift {drift_ppm}ppm",
            self.node_name(i)
        ))
    }

    /// `step_clock`: jumps the node's clock forward or back.
    pub(super) fn step_step_clock(&mut self, node: &NodeRef, by_ms: i64) -> Option<String> {
        let i = self.resolve(node)?;
        self.nodes[i].ctx.clock.step(by_ms * 1_000_000);
        Some(format!("step clock of {} by {by_ms}ms", self.node_name(i)))
    }

    /// `drop_heartbeats`: loses the node's heartbeats for `duration`.
    pub(super) fn step_drop_heartbeats(
        &mut self,
        node: &NodeRef,
        duration: Duration,
    ) -> Option<String> {
        let i = self.resolve(node)?;
        let until = Instant(self.sim.now().0 + duration.as_nanos() as u64);
        self.nodes[i].ctx.drop_heartbeats_until = until;
        Some(format!("drop heartbeats of {}", self.node_name(i)))
    }
}
