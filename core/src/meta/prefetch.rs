//! Prefetching a request's rows: one KV round trip for the rows a replay will read next, not one
//! per row.
//!
//! Why: a replay (`replay.rs`) learns its next row only when the previous one arrives, so a
//! path walk of n components, its idempotency record and the inodes it touches cost one KV
//! round trip each (a create through the mount measured 5 requests and 27 KV reads). Most of
//! those rows were read or written by an earlier request moments before. The server keeps what
//! it saw of them ([`RowHints`]); when a replay misses a row, [`speculate`] replays a copy of the
//! attempt's rows with the hinted value filled in (absent where nothing is known), finds the
//! replay's next miss, and so on, and the server fetches every row found this way in one read
//! at the attempt's read version.
//!
//! Invariant (what keeps it safe): hints only choose which rows are fetched. The real replay
//! reads nothing but rows fetched at the attempt's one read version; a stale or wrong hint costs
//! a row fetched for nothing and one more round trip, never a wrong answer, and conflicts are
//! detected by the KV exactly as before. Hints are a bounded map, evicted oldest first, so a
//! server's memory does not grow with the namespace.
//!
//! Not here: a cache that answers reads (every answer comes from the KV at the attempt's
//! version), range prefetch (a range a replay misses is fetched, and speculation stops there:
//! its rows cannot be guessed), idempotency records (each is read once, by its own request).

use std::collections::BTreeMap;

use super::keys::IDEM_RANGE_PREFIX;
use super::replay::{Fetched, Missing, ReplayKv};
use crate::kv::{Key, Mutation, Value};

/// A range read's rows.
type Rows = Vec<(Key, Value)>;

/// Rows fetched per round trip at most: a path walk of 8 components with its inodes, and the
/// request's own rows.
pub const PREFETCH_MAX: usize = 24;

/// Rows remembered at most (a row is ~100 bytes: a few MiB per server).
pub const HINTS_MAX: usize = 65_536;

/// The last value this server saw of each row (fetched or written), oldest evicted first.
#[derive(Clone, Debug, Default, Eq, Hash, PartialEq)]
pub struct RowHints {
    /// Each row's value (`None`: seen absent or cleared) and when it was last learned.
    rows: BTreeMap<Key, (u64, Option<Value>)>,
    /// Rows by when they were learned.
    order: BTreeMap<u64, Key>,
    next: u64,
}

impl RowHints {
    /// What the server last saw of `key`, if anything.
    pub fn get(&self, key: &[u8]) -> Option<&Option<Value>> {
        self.rows.get(key).map(|(_, v)| v)
    }

    /// Rows remembered.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Remembers `key` as `value`, evicting the oldest row beyond [`HINTS_MAX`].
    pub fn learn(&mut self, key: Key, value: Option<Value>) {
        if key.starts_with(IDEM_RANGE_PREFIX) {
            return;
        }
        self.next += 1;
        if let Some((seq, _)) = self.rows.insert(key.clone(), (self.next, value)) {
            self.order.remove(&seq);
        }
        self.order.insert(self.next, key);
        while self.rows.len() > HINTS_MAX {
            let Some((_, old)) = self.order.pop_first() else {
                break;
            };
            self.rows.remove(&old);
        }
    }

    /// Remembers what a commit writes (as sent: a commit that then fails leaves a wrong hint,
    /// which costs only a wasted fetch).
    pub fn learn_writes(&mut self, mutations: &[Mutation]) {
        for m in mutations {
            match m {
                Mutation::Set(k, v) => self.learn(k.clone(), Some(v.clone())),
                Mutation::Clear(k) => self.learn(k.clone(), None),
                Mutation::ClearRange(r) => {
                    let gone: Vec<Key> = self
                        .rows
                        .range(r.begin.clone()..r.end.clone())
                        .map(|(k, _)| k.clone())
                        .collect();
                    for k in gone {
                        self.learn(k, None);
                    }
                }
            }
        }
    }

    /// Remembers what a read returned for `misses` (keys and ranges in request order).
    pub fn learn_read(&mut self, misses: &[Missing], values: &[Option<Value>], ranges: &[Rows]) {
        let keys = misses.iter().filter_map(|m| match m {
            Missing::Key(k) => Some(k),
            Missing::Range(..) => None,
        });
        for (k, v) in keys.zip(values) {
            self.learn(k.clone(), v.clone());
        }
        for rows in ranges {
            for (k, v) in rows {
                self.learn(k.clone(), Some(v.clone()));
            }
        }
    }
}

/// The rows to fetch for a replay that missed `first`: `first`, then each next row a replay of a
/// copy of `rows` misses once the rows before it are filled with their hints (absent where none
/// is known), until a range is missed, a replay misses nothing, or [`PREFETCH_MAX`] rows.
/// `replay` runs the request's work once on the rows it is given.
pub fn speculate(
    first: Missing,
    rows: &ReplayKv,
    hints: &RowHints,
    mut replay: impl FnMut(&mut ReplayKv),
) -> Vec<Missing> {
    let version = rows.version().unwrap_or_default();
    let mut guess = rows.clone();
    let mut found = vec![first];
    while found.len() < PREFETCH_MAX {
        let Some(Missing::Key(k)) = found.last() else {
            break; // A range's rows cannot be guessed.
        };
        let value = hints.get(k).cloned().flatten();
        guess.fill(version, Missing::Key(k.clone()), Fetched::Value(value));
        replay(&mut guess);
        match guess.take_missing() {
            Some(next) if !found.contains(&next) => found.push(next),
            _ => break,
        }
    }
    found
}

/// Splits a read's answer into one [`Fetched`] per miss of `misses` (values to keys and row
/// lists to ranges, each in request order); a short answer yields fewer.
pub fn answers(
    misses: Vec<Missing>,
    values: Vec<Option<Value>>,
    ranges: Vec<Rows>,
) -> Vec<(Missing, Fetched)> {
    let (mut values, mut ranges) = (values.into_iter(), ranges.into_iter());
    let mut out = Vec::with_capacity(misses.len());
    for m in misses {
        let f = match &m {
            Missing::Key(_) => values.next().map(Fetched::Value),
            Missing::Range(..) => ranges.next().map(Fetched::Rows),
        };
        match f {
            Some(f) => out.push((m, f)),
            None => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::KeyRange;

    #[test]
    fn hints_keep_the_newest_value_and_evict_oldest_first() {
        let mut h = RowHints::default();
        h.learn(b"INODa".to_vec(), Some(b"1".to_vec()));
        h.learn(b"INODa".to_vec(), Some(b"2".to_vec()));
        assert_eq!(h.get(b"INODa"), Some(&Some(b"2".to_vec())));
        assert_eq!(h.len(), 1);
        h.learn(b"IDEMx".to_vec(), Some(b"r".to_vec()));
        assert_eq!(
            h.get(b"IDEMx"),
            None,
            "idempotency records are never hinted"
        );
        for i in 0..HINTS_MAX as u32 {
            h.learn(i.to_be_bytes().to_vec(), None);
        }
        assert_eq!(h.len(), HINTS_MAX);
        assert_eq!(h.get(b"INODa"), None, "the oldest row went first");
        assert_eq!(h.order.len(), h.rows.len());
    }

    #[test]
    fn writes_are_learned_including_cleared_ranges() {
        let mut h = RowHints::default();
        h.learn(b"DENTa1".to_vec(), Some(b"x".to_vec()));
        h.learn(b"DENTb1".to_vec(), Some(b"y".to_vec()));
        h.learn_writes(&[
            Mutation::Set(b"INOD1".to_vec(), b"i".to_vec()),
            Mutation::Clear(b"DENTb1".to_vec()),
            Mutation::ClearRange(KeyRange {
                begin: b"DENTa".to_vec(),
                end: b"DENTb".to_vec(),
            }),
        ]);
        assert_eq!(h.get(b"INOD1"), Some(&Some(b"i".to_vec())));
        assert_eq!(h.get(b"DENTb1"), Some(&None));
        assert_eq!(h.get(b"DENTa1"), Some(&None));
    }

    /// A stand-in replay: a chain of rows, each row's value naming the next key to read.
    fn walk(rows: &mut ReplayKv) {
        use crate::kv::KvEngine;
        let mut k = b"DENT0".to_vec();
        for _ in 0..10 {
            match rows.get(Default::default(), &k) {
                Ok(Some(v)) => k = v,
                _ => return,
            }
        }
    }

    #[test]
    fn speculation_follows_hints_and_stops_at_the_unknown() {
        let mut h = RowHints::default();
        h.learn(b"DENT0".to_vec(), Some(b"DENT1".to_vec()));
        h.learn(b"DENT1".to_vec(), Some(b"DENT2".to_vec()));
        let rows = ReplayKv::default();
        let got = speculate(Missing::Key(b"DENT0".to_vec()), &rows, &h, walk);
        let keys: Vec<Missing> = [&b"DENT0"[..], b"DENT1", b"DENT2"]
            .iter()
            .map(|k| Missing::Key(k.to_vec()))
            .collect();
        // DENT2 is unknown: guessed absent, the walk ends there.
        assert_eq!(got, keys);
    }

    #[test]
    fn a_cycle_or_a_range_ends_speculation() {
        let mut h = RowHints::default();
        h.learn(b"DENT0".to_vec(), Some(b"DENT0".to_vec()));
        let rows = ReplayKv::default();
        let got = speculate(Missing::Key(b"DENT0".to_vec()), &rows, &h, walk);
        assert_eq!(got, vec![Missing::Key(b"DENT0".to_vec())]);
        let r = Missing::Range(KeyRange::single(b"DENT0"), 4);
        assert_eq!(speculate(r.clone(), &rows, &h, walk), vec![r]);
    }

    #[test]
    fn answers_pair_keys_with_values_and_ranges_with_rows() {
        let r = Missing::Range(KeyRange::single(b"DENTr"), 4);
        let misses = vec![
            Missing::Key(b"a".to_vec()),
            r.clone(),
            Missing::Key(b"b".to_vec()),
        ];
        let values = vec![Some(b"1".to_vec()), None];
        let ranges = vec![vec![(b"DENTr".to_vec(), b"2".to_vec())]];
        let got = answers(misses, values, ranges);
        assert_eq!(got.len(), 3);
        assert_eq!(
            got[1],
            (r, Fetched::Rows(vec![(b"DENTr".to_vec(), b"2".to_vec())]))
        );
        assert_eq!(got[2], (Missing::Key(b"b".to_vec()), Fetched::Value(None)));
    }
}
