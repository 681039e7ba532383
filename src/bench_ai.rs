//! `t3fs bench checkpoint` and `t3fs bench kvcache`: the AI workloads of t3fs-real's
//! `workload` module on one or more stores in turn (the cluster through the native client, the
//! FUSE mount, a local directory), each beside the host's bounds probed in the same run, each
//! a run directory with its report, and a side-by-side table at the end.
//!
//! Not here: the workloads themselves (t3fs-real), or GraySort (`t3fs graysort`, and the
//! smallpond pipeline in python/bench/graysort.py).

use std::path::{Path, PathBuf};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use t3fs_real::probe::Probe;
use t3fs_real::roofline::Row;
use t3fs_real::workload::recorder::Recorder;
use t3fs_real::workload::store::Store;

/// Where a workload runs, and how a run's bounds are formed.
#[derive(Clone, Debug)]
pub struct Target {
    /// `native`, `mount` or `local` (the run directory's name).
    pub name: String,
    /// `None`: the native client; else the directory.
    pub dir: Option<PathBuf>,
    /// Replicas the bytes land on (the cluster's for native and mount, 1 for a local dir).
    pub replicas: u32,
}

/// Options shared by the workload benchmarks.
#[derive(clap::Args, Debug, Clone)]
pub struct Common {
    /// The cluster directory of `t3fs cluster up` (for `native`, and for the bounds).
    #[arg(long, default_value = "t3fs-cluster")]
    pub cluster: PathBuf,
    /// Where to run, in turn: `native` (the native client), or a directory (a t3fs FUSE mount
    /// is recognised as `mount`, anything else is `local`). Repeat for a side-by-side run.
    #[arg(long = "on", default_value = "native")]
    pub on: Vec<String>,
    /// Where the run directories go (one per target).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Reuse the saved host probe (runs/probe.json) while younger than this many seconds (0:
    /// probe in this run).
    #[arg(long, default_value_t = 0)]
    pub probe_max_age: u64,
    /// Skip the host probe: the report gives no bounds (and says so).
    #[arg(long)]
    pub no_probe: bool,
}

/// The file system type of the mount holding `p` (from /proc/self/mountinfo).
fn fs_type(p: &Path) -> String {
    let p = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut best = (0, String::new());
    for line in info.lines() {
        let mut f = line.split(' ');
        let point = f.nth(4).unwrap_or("");
        let ty = line.split(" - ").nth(1).and_then(|r| r.split(' ').next());
        if p.starts_with(point) && point.len() >= best.0 {
            best = (point.len(), ty.unwrap_or("").to_string());
        }
    }
    best.1
}

/// The targets `c` names, with the cluster's replica count.
pub fn targets(c: &Common, replicas: u32) -> Result<Vec<Target>, String> {
    c.on.iter()
        .map(|on| {
            if on == "native" {
                return Ok(Target {
                    name: "native".into(),
                    dir: None,
                    replicas,
                });
            }
            let dir = PathBuf::from(on);
            if !dir.is_dir() {
                return Err(format!("--on {on}: not `native` nor a directory"));
            }
            let mount = fs_type(&dir).starts_with("fuse");
            Ok(Target {
                name: if mount { "mount" } else { "local" }.into(),
                dir: Some(dir),
                replicas: if mount { replicas } else { 1 },
            })
        })
        .collect()
}

/// The targets `c` names and the host's bounds at `streams` streams, or why not.
pub fn setup(c: &Common, streams: usize) -> Result<(Vec<Target>, Option<Probe>), String> {
    let replicas = match t3fs_real::cluster::nodes(&c.cluster) {
        Ok(n) if !n.is_empty() => n[0].cfg.cluster.replicas,
        _ => return Err(format!("no cluster in {}", c.cluster.display())),
    };
    let targets = targets(c, replicas)?;
    Ok((targets, probe(c, streams, replicas)?))
}

/// `n` stores on `t`: a native client each, or the directory.
pub async fn stores(
    t: &Target,
    opts: &t3fs_client::client::ClientOptions,
    n: usize,
) -> Result<Vec<Store>, String> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(match &t.dir {
            None => Store::native(opts.clone()).await?,
            Some(d) => Store::Posix(d.clone()),
        });
    }
    Ok(out)
}

/// The host's bounds, on the filesystem the chunk stores live on, at `streams` streams.
pub fn probe(c: &Common, streams: usize, replicas: u32) -> Result<Option<Probe>, String> {
    if c.no_probe {
        return Ok(None);
    }
    let nodes = t3fs_real::cluster::nodes(&c.cluster)?;
    let data = nodes
        .iter()
        .find(|n| n.role == "storage")
        .map_or_else(|| c.cluster.clone(), |n| n.cfg.node.data.clone());
    eprintln!("probing this host's disk and loopback ...");
    let p = t3fs_real::probe::load_or_measure(
        Path::new("runs/probe.json"),
        &data,
        streams,
        streams * replicas as usize,
        Duration::from_secs(c.probe_max_age),
    )
    .map_err(|e| format!("host probe: {e}"))?;
    println!(
        "host probe: disk write {:.0} MiB/s (durable, {} streams), disk read {:.0} MiB/s (O_DIRECT), loopback {:.0} MiB/s",
        p.disk_write_mibs, p.write_qd, p.disk_read_mibs, p.loopback_mibs
    );
    Ok(Some(p))
}

/// Write bounds of a target: durable disk writes and loopback, each ÷ its replicas (a local
/// directory crosses no loopback).
pub fn write_bounds(p: Option<&Probe>, t: &Target) -> Vec<(String, f64)> {
    let Some(p) = p else { return Vec::new() };
    let r = f64::from(t.replicas);
    let mut b = vec![(
        format!(
            "disk write (durable) at {} streams ÷ {}",
            p.write_qd, t.replicas
        ),
        p.disk_write_mibs / r,
    )];
    if t.name != "local" {
        b.push((
            format!("loopback TCP ÷ {} hops", t.replicas),
            p.loopback_mibs / r,
        ));
    }
    b
}

/// Read bounds of a target: the disk (O_DIRECT; a read served from the page cache beats it
/// and is bound by what comes next) and loopback.
pub fn read_bounds(p: Option<&Probe>, t: &Target) -> Vec<(String, f64)> {
    let Some(p) = p else { return Vec::new() };
    let mut b = vec![(
        format!("disk sequential read (O_DIRECT) at qd {}", p.qd),
        p.disk_read_mibs,
    )];
    if t.name != "local" {
        b.push(("loopback TCP".into(), p.loopback_mibs));
    }
    b
}

/// A spinner showing `rec`'s phase and counts until `done` is set.
pub fn progress(
    rec: &Recorder,
    what: &str,
) -> (ProgressBar, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template("{spinner} {prefix} {elapsed} {msg}").expect("template"),
    );
    pb.set_prefix(what.to_string());
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (r, d, p) = (rec.clone(), done.clone(), pb.clone());
    std::thread::spawn(move || {
        while !d.load(std::sync::atomic::Ordering::Relaxed) {
            p.set_message(r.status());
            p.tick();
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    (pb, done)
}

/// The cluster's shape in words, with the target.
pub fn shape(c: &Common, t: &Target) -> String {
    let nodes = t3fs_real::cluster::nodes(&c.cluster).unwrap_or_default();
    let storage = nodes.iter().filter(|n| n.role == "storage").count();
    let cl = nodes.first().map(|n| n.cfg.cluster.clone());
    let cluster = cl.map_or_else(String::new, |cl| {
        format!(
            "{storage} storage nodes, {} chains of {} replicas, {} KV, loopback TCP",
            cl.chains, cl.replicas, cl.kv
        )
    });
    match &t.dir {
        None => format!("the native client; {cluster}"),
        Some(d) if t.name == "mount" => format!("the FUSE mount at {}; {cluster}", d.display()),
        Some(d) => format!("a local directory, {}", d.display()),
    }
}

/// Writes `run`'s directory under `out/<target>`; its path.
pub fn write_run(
    out: &Path,
    t: &Target,
    run: &t3fs_real::workload::run_dir::WorkloadRun,
) -> Result<PathBuf, String> {
    let dir = out.join(&t.name);
    let data = t3fs_real::workload::run_dir::run_data(run);
    t3fs_crosscheck::real_run::write(data, &dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

/// MiB/s of `bytes` over `secs`.
pub fn mibs(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64 / secs.max(1e-9)
}

/// A row's measured figure as a percentage of its binding bound, in words.
pub fn against(row: &Row) -> String {
    if row.bounds.is_empty() {
        return "no bounds (not probed)".into();
    }
    let (name, v) = row.binding();
    format!("{:.0}% of {name} ({v:.0} {})", row.percent(), row.unit)
}

/// The command line that reproduces this run.
pub fn command() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// The cluster's processes (and this one, as `client`) whose CPU a run accounts.
pub fn procs(c: &Common) -> std::collections::BTreeMap<String, i32> {
    t3fs_real::cluster::pids(&c.cluster)
}

/// What limited each row, in words (the binding bound when reached, else the saturated CPU or
/// the latency that bound it).
pub fn limits(rows: &[Row], usage: &t3fs_real::cpu::Usage) -> String {
    rows.iter()
        .filter(|r| !r.bounds.is_empty())
        .map(|r| {
            format!(
                "{}: {}",
                r.op,
                t3fs_real::cpu::limit(r.percent(), r.binding().0, usage)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}
