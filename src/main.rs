//! The t3fs command line: argument parsing and dispatch only. Every behaviour lives in the
//! workspace crates (t3fs-core machines, t3fs-sim models and simulator, …).

mod allocator;
mod bench;
mod bench_ai;
mod bench_checkpoint;
mod bench_kvcache;
mod bench_meta;
mod chains;
mod check;
mod cluster;
mod graysort;
mod report;
mod sim;

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
    /// GraySort's records (gensort's ASCII format) and valsort's checks.
    #[command(subcommand)]
    Graysort(graysort::GraysortCommand),
    /// A real cluster on this host: up, status, kill, restart, down, io.
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
    /// Mount a cluster as a FUSE file system (needs /dev/fuse and fusermount3, Debian fuse3);
    /// serves until unmounted with `fusermount3 -u MOUNTPOINT`.
    Mount {
        /// Where to mount (an existing, empty directory).
        mountpoint: PathBuf,
        /// The cluster directory (`cluster up --dir`).
        #[arg(long)]
        cluster: PathBuf,
        /// Let other users use the mount (root, or `user_allow_other` in /etc/fuse.conf).
        #[arg(long)]
        allow_other: bool,
        /// How long the kernel caches attributes and directory entries, milliseconds.
        #[arg(long, default_value_t = 1000)]
        attr_ttl_ms: u64,
        /// Bypass the page cache: every read and write goes to the cluster.
        #[arg(long)]
        direct_io: bool,
        /// The kernel's writeback cache: faster small writes, but a write returns before it is
        /// replicated (durable at fsync or close).
        #[arg(long)]
        writeback_cache: bool,
        /// Chunk writes in flight per open file (write-behind: a write returns once accepted,
        /// fsync and close return once all landed and report the first failure); 0 makes each
        /// write return only after its chain committed it.
        #[arg(long, default_value_t = 16)]
        write_window: usize,
        /// The client's own readahead per open file for sequential readers, KiB (0: off).
        #[arg(long, default_value_t = 4096)]
        readahead_kib: u64,
        /// While the cluster cannot serve a call (a chain with no replica up, no meta server):
        /// `eio` fails it with EIO once the client's retries are spent (seconds), `block` waits
        /// until the cluster is back, like an NFS hard mount.
        #[arg(long, default_value = "eio", value_parser = ["eio", "block"])]
        on_outage: String,
    },
    /// Run one real service process (what `cluster up` starts for each node).
    Serve {
        /// mgmtd, storage, meta or kv.
        #[arg(value_parser = ["mgmtd", "storage", "meta", "kv"])]
        role: String,
        /// The node's config file (TOML; keys documented in t3fs_services::config).
        #[arg(long)]
        config: PathBuf,
    },
    /// Chain tables: generate one and say how it spreads a failed node's recovery reads.
    #[command(subcommand)]
    Chains(chains::ChainsCommand),
    /// Serve a software RDMA fabric on a Unix socket (what `cluster up --transport soft-rdma`
    /// starts): every process's device on it reaches the others' registered memory through it.
    Fabric {
        /// The socket to serve on (replaced if stale).
        #[arg(long)]
        socket: PathBuf,
    },
    /// The simulator's resources against a real loopback cluster on this host: measure this
    /// host into a `this-host` hardware profile, run 1 MiB sequential write and read and 4 KiB
    /// random read on `cluster up` and in the simulator, and compare throughput (±10%) and p99
    /// (±25%); exit 1 when a figure is outside its tolerance.
    Calibrate {
        /// Seconds of each real job.
        #[arg(long, default_value_t = 6)]
        seconds: u64,
        /// Simulated seconds of each simulated job.
        #[arg(long, default_value_t = 3)]
        sim_seconds: u64,
        /// Rounds: each measures this host, then runs each job once, real and simulated; the
        /// median of the rounds' paired errors is judged, the ranges printed.
        #[arg(long, default_value_t = 3)]
        repeats: u32,
        /// Where the profiles, every run of each job and their comparisons go.
        #[arg(long, default_value = "runs/calibrate")]
        out: PathBuf,
        /// Also the concurrency variants: each job with 8 streams in flight (8 clients, each
        /// one I/O at a time), held to the same tolerances.
        #[arg(long)]
        concurrency: bool,
        /// Also the AI workloads: `bench checkpoint` (save and load, 4 ranks) and `bench
        /// kvcache` (reads, 32 in flight) on the native client, each beside a simulated twin of
        /// its shape, held to the same tolerances.
        #[arg(long)]
        workloads: bool,
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
    allocator::tune();
    let cli = Cli::parse();
    match cli.command {
        Command::Check(cmd) => check::run(cmd),
        Command::Sim(cmd) => sim::run(cmd),
        Command::Demo { out, real: false } => sim::demo(out),
        Command::Demo { out, real: true } => t3fs_crosscheck::real_run::demo(out),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Graysort(cmd) => graysort::run(cmd),
        Command::Cluster(cmd) => cluster::run(cmd),
        Command::Serve { role, config } => cluster::serve(&role, &config),
        Command::Chains(cmd) => chains::run(cmd),
        Command::Calibrate {
            seconds,
            sim_seconds,
            repeats,
            out,
            concurrency,
            workloads,
        } => t3fs_crosscheck::calibrate::run(t3fs_crosscheck::calibrate::Args {
            seconds,
            sim_seconds,
            repeats,
            out,
            concurrency,
            workloads,
        }),
        Command::Fabric { socket } => {
            match t3fs_services::rdma::soft::remote::serve_fabric(&socket) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: fabric on {}: {e}", socket.display());
                    ExitCode::from(2)
                }
            }
        }
        Command::Mount {
            mountpoint,
            cluster,
            allow_other,
            attr_ttl_ms,
            direct_io,
            writeback_cache,
            write_window,
            readahead_kib,
            on_outage,
        } => {
            let opts = t3fs_client::fuse::MountOptions {
                allow_other,
                attr_ttl: std::time::Duration::from_millis(attr_ttl_ms),
                direct_io,
                writeback_cache,
                write_window,
                readahead: readahead_kib << 10,
                ..Default::default()
            };
            let outage = match on_outage.as_str() {
                "block" => t3fs_client::client::Outage::Block,
                _ => t3fs_client::client::Outage::Fail,
            };
            mount(&mountpoint, &cluster, outage, &opts)
        }
        Command::Report { cmd, dir } => report::run(cmd, dir),
    }
}

/// `t3fs mount`.
fn mount(
    mountpoint: &std::path::Path,
    dir: &std::path::Path,
    outage: t3fs_client::client::Outage,
    opts: &t3fs_client::fuse::MountOptions,
) -> ExitCode {
    let r = t3fs_real::cluster::client_options(dir).and_then(|mut c| {
        c.outage = outage;
        t3fs_client::fuse::mount(c, mountpoint, opts)
    });
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: t3fs mount: {e}");
            ExitCode::from(2)
        }
    }
}
