//! The liveness phase of a real run, as a simulated run ends: heal the network and the slow or
//! full disks, resume paused processes, replace failed or damaged disks, restart stopped
//! processes and the runner's crashed clients, wait for every chain to serve (and for wiped
//! nodes to be resynced), read every chunk back, and wait for the cluster to quiesce.
//!
//! Invariant: every wait is bounded by the scenario's convergence bound, and a disk replacement
//! that failed is kept among the step failures, never dropped. Not here: the namespace
//! workload's end and the live dump (end.rs), the checks.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use t3fs_scenario::Scenario;

use super::execute::{self, Injected};
use super::life::Lives;
use super::live::{self, Live};
use super::workload::{self, Load};
use super::{mark, quiesce, RunOptions};
use crate::bench_run::Mark;

/// Each node whose failed or damaged disks were replaced: what was done and whether its target
/// directories were emptied, or why the replacement failed.
pub(super) type Replaced = Vec<(String, Result<(String, bool), String>)>;

/// Marks the start of the liveness phase and heals everything ([`heal_all`]); when the phase
/// started, the processes that exited without a step killing them, and the disk replacements.
pub(super) fn heal(
    live: &Live,
    injected: &mut Injected,
    killed: &[String],
    marks: &mut Vec<Mark>,
    say: &(dyn Fn(&str) + Sync),
) -> Result<(Instant, Vec<String>, Replaced), String> {
    mark(
        marks,
        say,
        "phase",
        "",
        "liveness: heal the network and the slow or full disks, resume paused processes, replace failed disks, restart stopped ones, wait for every chain to serve"
            .into(),
    );
    let live_start = Instant::now();
    let (halts, replaced) = tokio::task::block_in_place(|| heal_all(live, injected, killed))?;
    Ok((live_start, halts, replaced))
}

/// Resumes every process, heals and pushes every fault, replaces failed and damaged disks and
/// restarts the processes that are down; the restarted ones no step killed, and the
/// replacements.
fn heal_all(
    live: &Live,
    injected: &mut Injected,
    killed: &[String],
) -> Result<(Vec<String>, Replaced), String> {
    let dir = live.dir;
    live::resume_all(dir);
    injected.net.heal();
    injected.disk.heal();
    injected.clock.reset_to(&injected.clock_base.clone());
    injected.kv.reset_to(&BTreeMap::new());
    injected.kv.apply(dir)?;
    injected.net.apply(dir)?;
    injected.disk.apply(dir)?;
    injected.clock.apply(dir)?;
    let mut replace: BTreeSet<String> = injected.disk.failed().into_iter().collect();
    replace.extend(injected.damaged.iter().cloned());
    let replaced: Vec<_> = replace
        .into_iter()
        .map(|n| {
            let r = execute::replace_disks_wiped(live, injected, &n);
            (n, r)
        })
        .collect();
    let restarted = live::restart_dead(dir)?;
    for n in &restarted {
        injected.net.forget(n);
        injected.disk.restarted(n);
        injected.clock.restarted(n);
    }
    let halts = restarted
        .into_iter()
        .filter(|n| !killed.contains(n))
        .collect::<Vec<_>>();
    Ok((halts, replaced))
}

/// Restarts the runner's crashed clients and marks each, then marks each disk replacement (a
/// failed one also among the step failures); the nodes whose target directories were emptied.
pub(super) fn mark_restarts(
    lives: &Lives,
    replaced: Replaced,
    step_failures: &mut Vec<String>,
    marks: &mut Vec<Mark>,
    say: &(dyn Fn(&str) + Sync),
) -> Vec<String> {
    for k in lives.restart_all() {
        mark(
            marks,
            say,
            "fault",
            &format!("client-{k}"),
            format!("restart client-{k} with a fresh identity"),
        );
    }
    // Nodes whose target directories were emptied: convergence waits for their resync.
    let wiped: Vec<String> = replaced
        .iter()
        .filter(|(_, r)| r.as_ref().is_ok_and(|(_, wiped)| *wiped))
        .map(|(n, _)| n.clone())
        .collect();
    for (n, r) in replaced {
        let what = match r {
            Ok((what, _)) => format!("kill -9 {n} (failed or damaged disks): {what}"),
            Err(e) => {
                step_failures.push(format!("replacing the failed disks of {n} failed: {e}"));
                format!("replacing the failed disks of {n} failed: {e}")
            }
        };
        mark(marks, say, "fault", &n, what);
    }
    wiped
}

/// Waits until every chain serves and the `wiped` nodes have rejoined, at most `bound` from
/// `live_start`; how long after `live_start` that was, or `None` when not within the bound.
pub(super) async fn converge(
    live: &Live<'_>,
    wiped: &[String],
    live_start: Instant,
    bound: Duration,
) -> Option<Duration> {
    let (watch, names) = (live.watch, live.names);
    let deadline = live_start + bound;
    let converged = || watch.all_serving() && live::wiped_rejoined(watch, names, wiped, live_start);
    while !converged() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    converged().then(|| live_start.elapsed())
}

/// Why a run did not converge, for its output: what the routing watcher last saw of each chain,
/// what mgmtd answers now (asked afresh, in case the watcher fell behind), which processes run,
/// and the last lines of the wiped nodes' logs. A liveness failure on a machine whose cluster
/// directory is gone (a CI run) is otherwise a bare "not within 60s".
pub(super) fn why_not_converged(live: &Live<'_>, wiped: &[String]) -> String {
    let mut out = String::from("the routing watcher last saw:");
    let mut last = BTreeMap::new();
    for s in live.watch.seen() {
        last.insert(s.chain.chain, s.chain);
    }
    for c in last.values() {
        let members = t3fs_core::mgmtd::chain_update::render(&c.targets);
        out.push_str(&format!("\n  {} v{}: {members}", c.chain, c.version.0));
    }
    out.push_str("\nnow (cluster status):\n");
    let status = crate::cluster::status(live.dir).unwrap_or_else(|e| format!("no status: {e}\n"));
    out.push_str(&status);
    for name in wiped {
        let log = std::fs::read_to_string(live.dir.join(name).join("log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        out.push_str(&format!("last lines of {name}'s log:\n"));
        for l in &lines[lines.len().saturating_sub(12)..] {
            out.push_str(&format!("  {l}\n"));
        }
    }
    out.trim_end().to_string()
}

/// Marks whether the cluster converged and, when it did, reads every chunk back; the chunks no
/// final read answered.
pub(super) async fn final_reads(
    load: &Load,
    sc: &Scenario,
    converged_after: Option<Duration>,
    marks: &mut Vec<Mark>,
    say: &(dyn Fn(&str) + Sync),
) -> Result<Vec<u32>, String> {
    let unread = match converged_after {
        Some(after) => {
            mark(
                marks,
                say,
                "phase",
                "",
                format!(
                    "every chain SERVING {:.1} s after healing; reading every chunk back",
                    after.as_secs_f64()
                ),
            );
            workload::final_reads(load, sc.cluster.clients, sc.converge_within)
                .await
                .map_err(|e| e.to_string())?
        }
        None => {
            mark(
                marks,
                say,
                "phase",
                "",
                format!("not every chain SERVING within {:?}", sc.converge_within),
            );
            Vec::new()
        }
    };
    Ok(unread)
}

/// Once converged, waits for the cluster to quiesce and marks how long that took or why it did
/// not; the wait, or why there was none.
pub(super) async fn await_quiescence(
    o: &RunOptions,
    converged_after: Option<Duration>,
    marks: &mut Vec<Mark>,
    say: &(dyn Fn(&str) + Sync),
) -> Result<Duration, String> {
    let sc = &o.scenario;
    // Replicas are compared only once no update is in flight (quiesce.rs).
    let quiet = match converged_after {
        Some(_) => quiesce::quiesce(&o.dir, sc.converge_within).await,
        None => Err("the cluster did not converge".into()),
    };
    if converged_after.is_some() {
        let what = match &quiet {
            Ok(t) => format!("quiescent {:.1} s after the final reads", t.as_secs_f64()),
            Err(e) => format!("not quiescent within {:?}: {e}", sc.converge_within),
        };
        mark(marks, say, "phase", "", what);
    }
    quiet
}
