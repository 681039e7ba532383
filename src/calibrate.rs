//! `t3fs calibrate`: the simulator's resources against a real loopback cluster on this host.
//!
//! It measures this host (the probe's disk and loopback bounds, a TCP round trip of the real
//! transport, and this CPU's copy-and-checksum speed), writes those as a `this-host` hardware
//! profile, runs three jobs on a real `cluster up` (1 MiB sequential write, 1 MiB sequential
//! read, 4 KiB random read; one job, depth 1, through `t3fs bench io`) and the same three in the
//! simulator with that profile, and reports each pair: throughput and p99 side by side with
//! their error, held to ±10% and ±25%, plus `t3fs report compare` of each pair's run directories.
//!
//! Invariant: nothing in the profile is fitted to the jobs it predicts; every value comes from a
//! measurement named in `this-host.toml`, or is an assumption named there. The cluster it starts
//! is stopped whatever happens. Not here: the resource model (sim/src/world/resources.rs).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use t3fs_scenario::hardware::THIS_HOST;
use t3fs_scenario::{Hardware, Scenario};
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

/// This host's measured inputs to the profile.
struct Measured {
    probe: t3fs_real::probe::Probe,
    rtt_p50: Duration,
    sync_p50: Duration,
    /// 4 KiB O_DIRECT random read latency, median and 99th percentile, at queue depth 1.
    read_p50: Duration,
    read_p99: Duration,
    copy_ns_per_byte: f64,
    cores: u32,
}

/// Copies per byte a chunk payload takes through one service hop (encode, decode, checksum,
/// store): the code path's count, not a measurement.
const PASSES_PER_HOP: f64 = 4.0;

/// The `this-host` profile from `m`, with where each value comes from.
fn this_host(m: &Measured) -> (Hardware, Vec<String>) {
    let p = &m.probe;
    let mib = (1u64 << 20) as f64;
    let per_stream_write = p.disk_write_buffered_mibs / p.write_qd.max(1) as f64;
    let hw = Hardware {
        profile: THIS_HOST.into(),
        nic_bytes: p.loopback_mibs * mib,
        nic_message: m.rtt_p50 / 2,
        ssd_bytes: p.disk_read_mibs * mib,
        ssd_write_bytes: per_stream_write * mib,
        ssd_iops: p.rand_read_iops,
        ssd_queue_depth: 32,
        ssd_p50: m.read_p50,
        ssd_p99: m.read_p99.max(m.read_p50),
        ssd_sync: m.sync_p50,
        cpu_cores: m.cores,
        cpu_request: Duration::ZERO,
        cpu_byte_ns: m.copy_ns_per_byte * PASSES_PER_HOP,
        shared_host: true,
    };
    let why = vec![
        format!(
            "nic_gbps: loopback TCP {:.0} MiB/s (probe, {} streams)",
            p.loopback_mibs, p.loopback_streams
        ),
        format!(
            "nic_message_us: half the transport's 4 KiB TCP round trip, p50 {:.1} us",
            m.rtt_p50.as_secs_f64() * 1e6
        ),
        format!(
            "ssd_mb_s: O_DIRECT 1 MiB reads {:.0} MiB/s (probe, qd {})",
            p.disk_read_mibs, p.qd
        ),
        format!(
            "ssd_write_mb_s: buffered durable 1 MiB writes {:.0} MiB/s, {} stream (a chain's \
             replicas write one after another)",
            p.disk_write_buffered_mibs, p.write_qd
        ),
        format!(
            "ssd_iops: 4 KiB O_DIRECT random reads {:.0} IOPS at qd {} (probe)",
            p.rand_read_iops, p.qd
        ),
        format!(
            "ssd_p50_us, ssd_p99_us: 4 KiB O_DIRECT random reads one at a time for 1 s, p50 {:.0} \
             us, p99 {:.0} us",
            m.read_p50.as_secs_f64() * 1e6,
            m.read_p99.as_secs_f64() * 1e6
        ),
        "ssd_queue_depth: 32, ASSUMED".into(),
        format!(
            "ssd_sync_us: a 64-byte append made durable (fdatasync), p50 {:.0} us: the file \
             store's metadata sync after each update and commit",
            m.sync_p50.as_secs_f64() * 1e6
        ),
        format!("cpu_cores: {} (this host)", m.cores),
        format!(
            "cpu_byte_ns: {PASSES_PER_HOP} passes per byte per hop (encode, decode, checksum, \
             store) at this CPU's copy+CRC32C speed, {:.3} ns/byte",
            m.copy_ns_per_byte
        ),
        "cpu_request_us: 0 (a request's fixed cost is in nic_message_us)".into(),
        "shared_host: every node and target of a loopback cluster on one host".into(),
    ];
    (hw, why)
}

/// The median time of a small append made durable (fdatasync) in `dir`: a file store's
/// metadata durability point. 200 appends of 64 bytes.
fn sync_latency(dir: &Path) -> Result<Duration, String> {
    use std::io::Write;
    let path = dir.join("sync-probe");
    let mut f = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut v = Vec::with_capacity(200);
    for _ in 0..200 {
        let t = Instant::now();
        f.write_all(&[1u8; 64]).map_err(|e| e.to_string())?;
        f.sync_data().map_err(|e| e.to_string())?;
        v.push(t.elapsed());
    }
    let _ = std::fs::remove_file(&path);
    v.sort();
    Ok(v[v.len() / 2])
}

/// Nanoseconds per byte to copy a buffer and checksum it, best of three passes over 64 MiB.
fn copy_speed() -> f64 {
    let src = vec![7u8; 64 << 20];
    let mut dst = vec![0u8; src.len()];
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        dst.copy_from_slice(&src);
        let sum = t3fs_core::crc32c::checksum(&dst);
        std::hint::black_box(sum);
        best = best.min(t.elapsed().as_secs_f64() * 1e9 / src.len() as f64);
    }
    best / 2.0 // Two passes (copy, checksum) measured: the cost of one.
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

/// The real jobs: figures and run directory of each.
fn real_jobs(a: &Args) -> Result<Vec<(Figures, PathBuf)>, String> {
    let cluster = a.out.join("cluster");
    let _ = std::fs::remove_dir_all(&cluster);
    let c = cluster.display().to_string();
    t3fs(
        &["cluster", "up", "--dir", &c],
        &a.out.join("cluster-up.log"),
    )?;
    let _guard = ClusterGuard(cluster.clone());
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
    Ok(out)
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
    eprintln!("measuring this host (probe, transport round trip, copy speed) ...");
    let probe = t3fs_real::probe::load_or_measure(
        &a.out.join("probe.json"),
        &a.out,
        1,
        1,
        Duration::from_secs(3600),
    )
    .map_err(|e| format!("host probe: {e}"))?;
    let lat = t3fs_real::probe::rand_read_latencies(&a.out, 64, Duration::from_secs(1))
        .map_err(|e| format!("read latency probe: {e}"))?;
    if lat.is_empty() {
        return Err("read latency probe: no read completed".into());
    }
    let rtt =
        t3fs_real::bench_transport::run(t3fs_real::bench_transport::Kind::Tcp, 4096, 2000, 16)?;
    let m = Measured {
        probe,
        rtt_p50: Duration::from_nanos(rtt.rtt.value_at_quantile(0.5)),
        sync_p50: sync_latency(&a.out)?,
        read_p50: lat[lat.len() / 2],
        read_p99: lat[lat.len() * 99 / 100],
        copy_ns_per_byte: copy_speed(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
    };
    let (hw, why) = this_host(&m);
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
    let real = real_jobs(a)?;
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
    fn the_profile_is_the_measurements_mapped_as_documented() {
        let probe = t3fs_real::probe::Probe::parse(
            r#"{"at": 1, "disk_write_mibs": 900, "disk_write_buffered_mibs": 600,
                "disk_read_mibs": 2000, "rand_read_iops": 10000, "qd": 1, "write_qd": 1,
                "loopback_mibs": 4000, "loopback_streams": 2}"#,
        )
        .expect("probe json");
        let m = Measured {
            probe,
            rtt_p50: Duration::from_micros(100),
            sync_p50: Duration::from_micros(300),
            read_p50: Duration::from_micros(80),
            read_p99: Duration::from_micros(400),
            copy_ns_per_byte: 0.1,
            cores: 2,
        };
        let (hw, why) = this_host(&m);
        let mib = (1u64 << 20) as f64;
        assert_eq!(hw.nic_bytes, 4000.0 * mib);
        assert_eq!(hw.nic_message, Duration::from_micros(50));
        assert_eq!(hw.ssd_write_bytes, 600.0 * mib, "one stream");
        assert_eq!(hw.ssd_sync, Duration::from_micros(300));
        assert_eq!(
            (hw.ssd_p50, hw.ssd_p99),
            (Duration::from_micros(80), Duration::from_micros(400))
        );
        assert!((hw.cpu_byte_ns - 0.4).abs() < 1e-12);
        assert!(hw.shared_host);
        assert!(
            why.iter().any(|w| w.contains("ASSUMED")),
            "assumptions are named"
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
        let f = read_summary(&path, "randread").expect("figures");
        assert_eq!((f.iops, f.p99), (5000.5, 250e-6));
        assert!(read_summary(&path, "write").is_err(), "no write side");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
