//! [`Payload`]: the bytes of a write, shared instead of copied.
//!
//! A storage target hands one write's bytes to its chunk store and, later, to its successor
//! (and keeps them for a forward retry); a client keeps them for its own retries. With a plain
//! `Vec<u8>` each of those is a copy of up to a chunk (1 MiB), several per replica per write;
//! a `Payload` is a reference-counted buffer, so each is a count increment.
//!
//! Invariant: a payload is immutable once made. Equality, ordering, hashing and `Debug` are the
//! bytes' own, exactly as for the `Vec<u8>` it replaced, so model-checker states and simulator
//! trace hashes do not depend on whether bytes are shared. Not here: any I/O.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// Immutable, cheaply cloned bytes.
#[derive(Clone, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct Payload(Arc<Vec<u8>>);

impl Payload {
    /// The bytes as a vector: moved out when this is the only holder, else copied.
    pub fn into_vec(self) -> Vec<u8> {
        Arc::try_unwrap(self.0).unwrap_or_else(|shared| (*shared).clone())
    }
}

impl Deref for Payload {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for Payload {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl From<Vec<u8>> for Payload {
    fn from(v: Vec<u8>) -> Self {
        Self(Arc::new(v))
    }
}

impl From<&[u8]> for Payload {
    fn from(v: &[u8]) -> Self {
        Self(Arc::new(v.to_vec()))
    }
}

impl PartialEq<Vec<u8>> for Payload {
    fn eq(&self, other: &Vec<u8>) -> bool {
        *self.0 == *other
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{DefaultHasher, Hash, Hasher};

    fn hash(x: &impl Hash) -> u64 {
        let mut h = DefaultHasher::new();
        x.hash(&mut h);
        h.finish()
    }

    #[test]
    fn a_payload_hashes_prints_and_compares_as_its_bytes() {
        let v = vec![1u8, 2, 3];
        let p = Payload::from(v.clone());
        assert_eq!(hash(&p), hash(&v));
        assert_eq!(format!("{p:?}"), format!("{v:?}"));
        assert_eq!(p, v);
        let (one, two) = (Payload::from(vec![1u8]), Payload::from(vec![2u8]));
        assert!(one < two, "ordered as the bytes");
    }

    #[test]
    fn a_clone_shares_and_into_vec_moves_only_when_alone() {
        let p = Payload::from(vec![9u8; 4096]);
        let q = p.clone();
        assert_eq!(p.as_ptr(), q.as_ptr(), "shared, not copied");
        let v = q.into_vec();
        assert_ne!(v.as_ptr(), p.as_ptr(), "another holder: copied");
        let ptr = p.as_ptr();
        let alone = p.into_vec();
        assert_eq!(alone.as_ptr(), ptr, "the last holder: moved");
    }
}
