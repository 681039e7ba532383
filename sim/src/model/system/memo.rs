//! Memo tables: what an actor does with an event (an index into the model's log of steps), and
//! what a history becomes when a message is sent, computed once per distinct (interned state,
//! interned event) and looked up afterwards.
//!
//! Why: exploration reaches the same actor state with the same message in flight in thousands
//! of model states that differ only in what other actors are doing. Running the machine,
//! copying its state, passing messages through the codec and interning the results is most of
//! the cost of a step; the memo pays it once.
//!
//! Invariants: keys are pairs of interned ids, so a hit is exact. Entries are never replaced or
//! evicted, and when two threads compute the same entry the first to store it wins and both
//! use its result: a step is computed from the value the interner kept for the state's id, so
//! it is a function of the id even for machines with fields excluded from equality
//! (`t3fs_core::machine::Unobserved`, such as the storage node's I/O id counter, which still
//! shapes the ids in its output). Counterexample replay relies on that: replaying a path must
//! reproduce the states recorded along it. Not here: the model-wide effects of a step (network,
//! timers), which depend on the rest of the state.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::intern::Prehashed;

const SHARDS: usize = 64;

type Map<K> = HashMap<K, u32, BuildHasherDefault<Prehashed>>;

thread_local! {
    /// Each thread's copy of the entries it has used, by (memo, key): read without a lock, as
    /// every step looks one up (the shared map's lock and its cache line are hot otherwise).
    static SEEN: RefCell<Map<(u64, u64)>> = RefCell::default();
}

static MEMOS: AtomicU64 = AtomicU64::new(0);

/// A map from a pair of ids to a computed id.
pub struct Memo {
    /// Distinguishes this memo's entries in the threads' copies.
    id: u64,
    shards: Vec<Mutex<Map<u64>>>,
    len: AtomicUsize,
}

/// Mixes a key pair into a well-spread 64-bit key (the maps use it unhashed).
fn key(a: u32, b: u32) -> u64 {
    let k = u64::from(a) << 32 | u64::from(b);
    // A bijection (odd multiplier, xor-shift), so distinct pairs stay distinct keys.
    let k = (k ^ k >> 29).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    k ^ k >> 32
}

impl Memo {
    pub fn new() -> Self {
        Self {
            id: MEMOS.fetch_add(1, Ordering::Relaxed),
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            len: AtomicUsize::new(0),
        }
    }

    /// The value for `(a, b)`: stored, or computed by `f` (outside the lock) and stored.
    pub fn get_or(&self, a: u32, b: u32, f: impl FnOnce() -> u32) -> u32 {
        let k = key(a, b);
        if let Some(v) = SEEN.with(|seen| seen.borrow().get(&(self.id, k)).copied()) {
            return v;
        }
        let shard = &self.shards[(k >> 40) as usize % SHARDS];
        let stored = shard.lock().expect("memo lock").get(&k).copied();
        let v = match stored {
            Some(v) => v,
            None => {
                let v = f();
                *shard
                    .lock()
                    .expect("memo lock")
                    .entry(k)
                    .or_insert_with(|| {
                        self.len.fetch_add(1, Ordering::Relaxed);
                        v
                    })
            }
        };
        SEEN.with(|seen| seen.borrow_mut().insert((self.id, k), v));
        v
    }

    /// Entries stored.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_distinct_and_first_value_wins() {
        let mut keys: Vec<u64> = (0..300u32)
            .flat_map(|a| (0..300u32).map(move |b| key(a, b)))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), 90_000);
        let (m, n) = (Memo::new(), Memo::new());
        assert_eq!(m.get_or(1, 2, || 7), 7);
        assert_eq!(m.get_or(1, 2, || 9), 7);
        assert_eq!(n.get_or(1, 2, || 9), 9);
        assert_eq!(m.len(), 1);
    }
}
