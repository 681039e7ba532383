//! Linearizability of register histories: Wing & Gong's search with Lowe's just-in-time
//! linearization and memoization of (linearized set, state) pairs, as in Porcupine, run per
//! chunk (P-compositionality: a history is linearizable iff each chunk's sub-history is).
//!
//! Model: a chunk is a register holding a value id or nothing (a hole). Writes always succeed;
//! a read must return the current value. Open operations (failed calls, crashed clients) return
//! at infinity, so they may take effect at any point after their invocation or never. Reads that
//! failed carry no information and are dropped; reads of bytes no writer produced are reported
//! by the corruption check, not here. Budget exhaustion reports `Unknown`, never success.
//!
//! An open write whose value no read returned is dropped before the search: in any
//! linearization it can move to the very end (its return is at infinity, and nothing after it
//! reads its value), so dropping it changes no verdict. Without that, every such write (a full
//! disk fails writes for a while, each `NoSpace`, none applied) multiplies the memoized states
//! by the points where it might have taken effect, and the search ran out of budget.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use t3fs_scenario::workload::Payload;

use crate::history::{OpKind, OpRec};

/// A register operation for the search.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum RegOp {
    /// Write value.
    Write(u64),
    /// Read that returned `None` (hole) or a value.
    Read(Option<u64>),
}

/// One operation with its interval.
#[derive(Clone, Copy, Debug)]
pub struct Interval {
    /// The operation.
    pub op: RegOp,
    /// Invocation time.
    pub call: u64,
    /// Response time (`u64::MAX` when open).
    pub ret: u64,
    /// Index in the run's history (for reports).
    pub origin: usize,
}

/// The outcome for one chunk.
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum Outcome {
    /// Some linearization exists.
    Ok,
    /// None exists; the history indices of the operations around where every search got stuck.
    Violation(Vec<usize>),
    /// The memo table outgrew its budget.
    Unknown,
}

fn step(state: Option<u64>, op: RegOp) -> Option<Option<u64>> {
    match op {
        RegOp::Write(v) => Some(Some(v)),
        RegOp::Read(r) if r == state => Some(state),
        RegOp::Read(_) => None,
    }
}

/// Builds the intervals of `chunk` from a history (and extra synthetic operations).
pub fn intervals(ops: &[OpRec], chunk: u32) -> Vec<Interval> {
    ops.iter()
        .enumerate()
        .filter(|(_, o)| o.chunk == chunk)
        .filter_map(|(i, o)| interval(i, o))
        .collect()
}

/// The intervals of every chunk below `chunks`, in one pass over the history; reads before
/// index `reads_from` are left out (the durability check keeps only the final reads).
pub fn intervals_by_chunk(ops: &[OpRec], chunks: u32, reads_from: usize) -> Vec<Vec<Interval>> {
    let mut by_chunk = vec![Vec::new(); chunks as usize];
    for (i, o) in ops.iter().enumerate() {
        if i < reads_from && matches!(o.kind, OpKind::Read(_)) {
            continue;
        }
        if let (Some(c), Some(iv)) = (by_chunk.get_mut(o.chunk as usize), interval(i, o)) {
            c.push(iv);
        }
    }
    by_chunk
}

/// Operation `i` as an interval, if it has a register meaning.
fn interval(i: usize, o: &OpRec) -> Option<Interval> {
    let op = match o.kind {
        OpKind::Write(v) => RegOp::Write(v),
        OpKind::Read(Some(Payload::Hole)) => RegOp::Read(None),
        OpKind::Read(Some(Payload::Value(v))) => RegOp::Read(Some(v)),
        OpKind::Read(_) => return None, // Failed, or garbage (the corruption check's).
    };
    if matches!(op, RegOp::Read(_)) && o.ret.is_none() {
        return None;
    }
    Some(Interval {
        op,
        call: o.invoke,
        ret: o.ret.unwrap_or(u64::MAX),
        origin: i,
    })
}

/// Checks one register history with a memo budget (entries).
pub fn check(ops: &[Interval], budget: usize) -> Outcome {
    let read: HashSet<u64> = ops
        .iter()
        .filter_map(|o| match o.op {
            RegOp::Read(Some(v)) => Some(v),
            _ => None,
        })
        .collect();
    let unseen_open =
        |o: &Interval| o.ret == u64::MAX && matches!(o.op, RegOp::Write(v) if !read.contains(&v));
    if ops.iter().any(unseen_open) {
        let kept: Vec<Interval> = ops.iter().filter(|o| !unseen_open(o)).copied().collect();
        return search(&kept, budget);
    }
    search(ops, budget)
}

/// Wing & Gong's search over `ops` (module docs).
fn search(ops: &[Interval], budget: usize) -> Outcome {
    let n = ops.len();
    if n == 0 {
        return Outcome::Ok;
    }
    let entries = sorted_entries(ops);
    // Doubly linked list over entry positions 1..=len; 0 is the head sentinel, len + 1 the end.
    let end = entries.len() + 1;
    let (mut next, mut prev) = linked_list(entries.len());
    let (call_pos, ret_pos) = positions(&entries, n);
    // The memo key is the set of linearized operations and the register's state. The set is
    // kept as a 128-bit Zobrist hash (XOR of per-operation random keys), updated in O(1) per
    // step: hashing the whole bitset made each step O(n) and long single-chunk histories
    // quadratic. A false "seen" needs a 128-bit collision among the states visited.
    let keys = zobrist_keys(n);
    let mut linearized = (0u64, 0u64);
    let mut cache: HashSet<(u64, u64, Option<u64>), BuildHasherDefault<KeyHasher>> =
        HashSet::default();
    let mut calls: Vec<(usize, Option<u64>)> = Vec::new();
    let mut state: Option<u64> = None;
    let mut entry = next[0];
    // The operation whose return blocked the search at the greatest depth: the furthest any
    // order got (backtracking then blocks at shallower returns, which must not replace it).
    let mut stuck_at = 0usize;
    let mut stuck_depth = 0usize;
    while next[0] != end {
        if entry == end {
            // Only reachable if a return is missing; treat as backtrack.
            return Outcome::Violation(Vec::new());
        }
        let (_, is_call, i) = entries[entry - 1];
        if is_call {
            if let Some(new_state) = step(state, ops[i].op) {
                linearized.0 ^= keys[i].0;
                linearized.1 ^= keys[i].1;
                if cache.insert((linearized.0, linearized.1, new_state)) {
                    if cache.len() > budget {
                        return Outcome::Unknown;
                    }
                    calls.push((i, state));
                    state = new_state;
                    // Lift the call and its return out of the list (return first: it is later).
                    unlink(&mut next, &mut prev, ret_pos[i]);
                    unlink(&mut next, &mut prev, call_pos[i]);
                    entry = next[0];
                    continue;
                }
                linearized.0 ^= keys[i].0;
                linearized.1 ^= keys[i].1;
            }
            entry = next[entry];
        } else {
            // A return whose call is still in the list: nothing earlier can be linearized next.
            if calls.len() >= stuck_depth {
                stuck_at = i;
                stuck_depth = calls.len();
            }
            let Some((j, old)) = calls.pop() else {
                return Outcome::Violation(context(ops, stuck_at));
            };
            state = old;
            linearized.0 ^= keys[j].0;
            linearized.1 ^= keys[j].1;
            relink(&mut next, &mut prev, call_pos[j]);
            relink(&mut next, &mut prev, ret_pos[j]);
            entry = next[call_pos[j]];
        }
    }
    Outcome::Ok
}

/// Each call and return of `ops` as (time, is a call, operation), sorted by time.
fn sorted_entries(ops: &[Interval]) -> Vec<(u64, bool, usize)> {
    // Entries: 2 per op (call, return), sorted by time; calls before returns at equal times
    // cannot happen (times are unique logical ticks, and open returns are all at infinity,
    // ordered after every call).
    let mut entries: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * ops.len());
    for (i, o) in ops.iter().enumerate() {
        entries.push((o.call, true, i));
        entries.push((o.ret, false, i));
    }
    entries.sort_by_key(|&(t, is_call, i)| (t, !is_call, i));
    entries
}

/// The links `(next, prev)` of the list over entry positions 1..=len, in order.
fn linked_list(len: usize) -> (Vec<usize>, Vec<usize>) {
    let end = len + 1;
    let next: Vec<usize> = (1..=end + 1).collect();
    let prev: Vec<usize> = (0..=end).map(|p| p.saturating_sub(1)).collect();
    (next, prev)
}

/// The Zobrist keys of `n` operations, for the memo key of a set of linearized ones.
fn zobrist_keys(n: usize) -> Vec<(u64, u64)> {
    (0..n as u64)
        .map(|i| (splitmix(2 * i + 1), splitmix(2 * i + 2)))
        .collect()
}

/// The list positions (from 1) of each of the `n` operations' call and return.
fn positions(entries: &[(u64, bool, usize)], n: usize) -> (Vec<usize>, Vec<usize>) {
    let mut ret_pos = vec![0usize; n];
    let mut call_pos = vec![0usize; n];
    for (p, &(_, is_call, i)) in entries.iter().enumerate() {
        if is_call {
            call_pos[i] = p + 1;
        } else {
            ret_pos[i] = p + 1;
        }
    }
    (call_pos, ret_pos)
}

/// Takes position `p` out of the list `next`/`prev`, leaving its own links as they were.
#[inline]
fn unlink(next: &mut [usize], prev: &mut [usize], p: usize) {
    let (a, b) = (prev[p], next[p]);
    next[a] = b;
    prev[b] = a;
}

/// Puts position `p` back between the neighbours it had when it was unlinked.
#[inline]
fn relink(next: &mut [usize], prev: &mut [usize], p: usize) {
    // Restores in the reverse order of unlinking, so adjacent entries come back intact.
    let (a, b) = (prev[p], next[p]);
    next[a] = p;
    prev[b] = p;
}

/// SplitMix64: fixed, well-mixed keys for the Zobrist hash (the same on every run).
fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The memo keys are already uniformly random: hashing them again is wasted work.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = self.0.rotate_left(5) ^ x;
    }
}

/// History indices of the operations overlapping the one the search could not get past, plus
/// the last writes completed before it (the values a read there could have seen).
fn context(ops: &[Interval], stuck: usize) -> Vec<usize> {
    let s = ops[stuck];
    let mut v: Vec<(u64, usize)> = ops
        .iter()
        .filter(|o| o.call <= s.ret && o.ret >= s.call)
        .map(|o| (o.call, o.origin))
        .collect();
    let mut before: Vec<(u64, u64, usize)> = ops
        .iter()
        .filter(|o| o.ret < s.call && matches!(o.op, RegOp::Write(_)))
        .map(|o| (o.ret, o.call, o.origin))
        .collect();
    before.sort();
    v.extend(before.iter().rev().take(3).map(|&(_, c, o)| (c, o)));
    v.sort();
    v.dedup();
    v.truncate(24);
    v.into_iter().map(|(_, o)| o).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An operation over `[call, ret]` whose history index is its call time (test helper).
    pub(crate) fn iv(op: RegOp, call: u64, ret: u64) -> Interval {
        Interval {
            op,
            call,
            ret,
            origin: call as usize,
        }
    }

    #[test]
    fn sequential_and_concurrent_histories() {
        use RegOp::*;
        // w1 then r1: fine.
        assert_eq!(
            check(&[iv(Write(1), 1, 2), iv(Read(Some(1)), 3, 4)], 1000),
            Outcome::Ok
        );
        // Stale read after a completed write: not linearizable.
        let stale = [
            iv(Write(1), 1, 2),
            iv(Write(2), 3, 4),
            iv(Read(Some(1)), 5, 6),
        ];
        assert!(matches!(check(&stale, 1000), Outcome::Violation(_)));
        // Concurrent write: either value may be read.
        let conc = [
            iv(Write(1), 1, 2),
            iv(Write(2), 3, 8),
            iv(Read(Some(1)), 4, 5),
            iv(Read(Some(2)), 6, 7),
        ];
        assert_eq!(check(&conc, 1000), Outcome::Ok);
        // Once 2 was read, reading 1 again is a violation (new-old inversion).
        let inv = [
            iv(Write(1), 1, 2),
            iv(Write(2), 3, 10),
            iv(Read(Some(2)), 4, 5),
            iv(Read(Some(1)), 6, 7),
        ];
        assert!(matches!(check(&inv, 1000), Outcome::Violation(_)));
        // A hole read after a write completed: violation; before: fine.
        assert!(matches!(
            check(&[iv(Write(1), 1, 2), iv(Read(None), 3, 4)], 1000),
            Outcome::Violation(_)
        ));
        assert_eq!(
            check(&[iv(Read(None), 1, 2), iv(Write(1), 3, 4)], 1000),
            Outcome::Ok
        );
        // An open write may take effect late or never.
        let open = [
            iv(Write(1), 1, u64::MAX),
            iv(Read(None), 2, 3),
            iv(Read(Some(1)), 4, 5),
        ];
        assert_eq!(check(&open, 1000), Outcome::Ok);
        let never = [
            iv(Write(1), 1, 2),
            iv(Write(2), 3, u64::MAX),
            iv(Read(Some(1)), 4, 5),
        ];
        assert_eq!(check(&never, 1000), Outcome::Ok);
    }

    #[test]
    fn open_writes_nobody_read_cost_the_search_nothing_and_change_no_verdict() {
        use RegOp::*;
        // Writes 1..=8 complete in order, each read back; 40 failed writes (open, never read)
        // overlap them all.
        let mut h = Vec::new();
        for i in 0..8u64 {
            h.push(iv(Write(i + 1), 100 + 4 * i, 101 + 4 * i));
            h.push(iv(Read(Some(i + 1)), 102 + 4 * i, 103 + 4 * i));
        }
        let failed: Vec<Interval> = (0..40u64)
            .map(|k| iv(Write(1000 + k), 1 + k, u64::MAX))
            .collect();
        let with_failed: Vec<Interval> = h.iter().chain(&failed).copied().collect();
        assert_eq!(check(&with_failed, 2000), Outcome::Ok);
        // A stale read of 1 after 8 was read: a violation. With the failed writes in the search
        // it tries every subset of them at every point and runs out of budget, hiding it.
        let mut stale = with_failed.clone();
        stale.push(iv(Read(Some(1)), 140, 141));
        assert_eq!(search(&stale, 2000), Outcome::Unknown, "the blow-up");
        assert!(matches!(check(&stale, 2000), Outcome::Violation(_)));
        // An open write that a read returned is kept: it explains that read.
        let seen = [
            iv(Write(1), 1, 2),
            iv(Write(7), 3, u64::MAX),
            iv(Read(Some(7)), 4, 5),
            iv(Read(Some(1)), 6, 7),
        ];
        assert!(matches!(check(&seen, 1000), Outcome::Violation(_)));
        let seen_ok = [
            iv(Write(1), 1, 2),
            iv(Write(7), 3, u64::MAX),
            iv(Read(Some(1)), 4, 5),
            iv(Read(Some(7)), 6, 7),
        ];
        assert_eq!(check(&seen_ok, 1000), Outcome::Ok);
    }

    #[test]
    fn intervals_keep_one_chunk_drop_uninformative_reads_and_open_writes_run_forever() {
        use crate::history::History;
        use t3fs_scenario::workload::Payload;
        // The history's clock ticks once per invocation and once per response.
        let mut h = History::default();
        let w = h.invoke(0, 0, OpKind::Write(1)); // [1, 2]
        h.ret(w, None);
        let w = h.invoke(0, 1, OpKind::Write(2)); // Another chunk.
        h.ret(w, None);
        let w = h.invoke(0, 0, OpKind::Write(3)); // Open: may land any time after 5.
        h.fail(w);
        let answered = [
            Payload::Value(3),
            Payload::Hole,
            Payload::Garbage, // The corruption check's.
        ];
        for p in answered {
            let r = h.invoke(0, 0, OpKind::Read(None));
            h.ret(r, Some(p));
        }
        let r = h.invoke(0, 0, OpKind::Read(None)); // Failed read: no information.
        h.fail(r);
        let ops = h.ops;
        let iv = intervals(&ops, 0);
        let got: Vec<(RegOp, u64, u64, usize)> =
            iv.iter().map(|o| (o.op, o.call, o.ret, o.origin)).collect();
        assert_eq!(
            got,
            vec![
                (RegOp::Write(1), 1, 2, 0),
                (RegOp::Write(3), 5, u64::MAX, 2),
                (RegOp::Read(Some(3)), 6, 7, 3),
                (RegOp::Read(None), 8, 9, 4),
            ]
        );
        // The open write explains the read of 3; the later hole read cannot follow it (a
        // write once seen stays), so the whole is no register history.
        assert!(matches!(check(&iv, 1000), Outcome::Violation(_)));
        assert_eq!(check(&iv[..3], 1000), Outcome::Ok);
    }

    #[test]
    fn a_violation_names_the_operations_around_the_conflict() {
        use RegOp::*;
        // Origins are the call times: w1 [1,2], w2 [3,4], the stale read [5,6].
        let stale = [
            iv(Write(1), 1, 2),
            iv(Write(2), 3, 4),
            iv(Read(Some(1)), 5, 6),
        ];
        let Outcome::Violation(ctx) = check(&stale, 1000) else {
            panic!("stale read accepted");
        };
        assert!(ctx.contains(&5), "the stale read: {ctx:?}");
        assert!(ctx.contains(&3), "the write it missed: {ctx:?}");
    }

    #[test]
    fn long_histories_check_quickly_and_budget_reports_unknown() {
        // 4 clients, 2,000 operations, overlapping in windows of 4: always linearizable.
        let mut ops = Vec::new();
        let mut t = 0;
        for k in 0..500u64 {
            let base = t;
            for c in 0..4u64 {
                let op = if c == 0 {
                    RegOp::Write(k + 1)
                } else {
                    RegOp::Read(Some(k + 1))
                };
                // The write covers the window; reads start after it was invoked and end after
                // it returned, so each read may see the new value.
                let (call, ret) = if c == 0 {
                    (base + 1, base + 5)
                } else {
                    (base + 1 + c, base + 6 + c)
                };
                ops.push(iv(op, call, ret));
            }
            t = base + 20;
        }
        assert_eq!(check(&ops, 1 << 20), Outcome::Ok);
        let mut bad = ops.clone();
        bad.push(iv(RegOp::Read(Some(1)), t + 1, t + 2));
        assert!(matches!(check(&bad, 1 << 20), Outcome::Violation(_)));
        assert_eq!(check(&bad, 10), Outcome::Unknown);
    }
}
