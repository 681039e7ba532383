//! [`VecPool`]: vectors of one capacity (a chunk) for payloads that leave the thread that
//! filled them: a chunk store's read results and the transport's inbound bulk parts. A payload
//! made with [`Payload::recycled`] gives its vector back to the pool when its last holder drops
//! it, on whatever thread that is.
//!
//! Why: the data path allocated a fresh 1 MiB vector per chunk I/O and freed it on another
//! thread (a read result after the transport sent it; a received write after the store wrote
//! it), and the allocator kept answering with fresh memory. On the host measured, each fresh
//! huge page faulted in cost 5.5 to 7 ms: a loopback cluster's 1 MiB read p99 was 6 to 7 ms
//! against 0.7 ms for its chunk store alone, the time spent in one minor fault in every 60th or
//! so read's copy.
//!
//! Invariants: only lengths over half the capacity are pooled (a 4 KiB payload never pins a
//! 1 MiB vector); the pool keeps at most [`KEEP`] vectors, frees the rest, and takes back only
//! vectors of its capacity (one moved out of its payload comes back empty and is dropped).
//! Not here: aligned I/O buffers (the io_uring store's `BufPool`).

use std::sync::{Arc, Mutex};

use t3fs_core::payload::{Home, Payload};

/// Vectors each pool keeps: more than a node holds in flight at depth 1 to 16 per peer.
pub const KEEP: usize = 64;

/// The capacity the data path pools: the clusters' chunk size. Larger payloads get a vector of
/// their own.
pub const CHUNK: usize = 1 << 20;

/// Vectors of one capacity, shared with whichever thread drops the payload made of one.
pub struct VecPool {
    cap: usize,
    free: Arc<Mutex<Vec<Vec<u8>>>>,
    home: Home,
}

impl VecPool {
    /// A pool of vectors of `cap` bytes' capacity.
    pub fn new(cap: usize) -> Self {
        let free: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let back = Arc::clone(&free);
        let home: Home = Arc::new(move |v: Vec<u8>| {
            if v.capacity() == cap {
                let mut g = back.lock().unwrap_or_else(|e| e.into_inner());
                if g.len() < KEEP {
                    g.push(v);
                }
            }
        });
        Self { cap, free, home }
    }

    /// Whether a payload of `len` bytes is pooled.
    fn pools(&self, len: usize) -> bool {
        len > self.cap / 2 && len <= self.cap
    }

    /// An empty vector with room for at least `len` bytes: from the pool when `len` is pooled.
    pub fn take(&self, len: usize) -> Vec<u8> {
        if !self.pools(len) {
            return Vec::with_capacity(len);
        }
        let pooled = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut v = pooled.unwrap_or_else(|| Vec::with_capacity(self.cap));
        v.clear();
        v
    }

    /// `bytes` (from [`take`](Self::take)) as a payload, returning to the pool when dropped if
    /// its length is pooled.
    pub fn payload(&self, bytes: Vec<u8>) -> Payload {
        if self.pools(bytes.len()) {
            Payload::recycled(bytes, &self.home)
        } else {
            bytes.into()
        }
    }
}

impl std::fmt::Debug for VecPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.free.lock().map_or(0, |g| g.len());
        f.debug_struct("VecPool")
            .field("cap", &self.cap)
            .field("kept", &kept)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vector_returns_when_its_payload_is_dropped_on_another_thread() {
        let pool = VecPool::new(1 << 20);
        let mut v = pool.take(1 << 20);
        v.extend_from_slice(&[7u8; 1 << 20]);
        let ptr = v.as_ptr();
        let p = pool.payload(v);
        std::thread::spawn(move || drop(p)).join().unwrap();
        let back = pool.take(3 << 18);
        assert_eq!(
            (back.as_ptr(), back.len()),
            (ptr, 0),
            "the same vector, emptied"
        );
    }

    #[test]
    fn small_and_oversized_payloads_are_not_pooled() {
        let pool = VecPool::new(1 << 20);
        assert_eq!(
            pool.take(4096).capacity(),
            4096,
            "a small one pins no chunk"
        );
        assert_eq!(
            pool.take(2 << 20).capacity(),
            2 << 20,
            "too big for the pool"
        );
        drop(pool.payload(vec![1u8; 4096]));
        assert!(pool.free.lock().unwrap().is_empty(), "not taken back");
        for _ in 0..KEEP + 3 {
            drop(pool.payload(vec![0; 1 << 20]));
        }
        assert_eq!(pool.free.lock().unwrap().len(), KEEP, "bounded");
    }
}
