//! `t3fs sim run|swarm|replay|list` and `t3fs demo`: deterministic simulation of a whole cluster
//! under scripted and random faults, with verdicts, run directories and reports.
//!
//! Every failure prints the exact command that reproduces it; exit codes are 127 (assertion),
//! 128 (liveness), 129 (correctness) and 130 (undecided: an UNKNOWN verdict), as t3fs-sim
//! defines them.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use t3fs_scenario::Scenario;
use t3fs_sim::run::{self, Outcome};

#[derive(Subcommand, Debug)]
pub enum SimCommand {
    /// Run a scenario (a catalog name or a file) with one seed.
    Run(RunArgs),
    /// Run seeds whose cluster shape, workload and faults are drawn from the seed.
    Swarm(SwarmArgs),
    /// Re-run one swarm seed with a log line per event.
    Replay(ReplayArgs),
    /// List the catalog scenarios and the planted bugs.
    List,
    /// Run a performance scenario once per value of one parameter and draw the scaling curve
    /// against the roofline (`--vary clients=100,200,500`).
    Sweep(SweepArgs),
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// A performance scenario (name in scenarios/perf or a file) of kind peak_read.
    scenario: String,
    /// KEY=V1,V2,...: storage_nodes, clients, replicas, targets_per_disk, concurrency,
    /// read_kib, ssds, nic_gbps, background or oversubscription.
    #[arg(long)]
    vary: String,
    /// Where the sweep's directory goes.
    #[arg(long, default_value = "runs")]
    out: PathBuf,
}

/// `--storage-lease on|off`: overrides the scenario's (or the swarm seed's) lease switch.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Eq, PartialEq)]
pub enum Toggle {
    /// t3fs's storage-side lease.
    On,
    /// 3FS's behaviour: no storage-side lease.
    Off,
}

impl Toggle {
    fn apply(t: Option<Self>, sc: &mut Scenario) {
        if let Some(t) = t {
            sc.cluster.storage_lease = t == Self::On;
        }
    }

    fn flag(t: Option<Self>) -> String {
        match t {
            Some(Self::On) => " --storage-lease on".into(),
            Some(Self::Off) => " --storage-lease off".into(),
            None => String::new(),
        }
    }
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Catalog name (see `t3fs sim list`) or path to a scenario file.
    scenario: String,
    /// Seed (default: the scenario's first seed).
    #[arg(long)]
    seed: Option<u64>,
    /// Run every seed the scenario lists.
    #[arg(long, conflicts_with = "seed")]
    all_seeds: bool,
    /// Plant a bug (see `t3fs sim list`).
    #[arg(long, value_name = "NAME")]
    bug: Option<String>,
    /// Print one status line per event.
    #[arg(long)]
    log: bool,
    /// Where run directories go.
    #[arg(long, default_value = "runs")]
    out: PathBuf,
    /// Do not write a run directory.
    #[arg(long)]
    no_report: bool,
    /// Override the scenario's storage-side lease switch.
    #[arg(long, value_enum, value_name = "on|off")]
    storage_lease: Option<Toggle>,
}

#[derive(Args, Debug)]
pub struct SwarmArgs {
    /// Seeds to run.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// First seed.
    #[arg(long, default_value_t = 1)]
    from: u64,
    /// Plant a bug in every run; the swarm then reports the first seed that catches it.
    #[arg(long, value_name = "NAME")]
    bug: Option<String>,
    /// Keep going after a failure.
    #[arg(long)]
    keep_going: bool,
    /// Save failing seeds as regression scenarios in this directory.
    #[arg(long, value_name = "DIR")]
    save: Option<PathBuf>,
    /// Run every seed with the storage-side lease on or off (default: drawn from the seed).
    #[arg(long, value_enum, value_name = "on|off")]
    storage_lease: Option<Toggle>,
}

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The swarm seed.
    #[arg(long)]
    seed: u64,
    /// The planted bug the swarm ran with, if any.
    #[arg(long, value_name = "NAME")]
    bug: Option<String>,
    /// Do not print a status line per event.
    #[arg(long)]
    quiet: bool,
    /// Where the run directory goes.
    #[arg(long, default_value = "runs")]
    out: PathBuf,
    /// Override the seed's storage-side lease switch.
    #[arg(long, value_enum, value_name = "on|off")]
    storage_lease: Option<Toggle>,
}

fn load(name: &str) -> Result<Scenario, String> {
    let path = t3fs_scenario::find(name)?;
    t3fs_scenario::load_file(&path).map_err(|e| e.to_string())
}

pub fn run(cmd: SimCommand) -> ExitCode {
    match cmd {
        SimCommand::Run(a) => run_cmd(a),
        SimCommand::Swarm(a) => swarm_cmd(a),
        SimCommand::Replay(a) => replay_cmd(a),
        SimCommand::Sweep(a) => sweep_cmd(a),
        SimCommand::List => {
            println!("scenarios ({}):", t3fs_scenario::catalog_dir().display());
            for (name, path) in t3fs_scenario::catalog() {
                let about = t3fs_scenario::load_file(&path)
                    .map(|s| s.about)
                    .unwrap_or_else(|e| format!("INVALID: {e}"));
                println!("  {name:<32} {about}");
            }
            println!(
                "performance scenarios, flow model ({}):",
                t3fs_sim::perf::scenario::perf_dir().display()
            );
            for (name, path) in t3fs_sim::perf::scenario::catalog() {
                let about = t3fs_sim::perf::scenario::PerfScenario::load(&path)
                    .map(|s| s.about)
                    .unwrap_or_else(|e| format!("INVALID: {e}"));
                println!("  {name:<32} {about}");
            }
            println!("planted bugs (--bug NAME):");
            for (name, about) in t3fs_sim::bugs::list() {
                println!("  {name:<32} {about}");
            }
            ExitCode::SUCCESS
        }
    }
}

fn print_outcome(o: &Outcome, command: &str) {
    for (name, v) in &o.verdicts {
        let detail = v.detail();
        let first = detail.lines().next().unwrap_or("");
        println!("  {:<28} {:<7} {first}", name, v.label());
        for l in detail.lines().skip(1) {
            println!("  {:<28} {:<7} {l}", "", "");
        }
    }
    println!(
        "  events {} · simulated {:.1}s · trace {:016x}",
        o.events,
        o.sim_ns as f64 / 1e9,
        o.trace
    );
    for l in o
        .world
        .as_ref()
        .map(|w| w.hardware_report())
        .unwrap_or_default()
    {
        println!("  {l}");
    }
    if o.passed() {
        println!("PASS");
    } else {
        println!("FAIL (exit {}): {}", o.exit, o.reason);
        println!("reproduce: {command}");
    }
}

/// Runs a sweep, with a progress bar per point.
fn sweep_cmd(a: SweepArgs) -> ExitCode {
    let Some(path) = t3fs_sim::perf::scenario::find(&a.scenario) else {
        eprintln!(
            "error: no performance scenario `{}` (see `t3fs sim list`)",
            a.scenario
        );
        return ExitCode::from(2);
    };
    let pb = ProgressBar::new(0);
    pb.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} points · {elapsed} (eta {eta})")
            .expect("template"),
    );
    let r = t3fs_sim::perf::sweep::sweep(&path, &a.vary, &a.out, &mut |i, n| {
        pb.set_length(n as u64);
        pb.set_position(i as u64);
    });
    pb.finish_and_clear();
    match r {
        Ok((points, dir)) => {
            for p in &points {
                let (bind, b) = p.binding();
                println!(
                    "  {:>10}  model {:>7.2} TiB/s  {bind} bound {b:.2} ({:.1}%)",
                    p.x,
                    p.model,
                    100.0 * p.model / b
                );
            }
            println!("report: {}", dir.join("report.md").display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs a performance scenario with the flow model, with a progress bar.
fn perf_cmd(path: &std::path::Path, out: &std::path::Path) -> ExitCode {
    let pb = ProgressBar::new(1000);
    pb.set_style(
        ProgressStyle::with_template("{bar:40} {percent}% simulated · {elapsed} (eta {eta})")
            .expect("template"),
    );
    let r = t3fs_sim::perf::run::run(path, out, &mut |f| pb.set_position((f * 1000.0) as u64));
    pb.finish_and_clear();
    match r {
        Ok(o) => {
            print!("{}", o.summary);
            println!("report: {}", o.dir.join("report.md").display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run_cmd(a: RunArgs) -> ExitCode {
    if let Some(path) = t3fs_sim::perf::scenario::find(&a.scenario) {
        return perf_cmd(&path, &a.out);
    }
    let mut sc = match load(&a.scenario) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if a.bug.is_some() {
        sc.bug = a.bug.clone();
    }
    Toggle::apply(a.storage_lease, &mut sc);
    let seeds = match (a.seed, a.all_seeds) {
        (Some(s), _) => vec![s],
        (None, true) => sc.seeds.clone(),
        (None, false) => vec![sc.seeds[0]],
    };
    let mut worst = 0;
    for seed in seeds {
        let bug = sc
            .bug
            .as_ref()
            .map(|b| format!(" --bug {b}"))
            .unwrap_or_default();
        let command = format!(
            "t3fs sim run {} --seed {seed}{bug}{}",
            a.scenario,
            Toggle::flag(a.storage_lease)
        );
        println!("{} (seed {seed}): {}", sc.name, sc.about);
        let o = match run::run(&sc, seed, a.log) {
            Ok(o) => o,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        };
        print_outcome(&o, &command);
        if !a.no_report {
            match t3fs_crosscheck::provenance::write_sim(&o, &sc, "sim run", &command, &a.out) {
                Ok(dir) => println!("run directory: {}", dir.display()),
                Err(e) => eprintln!("warning: run directory not written: {e}"),
            }
        }
        if o.exit != 0 && worst == 0 {
            worst = o.exit;
        }
    }
    ExitCode::from(worst as u8)
}

/// What a swarm saw, by outcome: a seed is PASS, FAIL (exit 127..129) or UNKNOWN (exit 130);
/// EXPECTED verdicts are counted by reason across passing seeds.
#[derive(Default)]
struct Tally {
    pass: u64,
    fail: u64,
    unknown: u64,
    expected: std::collections::BTreeMap<String, u64>,
    leased: u64,
    hardware: u64,
}

impl Tally {
    fn add(&mut self, o: &Outcome, sc: &t3fs_scenario::Scenario) {
        self.leased += u64::from(sc.cluster.storage_lease);
        self.hardware += u64::from(sc.hardware.is_some());
        match o.exit {
            0 => self.pass += 1,
            run::EXIT_UNDECIDED => self.unknown += 1,
            _ => self.fail += 1,
        }
        for (_, v) in &o.verdicts {
            if let t3fs_sim::check::Verdict::Expected(d) = v {
                *self.expected.entry(expected_reason(d)).or_default() += 1;
            }
        }
    }

    fn line(&self) -> String {
        let expected = if self.expected.is_empty() {
            "0".to_string()
        } else {
            self.expected
                .iter()
                .map(|(r, n)| format!("{n} {r}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "{} PASS · {} FAIL · {} UNKNOWN · EXPECTED verdicts: {expected} · {} seeds with the storage lease · {} on modelled hardware",
            self.pass, self.fail, self.unknown, self.leased, self.hardware
        )
    }
}

/// An EXPECTED verdict's reason: its text up to the first `:` or ` (`.
fn expected_reason(detail: &str) -> String {
    let end = [detail.find(':'), detail.find(" (")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(detail.len());
    detail[..end].to_string()
}

fn swarm_cmd(a: SwarmArgs) -> ExitCode {
    let pb = ProgressBar::new(a.seeds);
    pb.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} seeds · {msg} · {elapsed} (eta {eta})")
            .expect("template"),
    );
    let mut tally = Tally::default();
    let mut worst = 0;
    let started = std::time::Instant::now();
    let mut events = 0u64;
    let mut sim_ns = 0u64;
    let flags = format!(
        "{}{}",
        a.bug
            .as_ref()
            .map(|b| format!(" --bug {b}"))
            .unwrap_or_default(),
        Toggle::flag(a.storage_lease)
    );
    for seed in a.from..a.from + a.seeds {
        let mut sc = t3fs_sim::swarm::scenario(seed, a.bug.as_deref());
        Toggle::apply(a.storage_lease, &mut sc);
        let o = match run::run(&sc, seed, false) {
            Ok(o) => o,
            Err(e) => {
                pb.finish_and_clear();
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        };
        events += o.events;
        sim_ns += o.sim_ns;
        tally.add(&o, &sc);
        pb.inc(1);
        pb.set_message(format!("{} failed, {} unknown", tally.fail, tally.unknown));
        // Every excused stale read is shown with its target, versions and window.
        for (name, v) in &o.verdicts {
            if let t3fs_sim::check::Verdict::Expected(d) = v {
                if d.starts_with("3FS Appendix B") {
                    let first = d.lines().next().unwrap_or("");
                    pb.suspend(|| println!("seed {seed}: {name} EXPECTED: {first}"));
                }
            }
        }
        if !o.passed() {
            if worst == 0 {
                worst = o.exit;
            }
            let label = if o.exit == run::EXIT_UNDECIDED {
                "UNKNOWN"
            } else {
                "FAIL"
            };
            pb.suspend(|| {
                println!("seed {seed}: {label} (exit {}): {}", o.exit, o.reason);
                println!("  reproduce: t3fs sim replay --seed {seed}{flags}");
            });
            if let Some(dir) = &a.save {
                save_seed(&pb, dir, &sc, seed, &o);
            }
            if !a.keep_going {
                break;
            }
        }
    }
    pb.finish_and_clear();
    let wall = started.elapsed().as_secs_f64();
    println!(
        "swarm: {} seeds from {}: {} · {events} events · {:.0} simulated s in {wall:.1} s wall ({:.0}x real time)",
        a.seeds,
        a.from,
        tally.line(),
        sim_ns as f64 / 1e9,
        sim_ns as f64 / 1e9 / wall.max(1e-9)
    );
    if worst == 0 {
        println!("PASS");
    }
    ExitCode::from(worst as u8)
}

/// Saves a failing swarm seed as a regression scenario file in `dir`.
fn save_seed(pb: &ProgressBar, dir: &std::path::Path, sc: &Scenario, seed: u64, o: &Outcome) {
    let _ = std::fs::create_dir_all(dir);
    let path = dir.join(format!("swarm_{seed}.toml"));
    let mut saved = sc.clone();
    saved.name = format!("swarm_{seed}");
    saved.about = format!(
        "Regression: swarm seed {seed} failed ({})",
        o.reason.lines().next().unwrap_or("")
    );
    saved.seeds = vec![seed];
    match std::fs::write(&path, t3fs_scenario::write::to_toml(&saved)) {
        Ok(()) => pb.suspend(|| {
            println!(
                "  saved: {} (t3fs sim run {})",
                path.display(),
                path.display()
            )
        }),
        Err(e) => pb.suspend(|| eprintln!("  not saved: {e}")),
    }
}

fn replay_cmd(a: ReplayArgs) -> ExitCode {
    let mut sc = t3fs_sim::swarm::scenario(a.seed, a.bug.as_deref());
    Toggle::apply(a.storage_lease, &mut sc);
    println!("{}: {}", sc.name, sc.about);
    print!("{}", t3fs_scenario::write::to_toml(&sc));
    let bug = a
        .bug
        .as_ref()
        .map(|b| format!(" --bug {b}"))
        .unwrap_or_default();
    let command = format!(
        "t3fs sim replay --seed {}{bug}{}",
        a.seed,
        Toggle::flag(a.storage_lease)
    );
    let o = match run::run(&sc, a.seed, !a.quiet) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    print_outcome(&o, &command);
    match t3fs_crosscheck::provenance::write_sim(&o, &sc, "sim replay", &command, &a.out) {
        Ok(dir) => println!("run directory: {}", dir.display()),
        Err(e) => eprintln!("warning: run directory not written: {e}"),
    }
    ExitCode::from(o.exit as u8)
}

/// `t3fs demo`: the embedded head-crash scenario, verdicts, run directory and report.
pub fn demo(out: PathBuf) -> ExitCode {
    let text = include_str!("../scenarios/catalog/head_crash_mid_write.toml");
    let sc = t3fs_scenario::parse("embedded:head_crash_mid_write.toml", text)
        .expect("the embedded demo scenario is valid");
    let seed = sc.seeds[0];
    println!("t3fs demo: {} — {}", sc.name, sc.about);
    println!(
        "cluster: {} mgmtd, {} storage nodes x {} targets, {} chains of {}, {} clients; seed {seed}",
        sc.cluster.mgmtd, sc.cluster.storage_nodes, sc.cluster.targets_per_node, sc.cluster.chains, sc.cluster.replicas, sc.cluster.clients
    );
    let o = match run::run(&sc, seed, false) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(w) = &o.world {
        println!("timeline:");
        for n in w.sim.notes().iter().filter(|n| n.kind != "verdict") {
            println!(
                "  {:>9.3}s  {:<6} {:<10} {}",
                n.at as f64 / 1e9,
                n.kind,
                n.node,
                n.what
            );
        }
    }
    print_outcome(
        &o,
        &format!("t3fs sim run head_crash_mid_write --seed {seed}"),
    );
    match t3fs_crosscheck::provenance::write_sim(&o, &sc, "demo", "t3fs demo", &out) {
        Ok(dir) => {
            println!("run directory: {}", dir.display());
            println!(
                "report: {} and {}",
                dir.join("report.md").display(),
                dir.join("report.html").display()
            );
        }
        Err(e) => eprintln!("warning: report not written: {e}"),
    }
    ExitCode::from(o.exit as u8)
}
