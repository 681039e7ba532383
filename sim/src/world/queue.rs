//! The event queue: a min-heap ordered by (simulated time, insertion sequence), so two events at
//! the same instant run in the order they were scheduled and a run is a pure function of its
//! seed.
//!
//! Invariant: `pop` never returns an event earlier than one already popped. Not here: what
//! events mean (mod.rs).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use t3fs_core::time::Instant;

struct Entry<E> {
    at: Instant,
    seq: u64,
    ev: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// A deterministic timed queue.
pub struct Queue<E> {
    heap: BinaryHeap<Reverse<Entry<E>>>,
    seq: u64,
    now: Instant,
}

impl<E> Default for Queue<E> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            seq: 0,
            now: Instant::ZERO,
        }
    }
}

impl<E> Queue<E> {
    /// Schedules `ev` at `at` (clamped to now: the past is not reachable).
    pub fn push(&mut self, at: Instant, ev: E) {
        let at = at.max(self.now);
        self.seq += 1;
        self.heap.push(Reverse(Entry {
            at,
            seq: self.seq,
            ev,
        }));
    }

    /// The next event, advancing the clock to its time.
    pub fn pop(&mut self) -> Option<(Instant, E)> {
        let Reverse(e) = self.heap.pop()?;
        self.now = e.at;
        Some((e.at, e.ev))
    }

    /// Time of the next event.
    pub fn peek_time(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse(e)| e.at)
    }

    /// The current simulated time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// No events waiting.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_time_then_insertion() {
        let mut q = Queue::default();
        q.push(Instant(5), "b");
        q.push(Instant(1), "a");
        q.push(Instant(5), "c");
        let order: Vec<&str> = core::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, ["a", "b", "c"]);
        q.push(Instant(0), "late");
        assert_eq!(
            q.pop(),
            Some((Instant(5), "late")),
            "the past is clamped to now"
        );
    }
}
