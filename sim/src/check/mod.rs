//! Checkers over a whole run: linearizability of client histories (per chunk), no acknowledged
//! write lost (the final reads after convergence must be explained by the history), no silent
//! corruption returned to a client, CRAQ agreement after convergence (committed bytes identical
//! on every serving target), and the verdict types the runner reports. The §2.6.1 chain
//! invariants are checked during the run (world/mod.rs, `audit_routing`) and reported here.
//!
//! Invariant: a checker that cannot decide says `Unknown`, never `Pass`. Not here: liveness
//! (the runner measures convergence time against the scenario's bound).

pub mod appendix_b;
pub mod file_length;
pub mod file_reads;
pub mod history;
pub mod linearizability;
pub mod namespace;
pub mod ns_fsck;
pub mod ns_model;
pub mod regular;

use std::collections::BTreeMap;

use t3fs_core::ids::ChunkId;
use t3fs_core::routing::PublicState;
use t3fs_scenario::workload::Payload;

use crate::world::World;
use history::{History, OpKind};
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
    for c in 0..chunks {
        let iv = linearizability::intervals(ops, c);
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
                    Verdict::Unknown(format!("chunk {c}: search budget exhausted")),
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

fn regular_of(h: &History, ops: &[history::OpRec], chunks: u32) -> Verdict {
    let mut reads = 0;
    for c in 0..chunks {
        let iv = linearizability::intervals(ops, c);
        reads += iv
            .iter()
            .filter(|o| matches!(o.op, linearizability::RegOp::Read(_)))
            .count();
        if let Err((origin, allowed)) = regular::check(&iv) {
            let allowed: Vec<String> = allowed
                .iter()
                .map(|v| v.map_or("hole".into(), |v| format!("{v:#x}")))
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
/// `final_from`), and durability (the whole history including the final reads, which must see
/// every acknowledged write). `linearizable_required`: the targets reject dirty reads (legacy
/// engine); otherwise reads return committed data at any replica (3FS's new engine), which
/// §3.3 says may invert new and old values across replicas, so only regularity is required and
/// a linearizability violation is `Expected`.
pub fn histories(
    h: &History,
    chunks: u32,
    final_from: usize,
    linearizable_required: bool,
) -> [(&'static str, Verdict); 3] {
    let (lin, _) = lin_of(h, &h.ops[..final_from], chunks);
    let reg = regular_of(h, &h.ops[..final_from], chunks);
    let lin = match lin {
        Verdict::Fail(d) if !linearizable_required => Verdict::Expected(format!(
            "new-old inversion under committed reads (3FS new engine, §3.3): {d}"
        )),
        v => v,
    };
    let finals = h.ops.len() - final_from;
    let answered = h.ops[final_from..]
        .iter()
        .filter(|o| o.ret.is_some())
        .count();
    let workload_ok = if linearizable_required {
        matches!(lin, Verdict::Pass(_))
    } else {
        matches!(reg, Verdict::Pass(_))
    };
    let durable = if !workload_ok {
        Verdict::Unknown("not checked: the workload history did not pass".into())
    } else if answered < finals {
        Verdict::Unknown(format!("{answered} of {finals} final reads answered"))
    } else {
        let full = if linearizable_required {
            lin_of(h, &h.ops, chunks).0
        } else {
            regular_of(h, &h.ops, chunks)
        };
        match full {
            Verdict::Pass(_) => {
                Verdict::Pass(format!("{finals} final reads see every acknowledged write"))
            }
            Verdict::Fail(d) => Verdict::Fail(format!(
                "an acknowledged write is missing after convergence: {d}"
            )),
            u => u,
        }
    };
    [
        ("linearizable", lin),
        ("regular", reg),
        ("no acknowledged write lost", durable),
    ]
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

/// CRAQ agreement at quiescence: every SERVING target of a chain holds the same committed
/// version and bytes of every workload chunk.
pub fn agreement(w: &World) -> Verdict {
    let mut compared = 0;
    for c in w.sim.audit.chains.values() {
        // The first serving target's committed chunks: (version, bytes) by chunk.
        type Content = BTreeMap<ChunkId, (u32, Vec<u8>)>;
        let mut reference: Option<(t3fs_core::ids::TargetId, Content)> = None;
        for t in c.targets.iter().filter(|t| t.state == PublicState::Serving) {
            let Some(node) = w.layout.initial.node_of(t.target) else {
                continue;
            };
            let Some(disk) = w.nodes[node.0 as usize].ctx.disks.get(&t.target) else {
                continue;
            };
            let content: BTreeMap<ChunkId, (u32, Vec<u8>)> = disk
                .store
                .chunks()
                .iter()
                .filter(|(_, m)| m.committed.0 > 0)
                .map(|(id, m)| (*id, (m.committed.0, m.data.clone())))
                .collect();
            compared += content.len();
            match &reference {
                None => reference = Some((t.target, content)),
                Some((rt, r)) if *r != content => {
                    let diff = r
                        .keys()
                        .chain(content.keys())
                        .find(|k| r.get(k) != content.get(k))
                        .copied()
                        .unwrap_or_default();
                    return Verdict::Fail(format!(
                        "chain {}: {rt} and {} differ on chunk {diff}: {:?} vs {:?}",
                        c.chain,
                        t.target,
                        r.get(&diff).map(|(v, _)| v),
                        content.get(&diff).map(|(v, _)| v)
                    ));
                }
                Some(_) => {}
            }
        }
    }
    Verdict::Pass(format!(
        "{compared} committed chunk replicas identical across serving targets"
    ))
}
