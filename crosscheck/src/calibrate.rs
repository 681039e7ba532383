//! `t3fs calibrate`: the simulator's resources against a real loopback cluster on this host.
//!
//! It starts a real `cluster up` whose targets use the io_uring chunk store (O_DIRECT: the disk
//! the model's SSD stands for, not the page cache) and runs `--repeats` rounds. Each round first
//! measures each modelled resource through the real component the cluster uses for it
//! (`calibrate_profile.rs`), then runs three jobs on the cluster (1 MiB sequential write, 1 MiB
//! sequential read, 4 KiB random read; one job, depth 1, through `t3fs bench io`). Each round's
//! measurements make a `this-host` hardware profile on which the simulator runs the same three
//! jobs, so every real run is paired with a prediction from this host as it was minutes before
//! (its disk's figures drift by more than the tolerances within an hour). Each job is judged
//! by the median over rounds of the paired errors, held to ±10% (throughput) and ±25% (p99);
//! the report shows both sides' ranges (this host's noise), each round's errors, and `t3fs
//! report compare` of the round whose real run is nearest the median (it says which).
//! `this-host.toml` is the profile of every round's measurements pooled. With `--workloads` the
//! rounds also run the AI workloads' own benchmarks (a checkpoint saved and loaded, KVCache's
//! reads; `calibrate/workloads.rs`) beside simulated twins of their shape (`calibrate/jobs.rs`),
//! judged the same way. The disk and loopback
//! bounds, the CRC32C speed and the core count are measured once, before the rounds.
//!
//! Invariant: nothing in a profile is fitted to the jobs it predicts; every value comes from a
//! measurement named in the profile's file, or is an assumption named there, and each round's
//! is measured before its jobs run. The cluster it starts is stopped whatever happens; its
//! chunk data is removed once it stopped, unless the run was interrupted (its configuration and
//! logs stay). Not here: the resource model (sim/src/world/resources.rs).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use t3fs_scenario::{Hardware, Scenario};

use crate::calibrate_profile::{self as profile, median, Measured, Sample};
use crate::supervised::{t3fs, ClusterGuard};
use jobs::{jobs, Job, Real};
use t3fs_sim::world::throughput::KindLoad;

mod jobs;
mod workloads;

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
    /// Rounds: each measures this host, then runs every real job once (the median of the
    /// rounds' paired errors is judged; the range shows this host's noise).
    pub repeats: u32,
    /// Output directory.
    pub out: PathBuf,
    /// Also the concurrency variants of the jobs (8 streams at once).
    pub concurrency: bool,
    /// Also the AI workloads' benchmarks (checkpoint save and load, KVCache reads) beside
    /// their simulated twins.
    pub workloads: bool,
}

/// A job's figures: operations per second and p99 latency in seconds.
#[derive(Clone, Copy, Debug)]
struct Figures {
    iops: f64,
    p99: f64,
}

/// One job's runs on one side, a run per round: figures, and the run directory (real side).
struct Runs(Vec<(Figures, PathBuf)>);

impl Runs {
    /// Runs without directories (the simulated side's).
    fn of(figs: &[Figures]) -> Runs {
        Runs(figs.iter().map(|f| (*f, PathBuf::new())).collect())
    }

    /// The median IOPS and the median p99 of the runs.
    fn median(&self) -> Figures {
        Figures {
            iops: median(self.0.iter().map(|(f, _)| f.iops).collect()),
            p99: median(self.0.iter().map(|(f, _)| f.p99).collect()),
        }
    }

    /// Each round's error of these runs against `real`'s of the same round, in `f`.
    fn errors_to(&self, real: &Runs, f: fn(&Figures) -> f64) -> Vec<f64> {
        debug_assert_eq!(self.0.len(), real.0.len(), "a run per round on each side");
        let pairs = self.0.iter().zip(&real.0);
        pairs.map(|((s, _), (r, _))| error(f(s), f(r))).collect()
    }

    /// The median of the rounds' paired errors against `real`, in `f`: each round's
    /// prediction judged against the run made under the same conditions.
    fn error_to(&self, real: &Runs, f: fn(&Figures) -> f64) -> f64 {
        median(self.errors_to(real, f))
    }

    /// The lowest and highest of `f` over the runs.
    fn range(&self, f: impl Fn(&Figures) -> f64) -> (f64, f64) {
        let v = self.0.iter().map(|(x, _)| f(x));
        let lo = v.clone().fold(f64::INFINITY, f64::min);
        (lo, v.fold(f64::NEG_INFINITY, f64::max))
    }

    /// The round whose IOPS is nearest the median: the one compared.
    fn typical(&self) -> usize {
        let m = self.median().iops;
        let dist = |(_, (f, _)): &(usize, &(Figures, PathBuf))| (f.iops - m).abs();
        let (i, _) = self
            .0
            .iter()
            .enumerate()
            .min_by(|a, b| dist(a).total_cmp(&dist(b)))
            .expect("at least one run");
        i
    }
}

/// What the rounds gave: each round's measurements, and each job's runs (one per round).
type RealRuns = (Vec<Sample>, Vec<Runs>);

/// The real side on a loopback cluster whose targets use the io_uring store (O_DIRECT: the
/// disk the model's SSD stands for, not the page cache): round by round, this host's
/// measurements, then one run of each job.
fn real_jobs(a: &Args) -> Result<RealRuns, String> {
    let cluster = a.out.join("cluster");
    let _ = std::fs::remove_dir_all(&cluster);
    let c = cluster.display().to_string();
    t3fs(
        &["cluster", "up", "--dir", &c, "--store", "uring"],
        &a.out.join("cluster-up.log"),
    )?;
    // Dropped after the cluster guard: the data goes once the cluster stopped.
    let _data = ChunkData(cluster.clone());
    let _guard = ClusterGuard::new(cluster.clone());
    let mut samples = Vec::new();
    let mut out: Vec<Runs> = jobs(a).iter().map(|_| Runs(Vec::new())).collect();
    // Round by round, so a slow spell of this host falls on every job and on the measurements
    // of its round, not on one job alone.
    for round in 1..=a.repeats.max(1) {
        eprintln!(
            "round {round}: measuring (the stores of one chain, the transport, reads of absent \
             chunks through the cluster) ..."
        );
        let store_dir = a.out.join("store-probe");
        samples.push(Sample::measure(&store_dir, &cluster, REPLICAS)?);
        for (j, runs) in jobs(a).into_iter().zip(&mut out) {
            let fig = real_job(a, &c, j, round)?;
            runs.0.push(fig);
        }
    }
    Ok((samples, out))
}

/// Removes, when dropped, the storage data of the cluster in its directory (some 100 MiB a
/// node of chunks and metadata logs), keeping its configuration and logs for a look at what
/// the services said.
struct ChunkData(PathBuf);

impl Drop for ChunkData {
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir(&self.0) else {
            return;
        };
        for e in entries.flatten() {
            let data = e.path().join("data");
            if e.file_name().to_string_lossy().starts_with("storage-") && data.exists() {
                if let Err(err) = std::fs::remove_dir_all(&data) {
                    eprintln!("warning: {} stays: {err}", data.display());
                }
            }
        }
    }
}

/// Run `round` of job `j` on the cluster at `c`: its figures and run directory.
fn real_job(a: &Args, c: &str, j: &Job, round: u32) -> Result<(Figures, PathBuf), String> {
    if j.real != Real::Io {
        return workloads::real_job(a, c, j, round);
    }
    let dir = a.out.join(format!("real-{}-{round}", j.name));
    let (d, secs, bs, n) = (
        dir.display().to_string(),
        a.seconds.to_string(),
        j.bs.to_string(),
        j.jobs.to_string(),
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
        "--numjobs",
        &n,
        "--size",
        "64m",
        "--runtime",
        &secs,
        "--time-based",
        "--out",
        &d,
    ];
    eprintln!("round {round}: {} ({} s) ...", j.name, a.seconds);
    t3fs(&args, &a.out.join(format!("real-{}-{round}.log", j.name)))?;
    Ok((read_summary(&dir.join("summary.json"), j.side)?, dir))
}

/// IOPS and p99 of `summary.json`'s `side` ("read" or "write").
fn read_summary(path: &Path, side: &str) -> Result<Figures, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
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
    let text = sim_scenario_text(j, &t3fs_scenario::write::hardware_toml(hw), seconds);
    t3fs_scenario::parse("<calibrate>", &text).expect("a valid generated scenario")
}

/// The simulated job's scenario text, `hardware` its `[hardware]` section. A write job's
/// streams get 64 chunks each (the real jobs write files of their own, so no two writes meet
/// on one chunk); a read job's streams share 64 prefilled chunks, as the real ones read files
/// laid out before the clock starts; so do a mixed job's, whose writes may then meet on a
/// chunk (which the real job's files never do), about one in ten with four writes in flight.
/// Beyond 8 streams a read job shares fewer chunks (`jobs::chunks`).
fn sim_scenario_text(j: &Job, hardware: &str, seconds: u64) -> String {
    format!(
        "name = \"calibrate-{name}\"\n\
         about = \"t3fs calibrate: {name} on the this-host profile\"\n\
         duration = \"{seconds}s\"\n\n[cluster]\nmgmtd = 1\nstorage_nodes = 3\n\
         replicas = {REPLICAS}\nclients = {clients}\n\n[workload]\nchunks = {chunks}\nwrite_size = {bs}\n\
         read_fraction = {rf}\n\
         think = \"0us..1us\"\nprefill = {prefill}\n\n[faults]\nnet_latency = \"0us..1us\"\n{hw}",
        name = j.name,
        bs = j.bs,
        clients = j.jobs,
        chunks = jobs::chunks(j),
        rf = match j.rw {
            "write" => 0.0,
            "randrw" => 0.5,
            _ => 1.0,
        },
        prefill = j.rw != "write",
        hw = hardware,
    )
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

/// Job `j` in the simulator on each round's profile (`hws`, in round order): each round's
/// figures, and the outcome and scenario of round `keep` (the one compared).
fn simulate(
    a: &Args,
    hws: &[Hardware],
    j: &Job,
    keep: usize,
) -> Result<(Runs, t3fs_sim::run::Outcome, Scenario), String> {
    let (mut sims, mut kept) = (Vec::new(), None);
    for (round, hw) in hws.iter().enumerate() {
        let sc = sim_scenario(j, hw, a.sim_seconds);
        let o = t3fs_sim::run::run(&sc, 1, false)?;
        let load = o
            .world
            .as_ref()
            .ok_or("the simulation kept no world")?
            .load();
        sims.push(sim_figures(if j.side == "write" {
            &load.writes
        } else {
            &load.reads
        }));
        if round == keep {
            kept = Some((o, sc));
        }
    }
    let (o, sc) = kept.ok_or("no simulated round to compare")?;
    Ok((Runs::of(&sims), o, sc))
}

/// Runs job `j` in the simulator on each round's profile (`hws`, in round order) and judges it
/// against the real `runs` of the same rounds by the median of the paired errors; writes `t3fs
/// report compare` of the typical round and prints the job's row. Whether it is within both
/// tolerances, and the lines of the two sides' ranges.
fn judge(a: &Args, hws: &[Hardware], j: &Job, runs: &Runs) -> Result<(bool, String), String> {
    let typical = runs.typical();
    let (sims, o, sc) = simulate(a, hws, j, typical)?;
    let command = format!("t3fs calibrate (job {})", j.name);
    let sim_dir = crate::provenance::write_sim(&o, &sc, "calibrate", &command, &a.out)
        .map_err(|e| format!("sim run directory: {e}"))?;
    let compare = a.out.join(format!("compare-{}", j.name));
    t3fs_reports::compare(&runs.0[typical].1, &sim_dir, &compare)
        .map_err(|e| format!("report compare: {e}"))?;
    let (et, ep) = (
        sims.error_to(runs, |f| f.iops),
        sims.error_to(runs, |f| f.p99),
    );
    let within = et.abs() <= THROUGHPUT_TOL && ep.abs() <= P99_TOL;
    let (r, s) = (runs.median(), sims.median());
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
    Ok((within, detail(j, runs, &sims, typical)))
}

/// The lines under the table for job `j`: both sides' ranges, each round's errors, and which
/// round `compare-<job>` shows.
fn detail(j: &Job, real: &Runs, sims: &Runs, typical: usize) -> String {
    let range = |side: &str, runs: &Runs| {
        let (i, p) = (runs.range(|f| f.iops), runs.range(|f| f.p99 * 1e6));
        format!(
            "  {:<14} {side} IOPS {:.0} to {:.0}, p99 {:.0} to {:.0} us",
            j.name, i.0, i.1, p.0, p.1
        )
    };
    let by_round = |f: fn(&Figures) -> f64| {
        let e: Vec<String> = (sims.errors_to(real, f).iter())
            .map(|e| format!("{:+.1}", e * 100.0))
            .collect();
        e.join(" ")
    };
    let errors = format!(
        "  {:<14} errors by round: IOPS {} %, p99 {} %; compare-{} shows round {} \
         (this-host-round-{}.toml)",
        j.name,
        by_round(|f| f.iops),
        by_round(|f| f.p99),
        j.name,
        typical + 1,
        typical + 1
    );
    [range("real", real), range("sim ", sims), errors].join("\n")
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
    eprintln!("measuring this host's bounds (disk and loopback probe, CRC32C speed) ...");
    // Never an earlier run's probe: this host's disk drifts within the hour.
    let probe = t3fs_real::probe::load_or_measure(
        &a.out.join("probe.json"),
        &a.out,
        profile::PROBE_DEPTH,
        1,
        Duration::ZERO,
    )
    .map_err(|e| format!("host probe: {e}"))?;
    let crc_ns_per_byte = crate::calibrate_probes::crc_speed();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let (samples, real) = real_jobs(a)?;
    let measured = |sample| Measured {
        probe: probe.clone(),
        sample,
        crc_ns_per_byte,
        cores,
    };
    let hws = profiles(a, samples.into_iter().map(measured).collect())?;
    println!(
        "\n{:<14} {:>11} {:>11} {:>8}  {:>10} {:>10} {:>8}",
        "job", "real IOPS", "sim IOPS", "pair err", "real p99", "sim p99", "pair err"
    );
    let mut ok = true;
    let mut ranges = Vec::new();
    for (j, runs) in jobs(a).into_iter().zip(&real) {
        let (within, range) = judge(a, &hws, j, runs)?;
        ok &= within;
        ranges.push(range);
    }
    println!(
        "\n{} round(s), each measuring this host, then running each job once; each round's \
         simulation runs on that round's profile (this-host-round-N.toml). IOPS and p99: the \
         medians over rounds; pair err: the median of the rounds' paired errors (sim / real - \
         1 of the same round), which is what is judged. Ranges (this host's noise):",
        hws.len()
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

/// Writes the profile of every round's measurements pooled (`this-host.toml`, printed with
/// where each value comes from) and each round's (`this-host-round-N.toml`, replacing those of
/// an earlier run); each round's hardware, in round order.
fn profiles(a: &Args, rounds: Vec<Measured>) -> Result<Vec<Hardware>, String> {
    let first = rounds.first().ok_or("no round measured")?;
    let samples: Vec<&Sample> = rounds.iter().map(|m| &m.sample).collect();
    let pooled = Measured {
        sample: Sample::pooled(&samples),
        probe: first.probe.clone(),
        crc_ns_per_byte: first.crc_ns_per_byte,
        cores: first.cores,
    };
    let pooled = profile::this_host(&pooled);
    let path = a.out.join("this-host.toml");
    write_profile(&path, &pooled)?;
    println!("this-host profile (every round pooled): {}", path.display());
    for w in &pooled.1 {
        println!("  {w}");
    }
    let stale = std::fs::read_dir(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    for e in stale.flatten() {
        if e.file_name()
            .to_string_lossy()
            .starts_with("this-host-round-")
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
    let mut hws = Vec::new();
    for (i, m) in rounds.iter().enumerate() {
        let p = profile::this_host(m);
        write_profile(&a.out.join(format!("this-host-round-{}.toml", i + 1)), &p)?;
        hws.push(p.0);
    }
    Ok(hws)
}

/// Writes profile `p` (the hardware and where each value comes from) to `path`.
fn write_profile(path: &Path, p: &(Hardware, Vec<String>)) -> Result<(), String> {
    let text = format!(
        "# Written by `t3fs calibrate`: this host, measured.\n{}{}",
        p.1.iter().map(|w| format!("# {w}\n")).collect::<String>(),
        t3fs_scenario::write::hardware_toml(&p.0)
    );
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod pinned;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_are_judged_by_their_paired_errors_and_compared_by_their_typical_run() {
        let run = |iops: f64, p99: f64, dir: &str| (Figures { iops, p99 }, PathBuf::from(dir));
        let job = Runs(vec![
            run(500.0, 0.007, "a"),
            run(700.0, 0.002, "b"),
            run(650.0, 0.003, "c"),
        ]);
        let m = job.median();
        assert_eq!((m.iops, m.p99), (650.0, 0.003));
        assert_eq!(job.range(|f| f.iops), (500.0, 700.0));
        assert_eq!(job.typical(), 2);
        assert_eq!(median(vec![4.0, 1.0]), 2.5);
        let fig = |iops: f64| Figures { iops, p99: 0.001 };
        // Paired, the rounds are +10%, -10% and +20% (median +10%); the medians' error would
        // be 630 / 650 - 1, about -3%.
        let sim = Runs::of(&[fig(550.0), fig(630.0), fig(780.0)]);
        let e = sim.errors_to(&job, |f| f.iops);
        let want = [0.1, -0.1, 0.2];
        assert!(
            e.iter().zip(want).all(|(e, w)| (e - w).abs() < 1e-9),
            "{e:?}"
        );
        assert!((sim.error_to(&job, |f| f.iops) - 0.1).abs() < 1e-9);
        assert_eq!(median(Vec::new()), 0.0);
    }

    #[test]
    fn every_job_is_judged_on_the_side_it_runs() {
        use jobs::{CONCURRENT_JOBS, JOBS, WORKLOAD_JOBS};
        let sides: Vec<(&str, &str)> = JOBS
            .iter()
            .chain(&CONCURRENT_JOBS)
            .chain(&WORKLOAD_JOBS)
            .map(|j| (j.name, j.side))
            .collect();
        assert_eq!(
            sides,
            [
                ("seq-write-1m", "write"),
                ("seq-read-1m", "read"),
                ("randread-4k", "read"),
                ("seq-write-1m-x8", "write"),
                ("seq-read-1m-x8", "read"),
                ("randread-4k-x8", "read"),
                ("randrw-1m-x8-r", "read"),
                ("randrw-1m-x8-w", "write"),
                ("checkpoint-save", "write"),
                ("checkpoint-load", "read"),
                ("kvcache-read", "read"),
            ]
        );
        // A mixed job's simulated clients read half the time, on chunks laid out first.
        let mixed = sim_scenario_text(&CONCURRENT_JOBS[3], "", 3);
        assert!(
            mixed.contains("read_fraction = 0.5") && mixed.contains("prefill = true"),
            "{mixed}"
        );
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
        let f = read_summary(&path, "read").expect("figures");
        assert_eq!((f.iops, f.p99), (5000.5, 250e-6));
        assert!(read_summary(&path, "write").is_err(), "no write side");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
