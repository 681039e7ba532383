//! `t3fs demo --real`: the simulated demo's story on real processes. It starts a cluster of 3
//! storage nodes (2 targets each, 3 replicas, 2 chains) on loopback, runs a verified mixed
//! read/write load through the native client, kills the storage process at the head of chain
//! 1 with SIGKILL mid-write, restarts it, and records from mgmtd's routing how the chain fails
//! over, resyncs and promotes the target back. It ends with verdicts and a run directory.
//!
//! Invariant: every process it starts is stopped before it returns, on success or error (the
//! cluster guard's drop). Verdicts come from what the real cluster published and what the
//! client read back; none is assumed. Not here: the commit and host of the manifest and the
//! rendering (the CLI), or the load itself (bench_io.rs).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use t3fs_core::ids::{ChainId, TargetId};
use t3fs_core::routing::PublicState;
use t3fs_reports::{RunData, VerdictLine};

use crate::bench_io::{Job, Rw};
use crate::bench_run::{Mark, RealRun};
use crate::cluster::{self, UpOptions};
use crate::routing_watch::{RoutingWatch, Seen};

/// What the demo does and when.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// The cluster directory (made and left behind with its logs).
    pub dir: PathBuf,
    /// Where the host probe is saved and reused from.
    pub probe_file: PathBuf,
    /// Seconds of load.
    pub load: Duration,
    /// When the head is killed, after the load starts.
    pub kill_at: Duration,
    /// When it is restarted, after the kill.
    pub restart_after: Duration,
    /// How long to wait after the load for every chain to serve again.
    pub recover_within: Duration,
}

impl DemoOptions {
    /// The demo's defaults, with its cluster in `dir`.
    pub fn new(dir: PathBuf, probe_file: PathBuf) -> Self {
        Self {
            dir,
            probe_file,
            load: Duration::from_secs(30),
            kill_at: Duration::from_secs(5),
            restart_after: Duration::from_secs(10),
            recover_within: Duration::from_secs(60),
        }
    }
}

/// Stops the cluster when dropped, whatever happened.
struct Up(PathBuf);

impl Drop for Up {
    fn drop(&mut self) {
        let _ = cluster::down(&self.0);
    }
}

fn up_options(dir: &std::path::Path) -> UpOptions {
    UpOptions {
        dir: dir.to_path_buf(),
        storage: 3,
        targets_per_node: 2,
        replicas: 3,
        mgmtd: 1,
        meta: 1,
        kv: "embedded".into(),
        timeouts: "fast".into(),
        chunk_size: 1 << 20,
        wait: Duration::from_secs(60),
        store: "file".into(),
        hosts: "loopback".into(),
        storage_lease: false,
        serial_forwarding: false,
        bug: None,
        transport: "tcp".into(),
        chunk_io_deadline_ms: 30_000,
        fault_injection: false,
        worker_threads: None,
    }
}

fn job(load: Duration) -> Job {
    Job {
        rw: Rw::RandRw,
        rwmixread: 50,
        bs: 256 << 10,
        iodepth: 4,
        numjobs: 2,
        size: 16 << 20,
        runtime: Some(load),
        time_based: true,
        ramp_time: Duration::ZERO,
        rate_iops: None,
        shared: false,
        verify: true,
    }
}

/// The node name hosting the head of `chain` in the watcher's newest view.
fn head_of(
    watch: &RoutingWatch,
    chain: ChainId,
    names: &BTreeMap<u32, String>,
) -> Option<(TargetId, String)> {
    let seen = watch.seen();
    let c = seen.iter().rev().find(|s| s.chain.chain == chain)?;
    let head = c.chain.targets.first()?.target;
    let node = watch.target_node(head)?;
    Some((head, names.get(&u32::try_from(node.0).ok()?)?.clone()))
}

/// Runs the demo; `say` gets each step as it happens.
pub fn run(o: &DemoOptions, say: &(dyn Fn(&str) + Sync)) -> Result<RunData, String> {
    let _ = std::fs::remove_dir_all(&o.dir);
    say(&format!(
        "starting 1 mgmtd, 1 kv, 1 meta and 3 storage processes in {}",
        o.dir.display()
    ));
    cluster::up(&up_options(&o.dir))?;
    let guard = Up(o.dir.clone());
    let entries = cluster::nodes(&o.dir)?;
    let names: BTreeMap<u32, String> = entries
        .iter()
        .map(|n| (n.cfg.node.id, n.name.clone()))
        .collect();
    let data_dir = entries
        .iter()
        .find(|n| n.role == "storage")
        .map_or_else(|| o.dir.clone(), |n| n.cfg.node.data.clone());
    let job = job(o.load);
    say("probing this host's disk and loopback bounds (reused while an hour old)");
    let probe = crate::probe::load_or_measure(
        &o.probe_file,
        &data_dir,
        job.iodepth * job.numjobs,
        3 * job.iodepth * job.numjobs,
        Duration::from_secs(3600),
    )
    .map_err(|e| format!("host probe: {e}"))?;
    let opts = cluster::client_options(&o.dir)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let (report, seen, marks, fault) = rt.block_on(drive(o, &opts, job, &names, say))?;
    say("stopping the cluster");
    drop(guard);
    let rows = crate::roofline::rows(&report, &probe, 3);
    let verdicts = verdicts(&seen, &fault, report.zero);
    let run = RealRun {
        name: "demo-real".into(),
        about: "The head of chain 1 is killed (SIGKILL) mid-write on a real 3-node, 3-replica cluster; the chain fails over, the node restarts, resyncs and is promoted.".into(),
        command: "t3fs demo --real".into(),
        shape: "1 mgmtd, 1 kv (embedded engine), 1 meta, 3 storage nodes x 2 targets (file store), 2 chains of 3 replicas, loopback TCP".into(),
        report: &report,
        probe: Some(&probe),
        rows,
        seen,
        marks,
        verdicts,
    };
    Ok(crate::bench_run::run_data(&run))
}

/// The fault the demo injected: the head's target, when its process was killed and restarted.
#[derive(Clone, Copy)]
struct Fault {
    target: TargetId,
    kill: Instant,
    restart: Instant,
}

type Driven = (crate::bench_io::Report, Vec<Seen>, Vec<Mark>, Fault);

async fn drive(
    o: &DemoOptions,
    opts: &t3fs_client::client::ClientOptions,
    job: Job,
    names: &BTreeMap<u32, String>,
    say: &(dyn Fn(&str) + Sync),
) -> Result<Driven, String> {
    let watch = RoutingWatch::start(opts.clone(), Duration::from_millis(100))
        .await
        .map_err(|e| e.to_string())?;
    let pids = cluster::pids(&o.dir);
    let mut marks = Vec::new();
    let mark = |marks: &mut Vec<Mark>, kind, node: &str, what: String| {
        say(&what);
        marks.push(Mark {
            at: Instant::now(),
            kind,
            node: node.into(),
            what,
        });
    };
    mark(
        &mut marks,
        "phase",
        "",
        format!(
            "load: {} s of 256 KiB random reads and writes (50/50), 2 jobs x depth 4, verified",
            o.load.as_secs()
        ),
    );
    let load = tokio::spawn(crate::bench_io::run(opts.clone(), job, pids, |_| {}));
    tokio::time::sleep(o.kill_at).await;
    let (head, victim) =
        head_of(&watch, ChainId(1), names).ok_or("no head of chain 1 in routing")?;
    cluster::kill(&o.dir, &victim, "KILL")?;
    mark(
        &mut marks,
        "fault",
        &victim,
        format!("kill -9 {victim} (hosts {head}, head of chain 1)"),
    );
    let killed = Instant::now();
    while Instant::now() < killed + o.restart_after {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cluster::restart(&o.dir, &victim)?;
    mark(&mut marks, "fault", &victim, format!("restart {victim}"));
    let fault = Fault {
        target: head,
        kill: killed,
        restart: Instant::now(),
    };
    let report = load.await.map_err(|e| e.to_string())??;
    if watch.all_serving() {
        mark(
            &mut marks,
            "phase",
            "",
            "load done; every chain already SERVING".into(),
        );
    } else {
        mark(
            &mut marks,
            "phase",
            "",
            "load done; waiting for every chain to serve".into(),
        );
        let deadline = Instant::now() + o.recover_within;
        while !watch.all_serving() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if watch.all_serving() {
            mark(&mut marks, "phase", "", "every chain SERVING again".into());
        }
    }
    let seen = watch.stop().await;
    Ok((report, seen, marks, fault))
}

fn verdict(name: &str, ok: bool, detail: String) -> VerdictLine {
    VerdictLine {
        name: name.into(),
        label: if ok { "PASS" } else { "FAIL" }.into(),
        detail,
    }
}

/// Failover, resync with promotion, and recovery, as mgmtd published them.
fn verdicts(seen: &[Seen], fault: &Fault, zero: Instant) -> Vec<VerdictLine> {
    let Fault {
        target,
        kill,
        restart,
    } = *fault;
    let t = |at: Instant| at.saturating_duration_since(zero).as_secs_f64();
    let state_after = |from: Instant, want: &dyn Fn(PublicState) -> bool| {
        seen.iter().filter(|s| s.at >= from).find_map(|s| {
            let x = s.chain.targets.iter().find(|x| x.target == target)?;
            want(x.state).then_some((s.at, s.chain.chain, s.chain.version))
        })
    };
    let off = state_after(kill, &|s| s != PublicState::Serving);
    let mut out = vec![verdict(
        "failover",
        off.is_some(),
        match off {
            Some((at, c, v)) => format!(
                "{target} left SERVING on {c}@{v} at {:.1} s, {:.1} s after the kill",
                t(at),
                (at - kill).as_secs_f64()
            ),
            None => format!("{target} never left SERVING after the kill"),
        },
    )];
    let syncing = state_after(restart, &|s| s == PublicState::Syncing);
    let back = state_after(syncing.map_or(restart, |s| s.0), &|s| {
        s == PublicState::Serving
    });
    out.push(verdict(
        "resync and promotion",
        syncing.is_some() && back.is_some(),
        match (syncing, back) {
            (Some((a, ..)), Some((b, c, v))) => format!(
                "{target} SYNCING at {:.1} s, SERVING again on {c}@{v} at {:.1} s",
                t(a),
                t(b)
            ),
            (Some((a, ..)), None) => {
                format!("{target} SYNCING at {:.1} s, never SERVING again", t(a))
            }
            _ => format!("{target} never seen SYNCING after its restart"),
        },
    ));
    let mut newest: BTreeMap<ChainId, &Seen> = BTreeMap::new();
    for s in seen {
        newest.insert(s.chain.chain, s);
    }
    let all = !newest.is_empty()
        && newest.values().all(|s| {
            s.chain
                .targets
                .iter()
                .all(|x| x.state == PublicState::Serving)
        });
    let lines: Vec<String> = newest
        .values()
        .map(|s| {
            format!(
                "{}@{}: {}",
                s.chain.chain,
                s.chain.version,
                t3fs_core::mgmtd::chain_update::render(&s.chain.targets)
            )
        })
        .collect();
    out.push(verdict(
        "every chain SERVING at the end",
        all,
        lines.join("; "),
    ));
    out
}
