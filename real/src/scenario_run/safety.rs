//! The safety phase of a real run: the register and namespace workloads' clients started, the
//! background faults set, every step that runs executed at its time while the clients run, and
//! the register clients awaited.
//!
//! Invariant: the streams fork from the run's seed in one order (register clients, namespace
//! clients, background clocks), and a step that fails to execute is marked and kept among the
//! step failures, never dropped. Not here: executing one step (execute.rs), the liveness phase
//! (liveness.rs).

use std::collections::BTreeMap;
use std::time::Instant;

use t3fs_scenario::{Rng, Scenario};

use super::execute::{self, Injected};
use super::life::Lives;
use super::live::Live;
use super::steps::{How, Planned};
use super::workload::{self, Load};
use super::{background, mark, namespace, RunOptions};
use crate::bench_run::Mark;
use t3fs_client::client::ClientError;

/// A workload client's task: the operations it sent, or why it could not connect.
pub(super) type ClientTask = tokio::task::JoinHandle<Result<u64, ClientError>>;

/// Marks the start of the safety phase: its clients, duration, chunks and steps.
pub(super) fn announce(
    sc: &Scenario,
    planned: &[Planned],
    marks: &mut Vec<Mark>,
    say: &(dyn Fn(&str) + Sync),
) {
    mark(
        marks,
        say,
        "phase",
        "",
        format!(
            "safety: {} clients for {:?} on {} chunks, {} steps",
            sc.cluster.clients,
            sc.duration,
            sc.workload.chunks,
            planned.len()
        ),
    );
}

/// Spawns the register workload's clients, each with its own stream forked from `rng`.
pub(super) fn spawn_clients(load: &Load, n: u32, rng: &mut Rng, lives: &Lives) -> Vec<ClientTask> {
    (0..n)
        .map(|i| {
            tokio::spawn(workload::client_loop(
                load.clone(),
                i,
                rng.fork(u64::from(i)),
                lives.of(i),
            ))
        })
        .collect()
}

/// Spawns the namespace workload's clients when the scenario has one (none otherwise).
pub(super) fn spawn_ns_clients(
    o: &RunOptions,
    opts: &t3fs_client::client::ClientOptions,
    ns_log: &namespace::NsLog,
    zero: Instant,
    rng: &mut Rng,
    lives: &Lives,
) -> Vec<ClientTask> {
    let sc = &o.scenario;
    match &sc.namespace {
        Some(w) => {
            let load = namespace::NsLoad {
                opts: opts.clone(),
                w: w.clone(),
                log: ns_log.clone(),
                stop: zero + sc.duration,
                call_bound: sc.converge_within,
            };
            (0..sc.cluster.clients)
                .map(|i| {
                    let rng = rng.fork(0x6e73 << 16 | u64::from(i));
                    tokio::spawn(namespace::client_loop(load.clone(), i, rng, lives.of(i)))
                })
                .collect()
        }
        None => Vec::new(),
    }
}

/// Sets the scenario's background faults (`[faults]`) and marks each; the injected state the
/// steps start from.
pub(super) fn start_faults(
    o: &RunOptions,
    names: &BTreeMap<u32, String>,
    rng: &mut Rng,
    marks: &mut Vec<Mark>,
    say: &(dyn Fn(&str) + Sync),
) -> Result<Injected, String> {
    let sc = &o.scenario;
    let (mut injected, lines) = tokio::task::block_in_place(|| {
        background::start(&sc.faults, &o.dir, names, &mut rng.fork(0xC10C))
    })?;
    injected.atlas_off = sc.expect.loss_allowed;
    for line in lines {
        mark(marks, say, "fault", "", line);
    }
    Ok(injected)
}

/// Executes every step that runs at its time, marking each; the steps that failed, and the
/// nodes a step killed with SIGKILL.
pub(super) async fn run_steps(
    live: &Live<'_>,
    injected: &mut Injected,
    planned: &[Planned],
    zero: Instant,
    marks: &mut Vec<Mark>,
    say: &(dyn Fn(&str) + Sync),
) -> (Vec<String>, Vec<String>) {
    let mut step_failures = Vec::new();
    let mut killed: Vec<String> = Vec::new();
    for p in planned.iter().filter(|p| !matches!(p.how, How::NotRun(_))) {
        tokio::time::sleep_until((zero + p.step.at).into()).await;
        let action = p.step.action.clone();
        match tokio::task::block_in_place(|| execute::execute(live, injected, &action)) {
            Ok((node, what)) => {
                if what.starts_with("kill -9") {
                    killed.push(node.clone());
                }
                mark(marks, say, "fault", &node, what);
            }
            Err(e) => {
                let line = format!(
                    "step at {:?} (line {}) `{}` failed: {e}",
                    p.step.at,
                    p.step.line,
                    action.verb()
                );
                mark(marks, say, "fault", "", line.clone());
                step_failures.push(line);
            }
        }
    }
    (step_failures, killed)
}

/// Waits for every register workload client; an error when one could not connect or panicked.
pub(super) async fn join_clients(clients: Vec<ClientTask>) -> Result<(), String> {
    for c in clients {
        match c.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(format!("a workload client could not connect: {e}")),
            Err(e) => return Err(format!("a workload client panicked: {e}")),
        }
    }
    Ok(())
}
