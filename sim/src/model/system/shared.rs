//! [`Shared`]: a value hashed once, when it is created, and shared by reference afterwards (the
//! interner's keys); and the hasher that hashes them and fingerprints model states.
//!
//! The hasher folds each word into a 64-bit accumulator with a 128-bit multiply (as foldhash
//! and wyhash do): several times faster than SipHash on the large machine states, with
//! well-mixed 64-bit results. Interning compares values on equal hashes, so a collision there
//! costs a comparison; a collision of two model states' fingerprints would merge them, as in
//! any explicit-state checker (stateright's included): about one chance in 10^4 at 70 million
//! states. Not here: resistance to adversarial inputs (none exist in a model checker).

use std::fmt::{self, Debug};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

const SEED: u64 = 0x243f_6a88_85a3_08d3;
const MUL: u64 = 0x9e37_79b9_7f4a_7c15;

fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// The hasher of [`Shared`] values.
pub struct FoldHasher(u64);

impl Default for FoldHasher {
    fn default() -> Self {
        Self(SEED)
    }
}

impl Hasher for FoldHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.write_u64(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            // The length tells "ab" from "ab\0".
            self.write_u64(u64::from_le_bytes(last) ^ (rest.len() as u64) << 59);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_u16(&mut self, i: u16) {
        self.write_u64(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = fold(self.0 ^ i, MUL);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn finish(&self) -> u64 {
        fold(self.0, SEED ^ MUL)
    }
}

/// Hashes `value` with [`FoldHasher`].
pub fn hash_of<T: Hash + ?Sized>(value: &T) -> u64 {
    let mut h = FoldHasher::default();
    value.hash(&mut h);
    h.finish()
}

/// A value with its hash computed once. Cloning shares the value; equality compares hashes
/// first and then identity, so a deep comparison happens only for equal values held twice.
pub struct Shared<T> {
    hash: u64,
    value: Arc<T>,
}

impl<T: Hash> Shared<T> {
    /// Wraps `value`, hashing it.
    pub fn new(value: T) -> Self {
        Self {
            hash: hash_of(&value),
            value: Arc::new(value),
        }
    }
}

impl<T> Shared<T> {
    /// The hash computed at creation.
    pub fn hash_value(&self) -> u64 {
        self.hash
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self {
            hash: self.hash,
            value: Arc::clone(&self.value),
        }
    }
}

impl<T> std::ops::Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> AsRef<T> for Shared<T> {
    fn as_ref(&self) -> &T {
        &self.value
    }
}

impl<T> Hash for Shared<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl<T: PartialEq> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash
            && (Arc::ptr_eq(&self.value, &other.value) || *self.value == *other.value)
    }
}

impl<T: Eq> Eq for Shared<T> {}

impl<T: Debug> Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_tell_apart_what_equality_does() {
        assert_ne!(hash_of(&(0u64, 5u64)), hash_of(&(5u64, 0u64)));
        assert_ne!(hash_of(&[0u8; 3][..]), hash_of(&[0u8; 2][..]));
        assert_ne!(hash_of("ab"), hash_of("ab\0"));
        assert_eq!(Shared::new(vec![1, 2]), Shared::new(vec![1, 2]));
        assert_ne!(Shared::new(vec![1, 2]), Shared::new(vec![2, 1]));
        // 64-bit hashes of a million small distinct values do not collide.
        let mut seen: Vec<u64> = (0u32..1_000_000).map(|i| hash_of(&(i, i % 7))).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 1_000_000);
    }
}
