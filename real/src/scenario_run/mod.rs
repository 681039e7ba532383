//! `t3fs cluster run SCENARIO`: a scenario file on real processes. It starts a cluster from the
//! file's `[cluster]` section on loopback, runs the file's register workload through native
//! clients, executes its steps on the processes at their times (SIGKILL, restart, a replaced
//! disk, SIGSTOP/SIGCONT) and through the nodes' fault layers (network, disk, clock, KV: steps.rs),
//! then ends as a simulated run does: resume and restart everything,
//! require every chain SERVING within the bound (from mgmtd's routing), read every chunk back,
//! stop the cluster and read each serving target's committed chunks from its store.
//!
//! Invariant: every process it starts is stopped before it returns (the guard's drop), and what
//! the run could not do as the file says (steps and settings that do not run on real processes,
//! steps that failed to execute) is in [`RealOutcome`], never dropped. The checking is the
//! simulator's, applied by the CLI to what this returns (t3fs-real never depends on t3fs-sim).
//! Not here: the verdicts, the run directory, the fault layers themselves.

mod background;
pub mod dump;
mod end;
pub mod execute;
pub mod life;
pub mod live;
mod liveness;
pub mod namespace;
pub mod net;
pub mod pushed;
mod quiesce;
mod safety;
pub mod steps;
pub mod workload;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use t3fs_core::ids::ChainId;
use t3fs_core::routing::ChainInfo;
use t3fs_scenario::history::History;
use t3fs_scenario::{Rng, Scenario, Timeouts};

use crate::bench_run::Mark;
use crate::cluster::{self, UpOptions};
use crate::routing_watch::{RoutingWatch, Seen};
use live::Live;
use steps::{How, Planned};
use workload::{Load, Recorder};

/// What to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The cluster directory (made, and left with its logs and data).
    pub dir: PathBuf,
    /// The scenario.
    pub scenario: Scenario,
    /// Seed of the workload's operation streams.
    pub seed: u64,
    /// A planted bug every node runs with.
    pub bug: Option<String>,
    /// Chunk store: `file` or `uring`.
    pub store: String,
    /// `loopback`, or `netns`: every server in a namespace of its own, network cuts in the kernel.
    pub hosts: String,
    /// `tcp`, `rdma` or `soft-rdma`: how every node's (and client's) frames travel.
    pub transport: String,
}

/// Everything a real run produced, for the checkers and the run directory.
pub struct RealOutcome {
    /// Every step with how it ran.
    pub planned: Vec<Planned>,
    /// Settings of the file that did not run for real.
    pub not_honoured: Vec<String>,
    /// Steps that were to run but failed to execute.
    pub step_failures: Vec<String>,
    /// The client history (workload, then final reads).
    pub history: History,
    /// Index of the first final read.
    pub final_from: usize,
    /// mgmtd's routing history as the watcher saw it.
    pub seen: Vec<Seen>,
    /// Steps and phases on the timeline.
    pub marks: Vec<Mark>,
    /// Time 0 of the history.
    pub zero: Instant,
    /// Wall time from 0 to the end of the final reads.
    pub elapsed: Duration,
    /// From the liveness phase's start to every chain SERVING; `None`: not within the bound.
    pub converged_after: Option<Duration>,
    /// The chain audit: publications checked, or the first violation.
    pub audit: Result<usize, String>,
    /// Each chain's serving targets' committed chunks; `Err` when they could not be read.
    pub contents: Result<dump::Contents, String>,
    /// Every target's committed chunk metadata, dumped over the RPC while the cluster still ran
    /// (after it quiesced); `Err` when it was not taken.
    pub live_dump: Result<crate::chunk_dump::Dump, String>,
    /// Processes that exited without being killed by a step.
    pub halts: Vec<String>,
    /// Chunks no final read answered.
    pub unread: Vec<u32>,
    /// The cluster shape in words.
    pub shape: String,
    /// The namespace workload's log and end state, when the scenario has one.
    pub namespace: Option<NsOutcome>,
}

/// What the namespace workload left for its checkers.
pub struct NsOutcome {
    /// Every meta request, data call and answer, in order.
    pub events: Vec<namespace::NsEvent>,
    /// The KV's rows after the stop, read from the engine on disk.
    pub rows: Result<Vec<(t3fs_core::kv::Key, t3fs_core::kv::Value)>, String>,
}

impl RealOutcome {
    /// The chain timeline in nanoseconds since 0 (states seen before 0 at 0), as the
    /// simulator's audit keeps it.
    pub fn timeline(&self) -> Vec<(u64, ChainInfo)> {
        self.seen
            .iter()
            .map(|s| {
                let ns = s.at.saturating_duration_since(self.zero).as_nanos() as u64;
                (ns, s.chain.clone())
            })
            .collect()
    }
}

/// Stops the cluster when dropped, whatever happened.
struct Up(PathBuf);

impl Drop for Up {
    fn drop(&mut self) {
        let _ = cluster::down(&self.0);
    }
}

fn up_options(o: &RunOptions) -> UpOptions {
    let c = &o.scenario.cluster;
    UpOptions {
        dir: o.dir.clone(),
        storage: c.storage_nodes,
        targets_per_node: c.targets_per_node,
        replicas: c.replicas,
        mgmtd: c.mgmtd,
        meta: c.meta,
        kv: "embedded".into(),
        timeouts: match c.timeouts {
            Timeouts::Fast => "fast".into(),
            Timeouts::ThreeFs => "3fs".into(),
        },
        chunk_size: 1 << 20,
        wait: Duration::from_secs(60),
        store: o.store.clone(),
        hosts: o.hosts.clone(),
        storage_lease: c.storage_lease,
        serial_forwarding: false,
        bug: o.bug.clone(),
        transport: o.transport.clone(),
        chunk_io_deadline_ms: 30_000,
        // A scenario run and a soak inject their faults through the endpoint.
        fault_injection: true,
        worker_threads: None,
    }
}

/// The cluster shape in words.
fn shape(o: &RunOptions) -> String {
    let c = &o.scenario.cluster;
    format!(
        "{} mgmtd, 1 kv (embedded engine), {} meta, {} storage nodes x {} targets ({} store), {} chains of {} replicas, {} clients, {}{}",
        c.mgmtd,
        c.meta,
        c.storage_nodes,
        c.targets_per_node,
        o.store,
        c.chains,
        c.replicas,
        c.clients,
        if o.hosts == "netns" {
            "TCP between network namespaces (cuts: nftables)"
        } else {
            "loopback TCP"
        },
        o.bug.as_ref().map(|b| format!(", planted bug {b}")).unwrap_or_default()
    )
}

/// Runs the scenario; `say` gets each step as it happens.
pub fn run(o: &RunOptions, say: &(dyn Fn(&str) + Sync)) -> Result<RealOutcome, String> {
    let planned = steps::plan(&o.scenario);
    let not_honoured = steps::not_honoured(&o.scenario);
    say_not_real(&planned, &not_honoured, say);
    let _ = std::fs::remove_dir_all(&o.dir);
    say(&format!("starting the cluster in {}", o.dir.display()));
    cluster::up(&up_options(o))?;
    let guard = Up(o.dir.clone());
    let entries = cluster::nodes(&o.dir)?;
    let names: BTreeMap<u32, String> = entries
        .iter()
        .map(|n| (n.cfg.node.id, n.name.clone()))
        .collect();
    let opts = cluster::client_options(&o.dir)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    // An interrupted run still stops its cluster: the guard drops on the error path.
    let d = rt.block_on(async {
        tokio::select! {
            d = drive(o, &opts, &planned, &names, say) => d,
            _ = t3fs_services::serve::shutdown_signal() => Err("interrupted (SIGINT or SIGTERM); the cluster was stopped".into()),
        }
    })?;
    if o.transport != "tcp" {
        say(&crate::wire_tally::tally(&entries));
    }
    say("stopping the cluster");
    drop(guard);
    drop(rt);
    let contents = compared_contents(&d, &entries);
    let namespace = d.ns.map(|events| NsOutcome {
        events,
        rows: namespace::rows_after_stop(&entries),
    });
    Ok(RealOutcome {
        live_dump: d.live_dump,
        namespace,
        audit: dump::audit(&d.seen),
        planned,
        not_honoured,
        step_failures: d.step_failures,
        history: d.rec.snapshot(),
        final_from: d.final_from,
        seen: d.seen,
        marks: d.marks,
        zero: d.zero,
        elapsed: d.elapsed,
        converged_after: d.converged_after,
        contents,
        halts: d.halts,
        unread: d.unread,
        shape: shape(o),
    })
}

/// Says each step that runs only approximately or not at all, and each setting of the file
/// that does not run for real.
fn say_not_real(planned: &[Planned], not_honoured: &[String], say: &(dyn Fn(&str) + Sync)) {
    for p in planned {
        match &p.how {
            How::Real => {}
            How::Approx(why) => say(&format!(
                "step at {:?} `{}` runs approximately: {why}",
                p.step.at,
                p.step.action.verb()
            )),
            How::NotRun(why) => say(&format!(
                "step at {:?} `{}` does not run: {why}",
                p.step.at,
                p.step.action.verb()
            )),
        }
    }
    for n in not_honoured {
        say(&format!("not run for real: {n}"));
    }
}

/// Each chain's serving targets' committed chunks, read from the stopped cluster's stores;
/// why not when the cluster did not converge or did not quiesce.
fn compared_contents(d: &Driven, entries: &[cluster::NodeEntry]) -> Result<dump::Contents, String> {
    match &d.quiet {
        _ if d.converged_after.is_none() => {
            Err("the cluster did not converge, so replicas were not compared".into())
        }
        Ok(_) => dump::serving_contents(&d.seen, &d.hosts, entries),
        Err(e) => Err(format!(
            "replicas not compared: updates were still in progress when the cluster stopped ({e})"
        )),
    }
}

/// What the async part hands back.
struct Driven {
    rec: Recorder,
    final_from: usize,
    seen: Vec<Seen>,
    hosts: BTreeMap<t3fs_core::ids::TargetId, t3fs_core::ids::NodeId>,
    marks: Vec<Mark>,
    zero: Instant,
    elapsed: Duration,
    converged_after: Option<Duration>,
    step_failures: Vec<String>,
    halts: Vec<String>,
    unread: Vec<u32>,
    /// How long the cluster took to quiesce after the final reads, or why it did not.
    quiet: Result<Duration, String>,
    /// The namespace log.
    ns: Option<Vec<namespace::NsEvent>>,
    /// The chunk metadata dump taken once quiescent.
    live_dump: Result<crate::chunk_dump::Dump, String>,
}

pub(crate) fn mark(
    marks: &mut Vec<Mark>,
    say: &(dyn Fn(&str) + Sync),
    kind: &'static str,
    node: &str,
    what: String,
) {
    say(&what);
    marks.push(Mark {
        at: Instant::now(),
        kind,
        node: node.into(),
        what,
    });
}

/// Starts the routing watcher and makes the namespace workload's starting tree; then time 0,
/// the history's recorder and the register workload's load from there.
async fn prepare(
    o: &RunOptions,
    opts: &t3fs_client::client::ClientOptions,
    say: &(dyn Fn(&str) + Sync),
) -> Result<(RoutingWatch, Instant, Recorder, Load), String> {
    let sc = &o.scenario;
    let watch = RoutingWatch::start(opts.clone(), Duration::from_millis(100))
        .await
        .map_err(|e| e.to_string())?;
    let chains: Vec<ChainId> = (1..=sc.cluster.chains).map(ChainId).collect();
    if let Some(w) = &sc.namespace {
        say(&format!(
            "making the starting tree /d0 … /d{}",
            w.dirs.saturating_sub(1)
        ));
        namespace::seed_dirs(opts, w.dirs, sc.converge_within).await?;
    }
    let zero = Instant::now();
    let rec = Recorder::new(zero);
    let load = Load {
        opts: opts.clone(),
        w: sc.workload.clone(),
        chains,
        rec: rec.clone(),
        stop: zero + sc.duration,
        call_bound: sc.converge_within,
    };
    Ok((watch, zero, rec, load))
}

/// The async part of [`run`]: the safety phase (safety.rs), the liveness phase (liveness.rs),
/// then the end before the cluster stops (end.rs).
async fn drive(
    o: &RunOptions,
    opts: &t3fs_client::client::ClientOptions,
    planned: &[Planned],
    names: &BTreeMap<u32, String>,
    say: &(dyn Fn(&str) + Sync),
) -> Result<Driven, String> {
    let sc = &o.scenario;
    let (watch, zero, rec, load) = prepare(o, opts, say).await?;
    let mut marks = Vec::new();
    safety::announce(sc, planned, &mut marks, say);
    let mut rng = Rng::new(o.seed);
    let lives = life::Lives::new(sc.cluster.clients);
    let clients = safety::spawn_clients(&load, sc.cluster.clients, &mut rng, &lives);
    let ns_log = namespace::NsLog::new(zero);
    let ns_clients = safety::spawn_ns_clients(o, opts, &ns_log, zero, &mut rng, &lives);
    let live = Live {
        dir: &o.dir,
        names,
        watch: &watch,
        clients: &lives,
    };
    let mut injected = safety::start_faults(o, names, &mut rng, &mut marks, say)?;
    let (mut step_failures, killed) =
        safety::run_steps(&live, &mut injected, planned, zero, &mut marks, say).await;
    safety::join_clients(clients).await?;
    let (live_start, halts, replaced) =
        liveness::heal(&live, &mut injected, &killed, &mut marks, say)?;
    let wiped = liveness::mark_restarts(&lives, replaced, &mut step_failures, &mut marks, say);
    let converged_after = liveness::converge(&live, &wiped, live_start, sc.converge_within).await;
    if converged_after.is_none() {
        let why = liveness::why_not_converged(&live, &wiped);
        mark(&mut marks, say, "phase", "", why);
    }
    let final_from = rec.len();
    let unread = liveness::final_reads(&load, sc, converged_after, &mut marks, say).await?;
    let ns = match &sc.namespace {
        Some(_) => Some(end::ns_end(o, ns_clients, &ns_log, &mut marks, say).await),
        None => None,
    };
    let quiet = liveness::await_quiescence(o, converged_after, &mut marks, say).await;
    let live_dump = end::live_dump(o, &quiet).await;
    let elapsed = zero.elapsed();
    let hosts = watch.hosts();
    let seen = watch.stop().await;
    Ok(Driven {
        live_dump,
        ns,
        quiet,
        rec,
        final_from,
        seen,
        hosts,
        marks,
        zero,
        elapsed,
        converged_after,
        step_failures,
        halts,
        unread,
    })
}
