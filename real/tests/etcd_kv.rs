//! The etcd KV engine against a real etcd: the conformance suite plus the cases the etcd mapping
//! makes hard (deletions after a read, ClearRange racing writers, tombstones under `range`
//! limits, tombstone GC). Needs `T3FS_ETCD_ENDPOINTS` (comma-separated); start a private etcd
//! with `bash scripts/etcd.sh start`. With the `etcd` feature on, a missing or unreachable etcd
//! fails these tests: they never pass vacuously.
#![cfg(feature = "etcd")]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use t3fs_core::kv::{CommitReq, KeyRange, KvEngine, KvError, KvVersion, Mutation, Txn};
use t3fs_services::etcd_kv::EtcdKv;

fn endpoints() -> Vec<String> {
    let eps = std::env::var("T3FS_ETCD_ENDPOINTS").unwrap_or_else(|_| {
        panic!(
            "T3FS_ETCD_ENDPOINTS is not set. Start etcd with `bash scripts/etcd.sh start`, then \
             run T3FS_ETCD_ENDPOINTS=http://127.0.0.1:23790 cargo nextest run -p t3fs-real \
             --features etcd"
        )
    });
    eps.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// A key space no other engine (test, process, earlier run) uses.
fn unique_prefix() -> Vec<u8> {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos();
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("t3fs-test/{}-{n}-{nanos}/", std::process::id()).into_bytes()
}

fn connect(prefix: &[u8]) -> EtcdKv {
    let eps = endpoints();
    EtcdKv::connect(&eps, prefix).unwrap_or_else(|e| {
        panic!("cannot use etcd at {eps:?}: {e}. Is it running? `bash scripts/etcd.sh start`")
    })
}

fn engine() -> EtcdKv {
    connect(&unique_prefix())
}

fn put(kv: &mut EtcdKv, k: &[u8], v: &[u8]) -> KvVersion {
    let mut t = Txn::new(kv);
    t.set(k, v);
    t.commit().expect("uncontended commit")
}

fn clear(kv: &mut EtcdKv, k: &[u8]) {
    let mut t = Txn::new(kv);
    t.clear(k);
    t.commit().expect("uncontended clear");
}

#[test]
fn passes_the_kv_conformance_suite() {
    t3fs_core::testing::kv_suite(engine);
}

#[test]
fn a_deletion_after_a_read_is_a_conflict() {
    let mut kv = engine();
    put(&mut kv, b"k", b"1");
    put(&mut kv, b"d/a", b"1");
    // A reads k and the range d/ at rv.
    let rv = kv.read_version().unwrap();
    assert_eq!(kv.get(rv, b"k").unwrap(), Some(b"1".to_vec()));
    assert_eq!(kv.range(rv, &KeyRange::prefix(b"d/"), 10).unwrap().len(), 1);
    // B deletes both (a point clear and a range clear).
    clear(&mut kv, b"k");
    let mut t = Txn::new(&mut kv);
    t.clear_range(&KeyRange::prefix(b"d/"));
    t.commit().unwrap();
    for read in [KeyRange::single(b"k"), KeyRange::prefix(b"d/")] {
        let a = CommitReq {
            read_version: rv,
            read_conflicts: vec![read.clone()],
            mutations: vec![Mutation::Set(b"out".to_vec(), b"x".to_vec())],
        };
        assert_eq!(
            kv.commit(a),
            Err(KvError::Conflict),
            "{read:?}: deletion unseen"
        );
    }
    // The snapshot at rv still holds what A read; the present does not.
    assert_eq!(kv.get(rv, b"k").unwrap(), Some(b"1".to_vec()));
    let now = kv.read_version().unwrap();
    assert_eq!(kv.get(now, b"k").unwrap(), None);
    assert_eq!(kv.range(now, &KeyRange::prefix(b"d/"), 10).unwrap(), vec![]);
}

/// Writers insert into a range while another engine clears it over and over. Whenever a clear
/// commits at version v, the range must be empty at v: an insert that slipped in between the
/// clear's pre-read and its txn must have failed the txn (and the retry cleared it), never
/// survived it.
#[test]
fn clear_range_racing_inserts_leaves_the_range_empty() {
    let prefix = unique_prefix();
    let range = KeyRange::prefix(b"r/");
    let stop = Instant::now() + Duration::from_secs(4);
    let writer = {
        let prefix = prefix.clone();
        std::thread::spawn(move || {
            let mut kv = connect(&prefix);
            let mut n = 0u64;
            while Instant::now() < stop {
                put(&mut kv, format!("r/{n:06}").as_bytes(), b"w");
                n += 1;
            }
            n
        })
    };
    let mut kv = connect(&prefix);
    let (mut clears, mut conflicts) = (0, 0);
    while Instant::now() < stop {
        let mut t = Txn::new(&mut kv);
        t.clear_range(&range);
        t.set(b"marker", b"m"); // Something outside the range, written in the same txn.
        match t.commit() {
            Ok(v) => {
                clears += 1;
                let left = kv.range(v, &range, 10).unwrap();
                assert_eq!(left, vec![], "keys survived a clear that committed at {v}");
            }
            Err(KvError::Conflict) => conflicts += 1, // Raced every retry: allowed, nothing written.
            Err(e) => panic!("clear failed: {e} ({:?})", kv.last_error()),
        }
    }
    let inserts = writer.join().unwrap();
    assert!(
        clears > 10 && inserts > 10,
        "too little racing: {clears} clears, {inserts} inserts"
    );
    eprintln!("{clears} clears, {conflicts} gave up, {inserts} inserts");
}

#[test]
fn range_pages_past_tombstones_to_fill_its_limit() {
    let mut kv = engine();
    let key = |i: u32| format!("p/{i:05}").into_bytes();
    // 1200 keys in two txns, then clear all but every 300th: runs of tombstones longer than a page.
    for chunk in [0..600u32, 600..1200] {
        let mut t = Txn::new(&mut kv);
        for i in chunk {
            t.set(&key(i), &i.to_le_bytes());
        }
        t.commit().unwrap();
    }
    let mut t = Txn::new(&mut kv);
    t.clear_range(&KeyRange::prefix(b"p/"));
    for i in (0..1200).step_by(300) {
        t.set(&key(i), b"kept");
    }
    t.commit().unwrap();
    let at = kv.read_version().unwrap();
    let all = KeyRange::prefix(b"p/");
    let got = kv.range(at, &all, 3).unwrap();
    let keys: Vec<_> = got.iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(
        keys,
        vec![key(0), key(300), key(600)],
        "limit counts live pairs only"
    );
    assert_eq!(kv.range(at, &all, 100).unwrap().len(), 4);
    assert_eq!(
        kv.range(at, &all, 0).unwrap(),
        vec![],
        "limit 0 is nothing, not everything"
    );
    let tail = KeyRange {
        begin: key(1),
        end: key(1199),
    };
    assert_eq!(kv.range(at, &tail, 1).unwrap()[0].0, key(300));
}

#[test]
fn tombstone_gc_makes_older_transactions_too_old_and_keeps_newer_ones_correct() {
    let mut kv = engine();
    put(&mut kv, b"k", b"1");
    put(&mut kv, b"j", b"1");
    let old = kv.read_version().unwrap(); // A transaction that read k while it was live.
    clear(&mut kv, b"k");
    clear(&mut kv, b"never-set");
    let horizon = kv.read_version().unwrap();
    let young = horizon; // One that read after the clears.
    assert_eq!(kv.compact_tombstones(horizon), Ok(2));
    assert_eq!(
        kv.compact_tombstones(horizon),
        Ok(0),
        "nothing left to collect"
    );
    // k's tombstone is gone, so a compare alone could not tell that k changed after `old`.
    let write = |rv| CommitReq {
        read_version: rv,
        read_conflicts: vec![KeyRange::single(b"k")],
        mutations: vec![Mutation::Set(b"j".to_vec(), b"2".to_vec())],
    };
    assert_eq!(kv.commit(write(old)), Err(KvError::TooOld));
    assert!(
        kv.last_error().unwrap().contains("horizon"),
        "{:?}",
        kv.last_error()
    );
    kv.commit(write(young))
        .expect("read after the horizon: unaffected");
    // A later re-insert of k is still seen by a transaction that read k absent after the GC.
    let rv = kv.read_version().unwrap();
    assert_eq!(kv.get(rv, b"k").unwrap(), None);
    put(&mut kv, b"k", b"again");
    assert_eq!(kv.commit(write(rv)), Err(KvError::Conflict));
    // The horizon never moves back; GC with an older one deletes nothing and breaks nothing.
    assert_eq!(kv.compact_tombstones(old), Ok(0));
    assert_eq!(kv.commit(write(old)), Err(KvError::TooOld));
}

#[test]
fn reads_outside_etcd_history_are_too_old() {
    let mut kv = engine();
    let now = kv.read_version().unwrap();
    assert_eq!(kv.get(KvVersion(0), b"k"), Err(KvError::TooOld));
    assert_eq!(
        kv.get(KvVersion(now.0 + 1_000_000), b"k"),
        Err(KvError::TooOld)
    );
    assert!(
        kv.last_error().unwrap().contains("future revision"),
        "{:?}",
        kv.last_error()
    );
    assert_eq!(kv.get(KvVersion(u64::MAX), b"k"), Err(KvError::TooOld));
}

#[test]
fn an_unreachable_etcd_is_a_prompt_clear_error() {
    let started = Instant::now();
    // Port 1 on loopback: nothing listens there, so the connect is refused at once.
    let err = EtcdKv::connect(&["http://127.0.0.1:1".to_string()], b"t3fs-test/none/")
        .err()
        .expect("connected to nothing");
    assert!(err.contains("127.0.0.1:1"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "took {:?}",
        started.elapsed()
    );
    eprintln!("{err}");
}
