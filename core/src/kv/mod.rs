//! The transactional KV contract (FoundationDB-like) that mgmtd and meta keep their state in.
//!
//! Purpose: one interface for every engine (in-memory MVCC for simulation and tests, an
//! embedded persistent engine, etcd), so machines and the simulator never care which one runs.
//!
//! The model is optimistic concurrency with snapshot reads, exactly FoundationDB's client model:
//! 1. a transaction takes a **read version** ([`KvEngine::read_version`]);
//! 2. it reads at that version (a consistent snapshot) and buffers its writes locally;
//! 3. it commits by sending its **read-conflict ranges** and mutations; the engine rejects the
//!    commit with [`KvError::Conflict`] if any write committed after the read version touches a
//!    read-conflict range. Accepted commits are applied atomically at a new, larger version.
//!
//! This is serializable: every committed transaction behaves as if it ran alone at its commit
//! version. Reads made with `snapshot` (see [`Txn::snapshot_get`]) add no conflict range and are
//! therefore only snapshot-isolated, by the caller's choice.
//!
//! Machines do not call engines: they emit `IoOp::Kv` with a [`KvOp`] (one read batch or one
//! commit) and get the [`KvDone`] back as an `IoDone`; drivers run [`execute`]. The [`Txn`]
//! helper is for code that owns an engine directly (the conformance suite, tools, drivers).
//!
//! Not here: engines themselves ([`mem`] is the reference one), retries (the caller's policy,
//! per the error docs below), watches and leases (3FS does not use KV-side leases either).

pub mod mem;
mod txn;

use core::fmt;

pub use txn::Txn;

/// A key. Ordered bytewise; prefixes group tables (3FS's 4-byte ASCII prefixes).
pub type Key = Vec<u8>;
/// A value.
pub type Value = Vec<u8>;

/// A point in the engine's commit history. Strictly increases with every commit.
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct KvVersion(pub u64);

impl fmt::Display for KvVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kv{}", self.0)
    }
}

/// Half-open key range `[begin, end)`.
#[derive(Clone, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct KeyRange {
    /// First key included.
    pub begin: Key,
    /// First key excluded.
    pub end: Key,
}

impl KeyRange {
    /// The range holding exactly `key`.
    pub fn single(key: &[u8]) -> Self {
        let mut end = key.to_vec();
        end.push(0);
        Self {
            begin: key.to_vec(),
            end,
        }
    }

    /// Every key starting with `prefix`.
    pub fn prefix(prefix: &[u8]) -> Self {
        let mut end = prefix.to_vec();
        // The smallest key greater than every key with this prefix: strip trailing 0xff bytes
        // and increment the last one. An all-0xff (or empty) prefix extends to the key space end.
        while end.last() == Some(&0xff) {
            end.pop();
        }
        match end.last_mut() {
            Some(b) => *b += 1,
            None => end = vec![0xff; 8],
        }
        Self {
            begin: prefix.to_vec(),
            end,
        }
    }

    /// Whether `key` lies in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.begin.as_slice() <= key && key < self.end.as_slice()
    }

    /// Whether the two ranges share a key.
    pub fn intersects(&self, other: &KeyRange) -> bool {
        self.begin < other.end && other.begin < self.end
    }
}

/// One buffered write.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum Mutation {
    /// Sets `key` to `value`.
    Set(Key, Value),
    /// Removes `key` (no-op if absent).
    Clear(Key),
    /// Removes every key in the range.
    ClearRange(KeyRange),
}

impl Mutation {
    /// The keys this mutation writes, as a range (for conflict checking).
    pub fn range(&self) -> KeyRange {
        match self {
            Self::Set(k, _) | Self::Clear(k) => KeyRange::single(k),
            Self::ClearRange(r) => r.clone(),
        }
    }
}

/// A commit request: what the transaction read (as conflict ranges) and what it writes.
#[derive(Clone, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct CommitReq {
    /// The version the transaction's reads were made at.
    pub read_version: KvVersion,
    /// Ranges whose change since `read_version` must abort the commit.
    pub read_conflicts: Vec<KeyRange>,
    /// Writes, applied in order.
    pub mutations: Vec<Mutation>,
}

/// Environmental failures, each named with the caller's required reaction.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum KvError {
    /// Something this transaction read changed before it committed; nothing was written.
    /// Reaction: restart the whole transaction from a fresh read version (safe to retry).
    Conflict,
    /// The commit may or may not have been applied (connection lost, timeout after sending).
    /// Reaction: never assume either outcome. Retry only if the transaction is idempotent or
    /// first re-read something the transaction wrote (a request-id record) to learn whether it
    /// applied; 3FS meta stores idempotency records for exactly this.
    CommitUnknown,
    /// The read version is older than the engine's retained history. Reaction: restart the
    /// transaction with a fresh read version (long transactions must be split).
    TooOld,
    /// The engine is unreachable or has no quorum. Reaction: back off and retry later; nothing
    /// was written. Callers that hold a lease must assume they may lose it meanwhile.
    Unavailable,
    /// The engine has no room for the commit (a full disk, etcd's space quota); nothing was
    /// written. Reaction: do not spin on it: retrying helps only once space is freed (deletes
    /// still fit, `real/src/wal_kv`), so a request fails with ENOSPC and background writers
    /// back off as for `Unavailable`.
    NoSpace,
}

impl fmt::Display for KvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Conflict => "transaction conflict",
            Self::CommitUnknown => "commit outcome unknown",
            Self::TooOld => "read version too old",
            Self::Unavailable => "kv unavailable",
            Self::NoSpace => "kv out of space",
        })
    }
}

/// An engine. Synchronous: drivers that need asynchrony run it on their own thread or task.
///
/// Contract (checked by `testing::kv_suite`): reads at a version see exactly the commits at or
/// below it; `commit` is atomic, serializable per the module docs, and returns a version greater
/// than every earlier one; a failed `get`/`range`/`commit` with any error but `CommitUnknown`
/// changed nothing.
pub trait KvEngine {
    /// A version at least as new as every commit acknowledged so far.
    fn read_version(&mut self) -> Result<KvVersion, KvError>;
    /// The value of `key` at version `at`.
    fn get(&mut self, at: KvVersion, key: &[u8]) -> Result<Option<Value>, KvError>;
    /// Up to `limit` pairs in `range` at version `at`, in key order.
    fn range(
        &mut self,
        at: KvVersion,
        range: &KeyRange,
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, KvError>;
    /// Commits `req`; returns the commit version.
    fn commit(&mut self, req: CommitReq) -> Result<KvVersion, KvError>;
}

/// One KV step a machine requests through `IoOp::Kv`.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum KvOp {
    /// Reads keys and ranges at one version: `at`, or a fresh read version when `None`.
    Read {
        /// Snapshot version; `None` takes a fresh one.
        at: Option<KvVersion>,
        /// Point reads.
        keys: Vec<Key>,
        /// Range reads with their limits.
        ranges: Vec<(KeyRange, u32)>,
    },
    /// Commits buffered writes with read-conflict ranges.
    Commit(CommitReq),
}

/// Successful completion of a [`KvOp`].
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum KvDone {
    /// `Read` finished at `version`: one value per key and one list per range, in request order.
    Read {
        /// The snapshot version of every returned value.
        version: KvVersion,
        /// Values of the requested keys.
        values: Vec<Option<Value>>,
        /// Contents of the requested ranges.
        ranges: Vec<Vec<(Key, Value)>>,
    },
    /// `Commit` applied at this version.
    Committed(KvVersion),
}

/// Runs one [`KvOp`] against an engine: what every driver does with `IoOp::Kv`.
pub fn execute(engine: &mut dyn KvEngine, op: KvOp) -> Result<KvDone, KvError> {
    match op {
        KvOp::Read { at, keys, ranges } => {
            let version = match at {
                Some(v) => v,
                None => engine.read_version()?,
            };
            let values = keys
                .iter()
                .map(|k| engine.get(version, k))
                .collect::<Result<Vec<_>, _>>()?;
            let ranges = ranges
                .iter()
                .map(|(r, limit)| engine.range(version, r, *limit as usize))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(KvDone::Read {
                version,
                values,
                ranges,
            })
        }
        KvOp::Commit(req) => engine.commit(req).map(KvDone::Committed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        let r = KeyRange::prefix(b"CHIF");
        assert!(r.contains(b"CHIF"));
        assert!(r.contains(b"CHIF\xff\xff"));
        assert!(!r.contains(b"CHIG"));
        assert!(!r.contains(b"CHIE\xff"));
        assert_eq!(KeyRange::prefix(b"a\xff").end, b"b".to_vec());
        let s = KeyRange::single(b"k");
        assert!(s.contains(b"k") && !s.contains(b"k\0") && !s.contains(b"j"));
        assert!(s.intersects(&KeyRange::prefix(b"k")));
        assert!(!s.intersects(&KeyRange::single(b"k\0")));
    }
}
