//! The verdict list and exit code of a run, from its checkers' answers: the one place that says
//! which verdicts a scenario's `[expect]` turns into EXPECTED, in what order verdicts are
//! reported, and which failure decides the exit code. Simulated runs (`run.rs`) and real-process
//! runs (`t3fs cluster run`) both end here, so their verdict lines and exit codes mean the same.
//!
//! Invariant: an UNKNOWN verdict never yields exit 0 unless the scenario sets
//! `[expect] undecided_ok`. Not here: running the checkers.

use t3fs_scenario::Expect;

use super::Verdict;

/// Exit code: an assertion failed (machine invariant, chain audit, halt).
pub const EXIT_ASSERTION: i32 = 127;
/// Exit code: the cluster did not converge in time.
pub const EXIT_LIVENESS: i32 = 128;
/// Exit code: a correctness checker failed.
pub const EXIT_CORRECTNESS: i32 = 129;
/// Exit code: no check failed, but at least one verdict is UNKNOWN.
pub const EXIT_UNDECIDED: i32 = 130;

/// The namespace checkers' answers (runs with meta servers and a namespace workload).
#[derive(Clone, Debug)]
pub struct NsVerdicts {
    /// Namespace operations serializable.
    pub serializable: Verdict,
    /// The KV's tree is consistent (fsck).
    pub integrity: Verdict,
    /// File reads explained by the file writes.
    pub file_reads: Verdict,
}

/// Every checker's answer, before the scenario's expectations are applied.
#[derive(Clone, Debug)]
pub struct Checked {
    /// §2.6.1 chain invariants and KV audits.
    pub audit: Verdict,
    /// Linearizable workload history.
    pub lin: Verdict,
    /// Regular workload history.
    pub reg: Verdict,
    /// No acknowledged write lost.
    pub durable: Verdict,
    /// No silent corruption.
    pub corruption: Verdict,
    /// Replicas agree.
    pub agreement: Verdict,
    /// Namespace verdicts, when the run had a namespace workload.
    pub namespace: Option<NsVerdicts>,
    /// Converged within the bound.
    pub liveness: Verdict,
    /// Halted machines (reported, never failed).
    pub halts: Verdict,
}

/// The named verdicts in report order, the exit code and a one-line reason (empty on 0).
pub fn assemble(c: Checked, expect: &Expect) -> (Vec<(&'static str, Verdict)>, i32, String) {
    let expected = |v: Verdict, allowed: bool| match v {
        Verdict::Fail(d) if allowed => Verdict::Expected(format!("the scenario expects this: {d}")),
        v => v,
    };
    let lin = expected(c.lin, !expect.linearizable);
    let reg = expected(c.reg, !expect.linearizable);
    let durable = expected(c.durable, expect.loss_allowed);
    // Destroyed copies show up in files too: bytes read back as zeros, lengths past the data.
    let ns = c.namespace.map(|n| NsVerdicts {
        file_reads: expected(n.file_reads, expect.loss_allowed),
        integrity: expected(n.integrity, expect.loss_allowed),
        serializable: n.serializable,
    });
    let liveness = expected(c.liveness, !expect.converges);
    let mut verdicts: Vec<(&'static str, Verdict)> = vec![
        ("chain invariants", c.audit.clone()),
        ("linearizable", lin),
        ("regular", reg),
        ("no acknowledged write lost", durable),
        ("no silent corruption", c.corruption),
        ("replicas agree", c.agreement),
    ];
    if let Some(n) = ns {
        verdicts.push(("namespace serializable", n.serializable));
        verdicts.push(("namespace integrity", n.integrity));
        verdicts.push(("file reads", n.file_reads));
    }
    verdicts.push(("converged (liveness)", liveness.clone()));
    verdicts.push(("halts", c.halts));
    let first_line = |v: &Verdict| v.detail().lines().next().unwrap_or("").to_string();
    let correctness = verdicts
        .iter()
        .filter(|(n, _)| !matches!(*n, "chain invariants" | "converged (liveness)" | "halts"))
        .find(|(_, v)| v.failed());
    let (exit, reason) = if c.audit.failed() {
        (
            EXIT_ASSERTION,
            format!("chain invariants: {}", c.audit.detail()),
        )
    } else if let Some((n, v)) = correctness {
        (EXIT_CORRECTNESS, format!("{n}: {}", first_line(v)))
    } else if liveness.failed() {
        (EXIT_LIVENESS, liveness.detail().to_string())
    } else if let Some((n, v)) = verdicts
        .iter()
        .find(|(_, v)| matches!(v, Verdict::Unknown(_)))
        .filter(|_| !expect.undecided_ok)
    {
        (EXIT_UNDECIDED, format!("{n} UNKNOWN: {}", first_line(v)))
    } else {
        (0, String::new())
    };
    (verdicts, exit, reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass() -> Verdict {
        Verdict::Pass("ok".into())
    }

    fn all_pass() -> Checked {
        Checked {
            audit: pass(),
            lin: pass(),
            reg: pass(),
            durable: pass(),
            corruption: pass(),
            agreement: pass(),
            namespace: None,
            liveness: pass(),
            halts: pass(),
        }
    }

    fn expect() -> Expect {
        Expect::default()
    }

    #[test]
    fn passing_checks_exit_zero_in_report_order() {
        let (v, exit, reason) = assemble(all_pass(), &expect());
        assert_eq!((exit, reason.as_str()), (0, ""));
        let names: Vec<&str> = v.iter().map(|(n, _)| *n).collect();
        assert_eq!(names[0], "chain invariants");
        assert_eq!(names[names.len() - 2..], ["converged (liveness)", "halts"]);
    }

    #[test]
    fn failures_pick_their_exit_code_and_unknown_is_not_pass() {
        let mut c = all_pass();
        c.durable = Verdict::Fail("chunk 3 lost\nmore".into());
        c.liveness = Verdict::Fail("slow".into());
        let (_, exit, reason) = assemble(c.clone(), &expect());
        assert_eq!(exit, EXIT_CORRECTNESS);
        assert_eq!(reason, "no acknowledged write lost: chunk 3 lost");
        c.audit = Verdict::Fail("chain went back".into());
        assert_eq!(assemble(c, &expect()).1, EXIT_ASSERTION);
        let mut c = all_pass();
        c.liveness = Verdict::Fail("slow".into());
        assert_eq!(assemble(c, &expect()).1, EXIT_LIVENESS);
        let mut c = all_pass();
        c.agreement = Verdict::Unknown("no dump".into());
        let (_, exit, reason) = assemble(c.clone(), &expect());
        assert_eq!(exit, EXIT_UNDECIDED);
        assert!(reason.starts_with("replicas agree UNKNOWN"), "{reason}");
        let mut lenient = expect();
        lenient.undecided_ok = true;
        assert_eq!(assemble(c, &lenient).1, 0);
    }

    #[test]
    fn expectations_turn_failures_into_expected() {
        let mut c = all_pass();
        c.durable = Verdict::Fail("lost".into());
        let mut e = expect();
        e.loss_allowed = true;
        let (v, exit, _) = assemble(c, &e);
        assert_eq!(exit, 0);
        let durable = &v
            .iter()
            .find(|(n, _)| *n == "no acknowledged write lost")
            .unwrap()
            .1;
        assert_eq!(durable.label(), "EXPECTED");
    }
}
