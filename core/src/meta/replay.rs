//! A [`KvEngine`] made of the rows one transaction attempt has already fetched, so a meta server
//! can run a synchronous namespace operation as a sequence of `IoOp::Kv` reads.
//!
//! How: the server runs the operation against a `ReplayKv`. The first read the cache cannot
//! answer is recorded as [`Missing`] and fails with `KvError::Unavailable`, which unwinds the
//! operation. The server fetches that key or range at the attempt's read version, adds it to
//! the cache and runs the operation again from the start. Operations are deterministic
//! functions of the rows they read (`request.rs`), so each replay takes the same path up to
//! one read further, and the last replay produces the answer and the commit request.
//!
//! Invariants: every cached row was read at the one `version` of this attempt, so a replay sees
//! a consistent snapshot; `missing` is only ever the first miss of the latest replay. Costs: an
//! operation that reads n rows runs n + 1 times, which is cheap next to a KV round trip.
//! Not here: issuing the reads or committing (the server does both through `IoOp::Kv`).

use std::collections::BTreeMap;

use crate::kv::{CommitReq, Key, KeyRange, KvEngine, KvError, KvVersion, Value};

/// The read a replay could not answer.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum Missing {
    /// A point read.
    Key(Key),
    /// A range read with its limit.
    Range(KeyRange, u32),
}

/// The rows of one transaction attempt.
#[derive(Clone, Debug, Default, Eq, Hash, PartialEq)]
pub struct ReplayKv {
    version: Option<KvVersion>,
    gets: BTreeMap<Key, Option<Value>>,
    ranges: BTreeMap<(KeyRange, u32), Vec<(Key, Value)>>,
    missing: Option<Missing>,
}

impl ReplayKv {
    /// The attempt's read version, once the first read returned.
    pub fn version(&self) -> Option<KvVersion> {
        self.version
    }

    /// Takes the miss of the last replay.
    pub fn take_missing(&mut self) -> Option<Missing> {
        self.missing.take()
    }

    /// Adds the answer to a missing read, made at `version`.
    pub fn fill(&mut self, version: KvVersion, miss: Missing, rows: Fetched) {
        debug_assert!(self.version.is_none_or(|v| v == version));
        self.version = Some(version);
        match (miss, rows) {
            (Missing::Key(k), Fetched::Value(v)) => {
                self.gets.insert(k, v);
            }
            (Missing::Range(r, limit), Fetched::Rows(rows)) => {
                self.ranges.insert((r, limit), rows);
            }
            // A mismatched answer is dropped: the next replay misses again and re-asks.
            _ => {}
        }
    }

    fn miss(&mut self, m: Missing) -> KvError {
        self.missing.get_or_insert(m);
        KvError::Unavailable
    }
}

/// What a fetch returned.
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum Fetched {
    /// A point read's value.
    Value(Option<Value>),
    /// A range read's rows.
    Rows(Vec<(Key, Value)>),
}

impl KvEngine for ReplayKv {
    fn read_version(&mut self) -> Result<KvVersion, KvError> {
        // Before the first fetch there is no version yet; any read then misses, so the
        // placeholder never reaches a commit (the server checks `version()` before committing).
        Ok(self.version.unwrap_or_default())
    }

    fn get(&mut self, _at: KvVersion, key: &[u8]) -> Result<Option<Value>, KvError> {
        match self.gets.get(key) {
            Some(v) => Ok(v.clone()),
            None => Err(self.miss(Missing::Key(key.to_vec()))),
        }
    }

    fn range(
        &mut self,
        _at: KvVersion,
        range: &KeyRange,
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, KvError> {
        let limit = u32::try_from(limit).unwrap_or(u32::MAX);
        match self.ranges.get(&(range.clone(), limit)) {
            Some(rows) => Ok(rows.clone()),
            None => Err(self.miss(Missing::Range(range.clone(), limit))),
        }
    }

    fn commit(&mut self, _req: CommitReq) -> Result<KvVersion, KvError> {
        // Replays never commit: the server sends the commit request through `IoOp::Kv`.
        Err(KvError::Unavailable)
    }
}
