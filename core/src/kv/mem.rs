//! The in-memory MVCC reference engine: what the simulator and the model checker run, and the
//! engine every other one is compared against by the conformance suite.
//!
//! Invariants: each key's history is sorted by version with at most one entry per version;
//! `log` holds the write ranges of every commit newer than `oldest`, so a commit whose read
//! version is at least `oldest` is checked against every commit it could conflict with, and one
//! below it gets `TooOld` (never a wrong answer). Fault injection ([`MemKvFault`]) lets tests
//! and the simulator produce every [`KvError`], including `CommitUnknown` on a commit that did
//! apply. Not here: durability (see the embedded and etcd engines) and timing.

use std::collections::{BTreeMap, VecDeque};

use super::{CommitReq, Key, KeyRange, KvEngine, KvError, KvVersion, Mutation, Value};

/// A fault the next operation(s) will suffer.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum MemKvFault {
    /// The next commit is applied but reported as `CommitUnknown`.
    CommitUnknownApplied,
    /// The next commit is dropped and reported as `CommitUnknown`.
    CommitUnknownDropped,
    /// The next commit fails with `Conflict` even if nothing conflicts (as FDB may, spuriously).
    SpuriousConflict,
}

/// The engine.
#[derive(Clone, Debug, Default, Eq, Hash, PartialEq)]
pub struct MemKv {
    data: BTreeMap<Key, Vec<(KvVersion, Option<Value>)>>,
    log: VecDeque<(KvVersion, Vec<KeyRange>)>,
    version: KvVersion,
    oldest: KvVersion,
    /// Commits of history kept for conflict checks and old reads.
    window: u64,
    next_fault: Option<MemKvFault>,
    unavailable: bool,
}

impl MemKv {
    /// An empty engine keeping `window` commits of history (at least 1).
    pub fn new(window: u64) -> Self {
        Self {
            window: window.max(1),
            ..Self::default()
        }
    }

    /// Makes the next commit suffer `fault`.
    pub fn inject(&mut self, fault: MemKvFault) {
        self.next_fault = Some(fault);
    }

    /// While set, every operation fails with `Unavailable`.
    pub fn set_unavailable(&mut self, unavailable: bool) {
        self.unavailable = unavailable;
    }

    /// Every live key and its newest value, in key order (a persistent engine's snapshot).
    pub fn latest(&self) -> Vec<(Key, Value)> {
        self.data
            .iter()
            .filter_map(|(k, h)| Self::value_at(h, self.version).map(|v| (k.clone(), v.clone())))
            .collect()
    }

    /// The newest committed version.
    pub fn version(&self) -> KvVersion {
        self.version
    }

    fn check_available(&self) -> Result<(), KvError> {
        if self.unavailable {
            Err(KvError::Unavailable)
        } else {
            Ok(())
        }
    }

    fn check_at(&self, at: KvVersion) -> Result<(), KvError> {
        self.check_available()?;
        if at < self.oldest {
            return Err(KvError::TooOld);
        }
        assert!(at <= self.version, "read at a future version {at}");
        Ok(())
    }

    fn value_at(history: &[(KvVersion, Option<Value>)], at: KvVersion) -> Option<&Value> {
        history
            .iter()
            .rev()
            .find(|(v, _)| *v <= at)
            .and_then(|(_, value)| value.as_ref())
    }

    fn write(&mut self, key: Key, value: Option<Value>, at: KvVersion) {
        let oldest = self.oldest;
        let history = self.data.entry(key).or_default();
        if history.last().map(|(v, _)| *v) == Some(at) {
            history.pop();
        }
        history.push((at, value));
        // Drop entries no read at or after `oldest` can see: keep the newest one <= oldest.
        let visible_from = history.iter().rposition(|(v, _)| *v <= oldest).unwrap_or(0);
        history.drain(..visible_from);
    }

    fn apply(&mut self, mutations: Vec<Mutation>, at: KvVersion) {
        for m in mutations {
            match m {
                Mutation::Set(k, v) => self.write(k, Some(v), at),
                Mutation::Clear(k) => self.write(k, None, at),
                Mutation::ClearRange(r) => {
                    let live: Vec<Key> = self
                        .data
                        .range(r.begin.clone()..r.end.clone())
                        .filter(|(_, h)| h.last().is_some_and(|(_, v)| v.is_some()))
                        .map(|(k, _)| k.clone())
                        .collect();
                    for k in live {
                        self.write(k, None, at);
                    }
                }
            }
        }
    }
}

impl KvEngine for MemKv {
    fn read_version(&mut self) -> Result<KvVersion, KvError> {
        self.check_available()?;
        Ok(self.version)
    }

    fn get(&mut self, at: KvVersion, key: &[u8]) -> Result<Option<Value>, KvError> {
        self.check_at(at)?;
        Ok(self
            .data
            .get(key)
            .and_then(|h| Self::value_at(h, at))
            .cloned())
    }

    fn range(
        &mut self,
        at: KvVersion,
        range: &KeyRange,
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, KvError> {
        self.check_at(at)?;
        if range.begin >= range.end {
            return Ok(Vec::new());
        }
        Ok(self
            .data
            .range(range.begin.clone()..range.end.clone())
            .filter_map(|(k, h)| Self::value_at(h, at).map(|v| (k.clone(), v.clone())))
            .take(limit)
            .collect())
    }

    fn commit(&mut self, req: CommitReq) -> Result<KvVersion, KvError> {
        self.check_at(req.read_version)?;
        let fault = self.next_fault.take();
        if fault == Some(MemKvFault::SpuriousConflict) {
            return Err(KvError::Conflict);
        }
        if fault == Some(MemKvFault::CommitUnknownDropped) {
            return Err(KvError::CommitUnknown);
        }
        // The log is in version order: walk back only over the commits after the read
        // version, not the whole window (thousands of commits on a busy meta service).
        let conflicted = self
            .log
            .iter()
            .rev()
            .take_while(|(v, _)| *v > req.read_version)
            .any(|(_, written)| {
                written
                    .iter()
                    .any(|w| req.read_conflicts.iter().any(|r| r.intersects(w)))
            });
        if conflicted {
            return Err(KvError::Conflict);
        }
        if req.mutations.is_empty() {
            return Ok(req.read_version);
        }
        let at = KvVersion(self.version.0 + 1);
        let written = req.mutations.iter().map(Mutation::range).collect();
        self.version = at;
        self.log.push_back((at, written));
        while self.log.len() as u64 > self.window {
            let (v, _) = self.log.pop_front().expect("non-empty log");
            self.oldest = v;
        }
        // After moving `oldest`, so that the write trims history no reader can see any more.
        self.apply(req.mutations, at);
        if fault == Some(MemKvFault::CommitUnknownApplied) {
            return Err(KvError::CommitUnknown);
        }
        Ok(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::Txn;

    #[test]
    fn history_is_trimmed_and_old_reads_are_too_old() {
        let mut kv = MemKv::new(2);
        for i in 0..5u8 {
            let mut t = Txn::new(&mut kv);
            t.set(b"k", &[i]);
            t.commit().unwrap();
        }
        assert_eq!(kv.version(), KvVersion(5));
        assert_eq!(kv.get(KvVersion(1), b"k"), Err(KvError::TooOld));
        assert_eq!(kv.get(KvVersion(4), b"k"), Ok(Some(vec![3])));
        assert!(
            kv.data[b"k".as_slice()].len() <= 3,
            "history grows without bound"
        );
        let stale = CommitReq {
            read_version: KvVersion(1),
            read_conflicts: vec![],
            mutations: vec![Mutation::Clear(b"k".to_vec())],
        };
        assert_eq!(kv.commit(stale), Err(KvError::TooOld));
    }
}
