//! The real side of calibrate's workload jobs (`--workloads`, issue 40 item 6): the workload
//! benchmarks themselves, `t3fs bench checkpoint` and `t3fs bench kvcache` on the native
//! client, shaped as their simulated twins (1 MiB operations, one chunk each), and the figures
//! judged, read back from the run directory the benchmark wrote: the headline throughput of
//! its roofline row and the p99 of the operation's latencies.
//!
//! Invariant: a workload whose own validator failed (a checkpoint loaded unequal, a KV block
//! read wrong) is an error, never a figure. Not here: the simulated twin (calibrate.rs's
//! scenario from the job's shape) or the judging.

use std::path::{Path, PathBuf};

use super::jobs::{chunks, Job, Real, KVCACHE_CLIENTS};
use super::{Args, Figures};
use crate::supervised::t3fs;

const MIB: f64 = (1u64 << 20) as f64;

/// The checkpoint's size for `seconds` of real time: 32 MiB per rank and second, which a save
/// on a 2-core loopback cluster takes about that long to write.
fn checkpoint_mib(j: &Job, seconds: u64) -> u64 {
    32 * seconds.max(1) * u64::from(j.jobs)
}

/// The benchmark's arguments for job `j` on the cluster at `cluster`, writing under `out`.
fn args(j: &Job, cluster: &str, out: &str, seconds: u64) -> Vec<String> {
    let (kind, extra): (&str, Vec<String>) = match j.real {
        Real::Checkpoint(_) => {
            let size = format!("{}m", checkpoint_mib(j, seconds));
            let ranks = j.jobs.to_string();
            let extra = ["--ranks", &ranks, "--size", &size, "--piece", "1m"];
            ("checkpoint", extra.map(String::from).into())
        }
        Real::Kvcache => {
            let (clients, depth) = (
                KVCACHE_CLIENTS.to_string(),
                (j.jobs / KVCACHE_CLIENTS).max(1).to_string(),
            );
            let (secs, blocks) = (seconds.max(1).to_string(), chunks(j).to_string());
            // Reads only (new blocks and the GC's removes are meta's, and the chunk workload
            // the twin runs has neither), uniform over as many blocks as the twin's chunks. A
            // real read opens its block's file first (a meta request): its latency has it.
            let extra = [
                "--clients",
                &clients,
                "--depth",
                &depth,
                "--block",
                "1m",
                "--blocks",
                &blocks,
                "--skew",
                "0",
                "--seconds",
                &secs,
                "--write-percent",
                "0",
                "--ttl",
                "1000000",
            ];
            ("kvcache", extra.map(String::from).into())
        }
        Real::Io => unreachable!("bench io jobs run in calibrate.rs"),
    };
    let common = [
        "--cluster",
        cluster,
        "--on",
        "native",
        "--no-probe",
        "--out",
        out,
    ];
    (["bench", kind].into_iter().chain(common))
        .map(String::from)
        .chain(extra)
        .collect()
}

/// The roofline row and the latency histogram that stand for job `j` in its run directory.
fn measured(j: &Job) -> (&'static str, &'static str) {
    match j.real {
        Real::Checkpoint(phase) => (phase, phase),
        Real::Kvcache => ("read (all clients)", "read"),
        Real::Io => unreachable!("bench io jobs have a summary"),
    }
}

/// Round `round` of workload job `j` on the cluster at `c`: its figures (operations per second
/// of `j.bs`, p99) and run directory.
pub(super) fn real_job(
    a: &Args,
    c: &str,
    j: &Job,
    round: u32,
) -> Result<(Figures, PathBuf), String> {
    let dir = a.out.join(format!("real-{}-{round}", j.name));
    let argv = args(j, c, &dir.display().to_string(), a.seconds);
    eprintln!("round {round}: {} ...", j.name);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    t3fs(&argv, &a.out.join(format!("real-{}-{round}.log", j.name)))?;
    let run = dir.join("native");
    Ok((figures(&run, j)?, run))
}

/// Job `j`'s figures from the run directory `run` of its benchmark.
fn figures(run: &Path, j: &Job) -> Result<Figures, String> {
    let at = |e: String| format!("{}: {e}", run.display());
    let data = t3fs_reports::rundir::read(run).map_err(|e| at(e.to_string()))?;
    let m = &data.manifest;
    if m.exit != 0 {
        return Err(at(format!("the workload's validator failed: {}", m.reason)));
    }
    let (row, op) = measured(j);
    let line = (m.roofline.iter().find(|l| l.op == row))
        .ok_or_else(|| at(format!("no roofline row {row:?}")))?;
    let lat = data.merged_latencies();
    let hist = (lat.get(op).filter(|h| h.len() > 0))
        .ok_or_else(|| at(format!("no latencies of {op:?}")))?;
    Ok(Figures {
        iops: line.measured * MIB / f64::from(j.bs),
        p99: hist.value_at_quantile(0.99) as f64 / 1e6,
    })
}

#[cfg(test)]
mod tests {
    use super::super::jobs::WORKLOAD_JOBS;
    use super::*;

    #[test]
    fn each_workload_runs_its_benchmark_shaped_as_its_twin() {
        let [save, load, kv] = &WORKLOAD_JOBS;
        let s = args(save, "c", "o", 2).join(" ");
        assert!(
            s.starts_with("bench checkpoint --cluster c --on native --no-probe --out o")
                && s.ends_with("--ranks 4 --size 256m --piece 1m"),
            "{s}"
        );
        assert_eq!(
            args(load, "c", "o", 2).join(" "),
            s,
            "one benchmark, two phases"
        );
        let k = args(kv, "c", "o", 3).join(" ");
        assert!(
            k.contains("bench kvcache")
                && k.contains("--clients 4 --depth 8 --block 1m")
                && k.contains("--blocks 16 --skew 0 --seconds 3 --write-percent 0"),
            "{k}"
        );
        assert_eq!(measured(kv), ("read (all clients)", "read"));
        assert_eq!(measured(load), ("load", "load"));
    }

    #[test]
    fn a_run_whose_validator_failed_gives_no_figures() {
        let dir = std::env::temp_dir().join(format!("t3fs-cal-wl-{}", std::process::id()));
        let mut data = t3fs_reports::RunData::default();
        data.manifest.exit = 1;
        data.manifest.reason = "checkpoint loaded equal to what was saved: FAIL".into();
        t3fs_reports::rundir::write(&dir, &data).expect("write");
        let e = figures(&dir, &WORKLOAD_JOBS[1]).expect_err("a failed run");
        assert!(e.contains("validator failed"), "{e}");
        data.manifest.exit = 0;
        t3fs_reports::rundir::write(&dir, &data).expect("write");
        let e = figures(&dir, &WORKLOAD_JOBS[1]).expect_err("no row");
        assert!(e.contains("no roofline row"), "{e}");
        // A load of 250 MiB/s whose pieces took 1 to 100 ms: 250 reads of 1 MiB a second,
        // p99 99 ms.
        data.manifest.roofline.push(t3fs_reports::RooflineLine {
            op: "load".into(),
            unit: "MiB/s".into(),
            measured: 250.0,
            bounds: Vec::new(),
            binding: String::new(),
            percent: 0.0,
            saturated: String::new(),
        });
        let mut h = t3fs_reports::rundir::new_histogram();
        for ms in 1..=100u64 {
            h.record(ms * 1000).expect("in range");
        }
        data.series.interval = 1.0;
        data.series.ops.insert("load".into(), vec![100]);
        data.latencies.insert("load".into(), vec![h]);
        t3fs_reports::rundir::write(&dir, &data).expect("write");
        let f = figures(&dir, &WORKLOAD_JOBS[1]).expect("figures");
        assert!((f.iops - 250.0).abs() < 1e-9, "{f:?}");
        assert!((f.p99 - 0.099).abs() < 0.001, "{f:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
