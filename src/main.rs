//! The t3fs command line: argument parsing and dispatch only. Every behaviour lives in the
//! workspace crates (t3fs-core machines, t3fs-sim models and simulator, …).

mod bench;
mod bench_meta;
mod check;
mod cluster;
mod cluster_agree;
mod cluster_ns;
mod cluster_run;
mod cluster_soak;
mod real_run;
mod report;
mod sim;

// Model checking clones and frees millions of small states; glibc malloc took over a third of
// the checker's time in profiles, mimalloc much less.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// t3fs: a simulation-first research testbed for 3FS-style distributed storage.
#[derive(Parser, Debug)]
#[command(name = "t3fs", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Exhaustively model-check a protocol on a tiny configuration (stateright).
    #[command(subcommand)]
    Check(check::CheckCommand),
    /// Deterministic simulation of a whole cluster: scenarios, swarms, replays.
    #[command(subcommand)]
    Sim(sim::SimCommand),
    /// The main job: a simulated cluster through a head crash mid-write, failover, resync and
    /// promotion, ending in verdicts and a report.
    Demo {
        /// Where the run directory goes.
        #[arg(long, default_value = "runs")]
        out: PathBuf,
        /// The same story on real processes: a 3-node, 3-replica cluster on loopback, a verified
        /// mixed load, the head's storage process killed with SIGKILL and restarted.
        #[arg(long)]
        real: bool,
    },
    /// Wall-clock benchmarks of the simulator and the checkers (figures, not tests).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// A real cluster on this host: up, status, kill, restart, down, io.
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
    /// Run one real service process (what `cluster up` starts for each node).
    Serve {
        /// mgmtd, storage, meta or kv.
        #[arg(value_parser = ["mgmtd", "storage", "meta", "kv"])]
        role: String,
        /// The node's config file (TOML; keys documented in t3fs_real::config).
        #[arg(long)]
        config: PathBuf,
    },
    /// Re-render the report of a run directory, or compare two runs side by side.
    #[command(args_conflicts_with_subcommands = true)]
    Report {
        #[command(subcommand)]
        cmd: Option<report::ReportCommand>,
        /// The run directory to re-render.
        dir: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(cmd) => check::run(cmd),
        Command::Sim(cmd) => sim::run(cmd),
        Command::Demo { out, real: false } => sim::demo(out),
        Command::Demo { out, real: true } => real_run::demo(out),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Cluster(cmd) => cluster::run(cmd),
        Command::Serve { role, config } => cluster::serve(&role, &config),
        Command::Report { cmd, dir } => report::run(cmd, dir),
    }
}
