//! The two volatile tables of a running node: armed timers with their generation, and the I/O
//! it has in flight (and the reused buffer its steps collect their actions in).
//!
//! Invariants: setting a timer replaces the armed one of the same name and gives it a fresh
//! generation, so a fire whose generation is not the armed one (cancelled, replaced, or set by
//! an earlier incarnation) is dropped. Generations keep growing across [`Tables::clear`] (a
//! crash), so a timer of a dead incarnation can never match a new one. Every I/O id is in
//! [`Inflight`] from submission until its one completion; a completion for an unknown id is
//! dropped. Not here: when timers fire or I/O completes (the driver's `Host`).

use std::collections::BTreeMap;

use crate::client::Client;
use crate::ids::{IoId, TargetId};
use crate::machine::Outbox;
use crate::meta::server::MetaServer;
use crate::mgmtd::Mgmtd;
use crate::storage::StorageNode;

use super::AnyTimer;

/// Where an in-flight I/O went.
#[derive(Clone, Copy, Debug, Eq, Ord, PartialEq, PartialOrd)]
pub enum IoDest {
    /// A target's chunk store.
    Chunk(TargetId),
    /// The KV.
    Kv,
}

/// Armed timers of a node, by name, with the generation that may fire and the host's handle
/// of that fire (so a host that queues fires can drop a stale one without a table of its own).
#[derive(Debug, Default)]
pub struct Timers {
    armed: BTreeMap<AnyTimer, (u64, u64)>,
    next: u64,
}

impl Timers {
    /// The generation for the next [`Timers::arm`].
    pub fn next_gen(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Arms `t` with generation `gen` and the host's `handle` of its fire, replacing an armed
    /// one; returns the replaced fire's handle.
    pub fn arm(&mut self, t: AnyTimer, gen: u64, handle: u64) -> Option<u64> {
        self.armed.insert(t, (gen, handle)).map(|(_, h)| h)
    }

    /// Disarms `t`; returns its fire's handle (`None` when not armed).
    pub fn cancel(&mut self, t: AnyTimer) -> Option<u64> {
        self.armed.remove(&t).map(|(_, h)| h)
    }

    /// Whether a fire of `t` with generation `gen` is live; a live fire disarms it.
    pub fn fire(&mut self, t: AnyTimer, gen: u64) -> bool {
        if self.armed.get(&t).map(|&(g, _)| g) != Some(gen) {
            return false;
        }
        self.armed.remove(&t);
        true
    }

    /// The host handles of the armed timers' fires, in timer order.
    pub fn handles(&self) -> impl Iterator<Item = u64> + '_ {
        self.armed.values().map(|&(_, h)| h)
    }

    /// Armed timers (for status and tests).
    pub fn len(&self) -> usize {
        self.armed.len()
    }

    /// Whether none is armed.
    pub fn is_empty(&self) -> bool {
        self.armed.is_empty()
    }
}

/// I/O a node has in flight, by id.
#[derive(Debug, Default)]
pub struct Inflight {
    ios: crate::vec_map::VecMap<IoId, IoDest>,
}

impl Inflight {
    /// Records a submitted I/O.
    pub fn insert(&mut self, id: IoId, dest: IoDest) {
        self.ios.insert(id, dest);
    }

    /// Takes the record of a completed I/O; `None` for an unknown (stale) id.
    pub fn complete(&mut self, id: IoId) -> Option<IoDest> {
        self.ios.remove(&id)
    }

    /// Where I/O `id` went, if it is in flight.
    pub fn get(&self, id: IoId) -> Option<IoDest> {
        self.ios.get(&id).copied()
    }

    /// Forgets the KV requests in flight and returns how many there were. For a node that
    /// stops: a request to the KV is applied or not whether or not its answer is awaited, and a
    /// KV that is gone would never answer.
    pub fn forget_kv(&mut self) -> usize {
        let before = self.ios.len();
        self.ios.retain(|_, d| !matches!(d, IoDest::Kv));
        before - self.ios.len()
    }

    /// I/O in flight.
    pub fn len(&self) -> usize {
        self.ios.len()
    }

    /// Whether nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.ios.is_empty()
    }
}

/// One outbox per machine kind, kept between steps: a step's actions are collected and carried
/// out within the step, so the buffer is empty again when it ends, and reusing it saves the
/// heap allocation a fresh outbox made on almost every step.
#[derive(Debug, Default)]
pub struct Outboxes {
    pub(super) mgmtd: Outbox<Mgmtd>,
    pub(super) storage: Outbox<StorageNode>,
    pub(super) client: Outbox<Client>,
    pub(super) meta: Outbox<MetaServer>,
}

/// A node's volatile tables.
#[derive(Debug, Default)]
pub struct Tables {
    /// Armed timers.
    pub timers: Timers,
    /// I/O in flight.
    pub inflight: Inflight,
    /// The step's outbox (empty between steps).
    pub outboxes: Outboxes,
}

impl Tables {
    /// Forgets every timer and in-flight I/O (the process died); generations keep growing.
    pub fn clear(&mut self) {
        self.timers.armed.clear();
        self.inflight.ios.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientTimer;

    #[test]
    fn replaced_and_stale_fires_are_dropped() {
        let mut t = Tables::default();
        let k = AnyTimer::Client(ClientTimer::Refresh);
        let arm = |t: &mut Tables| {
            let g = t.timers.next_gen();
            t.timers.arm(k, g, g * 10);
            g
        };
        let g1 = arm(&mut t);
        let g2 = arm(&mut t);
        assert!(!t.timers.fire(k, g1), "a replaced timer does not fire");
        t.clear();
        assert!(!t.timers.fire(k, g2), "a crash disarms");
        let g3 = arm(&mut t);
        assert!(g3 > g2, "generations outlive crashes");
        assert!(t.timers.fire(k, g3));
        assert!(!t.timers.fire(k, g3), "a timer fires once");
    }

    #[test]
    fn replacing_or_cancelling_a_timer_gives_back_the_hosts_handle() {
        let mut t = Timers::default();
        let k = AnyTimer::Client(ClientTimer::Refresh);
        let g = t.next_gen();
        assert_eq!(t.arm(k, g, 7), None);
        let g = t.next_gen();
        assert_eq!(t.arm(k, g, 8), Some(7), "the replaced fire's handle");
        assert_eq!(t.handles().collect::<Vec<_>>(), [8]);
        assert_eq!(t.cancel(k), Some(8));
        assert_eq!(t.cancel(k), None, "nothing armed");
    }

    #[test]
    fn completions_are_taken_once() {
        let mut t = Tables::default();
        t.inflight.insert(IoId(7), IoDest::Kv);
        assert_eq!(t.inflight.complete(IoId(7)), Some(IoDest::Kv));
        assert_eq!(t.inflight.complete(IoId(7)), None);
        t.inflight.insert(IoId(8), IoDest::Kv);
        t.inflight.insert(IoId(9), IoDest::Chunk(TargetId(1)));
        assert_eq!(t.inflight.forget_kv(), 1);
        assert_eq!(t.inflight.len(), 1);
    }
}
