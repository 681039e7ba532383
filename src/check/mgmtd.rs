//! `t3fs check mgmtd`: the chain model with mgmtd driving it (crash detection, chain update,
//! restart, resync and promotion), its options and planted bugs, and the standard set it checks.
//!
//! Invariant: every configuration checked prints its title, its verdict and, on failure, the
//! command that reproduces it. Not here: the checking itself and the read modes (check.rs).

use std::process::ExitCode;

use clap::Args;
use t3fs_core::bugs::MgmtdBug;
use t3fs_core::storage::ReadMode;
use t3fs_sim::model::{craq, run};

use super::{check_model, consistency, read_mode_flag, read_modes, via_simulator, ReadModeArg};

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

/// `t3fs check mgmtd`: the planted bugs listed, or the configurations asked for (the standard
/// set, or the one that catches a planted bug) checked.
pub(super) fn run_mgmtd(a: MgmtdArgs) -> ExitCode {
    if a.list_bugs {
        list_bugs();
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
        .flat_map(|&m| shapes.iter().map(move |&s| config(s, m, options, bug)))
        .collect();
    if configs.iter().any(|c| c.readers > c.clients) {
        eprintln!("error: --readers exceeds --clients");
        return ExitCode::from(2);
    }
    check_all(&a, configs, options, bug)
}

/// Prints every planted mgmtd bug with the command that catches it (and where the simulator
/// first found it).
fn list_bugs() {
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
}

/// The model configuration of one shape (replicas, clients, writes, failures, recoveries) in
/// `read_mode`, with mgmtd driving the chain.
fn config(
    (replicas, clients, writes, failures, recoveries): (u32, u32, u32, u32, u32),
    read_mode: ReadMode,
    options: MgmtdOptions,
    bug: Option<MgmtdBug>,
) -> craq::CraqConfig {
    craq::CraqConfig {
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
    }
}

/// Checks every configuration in turn; success when every one passes.
fn check_all(
    a: &MgmtdArgs,
    configs: Vec<craq::CraqConfig>,
    options: MgmtdOptions,
    bug: Option<MgmtdBug>,
) -> ExitCode {
    let mut ok = true;
    for cfg in configs {
        let mut cmd = reproduce_command(&cfg, options, bug);
        let title = title(&cfg, bug);
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

/// The command that checks `cfg` again (without `--dfs`).
fn reproduce_command(
    cfg: &craq::CraqConfig,
    options: MgmtdOptions,
    bug: Option<MgmtdBug>,
) -> String {
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
    cmd
}

/// The line that names what checking `cfg` covers.
fn title(cfg: &craq::CraqConfig, bug: Option<MgmtdBug>) -> String {
    format!(
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
        consistency(cfg),
        if cfg.async_kv { ", asynchronous KV commits" } else { "" },
        if cfg.storage_lease {
            format!(", storage lease with {} lapse(s)", cfg.lease_lapses)
        } else {
            String::new()
        },
        bug.map(|b| format!(", planted bug {b}")).unwrap_or_default()
    )
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
