//! `t3fs cluster run SCENARIO`: a scenario file on real processes (t3fs-real's scenario_run),
//! judged by the simulator's checkers (t3fs-sim's check), written as a run directory with the
//! same report as a simulated run. This file is the glue the dependency rules ask for: t3fs-real
//! never depends on t3fs-sim, so the CLI hands the real history to the checkers.
//!
//! Exit codes are the simulator's (127 assertion, 128 liveness, 129 correctness, 130 undecided),
//! and 2 when the run itself could not do what the file says (a step failed to execute).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use t3fs_real::routing_watch::{chain_events, chain_points};
use t3fs_real::scenario_run::{self, steps::How, RealOutcome, RunOptions};
use t3fs_reports::{EventLine, Manifest, RunData, Series, VerdictLine};
use t3fs_scenario::Scenario;
use t3fs_sim::check::{self, verdicts, Verdict};

/// `t3fs cluster run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// A catalog scenario's name or a scenario file.
    pub scenario: String,
    /// Seed of the workload's operation streams (default: the scenario's first).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where the cluster and the run directory go, and the planted bug.
    #[command(flatten)]
    pub place: PlaceArgs,
    /// Only say how each step would run (for real, approximately, or not at all) and which
    /// settings real processes do not honour; start nothing.
    #[arg(long)]
    pub plan: bool,
}

/// What `cluster run` and `cluster soak` share.
#[derive(Args, Debug)]
pub struct PlaceArgs {
    /// The cluster directory (default: a fresh one under the temporary directory, removed
    /// after a passing run).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Run every node with a planted bug (`t3fs sim list` names them).
    #[arg(long)]
    pub bug: Option<String>,
    /// Chunk store of every target: `file` or `uring`.
    #[arg(long, default_value = "file", value_parser = ["file", "uring"])]
    pub store: String,
    /// Where the run directory goes.
    #[arg(long, default_value = "runs")]
    pub out: PathBuf,
    /// `loopback`: network faults go through each node's transport fault layer. `netns` (root):
    /// every server process in a network namespace of its own, and cuts, partitions and
    /// isolation are nftables rules in those namespaces, so the kernel's TCP meets them.
    #[arg(long, default_value = "loopback", value_parser = ["loopback", "netns"])]
    pub hosts: String,
    /// How frames travel: `tcp`, `rdma` (a verbs device; the build needs `--features rdma`),
    /// or `soft-rdma` (the software verbs fabric, in a process of its own: RDMA without
    /// hardware, for tests).
    #[arg(long, default_value = "tcp", value_parser = ["tcp", "rdma", "soft-rdma"])]
    pub transport: String,
}

impl PlaceArgs {
    /// Where the run goes.
    pub fn place(&self) -> Place {
        Place {
            dir: self.dir.clone(),
            store: self.store.clone(),
            out: self.out.clone(),
            hosts: self.hosts.clone(),
            transport: self.transport.clone(),
        }
    }

    /// The flags to repeat in a reproduce line (`--bug B`, `--store S`, `--hosts H`).
    pub fn flags(&self, bug: Option<&str>) -> String {
        let mut f = bug.map(|b| format!(" --bug {b}")).unwrap_or_default();
        if self.store != "file" {
            f.push_str(&format!(" --store {}", self.store));
        }
        if self.hosts != "loopback" {
            f.push_str(&format!(" --hosts {}", self.hosts));
        }
        if self.transport != "tcp" {
            f.push_str(&format!(" --transport {}", self.transport));
        }
        f
    }
}

/// Checks a planted bug's name; the error line says where the names are.
pub fn known_bug(bug: Option<&str>) -> Result<(), String> {
    match t3fs_services::config::bugs(bug) {
        Some(_) => Ok(()),
        None => Err(format!(
            "unknown planted bug `{}` (`t3fs sim list` names them)",
            bug.unwrap_or_default()
        )),
    }
}

/// The `--plan` text: every step with how it runs, then the settings not honoured.
fn plan_text(sc: &Scenario) -> String {
    let mut out = String::new();
    for p in scenario_run::steps::plan(sc) {
        let how = match &p.how {
            How::Real => "runs for real".to_string(),
            How::Approx(why) => format!("runs approximately: {why}"),
            How::NotRun(why) => format!("does not run: {why}"),
        };
        out.push_str(&format!(
            "  line {:<4} {:>8.3}s  {:<22} {how}\n",
            p.step.line,
            p.step.at.as_secs_f64(),
            p.step.action.verb()
        ));
    }
    for n in scenario_run::steps::not_honoured(sc) {
        out.push_str(&format!("  not honoured: {n}\n"));
    }
    out
}

/// The checkers' verdicts on a real run, as `t3fs sim run` would give them.
fn judge(o: &RealOutcome, sc: &Scenario) -> (Vec<(&'static str, Verdict)>, i32, String) {
    let h = &o.history;
    let audit = match &o.audit {
        Ok(n) => Verdict::Pass(format!(
            "{n} chain states seen from mgmtd's routing checked (§2.6.1; versions never go back or repeat with other members)"
        )),
        Err(e) => Verdict::Fail(e.clone()),
    };
    let stale = if sc.cluster.storage_lease {
        Default::default()
    } else {
        check::appendix_b::stale_reads(&h.ops[..o.final_from], &o.timeline())
    };
    let [(_, lin), (_, reg), (_, durable)] =
        check::histories(h, sc.workload.chunks, o.final_from, false, &stale);
    let durable = if o.converged_after.is_some() {
        durable
    } else {
        Verdict::Unknown("not checked: the cluster did not converge, so no final reads ran".into())
    };
    let agreement = crate::cluster_agree::agreement(o);
    let liveness = match o.converged_after {
        Some(t) => Verdict::Pass(format!(
            "every chain SERVING {:.1}s after healing (bound {:.0}s)",
            t.as_secs_f64(),
            sc.converge_within.as_secs_f64()
        )),
        None => Verdict::Fail(format!(
            "not every chain SERVING within {:.0}s of healing",
            sc.converge_within.as_secs_f64()
        )),
    };
    let halts = Verdict::Pass(if o.halts.is_empty() {
        "no process exited unless a step killed it".into()
    } else {
        format!(
            "exited on their own (restarted for the liveness phase): {}",
            o.halts.join(", ")
        )
    });
    let checked = verdicts::Checked {
        audit,
        lin,
        reg,
        durable,
        corruption: check::corruption(h),
        agreement,
        namespace: o.namespace.as_ref().map(|ns| {
            let dirs = sc.namespace.as_ref().map_or(0, |w| w.dirs);
            crate::cluster_ns::judge(ns, &o.contents, dirs)
        }),
        liveness,
        halts,
    };
    verdicts::assemble(checked, &sc.expect)
}

/// What ran for real, approximately, or not at all, as one verdict line.
fn steps_line(o: &RealOutcome) -> VerdictLine {
    let count = |f: &dyn Fn(&How) -> bool| o.planned.iter().filter(|p| f(&p.how)).count();
    let real = count(&|h| *h == How::Real);
    let approx = count(&|h| matches!(h, How::Approx(_)));
    let not_run = count(&|h| matches!(h, How::NotRun(_)));
    let mut detail = format!(
        "{real} steps ran as in the simulator, {approx} approximately, {not_run} did not run; {} settings not honoured",
        o.not_honoured.len()
    );
    for p in &o.planned {
        match &p.how {
            How::Real => {}
            How::Approx(why) => detail.push_str(&format!(
                "\n{:?} {} (approximate): {why}",
                p.step.at,
                p.step.action.verb()
            )),
            How::NotRun(why) => detail.push_str(&format!(
                "\n{:?} {} (not run): {why}",
                p.step.at,
                p.step.action.verb()
            )),
        }
    }
    for n in &o.not_honoured {
        detail.push_str(&format!("\nnot honoured: {n}"));
    }
    for f in &o.step_failures {
        detail.push_str(&format!("\n{f}"));
    }
    VerdictLine {
        name: "steps on real processes".into(),
        label: if o.step_failures.is_empty() {
            "PASS"
        } else {
            "FAIL"
        }
        .into(),
        detail,
    }
}

/// The run directory's data.
fn run_data(
    o: &RealOutcome,
    sc: &Scenario,
    seed: u64,
    command: &str,
    verdicts: Vec<VerdictLine>,
    exit: i32,
    reason: String,
) -> RunData {
    let end_ns = o.elapsed.as_nanos() as u64;
    let (ops, latencies) = t3fs_sim::rundir::history_series(&o.history, end_ns);
    let mut counters = std::collections::BTreeMap::new();
    for (op, v) in &ops {
        counters.insert(format!("workload.{op}"), v.iter().sum());
    }
    // The steps carried out, by verb (a soak's fault counts).
    for p in o
        .planned
        .iter()
        .filter(|p| !matches!(p.how, How::NotRun(_)))
    {
        *counters
            .entry(format!("steps.{}", p.step.action.verb()))
            .or_insert(0) += 1;
    }
    let manifest = Manifest {
        scenario: sc.name.clone(),
        about: sc.about.clone(),
        seed,
        mode: "real".into(),
        command: command.into(),
        config: t3fs_scenario::write::to_toml(sc),
        exit,
        reason,
        seconds: o.elapsed.as_secs_f64(),
        verdicts,
        counters,
        shape: o.shape.clone(),
        ..Manifest::default()
    };
    let mut events: Vec<EventLine> = o
        .marks
        .iter()
        .map(|m| EventLine {
            t: m.at.saturating_duration_since(o.zero).as_secs_f64(),
            kind: m.kind.into(),
            node: m.node.clone(),
            what: m.what.clone(),
        })
        .collect();
    for p in &o.planned {
        if let How::NotRun(why) = &p.how {
            events.push(EventLine {
                t: p.step.at.as_secs_f64(),
                kind: "not-run".into(),
                node: String::new(),
                what: format!(
                    "{} (line {}) not run on real processes: {why}",
                    p.step.action.verb(),
                    p.step.line
                ),
            });
        }
    }
    events.extend(chain_events(&o.seen, o.zero));
    events.sort_by(|a, b| a.t.total_cmp(&b.t));
    RunData {
        manifest,
        events,
        series: Series {
            interval: t3fs_sim::rundir::INTERVAL,
            ops,
            counters: Default::default(),
        },
        chains: chain_points(&o.seen, o.zero),
        latencies,
        history: t3fs_sim::rundir::history_lines(&o.history),
    }
}

/// `t3fs cluster run`.
pub fn run(a: RunArgs) -> ExitCode {
    let mut sc = match t3fs_scenario::find(&a.scenario)
        .and_then(|p| t3fs_scenario::load_file(&p).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if a.place.bug.is_some() {
        sc.bug = a.place.bug.clone();
    }
    if let Err(e) = known_bug(sc.bug.as_deref()) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    if a.plan {
        print!(
            "{} on real processes, step by step:\n{}",
            sc.name,
            plan_text(&sc)
        );
        return ExitCode::SUCCESS;
    }
    let seed = a.seed.unwrap_or(sc.seeds[0]);
    let command = format!(
        "t3fs cluster run {} --seed {seed}{}",
        a.scenario,
        a.place.flags(sc.bug.as_deref())
    );
    let place = a.place.place();
    run_real(&sc, seed, &place, &command)
}

/// Where a real run's cluster and run directory go.
pub struct Place {
    /// The cluster directory (default: a fresh one under the temporary directory, removed
    /// after a passing run).
    pub dir: Option<PathBuf>,
    /// Chunk store of every target.
    pub store: String,
    /// Where the run directory goes.
    pub out: PathBuf,
    /// `loopback` or `netns`.
    pub hosts: String,
    /// `tcp`, `rdma` or `soft-rdma`.
    pub transport: String,
}

/// Runs `sc` on real processes with `seed`, judges it, writes its run directory and says how
/// to reproduce a failure with `command`.
pub fn run_real(sc: &Scenario, seed: u64, place: &Place, command: &str) -> ExitCode {
    let dir = place.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("t3fs-run-{}-{}", sc.name, std::process::id()))
    });
    println!("{} on real processes (seed {seed}): {}", sc.name, sc.about);
    let t0 = std::time::Instant::now();
    let say = move |s: &str| println!("  {:>6.1}s  {s}", t0.elapsed().as_secs_f64());
    let o = RunOptions {
        dir: dir.clone(),
        scenario: sc.clone(),
        seed,
        bug: sc.bug.clone(),
        store: place.store.clone(),
        hosts: place.hosts.clone(),
        transport: place.transport.clone(),
    };
    let outcome = match scenario_run::run(&o, &say) {
        Ok(x) => x,
        Err(e) => {
            eprintln!(
                "error: {e}\n(the cluster's logs stay in {})\nreproduce: {command}",
                dir.display()
            );
            return ExitCode::from(2);
        }
    };
    let (named, mut exit, mut reason) = judge(&outcome, sc);
    let mut lines: Vec<VerdictLine> = named
        .iter()
        .map(|(n, v)| VerdictLine {
            name: n.to_string(),
            label: v.label().into(),
            detail: v.detail().into(),
        })
        .collect();
    let steps = steps_line(&outcome);
    if exit == 0 && steps.label == "FAIL" {
        exit = 2;
        reason = format!("steps on real processes: {}", outcome.step_failures[0]);
    }
    lines.push(steps);
    for v in &lines {
        let mut l = v.detail.lines();
        println!("  {:<28} {:<8} {}", v.name, v.label, l.next().unwrap_or(""));
        for rest in l {
            println!("  {:<28} {:<8} {rest}", "", "");
        }
    }
    let ops = outcome.history.completed();
    println!(
        "  {ops} operations answered · {:.1}s wall",
        outcome.elapsed.as_secs_f64()
    );
    let data = run_data(&outcome, sc, seed, command, lines, exit, reason.clone());
    let run_dir = place.out.join(format!("{}-real-seed{seed}", sc.name));
    match crate::real_run::write(data, &run_dir) {
        Ok(()) => println!(
            "run directory: {} (report.md, report.html)",
            run_dir.display()
        ),
        Err(e) => eprintln!("warning: report not written: {e}"),
    }
    if exit == 0 {
        println!("PASS");
        if place.dir.is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
    } else {
        println!("FAIL (exit {exit}): {reason}");
        println!("reproduce: {command}");
        println!("the cluster's directory and logs stay in {}", dir.display());
    }
    ExitCode::from(exit as u8)
}
