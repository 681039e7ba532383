//! Regularity of register histories (Lamport's regular register, multi-writer form): every read
//! returns the value of a write concurrent with it, or of a write that completed before it and
//! was not superseded by another write entirely between the two. Unlike linearizability it
//! allows a new-old inversion between two reads that overlap one write — exactly what 3FS's new
//! chunk engine permits when reads at any replica return the committed version while the commit
//! travels from tail to head (reference §3.3) — and nothing weaker: a read of a value older than
//! one overwritten before it started, or of a value never written, is still a violation.
//!
//! Each read is judged on its own (O(reads × writes) with a sweep), so this scales to long
//! histories. Not here: write ordering (writes are serialized by the head; the agreement and
//! durability checks cover replicas), linearizability (linearizability.rs).

use super::linearizability::{Interval, RegOp};

/// The first read with an impossible value: its origin and the values it could have returned.
pub fn check(ops: &[Interval]) -> Result<(), (usize, Vec<Option<u64>>)> {
    let mut writes: Vec<&Interval> = ops
        .iter()
        .filter(|o| matches!(o.op, RegOp::Write(_)))
        .collect();
    writes.sort_by_key(|w| w.ret);
    for r in ops.iter().filter(|o| matches!(o.op, RegOp::Read(_))) {
        let RegOp::Read(got) = r.op else {
            unreachable!()
        };
        // Writes completed before the read started, by completion time.
        let done: Vec<&&Interval> = writes.iter().filter(|w| w.ret < r.call).collect();
        // The latest invocation among completed writes: any completed write that returned before
        // it was superseded entirely before the read.
        let cut = done.iter().map(|w| w.call).max();
        let mut allowed: Vec<Option<u64>> = Vec::new();
        match cut {
            None => allowed.push(None), // Nothing completed before: a hole is allowed.
            Some(cut) => {
                for w in &done {
                    if w.ret >= cut {
                        if let RegOp::Write(v) = w.op {
                            allowed.push(Some(v));
                        }
                    }
                }
            }
        }
        for w in writes.iter().filter(|w| w.call < r.ret && w.ret > r.call) {
            if let RegOp::Write(v) = w.op {
                allowed.push(Some(v));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::linearizability::tests::iv;
    use RegOp::*;

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
