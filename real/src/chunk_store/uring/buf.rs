//! The io_uring store's buffers and their pools. [`Buf`]: a 4 KiB-aligned heap buffer the
//! store reads into and writes from (O_DIRECT needs the memory, the offset and the length
//! aligned). [`BufPool`]: the store thread's free `Buf`s. [`VecPool`]: the vectors read results
//! are handed out in, which come back when the last holder of the payload drops it (any thread).
//!
//! Why pools: a stream of 1 MiB I/Os allocated and freed a buffer or two per operation, and the
//! allocator kept handing back fresh memory (the vector a read result was copied into is freed
//! on another thread, after the transport sent it). On the host measured, each fresh huge page
//! faulted in cost about 5.5 ms on the store thread, once every 60 or so reads: the 1 MiB read
//! p99 of a loopback cluster was 6 to 7 ms against 0.7 ms for the store alone.
//!
//! Invariant: a buffer's bytes are always initialised (zeroed once, at allocation); a pooled
//! buffer holds the previous operation's bytes, so users write or read the whole length they
//! take, or zero what they leave. Pools are bounded ([`KEEP`] each); beyond it buffers are freed.

use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use t3fs_core::payload::Home;

use crate::chunk_store::BLOCK;

/// Buffers each pool keeps: more than the operations one store thread has in flight at depth
/// 1 to 16 with a chunk each.
pub const KEEP: usize = 32;

/// A heap buffer aligned to [`BLOCK`], as O_DIRECT needs: `len` bytes in use of `cap`.
pub struct Buf {
    pub ptr: NonNull<u8>,
    pub len: usize,
    cap: usize,
}

// SAFETY: `Buf` owns its allocation exclusively, like a `Vec<u8>`.
unsafe impl Send for Buf {}

impl Buf {
    /// A zeroed buffer of `len` bytes (a multiple of [`BLOCK`]).
    pub fn new(len: usize) -> Self {
        assert!(len > 0 && len.is_multiple_of(BLOCK as usize));
        let layout = Layout::from_size_align(len, BLOCK as usize).expect("layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        Self { ptr, len, cap: len }
    }
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` points to `cap` >= `len` initialised (zeroed, then written) bytes we own.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.cap, BLOCK as usize).expect("layout");
        // SAFETY: allocated in `new` with this very layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) }
    }
}

/// The store thread's free [`Buf`]s, by capacity (a power of two of at least [`BLOCK`]).
#[derive(Default)]
pub struct BufPool {
    free: Vec<Buf>,
}

impl BufPool {
    /// A buffer of `len` bytes (a multiple of [`BLOCK`]); its bytes are a previous user's.
    pub fn take(&mut self, len: usize) -> Buf {
        let cap = len.next_power_of_two().max(BLOCK as usize);
        let mut b = match self.free.iter().position(|b| b.cap == cap) {
            Some(i) => self.free.swap_remove(i),
            None => Buf::new(cap),
        };
        b.len = len;
        b
    }

    /// Returns `b` for reuse (freed when [`KEEP`] are kept already).
    pub fn put(&mut self, b: Buf) {
        if self.free.len() < KEEP {
            self.free.push(b);
        }
    }
}

/// Vectors of one capacity for read results, shared with whichever thread drops the payload.
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
            // Vectors moved out of their payload come back empty: nothing to keep.
            if v.capacity() == cap {
                let mut g = back.lock().unwrap_or_else(|e| e.into_inner());
                if g.len() < KEEP {
                    g.push(v);
                }
            }
        });
        Self { cap, free, home }
    }

    /// An empty vector with room for `len` bytes: pooled when `len` fits the pool's capacity.
    pub fn take(&self, len: usize) -> Vec<u8> {
        if len > self.cap {
            return Vec::with_capacity(len);
        }
        let pooled = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut v = pooled.unwrap_or_else(|| Vec::with_capacity(self.cap));
        v.clear();
        v
    }

    /// Where a payload made of a vector from [`take`](Self::take) returns it.
    pub fn home(&self) -> &Home {
        &self.home
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use t3fs_core::payload::Payload;

    #[test]
    fn a_buffer_comes_back_with_its_capacity_and_pools_stay_bounded() {
        let mut p = BufPool::default();
        let b = p.take(3 * BLOCK as usize);
        assert_eq!((b.len, b.cap), (3 * BLOCK as usize, 4 * BLOCK as usize));
        let ptr = b.ptr;
        p.put(b);
        let again = p.take(4 * BLOCK as usize);
        assert_eq!(again.ptr, ptr, "reused");
        assert_ne!(p.take(4 * BLOCK as usize).ptr, ptr, "not handed out twice");
        for _ in 0..KEEP + 5 {
            p.put(Buf::new(BLOCK as usize));
        }
        assert_eq!(p.free.len(), KEEP);
    }

    #[test]
    fn a_read_result_vector_returns_when_its_payload_is_dropped_on_another_thread() {
        let pool = VecPool::new(1 << 20);
        let mut v = pool.take(1 << 20);
        v.extend_from_slice(&[7u8; 1 << 20]);
        let ptr = v.as_ptr();
        let p = Payload::recycled(v, pool.home());
        std::thread::spawn(move || drop(p)).join().unwrap();
        let back = pool.take(4096);
        assert_eq!(
            (back.as_ptr(), back.len()),
            (ptr, 0),
            "the same vector, emptied"
        );
        assert_eq!(
            pool.take(2 << 20).capacity(),
            2 << 20,
            "too big: not pooled"
        );
    }
}
