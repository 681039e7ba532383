//! White-box checks of the etcd engine that need its internals: a write landing exactly between
//! a ClearRange's pre-read and its txn. Needs a running etcd, like `real/tests/etcd_kv.rs`.

use super::*;
use t3fs_core::kv::Txn;

fn engine_pair() -> (EtcdKv, EtcdKv) {
    let eps: Vec<String> = std::env::var("T3FS_ETCD_ENDPOINTS")
        .expect("T3FS_ETCD_ENDPOINTS is not set: run `bash scripts/etcd.sh start` and export it")
        .split(',')
        .map(|s| s.trim().to_string())
        .collect();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos();
    let prefix = format!("t3fs-unit/{}-{nanos}/", std::process::id());
    let connect = || EtcdKv::connect(&eps, prefix.as_bytes()).expect("etcd reachable");
    (connect(), connect())
}

fn put(kv: &mut EtcdKv, k: &[u8]) {
    let mut t = Txn::new(kv);
    t.set(k, b"v");
    t.commit().unwrap();
}

#[test]
fn a_write_between_the_pre_read_and_the_txn_fails_the_guard_and_the_retry_clears_it() {
    let (mut a, mut b) = engine_pair();
    put(&mut b, b"r/1");
    let req = CommitReq {
        read_version: a.read_version().unwrap(),
        read_conflicts: vec![],
        mutations: vec![Mutation::ClearRange(KeyRange::prefix(b"r/"))],
    };
    let checks = a.etcd.checks(&req).unwrap();
    let plan = a.rt.block_on(a.etcd.plan(&req.mutations)).unwrap();
    assert_eq!(plan.writes.len(), 1, "the pre-read found r/1");
    put(&mut b, b"r/2"); // After the pre-read: the plan does not tombstone it.
    let sent = a.rt.block_on(a.etcd.attempt(&checks, plan)).unwrap();
    assert_eq!(
        sent, None,
        "the guard must fail the txn, not let r/2 survive the clear"
    );
    let v = a
        .commit(req)
        .expect("the retry pre-reads again and commits");
    let left = a.range(v, &KeyRange::prefix(b"r/"), 10).unwrap();
    assert_eq!(left, vec![], "the clear left keys behind");
}

#[test]
fn the_failure_branch_names_the_changed_read_range() {
    let (mut a, mut b) = engine_pair();
    put(&mut b, b"x");
    let rv = a.read_version().unwrap();
    put(&mut b, b"y");
    let req = |reads: &[&[u8]]| CommitReq {
        read_version: rv,
        read_conflicts: reads.iter().map(|k| KeyRange::single(k)).collect(),
        mutations: vec![Mutation::Set(b"z".to_vec(), b"1".to_vec())],
    };
    assert_eq!(a.commit(req(&[b"y", b"x"])), Err(KvError::Conflict));
    assert_eq!(a.last_error(), Some("a read-conflict range changed"));
    a.commit(req(&[b"x"])).expect("x did not change");
}
