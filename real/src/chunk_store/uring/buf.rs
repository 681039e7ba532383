//! [`Buf`]: the 4 KiB-aligned heap buffers the io_uring store reads into and writes from
//! (O_DIRECT needs the memory, the offset and the length aligned).

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use crate::chunk_store::BLOCK;

/// A zeroed heap buffer aligned to [`BLOCK`], as O_DIRECT needs.
pub struct Buf {
    pub ptr: NonNull<u8>,
    pub len: usize,
}

// SAFETY: `Buf` owns its allocation exclusively, like a `Vec<u8>`.
unsafe impl Send for Buf {}

impl Buf {
    pub fn new(len: usize) -> Self {
        assert!(len > 0 && len.is_multiple_of(BLOCK as usize));
        let layout = Layout::from_size_align(len, BLOCK as usize).expect("layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        Self { ptr, len }
    }
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` points to `len` initialised (zeroed, then written) bytes we own.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.len, BLOCK as usize).expect("layout");
        // SAFETY: allocated in `new` with this very layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) }
    }
}
