//! Conformance of every chunk store to the `t3fs_core::chunk` contract. Today: the in-memory
//! reference store; the file, io_uring and simulated stores join as they land.

#[test]
fn mem_chunk_store_passes_the_chunk_store_suite() {
    t3fs_core::testing::chunk_store_suite(t3fs_core::testing::MemChunkStore::new);
}

#[test]
fn mem_kv_passes_the_kv_suite() {
    t3fs_core::testing::kv_suite(|| t3fs_core::kv::mem::MemKv::new(1024));
}

/// The suite must be able to fail: an engine that ignores read conflicts (so lost updates and
/// phantoms slip through) is rejected.
#[test]
fn kv_suite_rejects_an_engine_without_conflict_checks() {
    use t3fs_core::kv::{
        mem::MemKv, CommitReq, Key, KeyRange, KvEngine, KvError, KvVersion, Value,
    };
    struct NoConflicts(MemKv);
    impl KvEngine for NoConflicts {
        fn read_version(&mut self) -> Result<KvVersion, KvError> {
            self.0.read_version()
        }
        fn get(&mut self, at: KvVersion, key: &[u8]) -> Result<Option<Value>, KvError> {
            self.0.get(at, key)
        }
        fn range(
            &mut self,
            at: KvVersion,
            r: &KeyRange,
            n: usize,
        ) -> Result<Vec<(Key, Value)>, KvError> {
            self.0.range(at, r, n)
        }
        fn commit(&mut self, mut req: CommitReq) -> Result<KvVersion, KvError> {
            req.read_conflicts.clear();
            self.0.commit(req)
        }
    }
    let caught =
        std::panic::catch_unwind(|| t3fs_core::testing::kv_suite(|| NoConflicts(MemKv::new(1024))));
    assert!(
        caught.is_err(),
        "an engine without conflict checks passed the suite"
    );
}
