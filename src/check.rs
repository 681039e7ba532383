//! `t3fs check <model>`: exhaustive model checks with a verdict, a readable counterexample on
//! failure (exit 1), and the exact command that reproduces it.

use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use t3fs_core::bugs::{MgmtdBug, PlantedBug};
use t3fs_core::storage::ReadMode;
use t3fs_sim::model::{craq, run};

#[derive(Subcommand, Debug)]
pub enum CheckCommand {
    /// CRAQ chain replication: one chain, clients writing and reading one chunk, fail-stops.
    Craq(CraqArgs),
    /// mgmtd driving the chain: crash detection by heartbeat deadline, chain update (§2.6.1),
    /// restart, resync (§3.6) and promotion, under client writes and reads.
    Mgmtd(MgmtdArgs),
}

#[derive(Args, Debug)]
pub struct MgmtdArgs {
    /// Replicas in the chain.
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=4))]
    replicas: Option<u32>,
    /// Clients.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=2))]
    clients: Option<u32>,
    /// Writes per client (each followed by --reads reads).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=3))]
    writes: Option<u32>,
    /// Storage nodes that may crash.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=2))]
    failures: Option<u32>,
    /// Crashed nodes that may restart from their disk.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=2))]
    recoveries: Option<u32>,
    /// Check only this read mode (default: both, each with its own consistency property).
    #[arg(long, value_enum)]
    read_mode: Option<ReadModeArg>,
    /// Plant a broken mgmtd or storage variant (see --list-bugs); the check must then FAIL.
    #[arg(long, value_name = "NAME")]
    bug: Option<String>,
    /// List the planted bugs and exit.
    #[arg(long)]
    list_bugs: bool,
    /// Checker threads (default: available cores). With one, state counts are exact; with
    /// more they vary by a fraction of a percent between runs.
    #[arg(long)]
    threads: Option<usize>,
    /// Depth-first search: memory holds fingerprints, not frontier states, so larger models
    /// fit (counterexamples may be long).
    #[arg(long)]
    dfs: bool,
    /// mgmtd's KV commits complete in a later step, with heartbeats and deliveries in between.
    #[arg(long)]
    async_kv: bool,
    /// The storage-side lease: heartbeat replies grant it, nodes serve only under it, and a
    /// lapse lets mgmtd suspect a live node (a false suspicion the lease must make safe).
    #[arg(long)]
    lease: bool,
    /// Lease lapses in all (with --lease).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=2))]
    lease_lapses: u32,
    /// Reads after each write.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=2))]
    reads: u32,
    /// Of the clients, this many only read, once each, starting at any moment (they write
    /// nothing).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=2))]
    readers: u32,
    /// Client retries per chunk I/O.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=2))]
    client_retries: u32,
}

/// The model options of a shape beyond its counts: asynchronous KV commits, lease lapses
/// (`None`: no storage lease) and where they strike, and the clients' scripts.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
struct MgmtdOptions {
    async_kv: bool,
    lease_lapses: Option<u32>,
    reads: u32,
    readers: u32,
    client_retries: u32,
}

impl MgmtdOptions {
    /// The standard set's: synchronous KV, no lease, a read after each write, no readers.
    const PLAIN: Self = Self {
        async_kv: false,
        lease_lapses: None,
        reads: 1,
        readers: 0,
        client_retries: 1,
    };

    fn of_args(a: &MgmtdArgs) -> Self {
        Self {
            async_kv: a.async_kv,
            lease_lapses: a.lease.then_some(a.lease_lapses),
            reads: a.reads,
            readers: a.readers,
            client_retries: a.client_retries,
        }
    }

    /// The flags that select these options (empty for `PLAIN`).
    fn flags(self) -> String {
        let mut flags = String::new();
        if self.reads != 1 {
            flags.push_str(&format!(" --reads {}", self.reads));
        }
        if self.readers != 0 {
            flags.push_str(&format!(" --readers {}", self.readers));
        }
        if self.client_retries != 1 {
            flags.push_str(&format!(" --client-retries {}", self.client_retries));
        }
        if self.async_kv {
            flags.push_str(" --async-kv");
        }
        if let Some(n) = self.lease_lapses {
            flags.push_str(&format!(" --lease --lease-lapses {n}"));
        }
        flags
    }
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
        CheckCommand::Mgmtd(args) => run_mgmtd(args),
    }
}

/// The shape (replicas, clients, writes, failures, recoveries) that catches an mgmtd bug.
fn mgmtd_catching(bug: MgmtdBug) -> (u32, u32, u32, u32, u32) {
    match bug {
        // A write acknowledged while the crashed replica is away, then an early promotion.
        MgmtdBug::PromoteBeforeSyncDone => (2, 1, 1, 1, 1),
        // Two replicas must be back at once to start syncing together; no client needed.
        MgmtdBug::TwoSyncing => (3, 0, 0, 2, 2),
        // Needs a second mgmtd: covered by handler tests, not this model.
        MgmtdBug::UnfencedWrites => (2, 1, 1, 1, 1),
        // A crashed replica left SERVING: the restarted one serves without a resync.
        MgmtdBug::KeepFailedTarget => (2, 1, 1, 1, 1),
        // One client writes through the chain that excluded a live replica, while a reader on
        // the old routing reads at that replica: no crash, but asynchronous commits, the lease
        // and a lapse (`mgmtd_options`).
        MgmtdBug::LeaseDuringDemotion => (2, 2, 1, 0, 0),
    }
}

/// The model options that catch an mgmtd bug (beyond its shape).
fn mgmtd_options(bug: MgmtdBug) -> MgmtdOptions {
    match bug {
        // A writer with no read, and a reader whose one read goes to the tail (reads rotate by
        // I/O id), a replica that may lapse; no retries (16.8M states).
        MgmtdBug::LeaseDuringDemotion => MgmtdOptions {
            async_kv: true,
            lease_lapses: Some(1),
            reads: 0,
            readers: 1,
            client_retries: 0,
            ..MgmtdOptions::PLAIN
        },
        _ => MgmtdOptions::PLAIN,
    }
}

/// The simulator's catalog scenario where an mgmtd bug was first found, with real clocks.
fn mgmtd_catalog(bug: MgmtdBug) -> Option<&'static str> {
    match bug {
        MgmtdBug::LeaseDuringDemotion => Some("lease_race_pending_demotion"),
        _ => None,
    }
}

fn run_mgmtd(a: MgmtdArgs) -> ExitCode {
    if a.list_bugs {
        for bug in MgmtdBug::ALL {
            println!("{:<28} {}", bug.name(), bug.about());
            if bug == MgmtdBug::UnfencedWrites {
                println!(
                    "{:<28} needs two mgmtds and a deposed primary's commit: `t3fs check mgmtd --bug {}` runs the simulator's swarm",
                    "",
                    bug.name()
                );
            } else {
                let (n, c, w, f, r) = mgmtd_catching(bug);
                println!(
                    "{:<28} caught by: t3fs check mgmtd --replicas {n} --clients {c} --writes {w} --failures {f} --recoveries {r}{} --bug {}",
                    "",
                    mgmtd_options(bug).flags(),
                    bug.name()
                );
                if let Some(scenario) = mgmtd_catalog(bug) {
                    println!(
                        "{:<28} first found by the simulator (real clocks): t3fs sim run {scenario} --bug {}",
                        "",
                        bug.name()
                    );
                }
            }
        }
        return ExitCode::SUCCESS;
    }
    let bug = match a.bug.as_deref() {
        None => None,
        Some(name) => match MgmtdBug::from_name(name) {
            Some(b) => Some(b),
            None => {
                eprintln!("error: unknown bug '{name}'; `t3fs check mgmtd --list-bugs` lists them");
                return ExitCode::from(2);
            }
        },
    };
    let explicit = (a.clients, a.writes, a.failures, a.recoveries);
    // A planted bug alone selects the shape and the options that catch it.
    let options = match (explicit, bug) {
        ((None, None, None, None), Some(bug)) => mgmtd_options(bug),
        _ => MgmtdOptions::of_args(&a),
    };
    let make = |(replicas, clients, writes, failures, recoveries): (u32, u32, u32, u32, u32),
                read_mode| craq::CraqConfig {
        replicas: replicas as usize,
        clients: clients as usize,
        writes: writes as usize,
        failures: failures as usize,
        recoveries: recoveries as usize,
        client_retries: options.client_retries,
        forward_retries: 0,
        read_mode,
        strict_reads: false,
        bug: None,
        mgmtd: true,
        mgmtd_bug: bug,
        reads: options.reads as usize,
        async_kv: options.async_kv,
        storage_lease: options.lease_lapses.is_some(),
        lease_lapses: options.lease_lapses.unwrap_or(0) as usize,
        readers: options.readers as usize,
    };
    let shapes = match (explicit, bug) {
        ((None, None, None, None), Some(MgmtdBug::UnfencedWrites)) => {
            return via_simulator(MgmtdBug::UnfencedWrites.name());
        }
        ((None, None, None, None), Some(bug)) => vec![mgmtd_catching(bug)],
        ((None, None, None, None), None) => MGMTD_STANDARD.to_vec(),
        ((c, w, f, r), _) => {
            let f = f.unwrap_or(1);
            let n = a.replicas.unwrap_or(3);
            vec![(n, c.unwrap_or(1), w.unwrap_or(1), f, r.unwrap_or(f))]
        }
    };
    // A planted mgmtd bug is about the chain, not reads: its catching model runs in the
    // default read mode unless one is asked for.
    let modes = match (bug, a.read_mode) {
        (Some(_), None) => vec![ReadMode::RejectDirty],
        (_, arg) => read_modes(arg),
    };
    let configs: Vec<craq::CraqConfig> = modes
        .iter()
        .flat_map(|&m| shapes.iter().map(move |&s| make(s, m)))
        .collect();
    if configs.iter().any(|c| c.readers > c.clients) {
        eprintln!("error: --readers exceeds --clients");
        return ExitCode::from(2);
    }
    let mut ok = true;
    for cfg in configs {
        let mut cmd = format!(
            "cargo run --release -- check mgmtd --replicas {} --clients {} --writes {} --failures {} --recoveries {} {}{}",
            cfg.replicas,
            cfg.clients,
            cfg.writes,
            cfg.failures,
            cfg.recoveries,
            read_mode_flag(cfg.read_mode),
            options.flags()
        );
        if let Some(bug) = bug {
            cmd.push_str(&format!(" --bug {bug}"));
        }
        let title = format!(
            "check mgmtd: chain of {} replicas driven by mgmtd, {}, up to {} crash, {} restart, read mode {:?} ({}){}{}{}",
            cfg.replicas,
            match (cfg.reads, cfg.readers) {
                (1, 0) => format!("{} clients x {} writes (+ reads)", cfg.clients, cfg.writes),
                (r, 0) => format!(
                    "{} clients x {} writes ({r} reads after each)",
                    cfg.clients, cfg.writes
                ),
                (r, k) => format!(
                    "{} clients x {} writes ({r} reads after each) and {k} reader(s) reading once",
                    cfg.clients - k,
                    cfg.writes
                ),
            },
            cfg.failures,
            cfg.recoveries,
            cfg.read_mode,
            consistency(&cfg),
            if cfg.async_kv { ", asynchronous KV commits" } else { "" },
            if cfg.storage_lease {
                format!(", storage lease with {} lapse(s)", cfg.lease_lapses)
            } else {
                String::new()
            },
            bug.map(|b| format!(", planted bug {b}")).unwrap_or_default()
        );
        if a.dfs {
            cmd.push_str(" --dfs");
        }
        let search = if a.dfs {
            run::Search::Dfs
        } else {
            run::Search::Bfs
        };
        ok &= check_model(&title, &cmd, cfg, a.threads, search);
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The standard `t3fs check mgmtd` set (replicas, clients, writes, crashes, restarts): a chain of
/// 3 through a crash and recovery with no traffic (detection, re-ordering, restart rule, resync,
/// promotion); a chain of 3 under a client's write and read through a crash without restart; a
/// chain of 2 under a client through a crash and recovery; each in both read modes unless one
/// is asked for. A chain of 3 under a client through crash and recovery (`--replicas 3
/// --clients 1 --failures 1 --recoveries 1`) is 359.8M states, about 6 minutes and 20 GB on 2
/// cores: too big for the standard set.
pub const MGMTD_STANDARD: [(u32, u32, u32, u32, u32); 3] =
    [(3, 0, 0, 1, 1), (3, 1, 1, 1, 0), (2, 1, 1, 1, 1)];

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
    let make =
        |(replicas, clients, writes, failures): (u32, u32, u32, u32), read_mode| craq::CraqConfig {
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
        };
    // Without shape flags, check the standard set (CRAQ_STANDARD) in each read mode. A planted
    // bug alone selects the configuration known to catch it (see --list-bugs), in its read mode
    // unless one is asked for.
    let configs: Vec<craq::CraqConfig> = match (
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
            .flat_map(|m| CRAQ_STANDARD.iter().map(move |&s| make(s, m)))
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
                .map(|m| make(shape, m))
                .collect()
        }
    };
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
