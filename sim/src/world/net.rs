//! The simulated network: per-message fate (latency with spikes, loss, duplication as a late
//! replay, reordering through latency spread), per-link latency distributions and loss that
//! override the cluster-wide ones (a far rack, a congested uplink), directed link cuts (symmetric and one-way
//! partitions, isolation, flapping), holds (in-flight messages kept until released) and a bounded
//! per-destination queue.
//!
//! Invariant: every draw comes from the world's seeded generator in event order; a cut link
//! drops at send time (a message already in flight still arrives, as on a real network whose
//! packets left before the cable was pulled). Not here: encoding (every frame is produced by the
//! real codec in mod.rs) and bandwidth (resources.rs, for scenarios with `[hardware]`).

use std::collections::{BTreeMap, BTreeSet};

use core::ops::Range;
use core::time::Duration;

use t3fs_core::ids::NodeId;
use t3fs_scenario::{Faults, Rng};

use super::Frame;

/// Messages queued towards one node before new ones are dropped (queue overflow).
pub const QUEUE_MAX: u32 = 100_000;

/// Counters of the network.
#[derive(Clone, Debug, Default)]
pub struct NetCounters {
    /// Frames sent.
    pub sent: u64,
    /// Frames delivered to a live node.
    pub delivered: u64,
    /// Dropped by random loss.
    pub lost: u64,
    /// Dropped on a cut link.
    pub cut: u64,
    /// Extra copies delivered (replays).
    pub duplicated: u64,
    /// Frames that took a latency spike.
    pub spiked: u64,
    /// Frames parked by a hold.
    pub held: u64,
    /// Dropped because the destination's queue was full.
    pub overflow: u64,
    /// Frames that failed to decode (dropped and counted, never a panic).
    pub malformed: u64,
    /// Frames addressed to a crashed node.
    pub to_dead: u64,
    /// Payload bytes sent.
    pub bytes: u64,
}

/// A link's own latency distribution and loss (`link` steps), overriding the cluster-wide ones.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkProfile {
    /// One-way latency, uniform in this range.
    pub latency: Range<Duration>,
    /// Probability of a spike (the cluster's spike latency).
    pub spike: f64,
    /// Loss rate.
    pub loss: f64,
}

/// What happens to one sent frame.
pub enum Fate {
    /// Dropped.
    Dropped,
    /// Parked until the link is released.
    Held,
    /// Delivered after this delay, and again after the second one if the frame is duplicated
    /// (a replay, later than the original).
    Deliver(Duration, Option<Duration>),
}

/// Network state.
pub struct Net {
    /// One-way latency.
    pub latency: Range<Duration>,
    /// Spike probability and latency.
    pub spike: f64,
    /// Spike latency.
    pub spike_latency: Range<Duration>,
    /// Loss rate.
    pub loss: f64,
    /// Duplication rate.
    pub duplicate: f64,
    cut: BTreeSet<(NodeId, NodeId)>,
    held: BTreeSet<(NodeId, NodeId)>,
    links: BTreeMap<(NodeId, NodeId), LinkProfile>,
    /// Frames parked by holds, in send order.
    pub parked: Vec<(NodeId, NodeId, Frame)>,
    /// Frames in flight towards each node, by node id (ids are dense: a node's index).
    queued: Vec<u32>,
    /// Counters.
    pub counters: NetCounters,
}

impl Net {
    /// A network with the background rates of `f`.
    pub fn new(f: &Faults) -> Self {
        let mut n = Self {
            latency: Duration::ZERO..Duration::ZERO,
            spike: 0.0,
            spike_latency: Duration::ZERO..Duration::ZERO,
            loss: 0.0,
            duplicate: 0.0,
            cut: BTreeSet::new(),
            held: BTreeSet::new(),
            links: BTreeMap::new(),
            parked: Vec::new(),
            queued: Vec::new(),
            counters: NetCounters::default(),
        };
        n.set_rates(f);
        n
    }

    /// Resets latency and rates to `f`'s.
    pub fn set_rates(&mut self, f: &Faults) {
        self.latency = f.net_latency.clone();
        self.spike = f.net_spike;
        self.spike_latency = f.net_spike_latency.clone();
        self.loss = f.loss;
        self.duplicate = f.duplicate;
    }

    /// Decides the fate of a frame `from → to`.
    pub fn route(&mut self, rng: &mut Rng, from: NodeId, to: NodeId, bytes: usize) -> Fate {
        self.counters.sent += 1;
        self.counters.bytes += bytes as u64;
        if self.cut.contains(&(from, to)) {
            self.counters.cut += 1;
            return Fate::Dropped;
        }
        if self.held.contains(&(from, to)) {
            self.counters.held += 1;
            return Fate::Held;
        }
        let (loss, spike, latency) = match self.links.get(&(from, to)) {
            Some(l) => (l.loss, l.spike, l.latency.clone()),
            None => (self.loss, self.spike, self.latency.clone()),
        };
        if rng.chance(loss) {
            self.counters.lost += 1;
            return Fate::Dropped;
        }
        if self
            .queued
            .get(to.0 as usize)
            .is_some_and(|&q| q >= QUEUE_MAX)
        {
            self.counters.overflow += 1;
            return Fate::Dropped;
        }
        let first = self.delay(rng, spike, &latency);
        let replay = if rng.chance(self.duplicate) {
            self.counters.duplicated += 1;
            // A replay arrives after the original, possibly much later.
            let again = self.delay(rng, spike, &latency);
            Some(first + again + rng.duration(self.spike_latency.clone()))
        } else {
            None
        };
        let i = to.0 as usize;
        if self.queued.len() <= i {
            self.queued.resize(i + 1, 0);
        }
        self.queued[i] += 1 + u32::from(replay.is_some());
        Fate::Deliver(first, replay)
    }

    fn delay(&mut self, rng: &mut Rng, spike: f64, latency: &Range<Duration>) -> Duration {
        if rng.chance(spike) {
            self.counters.spiked += 1;
            return rng.duration(self.spike_latency.clone());
        }
        rng.duration(latency.clone())
    }

    /// Gives `a → b` its own latency distribution and loss.
    pub fn set_link(&mut self, a: NodeId, b: NodeId, profile: LinkProfile) {
        if a != b {
            self.links.insert((a, b), profile);
        }
    }

    /// Every link back to the cluster-wide distribution.
    pub fn reset_links(&mut self) {
        self.links.clear();
    }

    /// A frame towards `to` left the queue (delivered or discarded).
    pub fn dequeued(&mut self, to: NodeId) {
        if let Some(q) = self.queued.get_mut(to.0 as usize) {
            *q = q.saturating_sub(1);
        }
    }

    /// Cuts `from → to`.
    pub fn cut(&mut self, from: NodeId, to: NodeId) {
        if from != to {
            self.cut.insert((from, to));
        }
    }

    /// Restores `from → to`.
    pub fn repair(&mut self, from: NodeId, to: NodeId) {
        self.cut.remove(&(from, to));
    }

    /// Restores every link.
    pub fn repair_all(&mut self) {
        self.cut.clear();
    }

    /// Whether `from → to` is cut.
    pub fn is_cut(&self, from: NodeId, to: NodeId) -> bool {
        self.cut.contains(&(from, to))
    }

    /// Holds `from → to`.
    pub fn hold(&mut self, from: NodeId, to: NodeId) {
        self.held.insert((from, to));
    }

    /// Stops holding `from → to` and returns its parked frames in send order.
    pub fn release(&mut self, from: NodeId, to: NodeId) -> Vec<(NodeId, NodeId, Frame)> {
        self.held.remove(&(from, to));
        let (out, keep) = std::mem::take(&mut self.parked)
            .into_iter()
            .partition(|(f, t, _)| (*f, *t) == (from, to));
        self.parked = keep;
        out
    }

    /// Releases every hold.
    pub fn release_all(&mut self) -> Vec<(NodeId, NodeId, Frame)> {
        self.held.clear();
        std::mem::take(&mut self.parked)
    }

    /// Directed links currently cut.
    pub fn cut_links(&self) -> usize {
        self.cut.len()
    }
}
