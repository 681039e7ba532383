//! `t3fs check <model>`: exhaustive model checks with a verdict, a readable counterexample on
//! failure (exit 1), and the exact command that reproduces it.

mod mgmtd;

use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use t3fs_core::bugs::PlantedBug;
use t3fs_core::storage::ReadMode;
use t3fs_sim::model::{craq, run};

use mgmtd::MgmtdArgs;

#[derive(Subcommand, Debug)]
pub enum CheckCommand {
    /// CRAQ chain replication: one chain, clients writing and reading one chunk, fail-stops.
    Craq(CraqArgs),
    /// mgmtd driving the chain: crash detection by heartbeat deadline, chain update (§2.6.1),
    /// restart, resync (§3.6) and promotion, under client writes and reads.
    Mgmtd(MgmtdArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum ReadModeArg {
    /// Legacy engine: a dirty chunk answers NotCommitted; reads are checked linearizable.
    RejectDirty,
    /// New engine (3FS code default): reads return the committed version even while dirty;
    /// reads are checked regular (§3.3: a read may see a commit that a later read at another
    /// replica does not, so not linearizable).
    Committed,
}

/// The read modes a run checks: the one asked for, or both.
fn read_modes(arg: Option<ReadModeArg>) -> Vec<ReadMode> {
    match arg {
        Some(ReadModeArg::RejectDirty) => vec![ReadMode::RejectDirty],
        Some(ReadModeArg::Committed) => vec![ReadMode::Committed],
        None => vec![ReadMode::RejectDirty, ReadMode::Committed],
    }
}

/// The flag that selects `mode`.
fn read_mode_flag(mode: ReadMode) -> &'static str {
    match mode {
        ReadMode::RejectDirty => "--read-mode reject-dirty",
        ReadMode::Committed => "--read-mode committed",
    }
}

/// The consistency property reads are checked against.
fn consistency(cfg: &craq::CraqConfig) -> &'static str {
    match cfg.read_mode {
        ReadMode::Committed if !cfg.strict_reads => "regular reads",
        _ => "linearizable reads",
    }
}

#[derive(Args, Debug)]
pub struct CraqArgs {
    /// Replicas in the chain.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=5))]
    replicas: Option<u32>,
    /// Clients.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=3))]
    clients: Option<u32>,
    /// Writes per client (each followed by a read).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=4))]
    writes: Option<u32>,
    /// Reads after each write.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=3))]
    reads: u32,
    /// Storage nodes that may fail-stop (each failure re-orders the chain).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=2))]
    failures: Option<u32>,
    /// Client retries per chunk I/O.
    #[arg(long, default_value_t = 1)]
    client_retries: u32,
    /// Timeout-driven forwarding retries per update (0: re-send only on routing changes).
    #[arg(long, default_value_t = 0)]
    forward_retries: u32,
    /// Check only this read mode (default: both, each with its own consistency property).
    #[arg(long, value_enum)]
    read_mode: Option<ReadModeArg>,
    /// Check committed reads for linearizability instead of regularity: it fails (a new-old
    /// inversion, 3FS §3.3), e.g. with --clients 2 --writes 1 --reads 2 --failures 0.
    #[arg(long)]
    linearizable: bool,
    /// Plant a broken protocol variant (see --list-bugs); the check must then FAIL.
    #[arg(long, value_name = "NAME")]
    bug: Option<String>,
    /// List the planted bugs and exit.
    #[arg(long)]
    list_bugs: bool,
    /// Serve stateright's explorer on this loopback address (e.g. 127.0.0.1:3000) instead of
    /// checking.
    #[arg(long, value_name = "ADDR")]
    explore: Option<String>,
    /// Checker threads (default: available cores). With one, state counts are exact; with
    /// more they vary by a fraction of a percent between runs.
    #[arg(long)]
    threads: Option<usize>,
    /// Depth-first search: memory holds fingerprints, not frontier states, so larger models
    /// fit (counterexamples may be long).
    #[arg(long)]
    dfs: bool,
}

pub fn run(cmd: CheckCommand) -> ExitCode {
    match cmd {
        CheckCommand::Craq(args) => run_craq(args),
        CheckCommand::Mgmtd(args) => mgmtd::run_mgmtd(args),
    }
}

/// The standard `t3fs check craq` set (replicas, clients, writes per client, fail-stops), run in
/// each read mode: two clients racing two writes each on one chunk (concurrency); one client's
/// two writes and reads through a fail-stop anywhere in the chain (failover, with a retried
/// write); and both at once, two clients x two writes through a fail-stop, the shape that
/// matters (it contains every run of the other two, and of two clients x one write). The first
/// two are quick and speak first; the third is some 70 million states in reject-dirty mode.
pub const CRAQ_STANDARD: [(u32, u32, u32, u32); 3] = [(3, 2, 2, 0), (3, 1, 2, 1), (3, 2, 2, 1)];

fn reproduce_command(a: &CraqArgs, cfg: &craq::CraqConfig) -> String {
    let mut cmd = format!(
        "cargo run --release -- check craq --replicas {} --clients {} --writes {} --failures {} --client-retries {} --forward-retries {}",
        cfg.replicas, cfg.clients, cfg.writes, cfg.failures, a.client_retries, a.forward_retries
    );
    if cfg.reads != 1 {
        cmd.push_str(&format!(" --reads {}", cfg.reads));
    }
    cmd.push(' ');
    cmd.push_str(read_mode_flag(cfg.read_mode));
    if cfg.strict_reads {
        cmd.push_str(" --linearizable");
    }
    if let Some(bug) = &a.bug {
        cmd.push_str(&format!(" --bug {bug}"));
    }
    cmd
}

/// A planted bug the small model cannot reach (it needs stale routing racing a forward, or
/// histories longer than exhaustive search affords): the simulator's swarm hunts it instead and
/// the check fails with the simulator's counterexample and its reproduce command.
fn via_simulator(bug: &str) -> ExitCode {
    println!(
        "{bug}: not reachable by the exhaustive model's small configurations; running the \
         simulator's swarm with the bug planted (seeds 1..=500)"
    );
    for seed in 1..=500 {
        let sc = t3fs_sim::swarm::scenario(seed, Some(bug));
        let o = match t3fs_sim::run::run(&sc, seed, false) {
            Ok(o) => o,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        };
        // A seed that fails without the bug too says nothing about the bug.
        let clean = t3fs_sim::swarm::scenario(seed, None);
        if o.passed() || !t3fs_sim::run::run(&clean, seed, false).is_ok_and(|c| c.passed()) {
            continue;
        }
        println!(
            "caught by swarm seed {seed} ({} events, {:.1} simulated s):",
            o.events,
            o.sim_ns as f64 / 1e9
        );
        for (name, v) in o.verdicts.iter().filter(|(_, v)| v.failed()) {
            println!("  {name}: {}", v.label());
            for line in v.detail().lines() {
                println!("    {line}");
            }
        }
        println!("FAIL");
        println!("reproduce: cargo run --release -- sim replay --seed {seed} --bug {bug}");
        return ExitCode::FAILURE;
    }
    println!("not caught by 500 swarm seeds either");
    println!("PASS");
    ExitCode::SUCCESS
}

fn run_craq(a: CraqArgs) -> ExitCode {
    if a.list_bugs {
        list_craq_bugs();
        return ExitCode::SUCCESS;
    }
    let bug = match a.bug.as_deref().map(|n| (n, PlantedBug::from_name(n))) {
        None => None,
        Some((_, Some(bug))) => Some(bug),
        Some((name, None)) => {
            eprintln!("error: unknown bug '{name}'; `t3fs check craq --list-bugs` lists them");
            return ExitCode::from(2);
        }
    };
    let configs = craq_configs(&a, bug);
    if let Some(addr) = &a.explore {
        return explore(configs[configs.len() - 1].clone(), addr);
    }
    let no_shape =
        a.replicas.is_none() && a.clients.is_none() && a.writes.is_none() && a.failures.is_none();
    if let Some(bug) = bug.filter(|b| no_shape && craq::catching_flags(*b).is_none()) {
        return via_simulator(bug.name());
    }
    let mut ok = true;
    for cfg in configs {
        ok &= check_one(&a, cfg, bug);
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Prints every planted protocol bug with the command that catches it (or that the simulator's
/// swarm hunts it).
fn list_craq_bugs() {
    for bug in PlantedBug::ALL {
        println!("{:<28} {}", bug.name(), bug.about());
        match craq::catching_flags(bug) {
            Some(flags) => println!(
                "{:<28} caught by: t3fs check craq {flags} --bug {}",
                "",
                bug.name()
            ),
            None => println!(
                "{:<28} beyond this small model: `t3fs check craq --bug {}` runs the simulator's swarm",
                "",
                bug.name()
            ),
        }
    }
}

/// The configurations `a` asks for: the standard set, the one that catches `bug`, or the shape
/// given, each in the read modes asked for.
fn craq_configs(a: &CraqArgs, bug: Option<PlantedBug>) -> Vec<craq::CraqConfig> {
    // Without shape flags, check the standard set (CRAQ_STANDARD) in each read mode. A planted
    // bug alone selects the configuration known to catch it (see --list-bugs), in its read mode
    // unless one is asked for.
    match (
        a.replicas,
        a.clients,
        a.writes,
        a.failures,
        bug.and_then(craq::catching_config),
    ) {
        (None, None, None, None, Some(catching)) => {
            let modes = match a.read_mode {
                None => vec![catching.read_mode],
                arg => read_modes(arg),
            };
            modes
                .into_iter()
                .map(|read_mode| craq::CraqConfig {
                    client_retries: a.client_retries,
                    forward_retries: a.forward_retries,
                    read_mode,
                    strict_reads: a.linearizable,
                    ..catching.clone()
                })
                .collect()
        }
        (None, None, None, None, None) => read_modes(a.read_mode)
            .into_iter()
            .flat_map(|m| {
                CRAQ_STANDARD
                    .iter()
                    .map(move |&s| craq_config(a, s, m, bug))
            })
            .collect(),
        (r, c, w, f, _) => {
            let shape = (
                r.unwrap_or(3),
                c.unwrap_or(2),
                w.unwrap_or(1),
                f.unwrap_or(1),
            );
            read_modes(a.read_mode)
                .into_iter()
                .map(|m| craq_config(a, shape, m, bug))
                .collect()
        }
    }
}

/// The model configuration of one shape (replicas, clients, writes, failures) in `read_mode`,
/// with `a`'s retries and reads.
fn craq_config(
    a: &CraqArgs,
    (replicas, clients, writes, failures): (u32, u32, u32, u32),
    read_mode: ReadMode,
    bug: Option<PlantedBug>,
) -> craq::CraqConfig {
    craq::CraqConfig {
        replicas: replicas as usize,
        clients: clients as usize,
        writes: writes as usize,
        failures: failures as usize,
        client_retries: a.client_retries,
        forward_retries: a.forward_retries,
        read_mode,
        strict_reads: a.linearizable,
        bug,
        reads: a.reads as usize,
        ..craq::CraqConfig::default()
    }
}

fn explore(cfg: craq::CraqConfig, addr: &str) -> ExitCode {
    let model = craq::build(cfg);
    let addr: std::net::SocketAddr = match addr.parse() {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("error: --explore {addr}: {e}");
            return ExitCode::from(2);
        }
    };
    if !addr.ip().is_loopback() {
        eprintln!("error: --explore serves only on a loopback address (127.0.0.1 or [::1])");
        return ExitCode::from(2);
    }
    println!("explorer: http://{addr}/ (Ctrl-C to stop)");
    use stateright::Model;
    let _ = model.checker().serve(addr);
    ExitCode::SUCCESS
}

fn check_one(a: &CraqArgs, cfg: craq::CraqConfig, bug: Option<PlantedBug>) -> bool {
    let title = format!(
        "check craq: chain of {} replicas, {} clients x {} writes (+ reads), up to {} fail-stop, read mode {:?} ({}){}",
        cfg.replicas,
        cfg.clients,
        cfg.writes,
        cfg.failures,
        cfg.read_mode,
        consistency(&cfg),
        bug.map(|b| format!(", planted bug {b}")).unwrap_or_default()
    );
    let cmd = reproduce_command(a, &cfg);
    let search = if a.dfs {
        run::Search::Dfs
    } else {
        run::Search::Bfs
    };
    let cmd = if a.dfs { format!("{cmd} --dfs") } else { cmd };
    check_model(&title, &cmd, cfg, a.threads, search)
}

/// Checks one configuration with a spinner, prints the verdict, and on failure the command
/// that reproduces it.
fn check_model(
    title: &str,
    reproduce: &str,
    cfg: craq::CraqConfig,
    threads: Option<usize>,
    search: run::Search,
) -> bool {
    let model = craq::build(cfg);
    println!("{title}");
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed} {msg}").expect("valid template"),
    );
    let threads =
        threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let verdict = run::check_with(
        model,
        threads,
        search,
        |n| {
            bar.set_message(format!("{n} unique states"));
            bar.tick();
        },
        craq::describe_action,
        craq::describe_state,
    );
    bar.finish_and_clear();
    print!("{}", run::render(&verdict));
    if !verdict.passed() {
        println!("reproduce: {reproduce}");
    }
    verdict.passed()
}
