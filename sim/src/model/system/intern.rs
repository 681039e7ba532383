//! Interning: every distinct actor state, message, timer and history gets a small integer id
//! the first time it appears, so a model state is a short array of ids.
//!
//! Each id also carries one word of facts derived from its value on first use (what a property
//! or the canonicalizer needs to know of it), so hot paths read a word instead of the value.
//!
//! Invariants: ids are dense from 0 and never reused; equal values (by `Eq`) get the same id,
//! and the value kept for an id is the first one interned (later equal values are dropped, so
//! fields excluded from equality keep the first value's contents); an id is handed out only
//! after its value is stored, so reading it never blocks. Not here: removal (tables only grow;
//! they hold distinct *local* values, far fewer than model states).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

use super::shared::Shared;

/// Segment `k` holds ids `[BASE * (2^k - 1), BASE * (2^(k+1) - 1))`.
const BASE: usize = 1024;
const SEGMENTS: usize = 22;

/// An append-only vector readable without locks while another thread appends.
pub struct Arena<T> {
    segments: [OnceLock<Box<[OnceLock<T>]>>; SEGMENTS],
}

fn locate(id: u32) -> (usize, usize) {
    let n = id as usize / BASE + 1;
    let k = (usize::BITS - 1 - n.leading_zeros()) as usize;
    (k, id as usize - BASE * ((1 << k) - 1))
}

impl<T> Arena<T> {
    fn new() -> Self {
        Self {
            segments: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    /// The value of `id` (which must have been set).
    pub fn get(&self, id: u32) -> &T {
        let (k, i) = locate(id);
        self.segments[k]
            .get()
            .and_then(|s| s[i].get())
            .expect("interned id")
    }

    fn set(&self, id: u32, value: T) {
        let (k, i) = locate(id);
        let seg =
            self.segments[k].get_or_init(|| (0..BASE << k).map(|_| OnceLock::new()).collect());
        assert!(seg[i].set(value).is_ok(), "id set twice");
    }
}

/// An append-only list: values by index, readable while another thread appends.
pub struct Log<T> {
    arena: Arena<T>,
    next: AtomicU32,
}

impl<T> Log<T> {
    pub fn new() -> Self {
        Self {
            arena: Arena::new(),
            next: AtomicU32::new(0),
        }
    }

    /// Appends `value`; returns its index.
    pub fn push(&self, value: T) -> u32 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        assert!(id < u32::MAX >> 2, "log full");
        self.arena.set(id, value);
        id
    }

    /// The value at `index` (returned by `push`).
    pub fn get(&self, index: u32) -> &T {
        self.arena.get(index)
    }
}

/// Keys are hashed already ([`Shared`] writes its stored hash).
#[derive(Default)]
pub struct Prehashed(u64);

impl Hasher for Prehashed {
    fn write(&mut self, _: &[u8]) {
        unreachable!("prehashed keys write one u64")
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = i;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

const SHARDS: usize = 32;

type IdMap<T> = HashMap<Shared<T>, u32, BuildHasherDefault<Prehashed>>;

/// Values by id and ids by value, each with one lazily computed word of derived facts.
pub struct Interner<T> {
    arena: Arena<(Shared<T>, OnceLock<u64>)>,
    ids: Vec<Mutex<IdMap<T>>>,
    next: AtomicU32,
}

impl<T: Hash + Eq> Interner<T> {
    pub fn new() -> Self {
        Self {
            arena: Arena::new(),
            ids: (0..SHARDS).map(|_| Mutex::default()).collect(),
            next: AtomicU32::new(0),
        }
    }

    /// The id of `value`, interning it if new.
    pub fn id(&self, value: Shared<T>) -> u32 {
        let mut map = self.ids[(value.hash_value() >> 40) as usize % SHARDS]
            .lock()
            .expect("interner lock");
        if let Some(&id) = map.get(&value) {
            return id;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        assert!(id < u32::MAX >> 2, "interner full");
        self.arena.set(id, (value.clone(), OnceLock::new()));
        map.insert(value, id);
        id
    }

    /// The value of `id`.
    pub fn get(&self, id: u32) -> &T {
        &self.arena.get(id).0
    }

    /// The facts of `id`: `derive` of its value, computed on first use.
    pub fn fact(&self, id: u32, derive: impl FnOnce(&T) -> u64) -> u64 {
        let (value, fact) = self.arena.get(id);
        *fact.get_or_init(|| derive(value))
    }

    /// Ids handed out so far.
    pub fn len(&self) -> usize {
        self.next.load(Ordering::Relaxed) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_dense_stable_and_shared_by_equal_values() {
        let t = Interner::new();
        let ids: Vec<u32> = (0..5000u32).map(|i| t.id(Shared::new(i % 3000))).collect();
        assert_eq!(&ids[..3], &[0, 1, 2]);
        assert_eq!(ids[3000], 0);
        assert_eq!(t.len(), 3000);
        assert!((0..3000).all(|i| *t.get(i) == i));
        for id in [0, 1023, 1024, 3071, 3072, 100_000] {
            let (k, i) = locate(id);
            assert!(i < BASE << k, "{id}");
        }
    }
}
