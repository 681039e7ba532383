//! Reference implementations and conformance suites (feature `testing`).
//!
//! [`MemChunkStore`] is the in-memory reference chunk store: the simulator's disk model wraps it
//! and the model checker embeds it. [`chunk_store_suite`] is the contract every chunk store must
//! pass (file, io_uring and simulated stores run it in `tests/`). Not for production use.

mod chunk_store_suite;
mod mem_chunk_store;

pub use chunk_store_suite::chunk_store_suite;
pub use mem_chunk_store::{MemChunk, MemChunkStore};
