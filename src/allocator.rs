//! The process's allocator: mimalloc, with freed memory kept for a second before it goes back
//! to the kernel.
//!
//! Why: the data path allocates and frees a buffer per chunk I/O (1 MiB reads and writes in
//! storage, in clients). mimalloc's default hands freed memory back (purges) after 10 ms, so at
//! a few hundred operations per second each new buffer is fresh memory again, faulted in and
//! zeroed by the kernel page by page. On this host that took a depth-1 stream of 1 MiB reads
//! on a loopback cluster from about 700 to about 500 IOPS within a minute (median latency 1.3
//! ms to 2.0 ms); with a 1 s delay it held 716 to 769 over six runs. Model checking, the
//! other heavy allocator user, clones and frees millions of small states: glibc malloc took
//! over a third of the checker's time in profiles, mimalloc much less.
//!
//! Invariant: a `MIMALLOC_PURGE_DELAY` in the environment wins (mimalloc reads it itself).
//! Not here: the data path's buffer pools (`t3fs_services::vec_pool`, the io_uring store's
//! `BufPool`), which keep chunk buffers from leaving for other threads' heaps.

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc v2's `mi_option_purge_delay` (its place in `mi_option_e`; the test below checks it
/// still names the purge delay of the linked library).
const PURGE_DELAY: core::ffi::c_int = 15;

/// How long freed memory stays with the process, milliseconds.
const KEEP_MS: core::ffi::c_long = 1000;

extern "C" {
    fn mi_option_set(option: core::ffi::c_int, value: core::ffi::c_long);
}

/// Sets the purge delay, unless the environment sets it. Call first thing in `main`.
pub fn tune() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: plain option setters of the linked mimalloc; called before other threads.
        unsafe { mi_option_set(PURGE_DELAY, KEEP_MS) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" {
        fn mi_option_get(option: core::ffi::c_int) -> core::ffi::c_long;
    }

    #[test]
    fn the_purge_delay_option_is_the_one_tuned() {
        // The documented default of mimalloc v2's purge delay is 10 ms, of no neighbouring
        // option: a renumbered enum fails here, not silently in production.
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // SAFETY: option getters and setters of the linked mimalloc.
        unsafe {
            let default = mi_option_get(PURGE_DELAY);
            assert!(default == 10 || default == KEEP_MS, "{default}");
            tune();
            assert_eq!(mi_option_get(PURGE_DELAY), KEEP_MS);
        }
    }
}
