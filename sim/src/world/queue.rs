//! The event queue: a min-heap ordered by (simulated time, insertion sequence), so two events at
//! the same instant run in the order they were scheduled and a run is a pure function of its
//! seed.
//!
//! Invariant: `pop` never returns an event earlier than one already popped, nor a cancelled
//! one (cancelling drops a timer whose fire became stale, which would otherwise sit in the heap
//! and make every operation on it slower). Not here: what events mean (mod.rs).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use t3fs_core::time::Instant;

/// A heap key, one integer: time in the high 64 bits, then the insertion sequence (40 bits),
/// then the slot holding the event (24 bits). It is small and compares in one instruction, so
/// sifting is cheap (a world keeps over a thousand events pending, most of them timers); the
/// slot never decides an order, since sequences are unique.
type Key = Reverse<u128>;

const SLOT_BITS: u32 = 24;

fn key(at: Instant, h: Handle) -> Key {
    assert!(
        h.seq < 1 << (64 - SLOT_BITS),
        "fewer than 2^40 events per run"
    );
    assert!(h.slot < 1 << SLOT_BITS, "fewer than 2^24 pending events");
    Reverse(u128::from(at.0) << 64 | u128::from(h.to_bits()))
}

fn unkey(k: Key) -> (Instant, u32) {
    let Reverse(k) = k;
    (Instant((k >> 64) as u64), Handle::from_bits(k as u64).slot)
}

/// A pushed event, to cancel it by: its slot and sequence (a slot is reused once its event is
/// popped, so the sequence tells whether the slot still holds this event).
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct Handle {
    slot: u32,
    seq: u64,
}

/// Cancelled events kept in the heap before it is compacted (and at least half of it). Small:
/// a run has a few dozen live events, and every operation cancels a retry timer or two, so at
/// 256 the heap was mostly stale keys and each pop sifted through them (32 ran 3% faster).
const COMPACT_AFTER: usize = 32;

impl Handle {
    /// The handle as one integer, as the heap key holds it (the node runtime keeps it beside
    /// the timer it fires).
    pub fn to_bits(self) -> u64 {
        self.seq << SLOT_BITS | u64::from(self.slot)
    }

    /// The handle [`Handle::to_bits`] made.
    pub fn from_bits(bits: u64) -> Self {
        Self {
            slot: (bits & ((1 << SLOT_BITS) - 1)) as u32,
            seq: bits >> SLOT_BITS,
        }
    }
}

/// A deterministic timed queue.
pub struct Queue<E> {
    heap: BinaryHeap<Key>,
    /// Events by slot, with their sequence; `None` once popped or cancelled.
    slots: Vec<Option<(u64, E)>>,
    /// Slots free for reuse.
    free: Vec<u32>,
    /// Keys in the heap whose event was cancelled.
    cancelled: usize,
    seq: u64,
    now: Instant,
}

impl<E> Default for Queue<E> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            cancelled: 0,
            seq: 0,
            now: Instant::ZERO,
        }
    }
}

impl<E> Queue<E> {
    /// Schedules `ev` at `at` (clamped to now: the past is not reachable).
    pub fn push(&mut self, at: Instant, ev: E) -> Handle {
        let at = at.max(self.now);
        self.seq += 1;
        let entry = Some((self.seq, ev));
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = entry;
                s
            }
            None => {
                self.slots.push(entry);
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^24 pending events")
            }
        };
        let h = Handle {
            slot,
            seq: self.seq,
        };
        self.heap.push(key(at, h));
        h
    }

    /// Drops the event of `h` if it is still pending (a no-op once it was popped).
    pub fn cancel(&mut self, h: Handle) {
        let s = &mut self.slots[h.slot as usize];
        if s.as_ref().is_some_and(|(seq, _)| *seq == h.seq) {
            *s = None;
            self.cancelled += 1;
            if self.cancelled > COMPACT_AFTER && 2 * self.cancelled > self.heap.len() {
                self.compact();
            }
        }
    }

    /// Removes the keys of cancelled events and frees their slots.
    fn compact(&mut self) {
        let (slots, free) = (&self.slots, &mut self.free);
        self.heap.retain(|&k| {
            let (_, slot) = unkey(k);
            let live = slots[slot as usize].is_some();
            if !live {
                free.push(slot);
            }
            live
        });
        self.cancelled = 0;
    }

    /// Pops keys of cancelled events off the top.
    fn skip_cancelled(&mut self) {
        while let Some(&k) = self.heap.peek() {
            let (_, slot) = unkey(k);
            if self.slots[slot as usize].is_some() {
                return;
            }
            self.heap.pop();
            self.free.push(slot);
            self.cancelled -= 1;
        }
    }

    /// The next event, advancing the clock to its time.
    pub fn pop(&mut self) -> Option<(Instant, E)> {
        self.skip_cancelled();
        let (at, slot) = unkey(self.heap.pop()?);
        self.now = at;
        self.free.push(slot);
        let (_, ev) = self.slots[slot as usize]
            .take()
            .expect("a pending slot holds its event");
        Some((at, ev))
    }

    /// Time of the next event.
    pub fn peek_time(&mut self) -> Option<Instant> {
        self.skip_cancelled();
        self.heap.peek().map(|&k| unkey(k).0)
    }

    /// The current simulated time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.heap.len() - self.cancelled
    }

    /// No events waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

    #[test]
    fn cancelled_events_never_pop_and_their_slots_are_reused() {
        let mut q = Queue::default();
        let handles: Vec<Handle> = (0..1000).map(|i| q.push(Instant(10 + i), i)).collect();
        // Cancel every event but each tenth: the heap compacts along the way.
        for (i, h) in handles.iter().enumerate() {
            if i % 10 != 0 {
                q.cancel(*h);
            }
        }
        assert_eq!(q.len(), 100);
        assert!(q.heap.len() < 1000, "compacted");
        q.cancel(handles[3]); // Twice: nothing more happens.
        assert_eq!(q.len(), 100);
        let popped: Vec<u64> = core::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(popped, (0..1000).step_by(10).collect::<Vec<_>>());
        // A handle of a popped event whose slot was reused cancels nothing.
        let a = q.push(Instant(5000), 1);
        assert_eq!(q.pop(), Some((Instant(5000), 1)));
        let _b = q.push(Instant(6000), 2);
        q.cancel(a);
        assert_eq!(q.pop(), Some((Instant(6000), 2)));
        assert!(q.is_empty() && q.peek_time().is_none());
    }
}
