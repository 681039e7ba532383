//! The step verbs that act on the links between two groups of nodes: per-link latency,
//! partitions, repairs, and holding and releasing messages in flight.
//!
//! Each resolves its groups when the step runs (a reference that names no node now drops
//! out) and returns the note to log. Not here: whole-node isolation and flapping
//! (node_verbs.rs), network-wide rates and `heal` (steps.rs), the network model (net.rs).

use core::ops::Range;
use core::time::Duration;

use t3fs_scenario::schema::NodeRef;

use super::super::World;

impl World {
    /// `link`: gives the links between the groups (both ways) their own latency, spikes and
    /// loss.
    pub(super) fn step_link(
        &mut self,
        a: &[NodeRef],
        b: &[NodeRef],
        latency: &Range<Duration>,
        spike: f64,
        loss: f64,
    ) -> String {
        let (a, b) = (self.resolve_all(a), self.resolve_all(b));
        let profile = super::super::net::LinkProfile {
            latency: latency.clone(),
            spike,
            loss,
        };
        for &x in &a {
            for &y in &b {
                let (p, q) = (self.nodes[x].ctx.id, self.nodes[y].ctx.id);
                self.sim.net.set_link(p, q, profile.clone());
                self.sim.net.set_link(q, p, profile.clone());
            }
        }
        self.sim.reached("per-link latency");
        format!(
            "link {:?} <-> {:?}: {:?}..{:?}, spike {spike}, loss {loss}",
            self.names(&a),
            self.names(&b),
            latency.start,
            latency.end
        )
    }

    /// `partition`: cuts the links a → b (and b → a unless `oneway`).
    pub(super) fn step_partition(&mut self, a: &[NodeRef], b: &[NodeRef], oneway: bool) -> String {
        let (a, b) = (self.resolve_all(a), self.resolve_all(b));
        for &x in &a {
            for &y in &b {
                self.sim.net.cut(self.nodes[x].ctx.id, self.nodes[y].ctx.id);
                if !oneway {
                    self.sim.net.cut(self.nodes[y].ctx.id, self.nodes[x].ctx.id);
                }
            }
        }
        format!(
            "partition {:?} {} {:?}",
            self.names(&a),
            if oneway { "->" } else { "<->" },
            self.names(&b)
        )
    }

    /// `repair`: restores the links between the groups, both ways.
    pub(super) fn step_repair(&mut self, a: &[NodeRef], b: &[NodeRef]) -> String {
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
        format!("repair {:?} <-> {:?}", self.names(&a), self.names(&b))
    }

    /// `hold`: keeps messages a → b in flight until released.
    pub(super) fn step_hold(&mut self, a: &[NodeRef], b: &[NodeRef]) -> String {
        let (a, b) = (self.resolve_all(a), self.resolve_all(b));
        for &x in &a {
            for &y in &b {
                self.sim
                    .net
                    .hold(self.nodes[x].ctx.id, self.nodes[y].ctx.id);
            }
        }
        format!("hold {:?} -> {:?}", self.names(&a), self.names(&b))
    }

    /// `release`: sends the held messages a → b on through the network model.
    pub(super) fn step_release(&mut self, a: &[NodeRef], b: &[NodeRef]) -> String {
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
        format!("release {:?} -> {:?}", self.names(&a), self.names(&b))
    }
}
