//! Runs one scenario with one seed: the safety phase (workload, background faults, steps), then
//! the liveness phase (heal everything, restart every crashed node — damaged disks replaced —
//! and require convergence within the scenario's bound), then final reads of every chunk, then
//! the checkers. Returns the verdicts, the trace hash and everything a report needs.
//!
//! Exit codes follow TigerBeetle's VOPR: 0 pass, 127 assertion failure (a machine invariant or
//! a world audit), 128 liveness failure, 129 correctness failure; and 130 undecided: some
//! verdict is UNKNOWN (a checker out of budget, a replica comparison that could not run) and
//! the scenario does not set `[expect] undecided_ok`. UNKNOWN is never PASS. Not here:
//! rendering (t3fs-reports) and the CLI.

use std::panic::{catch_unwind, AssertUnwindSafe};

use core::time::Duration;

use t3fs_core::routing::{LocalState, PublicState};
use t3fs_core::time::Instant;
use t3fs_scenario::Scenario;

use crate::check::{self, Verdict};
use crate::world::node::{Life, Process};
use crate::world::World;

pub use crate::check::verdicts::{EXIT_ASSERTION, EXIT_CORRECTNESS, EXIT_LIVENESS, EXIT_UNDECIDED};
/// Final reads a chunk gets before it counts as unreadable (each is a whole client call with
/// its own retries; the convergence bound ends them sooner).
const FINAL_READ_ATTEMPTS: usize = 64;

/// Everything a run produced.
pub struct Outcome {
    /// Seed.
    pub seed: u64,
    /// Named verdicts, in report order.
    pub verdicts: Vec<(&'static str, Verdict)>,
    /// Exit code (0 = pass).
    pub exit: i32,
    /// One-line reason when failing.
    pub reason: String,
    /// Trace hash.
    pub trace: u64,
    /// Events processed.
    pub events: u64,
    /// Simulated time at the end.
    pub sim_ns: u64,
    /// Time from the start of the liveness phase to convergence.
    pub converged_after: Option<Duration>,
    /// The world at the end (absent after an assertion panic).
    pub world: Option<World>,
}

impl Outcome {
    /// True if every verdict passed.
    pub fn passed(&self) -> bool {
        self.exit == 0
    }
}

/// The cluster has converged: every node runs, a primary publishes routing whose chains are all
/// SERVING, every storage target reports UPTODATE and acts on that routing version, no client
/// call and no chunk lock is outstanding.
pub fn converged(w: &World) -> Result<(), String> {
    if let Some(n) = w.nodes.iter().find(|n| n.ctx.life != Life::Up) {
        return Err(format!("{} is not running", n.ctx.name));
    }
    if let Some(i) = (0..w.nodes.len()).find(|&i| w.holds_damage(i)) {
        return Err(format!(
            "{} holds a damaged disk awaiting replacement",
            w.nodes[i].ctx.name
        ));
    }
    let Some((_, routing)) = w.primary() else {
        return Err("no primary mgmtd".into());
    };
    for c in routing.chains.values() {
        if let Some(t) = c.targets.iter().find(|t| t.state != PublicState::Serving) {
            return Err(format!("chain {} has {} {:?}", c.chain, t.target, t.state));
        }
    }
    for n in &w.nodes {
        match &n.proc {
            Process::Storage(s) => {
                if s.routing().version != routing.version {
                    return Err(format!(
                        "{} acts on routing {} (primary: {})",
                        n.ctx.name,
                        s.routing().version,
                        routing.version
                    ));
                }
                if s.targets().any(|t| !t.locks.is_empty()) {
                    return Err(format!("{} has updates in progress", n.ctx.name));
                }
                // Public SERVING is not enough: a restarted target reports OFFLINE until mgmtd
                // has taken it out and it was resynced back; until then it may lack writes.
                // Targets in no chain (spare capacity) never become UPTODATE: skip them.
                if let Some(t) = s.targets().find(|t| {
                    t.local_state != LocalState::UpToDate && routing.chain_of_target(t.id).is_some()
                }) {
                    return Err(format!(
                        "{} reports {} {:?}",
                        n.ctx.name, t.id, t.local_state
                    ));
                }
            }
            Process::Client(_) if n.ctx.driver.as_ref().is_some_and(|d| d.running.is_some()) => {
                return Err(format!("{} has a call in flight", n.ctx.name));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Runs `scenario` with `seed`.
pub fn run(scenario: &Scenario, seed: u64, log: bool) -> Result<Outcome, String> {
    let world = World::new(scenario.clone(), seed, log)?;
    let mut slot = Some(world);
    let result = catch_unwind(AssertUnwindSafe(|| phases(slot.as_mut().expect("world"))));
    match result {
        Ok(mut o) => {
            o.seed = seed;
            o.world = slot.take();
            Ok(o)
        }
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into());
            let w = slot.take();
            let (trace, events, sim_ns) = w.as_ref().map_or((0, 0, 0), |w| {
                (w.sim.trace_hash(), w.sim.events(), w.sim.now().0)
            });
            Ok(Outcome {
                seed,
                verdicts: vec![("assertions", Verdict::Fail(msg.clone()))],
                exit: EXIT_ASSERTION,
                reason: format!("assertion failed: {msg}"),
                trace,
                events,
                sim_ns,
                converged_after: None,
                world: w,
            })
        }
    }
}

/// Runs until [`converged`] holds (probed every 100 ms of simulated time) or `deadline`: when it
/// converged, and the last reason it had not.
fn run_until_converged(w: &mut World, deadline: Instant) -> (Option<Instant>, String) {
    let mut next_probe = w.sim.now();
    let mut converged_at = None;
    let mut last_reason = String::new();
    w.run_until(deadline, |w| {
        let now = w.sim.now();
        if now < next_probe {
            return false;
        }
        next_probe = Instant(now.0 + 100_000_000);
        match converged(w) {
            Ok(()) => {
                converged_at = Some(now);
                true
            }
            Err(r) => {
                last_reason = r;
                false
            }
        }
    });
    (converged_at, last_reason)
}

/// Reads every workload chunk after convergence until each has an answered read, trying a
/// failed chunk again from the next client, until `within` has passed.
fn final_reads(w: &mut World, chunks: u32, within: Duration) {
    let clients: Vec<usize> = w.layout.clients.iter().map(|n| n.0 as usize).collect();
    // Per chunk: its history indexes of final reads so far.
    let mut tries: Vec<Vec<usize>> = vec![Vec::new(); chunks as usize];
    let bound = Instant(w.sim.now().0 + within.as_nanos() as u64);
    let busy = |w: &World, c: usize| {
        w.nodes[c]
            .ctx
            .driver
            .as_ref()
            .is_some_and(|d| d.running.is_some())
    };
    w.run_until(bound, |w| {
        let mut done = true;
        // Highest chunk first, as the single-pass reads did (the trace hashes stay the same).
        for (chunk, t) in tries.iter_mut().enumerate().rev() {
            let last = t.last().map(|&i| &w.sim.history().ops[i]);
            if last.is_some_and(|o| o.ret.is_some()) {
                continue;
            }
            done = false;
            if last.is_some_and(|o| !o.failed) || t.len() >= FINAL_READ_ATTEMPTS {
                continue; // In flight, or given up on (the durability verdict names it).
            }
            let client = clients[(chunk + t.len()) % clients.len()];
            let index = w.sim.history().ops.len();
            if !busy(w, client) && w.issue_read(client, chunk as u32) {
                t.push(index);
            }
        }
        let gave_up = tries.iter().all(|t| {
            t.last()
                .is_some_and(|&i| w.sim.history().ops[i].ret.is_some())
                || t.len() >= FINAL_READ_ATTEMPTS
        });
        (done || gave_up) && clients.iter().all(|&c| !busy(w, c))
    });
}

fn phases(w: &mut World) -> Outcome {
    let sc = w.scenario.clone();
    // Safety phase.
    w.run_until(Instant(sc.duration.as_nanos() as u64), |_| false);
    // Liveness phase: heal, restart, converge.
    let live_start = w.sim.now();
    heal_and_restart(w);
    let deadline = Instant(live_start.0 + sc.converge_within.as_nanos() as u64);
    let (converged_at, last_reason) = run_until_converged(w, deadline);
    let checked = check_run(w, &sc, live_start, converged_at, &last_reason);
    let (verdicts, exit, reason) = check::verdicts::assemble(checked, &sc.expect);
    w.sum_mgmtd_rows();
    w.sim.note(
        "verdict",
        "",
        if exit == 0 {
            "PASS".into()
        } else {
            format!("FAIL: {reason}")
        },
    );
    Outcome {
        seed: 0,
        verdicts,
        exit,
        reason,
        trace: w.sim.trace_hash(),
        events: w.sim.events(),
        sim_ns: w.sim.now().0,
        converged_after: converged_at.map(|t| Duration::from_nanos(t.0 - live_start.0)),
        world: None,
    }
}

/// Starts the liveness phase: stops the workload, heals everything, and restarts every
/// crashed node (crashing first a running one whose disks are damaged, to replace them).
fn heal_and_restart(w: &mut World) {
    w.sim.note(
        "phase",
        "",
        "liveness: heal network, restart crashed nodes, replace failed disks".into(),
    );
    w.sim.stop_workload();
    w.heal();
    for i in 0..w.nodes.len() {
        let damaged = w.nodes[i]
            .ctx
            .disks
            .values()
            .any(|d| d.damaged || !d.corrupt.is_empty());
        if damaged && w.nodes[i].ctx.life == Life::Up {
            w.crash(i, "disk replacement");
        }
        if w.nodes[i].ctx.life == Life::Down {
            w.restart(i, true, false);
        }
    }
}

/// Every verdict of a run whose liveness phase started at `live_start`, in the order the
/// checks run (the final reads and the later waits run the world on).
fn check_run(
    w: &mut World,
    sc: &Scenario,
    live_start: Instant,
    converged_at: Option<Instant>,
    last_reason: &str,
) -> check::verdicts::Checked {
    let audit = audit_verdict(w);
    let halts = if w.sim.halts().is_empty() {
        Verdict::Pass("no machine halted".into())
    } else {
        // Halts are legitimate for disk failures; they are reported, not failed.
        Verdict::Pass(w.sim.halts().join("; "))
    };
    let liveness = liveness_verdict(sc, live_start, converged_at, last_reason);
    // Final reads: every chunk, spread over the clients, after convergence; a failed read is
    // tried again (from the next client) until one answers or the bound ends.
    let final_from = w.sim.history().ops.len();
    if converged_at.is_some() {
        final_reads(w, sc.workload.chunks, sc.converge_within);
    }
    let [(_, lin), (_, reg), (_, durable)] = history_verdicts(w, sc, final_from);
    let durable = if converged_at.is_some() {
        durable
    } else {
        Verdict::Unknown("not checked: the cluster did not converge, so no final reads ran".into())
    };
    let corruption = check::corruption(w.sim.history());
    let agreement = agreement_verdict(w, sc, converged_at);
    let namespace = sc
        .namespace
        .as_ref()
        .map(|ns| namespace_verdicts(w, ns, sc.converge_within));
    check::verdicts::Checked {
        audit,
        lin,
        reg,
        durable,
        corruption,
        agreement,
        namespace,
        liveness,
        halts,
    }
}

/// The audit verdict: the first chain or KV invariant violation, if any.
fn audit_verdict(w: &World) -> Verdict {
    match w.sim.violation() {
        Some(v) => Verdict::Fail(v.to_string()),
        None => Verdict::Pass(format!(
            "{} chain publications and {} KV commits checked (§2.6.1, §2.2)",
            w.sim.routing_changes(),
            w.sim.kv_commits()
        )),
    }
}

/// The liveness verdict: converged within the scenario's bound after healing, or why not.
fn liveness_verdict(
    sc: &Scenario,
    live_start: Instant,
    converged_at: Option<Instant>,
    last_reason: &str,
) -> Verdict {
    match converged_at {
        Some(t) => Verdict::Pass(format!(
            "converged {:.3}s after healing (bound {:.0}s)",
            (t.0 - live_start.0) as f64 / 1e9,
            sc.converge_within.as_secs_f64()
        )),
        None => Verdict::Fail(format!(
            "not converged within {:.0}s of healing: {last_reason}",
            sc.converge_within.as_secs_f64()
        )),
    }
}

/// The linearizability, regularity and durability verdicts of the workload history, whose
/// final reads start at `final_from`.
fn history_verdicts(w: &World, sc: &Scenario, final_from: usize) -> [(&'static str, Verdict); 3] {
    // Stale reads attributed per read (3FS Appendix B #1/#4); none are excused with the lease.
    let stale = if sc.cluster.storage_lease {
        Default::default()
    } else {
        check::appendix_b::stale_reads(&w.sim.history().ops[..final_from], w.sim.chain_timeline())
    };
    check::histories(
        w.sim.history(),
        sc.workload.chunks,
        final_from,
        sc.cluster.reject_dirty_reads,
        &stale,
    )
}

/// The replica agreement verdict, once any update started during the final reads finished.
fn agreement_verdict(w: &mut World, sc: &Scenario, converged_at: Option<Instant>) -> Verdict {
    if converged_at.is_some() {
        // A frame delayed past convergence (a buggified spike) can start an update during the
        // final reads; replicas are compared only once it has finished (found by swarm seed
        // 4543: the tail had committed a late retry the head was still forwarding).
        let bound = Instant(w.sim.now().0 + sc.converge_within.as_nanos() as u64);
        run_until_converged(w, bound);
    }
    if converged_at.is_some() {
        check::agreement::check(&w.serving_contents())
    } else {
        Verdict::Unknown("the cluster did not converge".into())
    }
}

/// The namespace verdicts, once open requests are answered and GC and session pruning had
/// their time.
fn namespace_verdicts(
    w: &mut World,
    ns: &t3fs_scenario::namespace::NsWorkload,
    within: Duration,
) -> check::verdicts::NsVerdicts {
    // Open requests keep retrying against the healed cluster; wait for their answers so
    // that as few as possible stay open, then compare with the KV's final tree.
    let bound = Instant(w.sim.now().0 + within.as_nanos() as u64);
    w.run_until(bound, |w| !w.ns_busy());
    // Then let GC catch up, and session pruning: a dead writer's sessions go once mgmtd has
    // dropped its client session (after the session timeout) and a prune round ran.
    let m = w.layout.mgmtd_cfg(t3fs_core::ids::NodeId(0));
    let wait = m.session_timeout + m.session_timeout / 2 + core::time::Duration::from_secs(10);
    let gc_bound = Instant(w.sim.now().0 + wait.as_nanos() as u64);
    w.run_until(gc_bound, |w| w.gc_drained());
    let chunks = w.file_chunks();
    let drained = w.gc_drained();
    let log = w.sim.logging();
    let (h, io, kv) = w.sim.namespace_evidence();
    let extents = check::ns_judge::extents(h, io, chunks);
    check::ns_judge::judge(h, io, kv, drained, &extents, ns.dirs, log)
}
