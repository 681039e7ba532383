//! `t3fs calibrate`: the simulator's resources against a real loopback cluster on this host.
//!
//! It starts a real `cluster up` whose targets use the io_uring chunk store (O_DIRECT: the disk
//! the model's SSD stands for, not the page cache), measures each modelled resource through the
//! real component the cluster uses for it (`calibrate_profile.rs`), writes those as a
//! `this-host` hardware profile, runs three jobs on the cluster (1 MiB sequential write, 1 MiB
//! sequential read, 4 KiB random read; one job, depth 1, through `t3fs bench io`) and the same
//! three in the simulator with that profile, and reports each pair: throughput and p99 side by
//! side with their error, held to ±10% and ±25%, plus `t3fs report compare` of each pair's run
//! directories.
//!
//! Invariant: nothing in the profile is fitted to the jobs it predicts; every value comes from a
//! measurement named in `this-host.toml`, or is an assumption named there. The cluster it starts
//! is stopped whatever happens. Not here: the resource model (sim/src/world/resources.rs).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use t3fs_scenario::{Hardware, Scenario};

use crate::calibrate_profile::{self as profile, Measured};
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

/// Tolerances of issue 19 item 6.
const THROUGHPUT_TOL: f64 = 0.10;
const P99_TOL: f64 = 0.25;

/// Options.
pub struct Args {
    /// Seconds of each real job.
    pub seconds: u64,
    /// Simulated seconds of each simulated job.
    pub sim_seconds: u64,
    /// Output directory.
    pub out: PathBuf,
}

/// A job's figures: operations per second and p99 latency in seconds.
#[derive(Clone, Copy, Debug)]
struct Figures {
    iops: f64,
    p99: f64,
}

/// Runs `t3fs ARGS` (this binary); its output goes to `log`.
fn t3fs(args: &[&str], log: &Path) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("this binary: {e}"))?;
    let file = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let status = Command::new(exe)
        .args(args)
        .stdout(file.try_clone().map_err(|e| e.to_string())?)
        .stderr(file)
        .status()
        .map_err(|e| format!("t3fs {}: {e}", args.join(" ")))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "t3fs {} failed ({status}); see {}",
            args.join(" "),
            log.display()
        ))
    }
}

/// Stops the cluster in `dir` when dropped, however the run ends.
struct ClusterGuard(PathBuf);

impl Drop for ClusterGuard {
    fn drop(&mut self) {
        let dir = self.0.display().to_string();
        let _ = t3fs(
            &["cluster", "down", "--dir", &dir],
            &self.0.with_extension("down.log"),
        );
    }
}

/// What the running cluster gave: the reads of absent chunks (sorted), and each job's figures
/// and run directory.
type RealRuns = (Vec<Duration>, Vec<(Figures, PathBuf)>);

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
    let _guard = ClusterGuard(cluster.clone());
    eprintln!("real: reads of absent chunks (1 s) ...");
    let null = profile::null_requests(&cluster, Duration::from_secs(1))?;
    let mut out = Vec::new();
    for j in &JOBS {
        let dir = a.out.join(format!("real-{}", j.name));
        let (d, secs, bs) = (
            dir.display().to_string(),
            a.seconds.to_string(),
            j.bs.to_string(),
        );
        let args = [
            "bench",
            "io",
            "--cluster",
            &c,
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
        eprintln!("real: {} ({} s) ...", j.name, a.seconds);
        t3fs(&args, &a.out.join(format!("real-{}.log", j.name)))?;
        out.push((read_summary(&dir.join("summary.json"), j.rw)?, dir));
    }
    Ok((null, out))
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
         duration = \"{seconds}s\"\n\n[cluster]\nmgmtd = 1\nstorage_nodes = 3\nreplicas = 3\n\
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

/// The io_uring chunk store alone in `dir` (removed after), as each target of the cluster
/// runs it: its operation latencies, one at a time.
fn store_probe(dir: &Path) -> Result<t3fs_real::probe_store::StoreLatencies, String> {
    let _ = std::fs::remove_dir_all(dir);
    let mut store = t3fs_real::chunk_store::UringChunkStore::open(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let r = t3fs_real::probe_store::measure(&mut store, Duration::from_secs(1));
    drop(store);
    let _ = std::fs::remove_dir_all(dir);
    r.map_err(|e| format!("chunk store probe: {e}"))
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
    eprintln!("measuring this host (probe, the io_uring chunk store alone, CRC32C speed) ...");
    let probe = t3fs_real::probe::load_or_measure(
        &a.out.join("probe.json"),
        &a.out,
        1,
        1,
        Duration::from_secs(3600),
    )
    .map_err(|e| format!("host probe: {e}"))?;
    let store = store_probe(&a.out.join("store-probe"))?;
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
    for (j, (r, real_dir)) in JOBS.iter().zip(&real) {
        let sc = sim_scenario(j, &hw, a.sim_seconds);
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
        ok &= within;
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
