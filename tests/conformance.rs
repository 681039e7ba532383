//! Conformance of every chunk store to the `t3fs_core::chunk` contract. Today: the in-memory
//! reference store; the file, io_uring and simulated stores join as they land.

#[test]
fn mem_chunk_store_passes_the_chunk_store_suite() {
    t3fs_core::testing::chunk_store_suite(t3fs_core::testing::MemChunkStore::new);
}
