//! [`Payload`]: the bytes of a write, shared instead of copied.
//!
//! A storage target hands one write's bytes to its chunk store and, later, to its successor
//! (and keeps them for a forward retry); a client keeps them for its own retries. With a plain
//! `Vec<u8>` each of those is a copy of up to a chunk (1 MiB), several per replica per write;
//! a `Payload` is a reference-counted buffer, so each is a count increment. Its CRC32Cs (per
//! 4 KiB block and whole, [`Sums`]) are computed once per buffer: the replica verifying the
//! client's checksum and its chunk store keeping block checksums share one pass over the bytes.
//!
//! Invariant: a payload is immutable once made. Equality, ordering, hashing and `Debug` are the
//! bytes' own, exactly as for the `Vec<u8>` it replaced, so model-checker states and simulator
//! trace hashes do not depend on whether bytes are shared, or recycled ([`Payload::recycled`]:
//! a real node's chunk buffers go back to its pool when the last holder drops them).
//! Not here: any I/O, or the pools themselves.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::{Arc, LazyLock, OnceLock};

use crate::crc32c::{self, Shift};

/// The block of [`Payload::sums`]: the real chunk stores keep one CRC32C per 4 KiB block.
pub const SUM_BLOCK: usize = 4096;

const SUM_SHIFT: Shift = Shift::zeros(SUM_BLOCK as u64);

/// CRC32C of each [`SUM_BLOCK`] of a payload (the last one its unpadded tail) and of the whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sums {
    /// One per block, in order (empty for empty bytes).
    pub blocks: Arc<[u32]>,
    /// Of all the bytes, folded from `blocks` without a second pass over them.
    pub whole: u32,
}

impl Sums {
    /// The sums of `bytes`: one pass.
    pub fn of(bytes: &[u8]) -> Self {
        let blocks: Arc<[u32]> = bytes.chunks(SUM_BLOCK).map(crc32c::checksum).collect();
        let whole = match blocks.split_last() {
            None => 0,
            Some((&last, body)) => {
                let tail = bytes.len() - body.len() * SUM_BLOCK;
                match body
                    .iter()
                    .copied()
                    .reduce(|acc, s| SUM_SHIFT.combine(acc, s))
                {
                    None => last,
                    Some(head) if tail == SUM_BLOCK => SUM_SHIFT.combine(head, last),
                    Some(head) => crc32c::combine(head, last, tail as u64),
                }
            }
        };
        Self { blocks, whole }
    }
}

/// Where a recycled payload's buffer goes when its last holder drops it: a real node's pool (a
/// chunk store's read results, the transport's inbound payloads), so that a stream of 1 MiB
/// reads reuses warm memory instead of faulting fresh pages in (on the hosts measured, a fresh
/// huge page cost about 5 ms). Nothing in the machines makes one.
pub type Home = Arc<dyn Fn(Vec<u8>) + Send + Sync>;

#[derive(Default)]
struct Inner {
    bytes: Vec<u8>,
    /// Computed on first use and shared by every holder: the replica verifying a write's
    /// checksum and its chunk store computing block checksums read the bytes once between
    /// them, not twice. A pure function of `bytes`, so no observable state.
    sums: OnceLock<Sums>,
    /// Where `bytes` go on drop (`None`: back to the allocator). Not part of the value.
    home: Option<Home>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(home) = self.home.take() {
            home(std::mem::take(&mut self.bytes));
        }
    }
}

/// Immutable, cheaply cloned bytes.
#[derive(Clone)]
pub struct Payload(Arc<Inner>);

/// Every empty payload shares one buffer: a message's payload slot is emptied each time it is
/// split from its head (`Msg::encode_split`) and filled with an empty one each time a head is
/// decoded, and those were a heap allocation apiece.
static EMPTY: LazyLock<Payload> = LazyLock::new(|| Payload(Arc::default()));

impl Default for Payload {
    fn default() -> Self {
        EMPTY.clone()
    }
}

impl Payload {
    /// The bytes as a vector: moved out when this is the only holder, else copied.
    pub fn into_vec(self) -> Vec<u8> {
        match Arc::try_unwrap(self.0) {
            // Moved out, a recycled buffer leaves its home an empty vector (which it ignores).
            Ok(mut inner) => std::mem::take(&mut inner.bytes),
            Err(shared) => shared.bytes.clone(),
        }
    }

    /// `bytes` as a payload whose buffer goes to `home` when the last holder drops it.
    pub fn recycled(bytes: Vec<u8>, home: &Home) -> Self {
        if bytes.is_empty() {
            return Self::default();
        }
        Self(Arc::new(Inner {
            bytes,
            sums: OnceLock::new(),
            home: Some(Arc::clone(home)),
        }))
    }

    /// The block and whole CRC32Cs of the bytes, computed once per buffer.
    pub fn sums(&self) -> &Sums {
        self.0.sums.get_or_init(|| Sums::of(self))
    }

    /// CRC32C of the bytes (from [`Payload::sums`]).
    pub fn checksum(&self) -> u32 {
        self.sums().whole
    }
}

impl Deref for Payload {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        &self.0.bytes
    }
}

impl AsRef<[u8]> for Payload {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        &self.0.bytes
    }
}

impl From<Vec<u8>> for Payload {
    fn from(bytes: Vec<u8>) -> Self {
        if bytes.is_empty() {
            return Self::default();
        }
        Self(Arc::new(Inner {
            bytes,
            sums: OnceLock::new(),
            home: None,
        }))
    }
}

impl From<&[u8]> for Payload {
    fn from(v: &[u8]) -> Self {
        v.to_vec().into()
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Payload {}

impl PartialOrd for Payload {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Payload {
    fn cmp(&self, other: &Self) -> Ordering {
        (**self).cmp(&**other)
    }
}

impl Hash for Payload {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

impl PartialEq<Vec<u8>> for Payload {
    fn eq(&self, other: &Vec<u8>) -> bool {
        **self == **other
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::std_hash as hash;

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

    #[test]
    fn a_recycled_buffer_goes_home_once_its_last_holder_drops_it() {
        use std::sync::Mutex;
        let back: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let b = Arc::clone(&back);
        let home: Home = Arc::new(move |v| b.lock().unwrap().push(v));
        let p = Payload::recycled(vec![5u8; 4096], &home);
        let ptr = p.as_ptr();
        assert_eq!(
            p,
            Payload::from(vec![5u8; 4096]),
            "the same value as a plain one"
        );
        let q = p.clone();
        drop(p);
        assert!(back.lock().unwrap().is_empty(), "a holder remains");
        drop(q);
        let home_now = back.lock().unwrap().pop().expect("returned");
        assert_eq!(home_now.as_ptr(), ptr, "the very buffer");
        let alone = Payload::recycled(vec![1u8; 8], &home).into_vec();
        assert_eq!(alone, vec![1u8; 8], "moved out");
        assert!(
            back.lock().unwrap().pop().unwrap().is_empty(),
            "home gets nothing to reuse"
        );
    }

    #[test]
    fn sums_are_the_block_and_whole_crcs_computed_once() {
        for len in [0, 1, 4095, 4096, 4097, 3 * 4096, 3 * 4096 + 5] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + i / 4096) as u8).collect();
            let p = Payload::from(bytes.clone());
            assert_eq!(p.checksum(), crc32c::checksum(&bytes), "len {len}");
            let blocks: Vec<u32> = bytes.chunks(SUM_BLOCK).map(crc32c::checksum).collect();
            assert_eq!(&*p.sums().blocks, &blocks[..], "len {len}");
            let q = p.clone();
            assert!(std::ptr::eq(p.sums(), q.sums()), "shared by every holder");
        }
    }
}
