//! A client-side transaction over a [`KvEngine`]: read version, snapshot reads, buffered writes
//! with read-your-writes, and a commit carrying the read-conflict ranges.
//!
//! Invariant: `writes` holds, per key, the value the transaction will leave there (`None` =
//! cleared) after applying `cleared` ranges first; reads consult the buffer before the engine, so
//! a transaction always sees its own writes. Not here: retry loops (callers choose per
//! [`KvError`]).

use std::collections::BTreeMap;

use super::{CommitReq, Key, KeyRange, KvEngine, KvError, KvVersion, Mutation, Value};

/// One optimistic transaction.
pub struct Txn<'e, E: KvEngine + ?Sized> {
    engine: &'e mut E,
    read_version: Option<KvVersion>,
    conflicts: Vec<KeyRange>,
    cleared: Vec<KeyRange>,
    writes: BTreeMap<Key, Option<Value>>,
    mutations: Vec<Mutation>,
}

impl<'e, E: KvEngine + ?Sized> Txn<'e, E> {
    /// Starts a transaction; the read version is taken at the first read.
    pub fn new(engine: &'e mut E) -> Self {
        Self {
            engine,
            read_version: None,
            conflicts: Vec::new(),
            cleared: Vec::new(),
            writes: BTreeMap::new(),
            mutations: Vec::new(),
        }
    }

    /// The read version, taking one if none is held yet.
    pub fn read_version(&mut self) -> Result<KvVersion, KvError> {
        if let Some(v) = self.read_version {
            return Ok(v);
        }
        let v = self.engine.read_version()?;
        self.read_version = Some(v);
        Ok(v)
    }

    fn buffered(&self, key: &[u8]) -> Option<Option<Value>> {
        if let Some(v) = self.writes.get(key) {
            return Some(v.clone());
        }
        self.cleared.iter().any(|r| r.contains(key)).then_some(None)
    }

    /// Reads `key` and adds it to the read-conflict set (serializable read).
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Value>, KvError> {
        self.conflicts.push(KeyRange::single(key));
        self.snapshot_get(key)
    }

    /// Reads `key` without a conflict range (snapshot read: another transaction may change it
    /// before this one commits without aborting it).
    pub fn snapshot_get(&mut self, key: &[u8]) -> Result<Option<Value>, KvError> {
        if let Some(v) = self.buffered(key) {
            return Ok(v);
        }
        let at = self.read_version()?;
        self.engine.get(at, key)
    }

    /// Reads up to `limit` pairs of `range`, merged with this transaction's writes; the whole
    /// range becomes a read conflict (so an insert into it by another transaction aborts this
    /// one: no phantoms).
    pub fn range(&mut self, range: &KeyRange, limit: usize) -> Result<Vec<(Key, Value)>, KvError> {
        self.conflicts.push(range.clone());
        let at = self.read_version()?;
        // Ask the engine for enough rows to survive our own clears, then overlay writes.
        let extra = self.writes.len() + if self.cleared.is_empty() { 0 } else { limit };
        let stored = self.engine.range(at, range, limit.saturating_add(extra))?;
        let mut merged: BTreeMap<Key, Value> = stored
            .into_iter()
            .filter(|(k, _)| !self.cleared.iter().any(|r| r.contains(k)))
            .collect();
        for (k, v) in self.writes.range(range.begin.clone()..range.end.clone()) {
            match v {
                Some(v) => merged.insert(k.clone(), v.clone()),
                None => merged.remove(k),
            };
        }
        Ok(merged.into_iter().take(limit).collect())
    }

    /// Buffers `key := value`.
    pub fn set(&mut self, key: &[u8], value: &[u8]) {
        self.writes.insert(key.to_vec(), Some(value.to_vec()));
        self.mutations
            .push(Mutation::Set(key.to_vec(), value.to_vec()));
    }

    /// Buffers the removal of `key`.
    pub fn clear(&mut self, key: &[u8]) {
        self.writes.insert(key.to_vec(), None);
        self.mutations.push(Mutation::Clear(key.to_vec()));
    }

    /// Buffers the removal of every key in `range`.
    pub fn clear_range(&mut self, range: &KeyRange) {
        self.writes.retain(|k, _| !range.contains(k));
        self.cleared.push(range.clone());
        self.mutations.push(Mutation::ClearRange(range.clone()));
    }

    /// Drops every buffered write, keeping the reads (read version and conflict ranges): for a
    /// transaction whose body failed but which must still record that outcome.
    pub fn discard_writes(&mut self) {
        self.cleared.clear();
        self.writes.clear();
        self.mutations.clear();
    }

    /// Adds a read-conflict range without reading (e.g. to fence on a lease row read earlier).
    pub fn add_read_conflict(&mut self, range: KeyRange) {
        self.conflicts.push(range);
    }

    /// The commit request this transaction would send.
    pub fn to_commit_req(&mut self) -> Result<CommitReq, KvError> {
        Ok(CommitReq {
            read_version: self.read_version()?,
            read_conflicts: self.conflicts.clone(),
            mutations: self.mutations.clone(),
        })
    }

    /// Commits. A read-only transaction commits trivially at its read version.
    pub fn commit(mut self) -> Result<KvVersion, KvError> {
        if self.mutations.is_empty() {
            return self.read_version();
        }
        let req = self.to_commit_req()?;
        self.engine.commit(req)
    }
}
