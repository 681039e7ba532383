//! The io_uring store's buffers: [`Buf`], a 4 KiB-aligned heap buffer the store reads into and
//! writes from (O_DIRECT needs the memory, the offset and the length aligned), and [`BufPool`],
//! the store thread's free ones, so that no operation allocates and zeroes its own (why pools:
//! `vec_pool.rs`; read results go out in vectors of a [`VecPool`](crate::vec_pool::VecPool)).
//!
//! Invariant: a buffer's bytes are always initialised (zeroed once, at allocation); a pooled
//! buffer holds the previous operation's bytes, so users write or read the whole length they
//! take, or zero what they leave. The pool is bounded ([`KEEP`]); beyond it buffers are freed.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use crate::chunk_store::BLOCK;

/// Buffers the pool keeps: more than the operations one store thread has in flight at depth
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
