//! The KV conformance suite: the contract of `crate::kv` as executable checks. Every engine
//! (in-memory MVCC, embedded, etcd) must pass it; `make` returns a fresh, empty engine (or an
//! empty key space of a shared one).
//!
//! Checks: read-your-writes, snapshot reads, conflict detection on point and range reads (no
//! lost updates, no phantoms), blind writes never conflict, strictly increasing commit versions,
//! serializability of concurrently interleaved read-modify-write transactions, and the
//! `CommitUnknown` reaction (re-read an idempotency record, never apply twice) whether or not the
//! unknown commit applied.

use crate::kv::{CommitReq, Key, KeyRange, KvEngine, KvError, KvVersion, Txn, Value};

/// Runs every check, panicking with the check's name on the first failure.
pub fn kv_suite<E: KvEngine>(mut make: impl FnMut() -> E) {
    read_your_writes(&mut make());
    snapshot_reads(&mut make());
    lost_update_is_a_conflict(&mut make());
    blind_and_disjoint_writes_commit(&mut make());
    range_reads_and_phantoms(&mut make());
    clear_range(&mut make());
    versions_increase(&mut make());
    interleaved_increments_are_serializable(&mut make(), 0x5eed);
    interleaved_increments_are_serializable(&mut make(), 7);
    commit_unknown_is_resolved_by_a_record(&mut make(), true);
    commit_unknown_is_resolved_by_a_record(&mut make(), false);
}

fn put<E: KvEngine>(kv: &mut E, key: &[u8], value: &[u8]) -> KvVersion {
    let mut t = Txn::new(kv);
    t.set(key, value);
    t.commit().expect("uncontended commit")
}

fn read<E: KvEngine>(kv: &mut E, key: &[u8]) -> Option<Value> {
    Txn::new(kv).get(key).expect("read")
}

fn read_your_writes<E: KvEngine>(kv: &mut E) {
    put(kv, b"a", b"1");
    let mut t = Txn::new(kv);
    t.set(b"a", b"2");
    t.set(b"b", b"3");
    t.clear(b"b");
    assert_eq!(
        t.get(b"a").unwrap(),
        Some(b"2".to_vec()),
        "read-your-writes"
    );
    assert_eq!(t.get(b"b").unwrap(), None, "read-your-clears");
    t.commit().unwrap();
    assert_eq!(read(kv, b"a"), Some(b"2".to_vec()), "committed value");
    assert_eq!(read(kv, b"b"), None);
}

fn snapshot_reads<E: KvEngine>(kv: &mut E) {
    put(kv, b"k", b"old");
    let at = kv.read_version().unwrap();
    put(kv, b"k", b"new");
    assert_eq!(
        kv.get(at, b"k").unwrap(),
        Some(b"old".to_vec()),
        "snapshot read"
    );
    let now = kv.read_version().unwrap();
    assert_eq!(kv.get(now, b"k").unwrap(), Some(b"new".to_vec()));
    assert!(now > at, "read version covers acknowledged commits");
}

fn lost_update_is_a_conflict<E: KvEngine>(kv: &mut E) {
    put(kv, b"n", b"0");
    // T1 reads n; T2 reads n, writes it and commits; T1's write must then abort.
    let t1_at = kv.read_version().unwrap();
    let t1_read = kv.get(t1_at, b"n").unwrap();
    assert_eq!(t1_read, Some(b"0".to_vec()));
    put(kv, b"n", b"1");
    let t1 = CommitReq {
        read_version: t1_at,
        read_conflicts: vec![KeyRange::single(b"n")],
        mutations: vec![crate::kv::Mutation::Set(b"n".to_vec(), b"1".to_vec())],
    };
    assert_eq!(
        kv.commit(t1),
        Err(KvError::Conflict),
        "lost update not detected"
    );
    assert_eq!(
        read(kv, b"n"),
        Some(b"1".to_vec()),
        "a conflicted commit wrote"
    );
}

fn blind_and_disjoint_writes_commit<E: KvEngine>(kv: &mut E) {
    put(kv, b"x", b"0");
    let at = kv.read_version().unwrap();
    put(kv, b"x", b"1");
    // Read y, write x: y did not change, so this commits (blind write over x).
    let req = CommitReq {
        read_version: at,
        read_conflicts: vec![KeyRange::single(b"y")],
        mutations: vec![crate::kv::Mutation::Set(b"x".to_vec(), b"2".to_vec())],
    };
    kv.commit(req).expect("disjoint read set must not conflict");
    // A snapshot read adds no conflict.
    let mut t = Txn::new(kv);
    assert_eq!(t.snapshot_get(b"x").unwrap(), Some(b"2".to_vec()));
    t.set(b"z", b"1");
    let req = t.to_commit_req().unwrap();
    put(kv, b"x", b"3");
    kv.commit(req).expect("snapshot reads must not conflict");
}

fn range_reads_and_phantoms<E: KvEngine>(kv: &mut E) {
    for k in [&b"d/a"[..], b"d/b", b"d/c", b"e/a"] {
        put(kv, k, k);
    }
    let mut t = Txn::new(kv);
    t.set(b"d/bb", b"new");
    t.clear(b"d/a");
    let rows = t.range(&KeyRange::prefix(b"d/"), 10).unwrap();
    let keys: Vec<&[u8]> = rows.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(
        keys,
        vec![&b"d/b"[..], b"d/bb", b"d/c"],
        "range merges own writes"
    );
    let limited = t.range(&KeyRange::prefix(b"d/"), 2).unwrap();
    assert_eq!(limited.len(), 2, "range limit");
    t.set(b"count", b"3");
    let req = t.to_commit_req().unwrap();
    // Another transaction inserts into the range: a phantom, so the first must abort.
    put(kv, b"d/ba", b"phantom");
    assert_eq!(
        kv.commit(req),
        Err(KvError::Conflict),
        "phantom not detected"
    );
}

fn clear_range<E: KvEngine>(kv: &mut E) {
    for k in [&b"r/1"[..], b"r/2", b"s/1"] {
        put(kv, k, b"v");
    }
    let mut t = Txn::new(kv);
    t.clear_range(&KeyRange::prefix(b"r/"));
    assert_eq!(t.get(b"r/1").unwrap(), None, "own range clear visible");
    t.set(b"r/3", b"after");
    t.commit().unwrap();
    let at = kv.read_version().unwrap();
    let rows = kv.range(at, &KeyRange::prefix(b"r/"), 10).unwrap();
    assert_eq!(rows, vec![(b"r/3".to_vec(), b"after".to_vec())]);
    assert_eq!(
        read(kv, b"s/1"),
        Some(b"v".to_vec()),
        "clear went past its range"
    );
}

fn versions_increase<E: KvEngine>(kv: &mut E) {
    let mut last = kv.read_version().unwrap();
    for i in 0..20u8 {
        let v = put(kv, b"v", &[i]);
        assert!(v > last, "commit version did not increase");
        assert!(
            kv.read_version().unwrap() >= v,
            "read version behind a commit"
        );
        last = v;
    }
}

/// A small deterministic generator for interleavings (no OS randomness in this crate).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

fn counter(v: &Option<Value>) -> u64 {
    v.as_ref()
        .map(|b| u64::from_le_bytes(b.as_slice().try_into().expect("8-byte counter")))
        .unwrap_or(0)
}

/// Several clients run `read a, read b, write a+1, b+1, log[a] := me` with their steps
/// interleaved at random, retrying on conflict. Serializable execution means every committed
/// transaction saw a distinct `a` (0, 1, 2, … in commit order), `a == b` always, and the final
/// counters equal the number of commits.
fn interleaved_increments_are_serializable<E: KvEngine>(kv: &mut E, seed: u64) {
    const CLIENTS: usize = 4;
    const COMMITS: u64 = 24;
    #[derive(Clone)]
    struct Open {
        at: KvVersion,
        a: u64,
        b: Option<u64>,
    }
    let mut rng = Lcg(seed);
    let mut open: Vec<Option<Open>> = vec![None; CLIENTS];
    let (mut commits, mut conflicts) = (0u64, 0u64);
    let mut steps = 0;
    while commits < COMMITS {
        steps += 1;
        assert!(steps < 100_000, "no progress: every commit conflicts");
        let c = rng.below(CLIENTS as u64) as usize;
        match open[c].clone() {
            None => {
                let at = kv.read_version().unwrap();
                let a = counter(&kv.get(at, b"a").unwrap());
                open[c] = Some(Open { at, a, b: None });
            }
            Some(Open { at, a, b: None }) => {
                let b = counter(&kv.get(at, b"b").unwrap());
                open[c] = Some(Open { at, a, b: Some(b) });
            }
            Some(Open { at, a, b: Some(b) }) => {
                open[c] = None;
                let mut log_key: Key = b"log/".to_vec();
                log_key.extend_from_slice(&a.to_be_bytes());
                let req = CommitReq {
                    read_version: at,
                    read_conflicts: vec![KeyRange::single(b"a"), KeyRange::single(b"b")],
                    mutations: vec![
                        crate::kv::Mutation::Set(b"a".to_vec(), (a + 1).to_le_bytes().to_vec()),
                        crate::kv::Mutation::Set(b"b".to_vec(), (b + 1).to_le_bytes().to_vec()),
                        crate::kv::Mutation::Set(log_key, vec![c as u8]),
                    ],
                };
                match kv.commit(req) {
                    Ok(_) => {
                        assert_eq!(a, b, "a committed transaction saw a torn snapshot");
                        commits += 1;
                    }
                    Err(KvError::Conflict) => conflicts += 1,
                    Err(e) => panic!("unexpected {e}"),
                }
            }
        }
    }
    assert_eq!(counter(&read(kv, b"a")), COMMITS, "lost or extra increment");
    assert_eq!(counter(&read(kv, b"b")), COMMITS);
    let at = kv.read_version().unwrap();
    let log = kv.range(at, &KeyRange::prefix(b"log/"), 1000).unwrap();
    assert_eq!(
        log.len() as u64,
        COMMITS,
        "two commits read the same counter"
    );
    assert!(
        conflicts > 0,
        "interleaving never produced a conflict: the check is vacuous"
    );
}

/// An engine wrapper that reports the next commit as `CommitUnknown`, after applying it or not.
struct UnknownOnce<'a, E> {
    inner: &'a mut E,
    armed: bool,
    apply: bool,
}

impl<E: KvEngine> KvEngine for UnknownOnce<'_, E> {
    fn read_version(&mut self) -> Result<KvVersion, KvError> {
        self.inner.read_version()
    }
    fn get(&mut self, at: KvVersion, key: &[u8]) -> Result<Option<Value>, KvError> {
        self.inner.get(at, key)
    }
    fn range(
        &mut self,
        at: KvVersion,
        r: &KeyRange,
        l: usize,
    ) -> Result<Vec<(Key, Value)>, KvError> {
        self.inner.range(at, r, l)
    }
    fn commit(&mut self, req: CommitReq) -> Result<KvVersion, KvError> {
        if !std::mem::take(&mut self.armed) {
            return self.inner.commit(req);
        }
        if self.apply {
            self.inner.commit(req)?;
        }
        Err(KvError::CommitUnknown)
    }
}

/// The documented reaction to `CommitUnknown`: re-run the transaction, which first checks the
/// request's idempotency record. The increment must land exactly once either way.
fn commit_unknown_is_resolved_by_a_record<E: KvEngine>(kv: &mut E, applied: bool) {
    put(kv, b"balance", &10u64.to_le_bytes());
    let mut kv = UnknownOnce {
        inner: kv,
        armed: true,
        apply: applied,
    };
    let mut attempts = 0;
    loop {
        attempts += 1;
        assert!(attempts <= 3, "CommitUnknown retry loop did not settle");
        let mut t = Txn::new(&mut kv);
        if t.get(b"req/42").unwrap().is_some() {
            break; // Already applied: answer from the record, do not re-apply.
        }
        let balance = counter(&t.get(b"balance").unwrap());
        t.set(b"balance", &(balance + 5).to_le_bytes());
        t.set(b"req/42", b"done");
        match t.commit() {
            Ok(_) => break,
            Err(KvError::CommitUnknown) => continue,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(attempts, 2, "the unknown commit was not retried");
    assert_eq!(
        counter(&read(kv.inner, b"balance")),
        15,
        "applied twice or never"
    );
}
