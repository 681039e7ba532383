//! Regularity of register histories (Lamport's regular register, multi-writer form): every read
//! returns the value of a write concurrent with it, or of a write that completed before it and
//! was not superseded by another write entirely between the two. Unlike linearizability it
//! allows a new-old inversion between two reads that overlap one write — exactly what 3FS's new
//! chunk engine permits when reads at any replica return the committed version while the commit
//! travels from tail to head (reference §3.3) — and nothing weaker: a read of a value older than
//! one overwritten before it started, or of a value never written, is still a violation.
//!
//! Each read is judged on its own, in O(log writes) when it passes (`check`), so this scales to
//! long histories. Not here: write ordering (writes are serialized by the head; the agreement and
//! durability checks cover replicas), linearizability (linearizability.rs).

use super::linearizability::{Interval, RegOp};

/// The first read with an impossible value: its origin and the values it could have returned.
///
/// Writes are sorted by completion once; for each read a binary search finds the writes that
/// completed before it, and a prefix maximum gives their latest invocation (the cut). A read's
/// value is then judged from the writes of that value alone, so a passing history costs
/// O((reads + writes) log writes); only a failing read lists everything it could have returned.
pub fn check(ops: &[Interval]) -> Result<(), (usize, Vec<Option<u64>>)> {
    let mut writes: Vec<(&Interval, u64)> = ops
        .iter()
        .filter_map(|o| match o.op {
            RegOp::Write(v) => Some((o, v)),
            RegOp::Read(_) => None,
        })
        .collect();
    writes.sort_by_key(|(w, _)| w.ret);
    // cuts[k]: the latest invocation among the first k writes to complete.
    let cuts: Vec<Option<u64>> = core::iter::once(None)
        .chain(writes.iter().scan(None, |m: &mut Option<u64>, (w, _)| {
            *m = Some(m.map_or(w.call, |m| m.max(w.call)));
            Some(*m)
        }))
        .collect();
    // (value, write) sorted: one buffer, where a map of vectors allocated once per value.
    let mut by_value: Vec<(u64, usize)> = writes
        .iter()
        .enumerate()
        .map(|(j, (_, v))| (*v, j))
        .collect();
    by_value.sort_unstable();
    for r in ops {
        let RegOp::Read(got) = r.op else { continue };
        let done = writes.partition_point(|(w, _)| w.ret < r.call);
        let ok = match got {
            None => done == 0, // A hole only before any write completed.
            Some(v) => by_value[by_value.partition_point(|&(x, _)| x < v)..]
                .iter()
                .take_while(|&&(x, _)| x == v)
                .any(|&(_, j)| allowed(writes[j].0, j < done, cuts[done], r)),
        };
        if !ok {
            let mut all: Vec<Option<u64>> = Vec::new();
            if done == 0 {
                all.push(None);
            }
            for (j, (w, v)) in writes.iter().enumerate() {
                if allowed(w, j < done, cuts[done], r) {
                    all.push(Some(*v));
                }
            }
            all.sort();
            all.dedup();
            return Err((r.origin, all));
        }
    }
    Ok(())
}

/// Whether read `r` may return write `w`'s value: `w` completed before the read (`done`) and was
/// not superseded entirely before it (it returned at or after the cut, the latest invocation
/// among completed writes), or `w` overlaps the read.
fn allowed(w: &Interval, done: bool, cut: Option<u64>, r: &Interval) -> bool {
    (done && cut.is_some_and(|c| w.ret >= c)) || (w.call < r.ret && w.ret > r.call)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::linearizability::tests::iv;
    use RegOp::*;

    /// The definition, read for read: what `check` must agree with.
    fn by_definition(ops: &[Interval]) -> Result<(), (usize, Vec<Option<u64>>)> {
        let writes: Vec<&Interval> = ops.iter().filter(|o| matches!(o.op, Write(_))).collect();
        for r in ops {
            let Read(got) = r.op else { continue };
            let done: Vec<&&Interval> = writes.iter().filter(|w| w.ret < r.call).collect();
            let cut = done.iter().map(|w| w.call).max();
            let mut allowed: Vec<Option<u64>> = Vec::new();
            if cut.is_none() {
                allowed.push(None);
            }
            let superseded = |w: &Interval| cut.is_some_and(|c| w.ret < c);
            let concurrent = |w: &Interval| w.call < r.ret && w.ret > r.call;
            for w in &writes {
                if let Write(v) = w.op {
                    if (w.ret < r.call && !superseded(w)) || concurrent(w) {
                        allowed.push(Some(v));
                    }
                }
            }
            if !allowed.contains(&got) {
                allowed.sort();
                allowed.dedup();
                return Err((r.origin, allowed));
            }
        }
        Ok(())
    }

    #[test]
    fn agrees_with_the_definition_on_random_histories() {
        let mut rng = t3fs_scenario::Rng::new(7);
        let (mut passed, mut failed) = (0, 0);
        for _ in 0..3000 {
            let n = 1 + rng.below(12) as usize;
            let mut times: Vec<u64> = (1..=2 * n as u64).collect();
            for i in (1..times.len()).rev() {
                times.swap(i, rng.below(i as u64 + 1) as usize);
            }
            let ops: Vec<Interval> = (0..n)
                .map(|i| {
                    let (a, b) = (times[2 * i], times[2 * i + 1]);
                    let op = if rng.chance(0.5) {
                        Write(1 + rng.below(4))
                    } else if rng.chance(0.1) {
                        Read(None)
                    } else {
                        Read(Some(1 + rng.below(4)))
                    };
                    let ret = if rng.chance(0.1) { u64::MAX } else { a.max(b) };
                    Interval {
                        op,
                        call: a.min(b),
                        ret,
                        origin: i,
                    }
                })
                .collect();
            let want = by_definition(&ops);
            assert_eq!(check(&ops), want, "{ops:?}");
            if want.is_ok() {
                passed += 1;
            } else {
                failed += 1;
            }
        }
        assert!(
            passed > 300 && failed > 300,
            "both verdicts exercised: {passed} / {failed}"
        );
    }

    #[test]
    fn inversion_allowed_staleness_not() {
        // Write 2 in flight; one read sees 2, a later read sees 1: regular, not linearizable.
        let inv = [
            iv(Write(1), 1, 2),
            iv(Write(2), 3, 10),
            iv(Read(Some(2)), 4, 5),
            iv(Read(Some(1)), 6, 7),
        ];
        assert_eq!(check(&inv), Ok(()));
        // Write 2 completed before the read: reading 1 is stale.
        let stale = [
            iv(Write(1), 1, 2),
            iv(Write(2), 3, 4),
            iv(Read(Some(1)), 5, 6),
        ];
        assert!(check(&stale).is_err());
        // A hole after a completed write, or a value never written: violations.
        assert!(check(&[iv(Write(1), 1, 2), iv(Read(None), 3, 4)]).is_err());
        assert!(check(&[iv(Write(1), 1, 2), iv(Read(Some(9)), 3, 4)]).is_err());
        // Overlapping completed writes: either may be last.
        let both = [
            iv(Write(1), 1, 5),
            iv(Write(2), 2, 4),
            iv(Read(Some(1)), 6, 7),
            iv(Read(Some(2)), 8, 9),
        ];
        assert_eq!(check(&both), Ok(()));
        // The error names the read and every value it could have returned.
        let stale = [
            iv(Write(1), 1, 2),
            iv(Write(2), 3, 4),
            iv(Write(3), 5, 9),
            iv(Read(Some(1)), 6, 7),
        ];
        assert_eq!(check(&stale), Err((6, vec![Some(2), Some(3)])));
        // Before any write completed, a hole is allowed, and named as allowed.
        assert_eq!(
            check(&[iv(Write(4), 1, 9), iv(Read(Some(8)), 2, 3)]),
            Err((2, vec![None, Some(4)]))
        );
        // An open write may be seen any time after its invocation.
        assert_eq!(
            check(&[
                iv(Write(1), 1, 2),
                iv(Write(2), 3, u64::MAX),
                iv(Read(Some(2)), 9, 10)
            ]),
            Ok(())
        );
    }
}
