//! `t3fs calibrate`: the simulator's resources against a real loopback cluster on this host.
//!
//! It starts a real `cluster up` whose targets use the io_uring chunk store (O_DIRECT: the disk
//! the model's SSD stands for, not the page cache), measures each modelled resource through the
//! real component the cluster uses for it (`calibrate_profile.rs`), writes those as a
//! `this-host` hardware profile, runs three jobs on the cluster (1 MiB sequential write, 1 MiB
//! sequential read, 4 KiB random read; one job, depth 1, through `t3fs bench io`; each run
//! `--repeats` times, round by round) and the same three in the simulator with that profile, and
//! reports each pair: the real runs' median throughput and p99 beside the simulator's, with
//! their error, held to ±10% and ±25%, the real runs' range (this host's noise), and `t3fs
//! report compare` of the simulated run against the real run nearest the median.
//!
//! Invariant: nothing in the profile is fitted to the jobs it predicts; every value comes from a
//! measurement named in `this-host.toml`, or is an assumption named there. The cluster it starts
//! is stopped whatever happens. Not here: the resource model (sim/src/world/resources.rs).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use t3fs_scenario::{Hardware, Scenario};

use crate::calibrate_profile::{self as profile, Measured};
use crate::supervised::{t3fs, ClusterGuard};
use t3fs_sim::world::throughput::KindLoad;

/// One job, run both ways.
struct Job {
    name: &'static str,
    rw: &'static str,
    bs: u32,
}

const JOBS: [Job; 3] = [
    Job {
        name: "seq-write-1m",
        rw: "write",
        bs: 1 << 20,
    },
    Job {
        name: "seq-read-1m",
        rw: "read",
        bs: 1 << 20,
    },
    Job {
        name: "randread-4k",
        rw: "randread",
        bs: 4096,
    },
];

/// The replicas of each chain of `cluster up`'s loopback cluster (three storage nodes).
const REPLICAS: u32 = 3;

/// Tolerances of issue 19 item 6.
const THROUGHPUT_TOL: f64 = 0.10;
const P99_TOL: f64 = 0.25;

/// Options.
pub struct Args {
    /// Seconds of each real job.
    pub seconds: u64,
    /// Simulated seconds of each simulated job.
    pub sim_seconds: u64,
    /// Runs of each real job (their median is judged; the range shows this host's noise).
    pub repeats: u32,
    /// Output directory.
    pub out: PathBuf,
}

/// A job's figures: operations per second and p99 latency in seconds.
#[derive(Clone, Copy, Debug)]
struct Figures {
    iops: f64,
    p99: f64,
}

/// The repeated runs of one real job: figures and run directory of each.
struct RealJob(Vec<(Figures, PathBuf)>);

/// The median of `v` (the mean of the middle two when even; 0 when empty).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

impl RealJob {
    /// The median IOPS and the median p99 of the runs.
    fn median(&self) -> Figures {
        Figures {
            iops: median(self.0.iter().map(|(f, _)| f.iops).collect()),
            p99: median(self.0.iter().map(|(f, _)| f.p99).collect()),
        }
    }

    /// The lowest and highest of `f` over the runs.
    fn range(&self, f: impl Fn(&Figures) -> f64) -> (f64, f64) {
        let v = self.0.iter().map(|(x, _)| f(x));
        let lo = v.clone().fold(f64::INFINITY, f64::min);
        (lo, v.fold(f64::NEG_INFINITY, f64::max))
    }

    /// The run directory of the run whose IOPS is nearest the median: the one compared.
    fn typical(&self) -> &Path {
        let m = self.median().iops;
        let (_, dir) = self
            .0
            .iter()
            .min_by(|a, b| (a.0.iops - m).abs().total_cmp(&(b.0.iops - m).abs()))
            .expect("at least one run");
        dir
    }
}

/// What the running cluster gave: the reads of absent chunks (sorted), and each job's runs.
type RealRuns = (Vec<Duration>, Vec<RealJob>);

/// The real side on a loopback cluster whose targets use the io_uring store (O_DIRECT: the
/// disk the model's SSD stands for, not the page cache): the null requests, then the jobs.
fn real_jobs(a: &Args) -> Result<RealRuns, String> {
    let cluster = a.out.join("cluster");
    let _ = std::fs::remove_dir_all(&cluster);
    let c = cluster.display().to_string();
    t3fs(
        &["cluster", "up", "--dir", &c, "--store", "uring"],
        &a.out.join("cluster-up.log"),
    )?;
    let _guard = ClusterGuard::new(cluster.clone());
    eprintln!("real: reads of absent chunks (1 s) ...");
    let null = profile::null_requests(&cluster, Duration::from_secs(1))?;
    let mut out: Vec<RealJob> = JOBS.iter().map(|_| RealJob(Vec::new())).collect();
    // Round by round, so a slow spell of this host falls on every job, not one.
    for round in 1..=a.repeats.max(1) {
        for (j, runs) in JOBS.iter().zip(&mut out) {
            let fig = real_job(a, &c, j, round)?;
            runs.0.push(fig);
        }
    }
    Ok((null, out))
}

/// Run `round` of job `j` on the cluster at `c`: its figures and run directory.
fn real_job(a: &Args, c: &str, j: &Job, round: u32) -> Result<(Figures, PathBuf), String> {
    let dir = a.out.join(format!("real-{}-{round}", j.name));
    let (d, secs, bs) = (
        dir.display().to_string(),
        a.seconds.to_string(),
        j.bs.to_string(),
    );
    let args = [
        "bench",
        "io",
        "--cluster",
        c,
        "--rw",
        j.rw,
        "--bs",
        &bs,
        "--size",
        "64m",
        "--runtime",
        &secs,
        "--time-based",
        "--out",
        &d,
    ];
    eprintln!("real: {} run {round} ({} s) ...", j.name, a.seconds);
    t3fs(&args, &a.out.join(format!("real-{}-{round}.log", j.name)))?;
    Ok((read_summary(&dir.join("summary.json"), j.rw)?, dir))
}

/// IOPS and p99 of `summary.json`'s read or write side.
fn read_summary(path: &Path, rw: &str) -> Result<Figures, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let side = if rw.contains("read") { "read" } else { "write" };
    let s = &v["jobs"][0][side];
    let iops = s["iops"].as_f64();
    let p99 = s["clat_ns"]["percentile"]["99.000000"].as_f64();
    match (iops, p99) {
        (Some(iops), Some(p99)) => Ok(Figures {
            iops,
            p99: p99 / 1e9,
        }),
        _ => Err(format!("{}: no {side} iops or p99", path.display())),
    }
}

/// The simulated job: the loopback cluster's shape, one client, the job's block size.
fn sim_scenario(j: &Job, hw: &Hardware, seconds: u64) -> Scenario {
    let text = format!(
        "name = \"calibrate-{name}\"\nabout = \"t3fs calibrate: {name} on the this-host profile\"\n\
         duration = \"{seconds}s\"\n\n[cluster]\nmgmtd = 1\nstorage_nodes = 3\nreplicas = {REPLICAS}\n\
         clients = 1\n\n[workload]\nchunks = 64\nwrite_size = {bs}\nread_fraction = {rf}\n\
         think = \"0us..1us\"\nprefill = {prefill}\n\n[faults]\nnet_latency = \"0us..1us\"\n{hw}",
        name = j.name,
        bs = j.bs,
        rf = if j.rw == "write" { 0.0 } else { 1.0 },
        prefill = j.rw != "write",
        hw = t3fs_scenario::write::hardware_toml(hw),
    );
    t3fs_scenario::parse("<calibrate>", &text).expect("a valid generated scenario")
}

fn sim_figures(k: &KindLoad) -> Figures {
    Figures {
        iops: k.ops_per_s,
        p99: k.p99,
    }
}

/// `sim / real - 1`.
fn error(sim: f64, real: f64) -> f64 {
    sim / real.max(1e-12) - 1.0
}

/// Runs job `j` in the simulator, compares it with its real `runs` (report compare of the
/// typical run) and prints its row; whether it is within both tolerances, and the line of the
/// real runs' range.
fn judge(a: &Args, hw: &Hardware, j: &Job, runs: &RealJob) -> Result<(bool, String), String> {
    let (r, real_dir) = (runs.median(), runs.typical());
    let sc = sim_scenario(j, hw, a.sim_seconds);
    let o = t3fs_sim::run::run(&sc, 1, false)?;
    let w = o.world.as_ref().ok_or("the simulation kept no world")?;
    let load = w.load();
    let s = sim_figures(if j.rw == "write" {
        &load.writes
    } else {
        &load.reads
    });
    let command = format!("t3fs calibrate (job {})", j.name);
    let sim_dir = crate::report::write(&o, &sc, "calibrate", &command, &a.out)
        .map_err(|e| format!("sim run directory: {e}"))?;
    let compare = a.out.join(format!("compare-{}", j.name));
    t3fs_reports::compare(real_dir, &sim_dir, &compare)
        .map_err(|e| format!("report compare: {e}"))?;
    let (et, ep) = (error(s.iops, r.iops), error(s.p99, r.p99));
    let within = et.abs() <= THROUGHPUT_TOL && ep.abs() <= P99_TOL;
    println!(
        "{:<14} {:>11.0} {:>11.0} {:>+7.1}%  {:>8.0}us {:>8.0}us {:>+7.1}%  {}",
        j.name,
        r.iops,
        s.iops,
        et * 100.0,
        r.p99 * 1e6,
        s.p99 * 1e6,
        ep * 100.0,
        if within { "within" } else { "OUTSIDE" }
    );
    let (i, p) = (runs.range(|f| f.iops), runs.range(|f| f.p99 * 1e6));
    let range = format!(
        "  {:<14} IOPS {:.0} to {:.0}, p99 {:.0} to {:.0} us",
        j.name, i.0, i.1, p.0, p.1
    );
    Ok((within, range))
}

/// Runs the calibration; exit 0 when every figure is within its tolerance, 1 when not.
pub fn run(a: Args) -> ExitCode {
    match calibrate(&a) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: t3fs calibrate: {e}");
            ExitCode::from(2)
        }
    }
}

fn calibrate(a: &Args) -> Result<bool, String> {
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    eprintln!(
        "measuring this host (probe, the io_uring chunk stores of one chain, CRC32C speed) ..."
    );
    let probe = t3fs_real::probe::load_or_measure(
        &a.out.join("probe.json"),
        &a.out,
        1,
        1,
        Duration::from_secs(3600),
    )
    .map_err(|e| format!("host probe: {e}"))?;
    let store = profile::store_probe(&a.out.join("store-probe"), REPLICAS)?;
    let crc_ns_per_byte = profile::crc_speed();
    let message = (
        t3fs_real::probe_message::round_trips(0, 2000)?,
        t3fs_real::probe_message::round_trips(1 << 20, 300)?,
    );
    let (null, real) = real_jobs(a)?;
    let m = Measured {
        probe,
        store,
        null,
        message,
        crc_ns_per_byte,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
    };
    let (hw, why) = profile::this_host(&m);
    let profile = format!(
        "# Written by `t3fs calibrate`: this host, measured.\n{}{}",
        why.iter().map(|w| format!("# {w}\n")).collect::<String>(),
        t3fs_scenario::write::hardware_toml(&hw)
    );
    let path = a.out.join("this-host.toml");
    std::fs::write(&path, &profile).map_err(|e| format!("{}: {e}", path.display()))?;
    println!("this-host profile: {}", path.display());
    for w in &why {
        println!("  {w}");
    }
    println!(
        "\n{:<14} {:>11} {:>11} {:>8}  {:>10} {:>10} {:>8}",
        "job", "real IOPS", "sim IOPS", "error", "real p99", "sim p99", "error"
    );
    let mut ok = true;
    let mut ranges = Vec::new();
    for (j, runs) in JOBS.iter().zip(&real) {
        let (within, range) = judge(a, &hw, j, runs)?;
        ok &= within;
        ranges.push(range);
    }
    println!(
        "\nreal: the median of {} runs of each job; their range (this host's noise):",
        a.repeats.max(1)
    );
    for r in &ranges {
        println!("{r}");
    }
    println!(
        "\ntolerance: throughput ±{:.0}%, p99 ±{:.0}%; side by side: {}/compare-*/compare.html",
        THROUGHPUT_TOL * 100.0,
        P99_TOL * 100.0,
        a.out.display()
    );
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_runs_are_judged_by_their_median_and_compared_by_their_typical_run() {
        let run = |iops: f64, p99: f64, dir: &str| (Figures { iops, p99 }, PathBuf::from(dir));
        let job = RealJob(vec![
            run(500.0, 0.007, "a"),
            run(700.0, 0.002, "b"),
            run(650.0, 0.003, "c"),
        ]);
        let m = job.median();
        assert_eq!((m.iops, m.p99), (650.0, 0.003));
        assert_eq!(job.range(|f| f.iops), (500.0, 700.0));
        assert_eq!(job.typical(), Path::new("c"));
        assert_eq!(median(vec![4.0, 1.0]), 2.5);
        assert_eq!(median(Vec::new()), 0.0);
    }

    #[test]
    fn summaries_give_their_sides_iops_and_p99() {
        let dir = std::env::temp_dir().join(format!("t3fs-cal-sum-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("summary.json");
        std::fs::write(
            &path,
            r#"{"jobs": [{"read": {"iops": 5000.5, "clat_ns": {"percentile": {"99.000000": 250000}}}}]}"#,
        )
        .expect("write");
        let f = read_summary(&path, "randread").expect("figures");
        assert_eq!((f.iops, f.p99), (5000.5, 250e-6));
        assert!(read_summary(&path, "write").is_err(), "no write side");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
