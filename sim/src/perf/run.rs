//! Runs a performance scenario and writes its report: `report.md` (figures, roofline, what
//! binds, the model's assumptions), charts as SVG and the throughput series as CSV, in
//! `OUT/NAME-flow-seedS/`.
//!
//! Not here: the model (`engine.rs`, `flow.rs`) or the scenario's traffic (`peak_read.rs`,
//! `recovery.rs`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::engine::{Sample, Stats};
use super::hardware::Hardware;
use super::layout::Layout;
use super::peak_read::Readers;
use super::recovery::Recovery;
use super::scenario::{PerfScenario, RecoverySection};
use super::setup::{assumptions, hardware, layout, simulate, write};

const TIB: f64 = (1u64 << 40) as f64;
const GIB: f64 = (1u64 << 30) as f64;

/// What a run printed and where its report is.
pub struct Outcome {
    /// The summary lines.
    pub summary: String,
    /// The run directory.
    pub dir: PathBuf,
}

/// Runs the scenario at `path`, writing its report under `out`; `progress` sees each sample.
pub fn run(path: &Path, out: &Path, progress: &mut dyn FnMut(f64)) -> Result<Outcome, String> {
    let sc = PerfScenario::load(path)?;
    let dir = out.join(format!("{}-flow-seed{}", sc.name, sc.seed));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let summary = match sc.kind.as_str() {
        "peak_read" => peak_read(&sc, &dir, progress)?.0,
        "pipeline" => {
            let (summary, fig) = super::pipeline_run::pipeline(&sc, &dir, progress)?;
            super::run_dir::write_pipeline(&sc, path, &dir, &fig)?;
            summary
        }
        "training" => {
            let (summary, held) = super::training_run::training(&sc, &dir, progress)?;
            super::run_dir::write_training(&sc, path, &dir, &held)?;
            summary
        }
        _ => recovery(&sc, &dir, progress)?,
    };
    Ok(Outcome { summary, dir })
}

/// The published figure the scenario compares with, if it names one.
/// The published figures beside the prediction `mean` (TiB/s aggregate), with the error.
fn published(sc: &PerfScenario, mean: f64) -> String {
    let mut s = sc.published_tib_s.map_or(String::new(), |p| {
        format!(" Published: {p} TiB/s ({:+.1}%).", 100.0 * (mean / p - 1.0))
    });
    if let Some(p) = sc.published_client_gib_s {
        let per = client_gib_s(sc, mean);
        let _ = write!(
            s,
            " Per client: predicted {per:.1} GiB/s, published {p} GiB/s ({:+.1}%).",
            100.0 * (per / p - 1.0)
        );
    }
    s
}

/// Read GiB/s per client of an aggregate `mean` TiB/s.
pub fn client_gib_s(sc: &PerfScenario, mean: f64) -> f64 {
    mean * TIB / GIB / f64::from(sc.cluster.clients)
}

/// A peak-read run's figures, TiB/s.
pub struct Peak {
    /// Predicted aggregate read.
    pub mean: f64,
    /// The roofline: (what, bound), the fabric core's among them when it is oversubscribed.
    pub bounds: Vec<(&'static str, f64)>,
}

impl Peak {
    /// The binding bound: (what, TiB/s).
    pub fn binding(&self) -> (&'static str, f64) {
        binding(&self.bounds)
    }
}

/// The lowest of `bounds`.
fn binding(bounds: &[(&'static str, f64)]) -> (&'static str, f64) {
    bounds
        .iter()
        .copied()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .expect("three bounds")
}

/// Runs a peak-read scenario, writing its report in `dir`: the summary line and the figures.
pub fn peak_read(
    sc: &PerfScenario,
    dir: &Path,
    progress: &mut dyn FnMut(f64),
) -> Result<(String, Peak), String> {
    let hw = hardware(sc);
    let c = &sc.cluster;
    let layout = layout(sc, &hw, &c.table)?;
    let run = run_readers(sc, &hw, &layout, progress);
    let mean = run.node_gib.iter().sum::<f64>() * GIB / TIB;
    let bounds = read_bounds(sc, &hw, &layout);
    let (bind, bound) = binding(&bounds);
    write_read_charts(sc, dir, &run, &bounds)?;
    let md = peak_report(sc, &hw, &run, mean, &bounds, (bind, bound));
    write(dir, "report.md", &md)?;
    let line = peak_summary(sc, mean, &bounds, (bind, bound));
    let bounds = bounds.into_iter().map(|(n, v)| (n, v / TIB)).collect();
    Ok((line, Peak { mean, bounds }))
}

/// What a peak-read run measured.
struct ReadRun {
    /// Aggregate read over time: (t, TiB/s).
    series: Vec<(f64, f64)>,
    /// Each storage node's read rate over the second half, GiB/s.
    node_gib: Vec<f64>,
    /// The engine's counts.
    stats: Stats,
}

/// Runs the scenario's closed-loop readers on `layout` and samples what the storage nodes send.
fn run_readers(
    sc: &PerfScenario,
    hw: &Hardware,
    layout: &Layout,
    progress: &mut dyn FnMut(f64),
) -> ReadRun {
    let c = &sc.cluster;
    let read = f64::from(sc.workload.read_kib) * 1024.0;
    let mut src = Readers::new(
        layout,
        sc.seed,
        read,
        sc.workload.concurrency,
        hw.request_latency,
    );
    let (mut series, mut per_node) = (Vec::new(), vec![0.0; c.storage_nodes as usize]);
    let half = sc.duration_s / 2.0;
    let mut steady = 0.0;
    let stats = simulate(sc, layout, &mut src, |s: &Sample| {
        let bytes: f64 = (0..c.storage_nodes)
            .map(|n| s.bytes[layout.storage_out(n) as usize])
            .sum();
        series.push((s.t, bytes / s.dt / TIB));
        if s.t > half + 1e-9 {
            steady += s.dt;
            for n in 0..c.storage_nodes {
                per_node[n as usize] += s.bytes[layout.storage_out(n) as usize];
            }
        }
        progress(s.t / sc.duration_s);
    });
    let node_gib: Vec<f64> = per_node
        .iter()
        .map(|b| b / steady.max(1e-12) / GIB)
        .collect();
    ReadRun {
        series,
        node_gib,
        stats,
    }
}

/// The roofline, bytes/s: storage NICs, client NICs, SSDs, and the fabric core if oversubscribed.
fn read_bounds(sc: &PerfScenario, hw: &Hardware, layout: &Layout) -> Vec<(&'static str, f64)> {
    let c = &sc.cluster;
    let mut bounds = vec![
        ("storage NICs", f64::from(c.storage_nodes) * layout.caps[0]),
        (
            "client NICs",
            f64::from(c.clients) * hw.nic_payload(&hw.client),
        ),
        (
            "SSDs",
            f64::from(c.storage_nodes * hw.storage.ssds) * hw.storage.ssd_bytes,
        ),
    ];
    if let Some(core) = layout.core_capacity() {
        bounds.push(("fabric core", core));
    }
    bounds
}

/// Writes the throughput chart with its bounds, the per-node scatter and the throughput CSV.
fn write_read_charts(
    sc: &PerfScenario,
    dir: &Path,
    run: &ReadRun,
    bounds: &[(&'static str, f64)],
) -> Result<(), String> {
    let bound_lines: Vec<(String, f64)> = bounds
        .iter()
        .map(|(n, v)| (format!("{n} bound"), v / TIB))
        .collect();
    let chart = t3fs_reports::perf_charts::series_with_bounds(
        &format!("{}: aggregate read throughput", sc.name),
        "TiB/s",
        &run.series,
        &bound_lines,
    )?;
    write(dir, "throughput.svg", &chart)?;
    let scatter = t3fs_reports::perf_charts::scatter_with_mean(
        "read throughput per storage node (second half)",
        "GiB/s",
        &run.node_gib,
    )?;
    write(dir, "per_node.svg", &scatter)?;
    let mut csv = String::from("t_s,read_tib_s\n");
    for (t, v) in &run.series {
        let _ = writeln!(csv, "{t:.4},{v:.6}");
    }
    write(dir, "throughput.csv", &csv)
}

/// The peak-read `report.md`: prediction, bounds, spread over nodes, the model's assumptions.
fn peak_report(
    sc: &PerfScenario,
    hw: &Hardware,
    run: &ReadRun,
    mean: f64,
    bounds: &[(&'static str, f64)],
    (bind, bound): (&'static str, f64),
) -> String {
    let c = &sc.cluster;
    let (lo, hi) = run
        .node_gib
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), v| (l.min(*v), h.max(*v)));
    let mut md = format!("# {}\n\n{}\n\n", sc.name, sc.about);
    let _ = writeln!(
        md,
        "Predicted aggregate read throughput (mean of the second half): **{mean:.2} TiB/s**, \
         {:.1}% of the binding bound ({bind}, {:.2} TiB/s).{}\n",
        100.0 * mean * TIB / bound,
        bound / TIB,
        published(sc, mean)
    );
    md.push_str("| bound | TiB/s | model's share of it |\n|---|---|---|\n");
    for &(n, v) in bounds {
        let _ = writeln!(
            md,
            "| {n} | {:.2} | {:.1}% |",
            v / TIB,
            100.0 * mean * TIB / v
        );
    }
    let _ = writeln!(
        md,
        "\nPer storage node: {lo:.1} to {hi:.1} GiB/s (mean {:.1}); the spread comes from random \
         chunk placement at finite concurrency ({} clients x {} reads of {} KiB).\n",
        mean * TIB / GIB / f64::from(c.storage_nodes),
        c.clients,
        sc.workload.concurrency,
        sc.workload.read_kib
    );
    md.push_str("![throughput](throughput.svg)\n\n![per node](per_node.svg)\n\n");
    md.push_str(&assumptions(sc, hw, &run.stats));
    md
}

/// The peak-read summary line: the prediction, the binding bound `(bind, bound)` and the others.
fn peak_summary(
    sc: &PerfScenario,
    mean: f64,
    bounds: &[(&'static str, f64)],
    (bind, bound): (&'static str, f64),
) -> String {
    let others: Vec<String> = bounds
        .iter()
        .filter(|b| b.0 != bind)
        .map(|(n, v)| format!("{n} {:.2}", v / TIB))
        .collect();
    format!(
        "{}: predicted {mean:.2} TiB/s aggregate read ({:.1}% of the {bind} bound, {:.2} TiB/s; \
         {}){}\n",
        sc.name,
        100.0 * mean * TIB / bound,
        bound / TIB,
        others.join(", "),
        published(sc, mean)
    )
}

/// Recovery of one node under each chain table.
fn recovery(
    sc: &PerfScenario,
    dir: &Path,
    progress: &mut dyn FnMut(f64),
) -> Result<String, String> {
    let hw = hardware(sc);
    let r = sc.recovery.as_ref().expect("checked at load");
    let read = f64::from(sc.workload.read_kib) * 1024.0;
    let mut groups = Vec::new();
    let mut md = format!(
        "# {}\n\n{}\n\n| table | recovery time (s) | peers serving copies | most one peer served (GiB) | busiest peer's NIC (sending) | foreground read during recovery (GiB/s) |\n|---|---|---|---|---|---|\n",
        sc.name, sc.about
    );
    let (mut floor, mut last_stats) = (0.0, Stats::default());
    let mut summary = String::new();
    for (k, kind) in ["round-robin", "balanced"].into_iter().enumerate() {
        let TableRecovery {
            stats,
            floor: table_floor,
            time,
            peers,
            most,
            busiest,
            nic,
            fg_rate,
            served,
        } = recover_under(sc, &hw, r, (k, kind), read, progress)?;
        last_stats = stats;
        floor = table_floor;
        let _ = writeln!(
            md,
            "| {kind} | {time} | {peers} | {most:.0} | copies {:.0}% of its NIC, all traffic {:.0}% | {fg_rate:.1} |",
            100.0 * busiest,
            100.0 * nic
        );
        let _ = writeln!(
            summary,
            "{}: {kind} table: recovery {time} s, copies served by {peers} peers (at most {most:.0} GiB each, {:.0}% of that peer's NIC)",
            sc.name,
            100.0 * busiest
        );
        groups.push((kind.to_string(), served));
    }
    let chart = t3fs_reports::perf_charts::grouped_bars(
        &format!("recovery reads per node when node {} fails", r.failed_node),
        "GiB served",
        &groups,
    )?;
    write(dir, "recovery.svg", &chart)?;
    let _ = writeln!(
        md,
        "\nThe floor under either table: the returning node's NIC receives every copied byte, so \
         recovery takes at least {floor:.1} s; a table decides how many peers share the sending \
         and how hot the busiest runs while clients read from it.\n"
    );
    md.push_str("![recovery reads per node](recovery.svg)\n\n");
    md.push_str(&assumptions(sc, &hw, &last_stats));
    write(dir, "report.md", &md)?;
    Ok(summary)
}

/// One chain table's recovery run, as its report row reads it.
struct TableRecovery {
    /// The engine's counts.
    stats: Stats,
    /// The least time the recovery could take under this table, seconds.
    floor: f64,
    /// When the copies ended (`> duration` if they did not), seconds.
    time: String,
    /// Peers that served copies.
    peers: usize,
    /// Most one peer served, GiB.
    most: f64,
    /// The busiest peer's copy traffic as a share of its NIC.
    busiest: f64,
    /// The busiest peer's whole sending load as a share of its NIC.
    nic: f64,
    /// Foreground read during recovery, GiB/s.
    fg_rate: f64,
    /// GiB each node served.
    served: Vec<f64>,
}

/// Runs the recovery of `r` under chain table `kind` (the `k`th of two, for progress).
fn recover_under(
    sc: &PerfScenario,
    hw: &Hardware,
    r: &RecoverySection,
    (k, kind): (usize, &str),
    read: f64,
    progress: &mut dyn FnMut(f64),
) -> Result<TableRecovery, String> {
    let c = &sc.cluster;
    let layout = layout(sc, hw, kind)?;
    let mut src = Recovery::new(
        &layout,
        r.failed_node,
        r.target_gib * GIB,
        sc.seed,
        read,
        sc.workload.concurrency,
        hw.request_latency,
    );
    // The run ends when the copies do (the source says so): every sample is recovery.
    let (mut fg, mut elapsed) = (0.0, 0.0);
    let mut sent = vec![0.0; c.storage_nodes as usize];
    let stats = simulate(sc, &layout, &mut src, |s: &Sample| {
        fg += (0..c.clients)
            .map(|n| s.bytes[layout.client_in(n) as usize])
            .sum::<f64>();
        for (n, b) in sent.iter_mut().enumerate() {
            *b += s.bytes[layout.storage_out(n as u32) as usize];
        }
        elapsed = s.t;
        progress((k as f64 + s.t / sc.duration_s) / 2.0);
    });
    let floor = recovery_floor(hw, r, &layout, &src.served);
    // The busiest peer's copy traffic as a share of its NIC, and its NIC's whole load.
    let (peer, copies) = src
        .served
        .iter()
        .copied()
        .enumerate()
        .fold((0, 0.0), |a, (n, b)| if b > a.1 { (n, b) } else { a });
    let busiest = copies / elapsed.max(1e-12) / layout.caps[0];
    let nic = sent[peer] / elapsed.max(1e-12) / layout.caps[0];
    let served: Vec<f64> = src.served.iter().map(|b| b / GIB).collect();
    let peers = served.iter().filter(|&&v| v > 0.0).count();
    let most = served.iter().copied().fold(0.0, f64::max);
    let time = src
        .done_at
        .map_or(format!("> {:.0}", sc.duration_s), |t| format!("{t:.1}"));
    let fg_rate = fg / elapsed.max(1e-12) / GIB;
    Ok(TableRecovery {
        stats,
        floor,
        time,
        peers,
        most,
        busiest,
        nic,
        fg_rate,
        served,
    })
}

/// The least time recovery can take with `served` bytes copied from each node, seconds.
fn recovery_floor(hw: &Hardware, r: &RecoverySection, layout: &Layout, served: &[f64]) -> f64 {
    // The floor: the returning node's NIC takes every copied byte, and each of its SSDs
    // the targets of its disk index.
    let total: f64 = served.iter().sum();
    let per_disk = layout
        .table
        .chains
        .iter()
        .filter(|ch| ch.contains(&r.failed_node))
        .count();
    (total / layout.caps[layout.storage_in(r.failed_node) as usize])
        .max(per_disk as f64 * r.target_gib * GIB / hw.storage.ssd_bytes)
}
