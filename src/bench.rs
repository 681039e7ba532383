//! `t3fs bench`: wall-clock benchmarks of the simulator and the linearizability checker
//! (simulation.md §6c). Figures are measured on this machine in this run and printed with the
//! goal they are compared against; nothing here is a test (timings are noisy by nature).

use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;
use indicatif::{ProgressBar, ProgressStyle};
use t3fs_sim::bench;

/// What to measure.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// The 10-host cluster under faults: simulated seconds per wall second, events per second,
    /// client operations per simulated second.
    Sim {
        /// Seeds to run (the first is 1). The client rate depends on where each seed's faults
        /// fall (one seed does 850 operations per simulated second, another 1,250), so the
        /// default of 20 keeps the standard error of its mean near 2%.
        #[arg(long, default_value_t = 20)]
        seeds: u64,
        /// Simulated seconds of workload per seed (the liveness phase comes on top).
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Bytes per write (every frame carries them through the codec and the checksums).
        #[arg(long, default_value_t = 4096)]
        write_size: u32,
    },
    /// The linearizability checker on synthetic histories: 10,000 operations by 10 clients on
    /// one register, and 1,000,000 operations over 1,000 chunks; valid and with one stale read.
    Checker {
        /// Scale both workloads down by this factor (for a quick look).
        #[arg(long, default_value_t = 1)]
        divide: usize,
    },
    /// A distributed checkpoint (torch.distributed.checkpoint's layout: a shard per rank,
    /// fsynced, the manifest last) saved by N ranks and loaded back by N ranks, checked byte
    /// for byte, through the native client, the FUSE mount or a local directory (`--on`).
    Checkpoint(crate::bench_checkpoint::CheckpointArgs),
    /// 3FS's KVCache: clients read KV blocks with a skewed popularity and high concurrency,
    /// write new ones, and a GC removes expired blocks in bursts; every read is checked.
    Kvcache(crate::bench_kvcache::KvcacheArgs),
    /// fio-style I/O load on a running cluster (`t3fs cluster up`) through the native client:
    /// bandwidth, IOPS and completion-latency percentiles, written as fio-vocabulary JSON and
    /// HdrHistogram interval logs.
    Io(IoArgs),
    /// Meta namespace operations per second by type, on the in-memory and embedded KV; with
    /// `--cluster`, mdtest's phases through a running cluster's meta service over TCP.
    Meta {
        /// Run mdtest's phases against this cluster directory (`t3fs cluster up`).
        #[arg(long)]
        cluster: Option<std::path::PathBuf>,
        /// mdtest -n: items per rank.
        #[arg(short = 'n', long, default_value_t = 1000)]
        items: u64,
        /// mdtest -u: a unique directory per rank.
        #[arg(short = 'u', long)]
        unique_dir: bool,
        /// mdtest -z: tree depth.
        #[arg(short = 'z', long, default_value_t = 0)]
        depth: u32,
        /// mdtest -b: tree branching.
        #[arg(short = 'b', long, default_value_t = 1)]
        branch: u32,
        /// Ranks (concurrent clients).
        #[arg(long, default_value_t = 4)]
        ranks: usize,
        /// Files to create, stat, rename and remove.
        #[arg(long, default_value_t = 20_000)]
        files: u64,
        /// Also measure against this etcd endpoint (needs a build with `--features etcd`;
        /// `bash scripts/etcd.sh start` runs one on http://127.0.0.1:23790).
        #[arg(long, value_name = "URL")]
        etcd: Option<String>,
    },
    /// Round-trip latency and one-way bandwidth of a transport between two endpoints in this
    /// process: TCP on loopback, or the RDMA transport on the software provider (`soft-rdma`:
    /// in-process copies, not a network) or on the first RDMA device (`rdma`, needs a build
    /// with `--features rdma` and a device under /sys/class/infiniband), each beside its bound
    /// measured in the same run (a plain socket; the bare RDMA channel).
    Transport {
        /// tcp, soft-rdma or rdma.
        #[arg(long, default_value = "tcp", value_parser = ["tcp", "soft-rdma", "rdma"])]
        transport: String,
        /// Bytes per round-trip message.
        #[arg(long, default_value_t = 4096)]
        size: usize,
        /// Round trips.
        #[arg(long, default_value_t = 10_000)]
        round_trips: u32,
        /// MiB moved one way in 1 MiB pieces.
        #[arg(long, default_value_t = 1024)]
        mib: u32,
    },
}

/// `t3fs bench io` knobs (fio's names and meanings).
#[derive(clap::Args, Debug)]
pub struct IoArgs {
    /// The cluster directory of `t3fs cluster up`.
    #[arg(long, default_value = "t3fs-cluster")]
    cluster: std::path::PathBuf,
    /// read, write, randread, randwrite or randrw.
    #[arg(long, default_value = "write")]
    rw: String,
    /// Percentage of reads in randrw.
    #[arg(long, default_value_t = 50)]
    rwmixread: u32,
    /// Block size (4k, 1m, ...).
    #[arg(long, default_value = "1m")]
    bs: String,
    /// I/Os in flight per job.
    #[arg(long, default_value_t = 1)]
    iodepth: usize,
    /// Concurrent jobs (each its own client).
    #[arg(long, default_value_t = 1)]
    numjobs: usize,
    /// Bytes per job file (or of the shared file).
    #[arg(long, default_value = "256m")]
    size: String,
    /// Seconds to run (with --time-based, loop over the file until then).
    #[arg(long)]
    runtime: Option<u64>,
    /// Loop over the file until --runtime.
    #[arg(long)]
    time_based: bool,
    /// Seconds run before recording starts.
    #[arg(long, default_value_t = 0)]
    ramp_time: u64,
    /// Open loop: I/Os per second per job (latency counted from each I/O's scheduled start).
    #[arg(long)]
    rate_iops: Option<u64>,
    /// 1 (the native client has no cache; 0 is refused rather than silently ignored).
    #[arg(long, default_value_t = 1)]
    direct: u8,
    /// One file shared by every job instead of a file per job.
    #[arg(long)]
    shared: bool,
    /// Where summary.json and the .hlog interval logs go.
    #[arg(long, default_value = "runs/bench-io")]
    out: std::path::PathBuf,
    /// Reuse the saved host probe (runs/probe.json) while younger than this many seconds.
    #[arg(long, default_value_t = 3600)]
    probe_max_age: u64,
    /// Check every read as it returns and read every block back at the end, holding it to the
    /// acknowledged writes (fio's verify; every block carries its number and a generation).
    #[arg(long)]
    verify: bool,
}

/// `t3fs bench io`: the host probed, the fio-style load run on the cluster, its report printed
/// beside the host's bounds, and the run directory written.
fn io(a: IoArgs) -> ExitCode {
    let fail = |e: String| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    };
    if a.direct != 1 {
        return fail(
            "--direct 0: the native client keeps no page cache; every I/O is direct".into(),
        );
    }
    let job = match io_job(&a) {
        Ok(j) => j,
        Err(e) => return fail(e),
    };
    let opts = match t3fs_real::cluster::client_options(&a.cluster) {
        Ok(o) => o,
        Err(e) => return fail(e),
    };
    let rt = match t3fs_client::client::bench_runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    let nodes = match t3fs_real::cluster::nodes(&a.cluster) {
        Ok(n) if !n.is_empty() => n,
        _ => return fail(format!("no cluster in {}", a.cluster.display())),
    };
    let replicas = nodes[0].cfg.cluster.replicas;
    let probe = match host_probe(&a, &nodes, &job, replicas) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    println!(
        "host probe ({} s old): disk write {:.0} MiB/s (durable, {} streams; buffered {:.0}), disk read {:.0} MiB/s (O_DIRECT, qd {}), 4k random read {:.0} IOPS at qd {}, loopback {:.0} MiB/s ({} streams)",
        probe.age().as_secs(), probe.disk_write_mibs, probe.write_qd, probe.disk_write_buffered_mibs, probe.disk_read_mibs, probe.qd, probe.rand_read_iops, probe.qd, probe.loopback_mibs, probe.loopback_streams
    );
    let pb = bar(1000, "bench io");
    let p = pb.clone();
    let procs = t3fs_real::cluster::pids(&a.cluster);
    let (report, seen) = match rt.block_on(io_load(opts, job, procs, p)) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    pb.finish_and_clear();
    print!("{}", report.text());
    let rows = t3fs_real::roofline::rows(&report, &probe, replicas);
    print!("{}", t3fs_real::roofline::text(&rows));
    print_usage_and_limits(&report, &rows);
    if let Err(e) = write_io_run(&a, &report, &probe, rows, seen, replicas, &nodes) {
        return fail(format!("{}: {e}", a.out.display()));
    }
    println!(
        "run directory: {} (summary.json, report.md, report.html)",
        a.out.display()
    );
    if report.verify.as_ref().is_some_and(|v| !v.ok()) {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// The job `a` describes, in fio's terms.
fn io_job(a: &IoArgs) -> Result<t3fs_real::bench_io::Job, String> {
    Ok(t3fs_real::bench_io::Job {
        rw: a.rw.parse()?,
        rwmixread: a.rwmixread,
        bs: t3fs_real::bench_io::parse_size(&a.bs)?,
        iodepth: a.iodepth,
        numjobs: a.numjobs,
        size: t3fs_real::bench_io::parse_size(&a.size)?,
        runtime: a.runtime.map(Duration::from_secs),
        time_based: a.time_based,
        ramp_time: Duration::from_secs(a.ramp_time),
        rate_iops: a.rate_iops,
        shared: a.shared,
        verify: a.verify,
    })
}

/// This host's bounds at the job's queue depth, measured on the chunk stores' file system (or
/// a saved probe younger than `--probe-max-age`).
fn host_probe(
    a: &IoArgs,
    nodes: &[t3fs_real::cluster::NodeEntry],
    job: &t3fs_real::bench_io::Job,
    replicas: u32,
) -> Result<t3fs_real::probe::Probe, String> {
    // The probe measures the filesystem the chunk stores live on.
    let data_dir = nodes
        .iter()
        .find(|n| n.role == "storage")
        .map_or_else(|| a.cluster.clone(), |n| n.cfg.node.data.clone());
    let qd = job.iodepth * job.numjobs;
    eprintln!(
        "probing this host (or reusing a probe younger than {} s) ...",
        a.probe_max_age
    );
    t3fs_real::probe::load_or_measure(
        std::path::Path::new("runs/probe.json"),
        &data_dir,
        qd,
        qd * replicas as usize,
        Duration::from_secs(a.probe_max_age),
    )
    .map_err(|e| format!("host probe: {e}"))
}

/// Runs the job under a routing watcher, `p` following its progress; the report and the
/// routing seen meanwhile.
async fn io_load(
    opts: t3fs_client::client::ClientOptions,
    job: t3fs_real::bench_io::Job,
    procs: std::collections::BTreeMap<String, i32>,
    p: ProgressBar,
) -> Result<
    (
        t3fs_real::bench_io::Report,
        Vec<t3fs_real::routing_watch::Seen>,
    ),
    String,
> {
    let watch =
        t3fs_real::routing_watch::RoutingWatch::start(opts.clone(), Duration::from_millis(200))
            .await
            .map_err(|e| e.to_string())?;
    let r = t3fs_real::bench_io::run(opts, job, procs, move |f| {
        p.set_position((f * 1000.0) as u64)
    })
    .await;
    let seen = watch.stop().await;
    r.map(|r| (r, seen))
}

/// Prints the CPU the load cost, what limited each operation, and the verify verdict.
fn print_usage_and_limits(report: &t3fs_real::bench_io::Report, rows: &[t3fs_real::roofline::Row]) {
    let bytes: u64 = report.ops.values().map(|s| s.bytes).sum();
    let per: Vec<String> = report
        .usage
        .per_gib(bytes)
        .iter()
        .map(|(r, s)| format!("{r} {s:.2}"))
        .collect();
    println!(
        "cpu: host {:.0}% busy, {:.0}% waiting on I/O; CPU seconds per GiB moved: {}",
        report.usage.host_busy * 100.0,
        report.usage.host_iowait * 100.0,
        per.join(", ")
    );
    let ops: u64 = report.ops.values().map(|s| s.hist.len()).sum();
    if let Some(line) = report.usage.run_queue_line(ops) {
        println!("scheduling: {line}");
    }
    for r in rows {
        let limit =
            t3fs_real::cpu::limit(r.percent(), r.binding().0, &report.usage) + &r.context_text();
        println!("limit {}: {limit}", r.op);
    }
    if let Some(v) = t3fs_real::bench_run::verify_verdict(report) {
        println!("verify: {} ({})", v.label, v.detail.replace('\n', "; "));
    }
}

/// summary.json, the .hlog files and roofline.json of fio's habit, and the run directory with
/// its report, all in `--out`.
fn write_io_run(
    a: &IoArgs,
    report: &t3fs_real::bench_io::Report,
    probe: &t3fs_real::probe::Probe,
    rows: Vec<t3fs_real::roofline::Row>,
    seen: Vec<t3fs_real::routing_watch::Seen>,
    replicas: u32,
    nodes: &[t3fs_real::cluster::NodeEntry],
) -> std::io::Result<()> {
    report.write(&a.out)?;
    let extra = format!(
        "{{\"probe\": {}, \"roofline\": {}}}\n",
        probe.json().trim(),
        t3fs_real::roofline::json(&rows)
    );
    std::fs::write(a.out.join("roofline.json"), extra)?;
    let storage: Vec<_> = nodes.iter().filter(|n| n.role == "storage").collect();
    let c = &nodes[0].cfg.cluster;
    let shape = format!(
        "{} storage nodes, {} chains of {replicas} replicas, {} KV, {} timeouts, loopback TCP",
        storage.len(),
        c.chains,
        c.kv,
        c.timeouts
    );
    let run = t3fs_real::bench_run::RealRun {
        name: format!("bench-io {} bs={}", a.rw, a.bs),
        about: format!(
            "fio-style {} load through the native client on the cluster in {}",
            a.rw,
            a.cluster.display()
        ),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        shape,
        report,
        probe: Some(probe),
        rows,
        seen,
        marks: Vec::new(),
        verdicts: Vec::new(),
    };
    t3fs_crosscheck::real_run::write(t3fs_real::bench_run::run_data(&run), &a.out)
}

fn mdtest(dir: &std::path::Path, job: t3fs_real::bench_mdtest::MdJob) -> ExitCode {
    let run = || -> Result<Vec<t3fs_real::bench_mdtest::Phase>, String> {
        let opts = t3fs_real::cluster::client_options(dir)?;
        let rt = t3fs_client::client::bench_runtime()?;
        rt.block_on(t3fs_real::bench_mdtest::run(opts, job.clone()))
    };
    match run() {
        Ok(phases) => {
            println!(
                "mdtest through the meta service over TCP: {} ranks, -n {}{}, -z {} -b {}",
                job.ranks,
                job.items,
                if job.unique_dir { " -u" } else { "" },
                job.depth,
                job.branch
            );
            for p in phases {
                println!(
                    "   {:<14} {:>10.1} ops/s  ({} ops in {:.2} s)",
                    p.name,
                    p.rate(),
                    p.ops,
                    p.elapsed.as_secs_f64()
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs a benchmark.
pub fn run(cmd: BenchCommand) -> ExitCode {
    match cmd {
        BenchCommand::Sim {
            seeds,
            seconds,
            write_size,
        } => sim(seeds, seconds, write_size),
        BenchCommand::Checker { divide } => checker(divide.max(1)),
        BenchCommand::Meta {
            cluster: Some(dir),
            items,
            unique_dir,
            depth,
            branch,
            ranks,
            ..
        } => mdtest(
            &dir,
            t3fs_real::bench_mdtest::MdJob {
                ranks,
                items,
                unique_dir,
                depth,
                branch,
            },
        ),
        BenchCommand::Meta { files, etcd, .. } => crate::bench_meta::run(files, etcd),
        BenchCommand::Io(a) => io(a),
        BenchCommand::Checkpoint(a) => crate::bench_checkpoint::run(a),
        BenchCommand::Kvcache(a) => crate::bench_kvcache::run(a),
        BenchCommand::Transport {
            transport,
            size,
            round_trips,
            mib,
        } => {
            use t3fs_real::bench_transport::{run, Kind};
            let kind = match transport.as_str() {
                "soft-rdma" => Kind::SoftRdma,
                "rdma" => Kind::Rdma,
                _ => Kind::Tcp,
            };
            match run(kind, size, round_trips, mib) {
                Ok(f) => {
                    println!("{f}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: t3fs bench transport: {e}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

fn bar(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed}")
            .expect("template")
            .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

fn sim(seeds: u64, seconds: u64, write_size: u32) -> ExitCode {
    let mut sc = bench::ten_host_scenario(Duration::from_secs(seconds));
    sc.workload.write_size = write_size;
    println!("{} {write_size}-byte writes.", sc.about);
    let pb = bar(seeds, "bench sim");
    let mut all = Vec::new();
    for seed in 1..=seeds {
        match bench::measure_sim(&sc, seed) {
            Ok(f) => all.push(f),
            Err(e) => {
                pb.finish_and_clear();
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    println!(
        "{:>5} {:>8} {:>10} {:>9} {:>9} {:>12} {:>13}  {:<16}",
        "seed", "verdict", "events", "sim s", "wall s", "sim s/wall s", "ops/sim s", "trace"
    );
    for f in &all {
        println!(
            "{:>5} {:>8} {:>10} {:>9.1} {:>9.3} {:>12.0} {:>13.0}  {:016x}",
            f.seed,
            if f.passed { "PASS" } else { "FAIL" },
            f.events,
            f.sim_secs,
            f.wall_secs,
            f.speedup(),
            f.ops_per_sim_sec(),
            f.trace
        );
    }
    let sum = |g: fn(&bench::SimFigures) -> f64| all.iter().map(g).sum::<f64>();
    let (sim_s, wall_s, events, ops) = (
        sum(|f| f.sim_secs),
        sum(|f| f.wall_secs),
        sum(|f| f.events as f64),
        sum(|f| f.ops as f64),
    );
    let rate = Spread::of(all.iter().map(bench::SimFigures::ops_per_sim_sec));
    println!(
        "total: {:.0} simulated s in {:.2} wall s = {:.0}x real time (goal ≥ 200x on one core); \
         {:.0} events/s; {:.0} client ops per simulated s (goal ≥ 1,000; seeds {:.0} to {:.0}, \
         standard error of the mean {:.0}); {:.1} seeds/min",
        sim_s,
        wall_s,
        sim_s / wall_s,
        events / wall_s,
        ops / sim_s,
        rate.min,
        rate.max,
        rate.std_error,
        all.len() as f64 * 60.0 / wall_s
    );
    if all.iter().all(|f| f.passed) {
        ExitCode::SUCCESS
    } else {
        println!(
            "some seeds failed their verdicts: replay them with `t3fs sim run` on the scenario"
        );
        ExitCode::FAILURE
    }
}

/// How a per-seed figure spreads over the seeds.
struct Spread {
    min: f64,
    max: f64,
    /// Standard deviation over the square root of the count (0 for one seed).
    std_error: f64,
}

impl Spread {
    fn of(xs: impl Iterator<Item = f64> + Clone) -> Self {
        let n = xs.clone().count() as f64;
        let mean = xs.clone().sum::<f64>() / n.max(1.0);
        let var = xs.clone().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
        Self {
            min: xs.clone().fold(f64::INFINITY, f64::min),
            max: xs.fold(f64::NEG_INFINITY, f64::max),
            std_error: (var / n.max(1.0)).sqrt(),
        }
    }
}

fn checker(divide: usize) -> ExitCode {
    let cases = [
        (1, 10_000 / divide, 10, 0.3),
        ((1_000 / divide).max(1), 1_000, 10, 10.0),
    ];
    let mut ok = true;
    for (chunks, ops, clients, goal) in cases {
        let name = format!("{} ops, {clients} clients, {chunks} chunk(s)", chunks * ops);
        let name = name.as_str();
        for stale in [false, true] {
            let pb = bar(chunks as u64, name);
            let f = bench::measure_checker(42, chunks, ops, clients, stale, |n| {
                pb.set_position(n as u64)
            });
            pb.finish_and_clear();
            let expect_ok = !stale;
            let right = if expect_ok {
                f.ok == f.chunks
            } else {
                f.violations == f.chunks
            };
            ok &= right;
            println!(
                "{name}, {}: {} ops checked in {:.3} s ({:.0} ops/s; goal ≤ {goal} s for the valid \
                 history) → {} linearizable, {} violations, {} out of budget{}",
                if stale { "one stale read per chunk" } else { "valid" },
                f.ops,
                f.wall_secs,
                f.ops as f64 / f.wall_secs.max(1e-9),
                f.ok,
                f.violations,
                f.unknown,
                if right { "" } else { "  (WRONG VERDICT)" }
            );
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
