//! The event queue: a min-heap ordered by (simulated time, insertion sequence), so two events at
//! the same instant run in the order they were scheduled and a run is a pure function of its
//! seed.
//!
//! Invariant: `pop` never returns an event earlier than one already popped. Not here: what
//! events mean (mod.rs).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use t3fs_core::time::Instant;

/// A heap key, one integer: time in the high 64 bits, then the insertion sequence (40 bits),
/// then the slot holding the event (24 bits). It is small and compares in one instruction, so
/// sifting is cheap (a world keeps over a thousand events pending, most of them timers); the
/// slot never decides an order, since sequences are unique.
type Key = Reverse<u128>;

const SLOT_BITS: u32 = 24;

fn key(at: Instant, seq: u64, slot: u32) -> Key {
    assert!(
        seq < 1 << (64 - SLOT_BITS),
        "fewer than 2^40 events per run"
    );
    assert!(slot < 1 << SLOT_BITS, "fewer than 2^24 pending events");
    Reverse(u128::from(at.0) << 64 | u128::from(seq << SLOT_BITS | u64::from(slot)))
}

fn unkey(k: Key) -> (Instant, u32) {
    let Reverse(k) = k;
    (
        Instant((k >> 64) as u64),
        (k as u64 & ((1 << SLOT_BITS) - 1)) as u32,
    )
}

/// A deterministic timed queue.
pub struct Queue<E> {
    heap: BinaryHeap<Key>,
    /// Events by slot; `None` once popped.
    slots: Vec<Option<E>>,
    /// Slots free for reuse.
    free: Vec<u32>,
    seq: u64,
    now: Instant,
}

impl<E> Default for Queue<E> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
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
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(ev);
                s
            }
            None => {
                self.slots.push(Some(ev));
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^24 pending events")
            }
        };
        self.heap.push(key(at, self.seq, slot));
    }

    /// The next event, advancing the clock to its time.
    pub fn pop(&mut self) -> Option<(Instant, E)> {
        let (at, slot) = unkey(self.heap.pop()?);
        self.now = at;
        self.free.push(slot);
        let ev = self.slots[slot as usize]
            .take()
            .expect("a pending slot holds its event");
        Some((at, ev))
    }

    /// Time of the next event.
    pub fn peek_time(&self) -> Option<Instant> {
        self.heap.peek().map(|&k| unkey(k).0)
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
        // Slots are reused; order still follows time, then insertion.
        for (t, e) in [(9, "y"), (7, "x"), (9, "z")] {
            q.push(Instant(t), e);
        }
        let order: Vec<&str> = core::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, ["x", "y", "z"]);
        q.push(Instant(0), "late");
        assert_eq!(
            q.pop(),
            Some((Instant(9), "late")),
            "the past is clamped to now"
        );
        // Times use all 64 bits of the key's high half.
        q.push(Instant(u64::MAX), "end");
        q.push(Instant(u64::MAX - 1), "before end");
        assert_eq!(q.pop(), Some((Instant(u64::MAX - 1), "before end")));
        assert_eq!(q.peek_time(), Some(Instant(u64::MAX)));
    }
}
