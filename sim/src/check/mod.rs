//! Checkers over a whole run: linearizability of client histories (per chunk), no acknowledged
//! write lost (the final reads after convergence must be explained by the history), no silent
//! corruption returned to a client, CRAQ agreement after convergence (committed bytes identical
//! on every serving target), and the verdict types the runner reports. The §2.6.1 chain
//! invariants are checked during the run (world/mod.rs, `audit_routing`) and reported here.
//!
//! Invariant: a checker that cannot decide says `Unknown`, never `Pass`. Not here: liveness
//! (the runner measures convergence time against the scenario's bound).

pub mod agreement;
pub mod appendix_b;
pub mod file_length;
pub mod file_reads;
pub mod linearizability;
pub mod namespace;
pub mod ns_fsck;
pub mod ns_judge;
pub mod ns_listing;
pub mod ns_model;
pub mod regular;
pub mod verdicts;

use std::collections::BTreeMap;

use t3fs_scenario::workload::Payload;

use crate::history::{self, History, OpKind};
use linearizability::Outcome;

/// Memo entries the linearizability search may use per chunk before answering `Unknown`.
pub const LIN_BUDGET: usize = 4_000_000;

/// One checker's verdict.
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum Verdict {
    /// Holds; the detail says what was checked.
    Pass(String),
    /// Violated; the detail is the evidence.
    Fail(String),
    /// Could not be decided.
    Unknown(String),
    /// Violated, as the configuration is documented to allow (not a failure of the run).
    Expected(String),
}

impl Verdict {
    /// True for `Fail`.
    pub fn failed(&self) -> bool {
        matches!(self, Self::Fail(_))
    }

    /// `PASS`, `FAIL` or `UNKNOWN`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Pass(_) => "PASS",
            Self::Fail(_) => "FAIL",
            Self::Unknown(_) => "UNKNOWN",
            Self::Expected(_) => "EXPECTED",
        }
    }

    /// The detail.
    pub fn detail(&self) -> &str {
        match self {
            Self::Pass(d) | Self::Fail(d) | Self::Unknown(d) | Self::Expected(d) => d,
        }
    }
}

fn describe(h: &History, idx: &[usize]) -> String {
    idx.iter()
        .map(|&i| {
            let o = &h.ops[i];
            let what = match o.kind {
                OpKind::Write(v) => format!("write {v:#x}"),
                OpKind::Read(Some(Payload::Value(v))) => format!("read -> {v:#x}"),
                OpKind::Read(Some(Payload::Hole)) => "read -> hole".into(),
                OpKind::Read(_) => "read -> ?".into(),
            };
            let ret = match o.ret_ns {
                Some(r) => format!("{:.6}s", r as f64 / 1e9),
                None if o.failed => "failed (open)".into(),
                None => "open".into(),
            };
            format!(
                "    client-{} chunk {} {what} [{:.6}s .. {ret}]",
                o.client,
                o.chunk,
                o.invoke_ns as f64 / 1e9
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn lin_of(h: &History, ops: &[history::OpRec], chunks: u32) -> (Verdict, usize) {
    let mut checked = 0;
    for (c, iv) in (0..).zip(linearizability::intervals_by_chunk(ops, chunks, 0)) {
        checked += iv.len();
        match linearizability::check(&iv, LIN_BUDGET) {
            Outcome::Ok => {}
            Outcome::Violation(ctx) => {
                return (
                    Verdict::Fail(format!(
                    "chunk {c}: no linearization of its {} operations; around the conflict:\n{}",
                    iv.len(),
                    describe(h, &ctx)
                )),
                    checked,
                )
            }
            Outcome::Unknown => {
                return (
                    Verdict::Unknown(format!(
                        "chunk {c}: the linearizability search used its whole budget (LIN_BUDGET = {LIN_BUDGET} memo entries) on the chunk's {} operations; {c} of {chunks} chunks ({} operations) were decided before it",
                        iv.len(),
                        checked - iv.len()
                    )),
                    checked,
                )
            }
        }
    }
    (
        Verdict::Pass(format!("{checked} operations on {chunks} chunks")),
        checked,
    )
}

/// How many of the values a regular register allows a failed verdict names.
const ALLOWED_SHOWN: usize = 8;

/// Regularity of `ops`, leaving out the reads before `reads_from`.
fn regular_of(h: &History, ops: &[history::OpRec], chunks: u32, reads_from: usize) -> Verdict {
    let mut reads = 0;
    for (c, iv) in (0..).zip(linearizability::intervals_by_chunk(ops, chunks, reads_from)) {
        reads += iv
            .iter()
            .filter(|o| matches!(o.op, linearizability::RegOp::Read(_)))
            .count();
        if let Err((origin, allowed)) = regular::check(&iv) {
            // The first few allowed values say what was expected; a long-running history
            // allows thousands, which would bury the operations that matter below them.
            let allowed: Vec<String> = allowed
                .iter()
                .take(ALLOWED_SHOWN)
                .map(|v| v.map_or("hole".into(), |v| format!("{v:#x}")))
                .chain(
                    (allowed.len() > ALLOWED_SHOWN)
                        .then(|| format!("and {} more", allowed.len() - ALLOWED_SHOWN)),
                )
                .collect();
            let mut ctx: Vec<usize> = ops
                .iter()
                .enumerate()
                .filter(|(_, o)| o.chunk == c && matches!(o.kind, OpKind::Write(_)))
                .filter(|(_, o)| o.invoke <= ops[origin].ret.unwrap_or(u64::MAX))
                .map(|(i, _)| i)
                .collect();
            let keep = ctx.len().saturating_sub(4);
            ctx.drain(..keep);
            ctx.push(origin);
            return Verdict::Fail(format!(
                "chunk {c}: a read returned a value no regular register allows (allowed: {}):\n{}",
                allowed.join(", "),
                describe(h, &ctx)
            ));
        }
    }
    Verdict::Pass(format!("{reads} reads on {chunks} chunks"))
}

/// The history verdicts: linearizability and regularity of the workload (operations before
/// `final_from`), and durability (every final read, after convergence, must see every
/// acknowledged write). `linearizable_required`: the targets reject dirty reads (legacy
/// engine); otherwise reads return committed data at any replica (3FS's new engine), which
/// §3.3 says may invert new and old values across replicas, so only regularity is required and
/// a linearizability violation is `Expected`.
///
/// `stale` are the reads served by a replica mgmtd had already moved out of its chain (3FS
/// Appendix B #1/#4, `appendix_b.rs`; empty when the storage lease is on). A violation is
/// `Expected` for that reason only if the history without those reads passes; the verdict
/// names the first of them. Durability is checked whatever the workload verdicts said.
pub fn histories(
    h: &History,
    chunks: u32,
    final_from: usize,
    linearizable_required: bool,
    stale: &BTreeMap<usize, appendix_b::StaleRead>,
) -> [(&'static str, Verdict); 3] {
    let workload = &h.ops[..final_from];
    // The workload without the stale-served reads (indices kept: an open read is skipped).
    let excused: Vec<history::OpRec> = if stale.is_empty() {
        Vec::new()
    } else {
        let mut ops = workload.to_vec();
        for &i in stale.keys() {
            ops[i].kind = OpKind::Read(None);
        }
        ops
    };
    let appendix_b = |v: Verdict, recheck: &dyn Fn(&[history::OpRec]) -> Verdict| match v {
        Verdict::Fail(d) if !stale.is_empty() && matches!(recheck(&excused), Verdict::Pass(_)) => {
            let first = culprit(workload, chunks, stale);
            Verdict::Expected(format!(
                "3FS Appendix B #1/#4 (no storage-side lease): {} ({} stale-served reads; the history without them passes): {d}",
                first.describe(),
                stale.len()
            ))
        }
        v => v,
    };
    let lin = appendix_b(lin_of(h, workload, chunks).0, &|ops| {
        lin_of(h, ops, chunks).0
    });
    let reg = appendix_b(regular_of(h, workload, chunks, 0), &|ops| {
        regular_of(h, ops, chunks, 0)
    });
    let lin = match lin {
        Verdict::Fail(d) if !linearizable_required => Verdict::Expected(format!(
            "new-old inversion under committed reads (3FS new engine, §3.3): {d}"
        )),
        v => v,
    };
    [
        ("linearizable", lin),
        ("regular", reg),
        (
            "no acknowledged write lost",
            durability(h, chunks, final_from),
        ),
    ]
}

/// The stale-served read to name for a violation: the read the regularity check rejects if it
/// is stale-served, else the first stale-served read of that chunk, else the first one.
fn culprit<'a>(
    ops: &[history::OpRec],
    chunks: u32,
    stale: &'a BTreeMap<usize, appendix_b::StaleRead>,
) -> &'a appendix_b::StaleRead {
    let failing = (0..chunks).find_map(|c| {
        regular::check(&linearizability::intervals(ops, c))
            .err()
            .map(|(origin, _)| (c, origin))
    });
    failing
        .and_then(|(c, origin)| {
            stale.get(&origin).or_else(|| {
                stale
                    .iter()
                    .find(|(&i, _)| ops[i].chunk == c)
                    .map(|(_, s)| s)
            })
        })
        .or_else(|| stale.values().next())
        .expect("called with stale reads")
}

/// No acknowledged write lost: every chunk has an answered final read, and each final read
/// returns a value a regular register allows given every write of the run. Workload reads do
/// not take part (a regular register's allowed values depend on writes only), so this verdict
/// stands whatever the workload's own verdicts were.
pub fn durability(h: &History, chunks: u32, final_from: usize) -> Verdict {
    let finals = &h.ops[final_from..];
    let unread: Vec<u32> = (0..chunks)
        .filter(|c| {
            !finals.iter().any(|o| {
                o.chunk == *c && o.ret.is_some() && matches!(o.kind, OpKind::Read(Some(_)))
            })
        })
        .collect();
    if let Some(c) = unread.first() {
        let tries = finals.iter().filter(|o| o.chunk == *c).count();
        return Verdict::Fail(format!(
            "chunk {c} unreadable after convergence ({tries} final reads failed; {} chunks unreadable in all): its acknowledged writes may be lost",
            unread.len()
        ));
    }
    // The writes and the final reads: every final read must see what the writes left.
    match regular_of(h, &h.ops, chunks, final_from) {
        Verdict::Pass(_) => Verdict::Pass(format!(
            "{} final reads of {chunks} chunks see every acknowledged write",
            finals.iter().filter(|o| o.ret.is_some()).count()
        )),
        Verdict::Fail(d) => Verdict::Fail(format!(
            "an acknowledged write is missing after convergence: {d}"
        )),
        u => u,
    }
}

/// No read returned bytes that no client wrote.
pub fn corruption(h: &History) -> Verdict {
    let bad: Vec<usize> = h
        .ops
        .iter()
        .enumerate()
        .filter(|(_, o)| matches!(o.kind, OpKind::Read(Some(Payload::Garbage))))
        .map(|(i, _)| i)
        .collect();
    if bad.is_empty() {
        let reads = h
            .ops
            .iter()
            .filter(|o| matches!(o.kind, OpKind::Read(Some(_))))
            .count();
        Verdict::Pass(format!(
            "{reads} reads returned only written values or holes"
        ))
    } else {
        Verdict::Fail(format!(
            "{} reads returned bytes no client wrote:\n{}",
            bad.len(),
            describe(h, &bad[..bad.len().min(5)])
        ))
    }
}
