//! [`VecMap`]: an ordered map kept as a sorted double-ended queue, for the maps on every step's
//! path whose keys arrive in increasing order (I/O ids, request ids) and leave roughly in that
//! order.
//!
//! A `BTreeMap` pays a node search, and on removal a shift of a node's keys and values, per
//! operation; these maps mostly hold a handful of entries (the I/O a node has in flight, a
//! client's running calls), where a sorted queue appends in O(1) and finds by binary search in
//! a cache line or two. They were about a twentieth of the simulator's instructions as B-trees.
//! A queue rather than a vector because a real client may keep up to a thousand chunk I/Os in
//! flight and completes them oldest first: removing near the front moves only the entries before
//! it.
//!
//! Invariant: keys are unique and strictly increasing in the queue. Iteration is in key order,
//! and equality, ordering, hashing and `Debug` are exactly those of a `BTreeMap` holding the
//! same entries (the queue's hash writes the length, then each `(key, value)` in order, as the
//! B-tree's does), so model-checker fingerprints and simulator traces do not depend on which of
//! the two a machine uses. Not for large maps with removals in the middle: those move every
//! entry between the removed one and the nearer end.

use core::fmt;
use std::collections::VecDeque;

/// Entries up to which a lookup scans instead of bisecting.
const SCAN_MAX: usize = 16;

/// An ordered map on a sorted queue.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VecMap<K, V> {
    entries: VecDeque<(K, V)>,
}

impl<K, V> Default for VecMap<K, V> {
    fn default() -> Self {
        Self {
            entries: VecDeque::new(),
        }
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for VecMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: Ord, V> VecMap<K, V> {
    /// An empty map.
    pub const fn new() -> Self {
        Self {
            entries: VecDeque::new(),
        }
    }

    #[inline]
    fn find(&self, k: &K) -> Result<usize, usize> {
        // The newest and the oldest keys are the ones most often asked for (a new I/O, a
        // completion in submission order): try the ends before searching, and scan a short
        // queue rather than bisect it (its two halves make each probe dearer).
        let n = self.entries.len();
        match (self.entries.front(), self.entries.back()) {
            (_, Some((last, _))) if last < k => Err(n),
            (_, Some((last, _))) if last == k => Ok(n - 1),
            (Some((first, _)), _) if first == k => Ok(0),
            _ if n <= SCAN_MAX => match self.entries.iter().position(|(e, _)| e >= k) {
                Some(i) if self.entries[i].0 == *k => Ok(i),
                Some(i) => Err(i),
                None => Err(n),
            },
            _ => self.entries.binary_search_by(|(e, _)| e.cmp(k)),
        }
    }

    /// Inserts `v` at `k`, returning the value it replaced.
    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        match self.find(&k) {
            Ok(i) => Some(core::mem::replace(&mut self.entries[i].1, v)),
            Err(i) if i == self.entries.len() => {
                self.entries.push_back((k, v));
                None
            }
            Err(i) => {
                self.entries.insert(i, (k, v));
                None
            }
        }
    }

    /// Removes `k`, returning its value.
    pub fn remove(&mut self, k: &K) -> Option<V> {
        let (_, v) = match self.find(k).ok()? {
            0 => self.entries.pop_front(),
            i => self.entries.remove(i),
        }?;
        Some(v)
    }

    /// The value at `k`.
    pub fn get(&self, k: &K) -> Option<&V> {
        self.find(k).ok().map(|i| &self.entries[i].1)
    }

    /// The value at `k`, mutably.
    pub fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        self.find(k).ok().map(|i| &mut self.entries[i].1)
    }

    /// Whether `k` has a value.
    pub fn contains_key(&self, k: &K) -> bool {
        self.find(k).is_ok()
    }

    /// Keeps the entries `f` accepts.
    pub fn retain(&mut self, mut f: impl FnMut(&K, &mut V) -> bool) {
        self.entries.retain_mut(|(k, v)| f(k, v));
    }
}

impl<K, V> VecMap<K, V> {
    /// Entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> + ExactSizeIterator {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Values in key order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.entries.iter().map(|(_, v)| v)
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

impl<K: Ord, V> core::ops::Index<&K> for VecMap<K, V> {
    type Output = V;

    /// The value at `k`; panics if there is none, as a `BTreeMap` does.
    fn index(&self, k: &K) -> &V {
        self.get(k).expect("key in the map")
    }
}

impl<K, V> IntoIterator for VecMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::collections::vec_deque::IntoIter<(K, V)>;

    /// Entries in key order.
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl<'a, K, V> IntoIterator for &'a VecMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = core::iter::Map<
        std::collections::vec_deque::Iter<'a, (K, V)>,
        fn(&'a (K, V)) -> (&'a K, &'a V),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use crate::testing::std_hash as hash;

    /// A seeded mix of mostly increasing inserts, removals anywhere, replacements and retains
    /// leaves the map equal to a B-tree fed the same, in contents, order, hash and Debug.
    #[test]
    fn behaves_as_a_btree_map() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut v, mut b) = (VecMap::new(), BTreeMap::new());
        let (mut top, mut largest) = (0u64, 0);
        for step in 0..20_000u64 {
            match next() % 8 {
                0..=3 => {
                    top += 1 + next() % 3;
                    // Now and then an old key comes back (a replacement) or a gap is filled.
                    let k = if next() % 5 == 0 {
                        top - next() % top.min(10)
                    } else {
                        top
                    };
                    assert_eq!(v.insert(k, step), b.insert(k, step));
                }
                4..=6 => {
                    // Near the newest key, or the oldest (completions in submission order).
                    let k = match next() % 3 {
                        0 => b.keys().next().copied().unwrap_or(0),
                        _ => top.saturating_sub(next() % 12),
                    };
                    assert_eq!(v.remove(&k), b.remove(&k));
                    assert_eq!(v.get(&(k + 1)), b.get(&(k + 1)));
                    assert_eq!(v.contains_key(&k), b.contains_key(&k));
                }
                _ => {
                    let m = 2 + next() % 3;
                    v.retain(|k, _| k % m != 0);
                    b.retain(|k, _| k % m != 0);
                }
            }
            if let Some(val) = v.get_mut(&top) {
                *val += 1;
                *b.get_mut(&top).expect("same keys") += 1;
            }
            assert_eq!(v.len(), b.len());
            largest = largest.max(v.len());
        }
        assert!(largest > 2 * SCAN_MAX, "both lookups ran: {largest}");
        assert!(v.iter().eq(b.iter()));
        assert_eq!(hash(&v), hash(&b));
        assert_eq!(format!("{v:?}"), format!("{b:?}"));
        assert!(v.values().eq(b.values()));
    }
}
