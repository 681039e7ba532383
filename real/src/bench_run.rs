//! A real run as a run directory of t3fs-reports, the same format and report as a simulated
//! run: the manifest (mode `real`, the job as a fio job file, the cluster shape, the probed
//! bounds, CPU per GiB, the roofline and the verdicts), completions and failures per second,
//! per-second latency histograms, `phase` and `fault` events from the caller, and the chain
//! timeline with `chain` events from mgmtd's routing history as a watcher saw it.
//!
//! Invariant: times are seconds since recording began (`Report::zero`); events before it keep
//! negative times and chain states before it are clamped to 0. Not here: the commit and host
//! (the CLI fills them, as for simulated runs), running the load, or drawing.

use std::collections::BTreeMap;
use std::time::Instant;

use t3fs_reports::{Bound, EventLine, Manifest, RooflineLine, RunData, Series, VerdictLine};

use crate::bench_io::Rw;
use crate::bench_report::Report;
use crate::cpu::Usage;
use crate::probe::Probe;
use crate::roofline::Row;
use crate::routing_watch::{chain_events, chain_points, Seen};

/// A fault or phase the caller marks on the timeline.
#[derive(Clone, Debug)]
pub struct Mark {
    /// When.
    pub at: Instant,
    /// `fault` or `phase`.
    pub kind: &'static str,
    /// The node it concerns (empty: none).
    pub node: String,
    /// What happened.
    pub what: String,
}

/// Everything a real run's directory is made from.
pub struct RealRun<'a> {
    /// Run name (the report's title).
    pub name: String,
    /// One line on what it did.
    pub about: String,
    /// The command that reproduces it.
    pub command: String,
    /// The cluster shape in words.
    pub shape: String,
    /// The load's outcome.
    pub report: &'a Report,
    /// The host's bounds.
    pub probe: Option<&'a Probe>,
    /// The roofline rows.
    pub rows: Vec<Row>,
    /// mgmtd's routing history as a watcher saw it.
    pub seen: Vec<Seen>,
    /// Faults and phases.
    pub marks: Vec<Mark>,
    /// Verdicts beyond the load's own (verify adds one).
    pub verdicts: Vec<VerdictLine>,
}

/// The job as a fio job file, so a reader can rerun it with fio's vocabulary in mind.
pub fn job_file(r: &Report) -> String {
    let j = &r.job;
    let rw = match j.rw {
        Rw::Read => "read",
        Rw::Write => "write",
        Rw::RandRead => "randread",
        Rw::RandWrite => "randwrite",
        Rw::RandRw => "randrw",
    };
    let mut s = format!(
        "[global]\nioengine=t3fs-native\ndirect=1\nrw={rw}\nbs={}\niodepth={}\nnumjobs={}\nsize={}\n",
        j.bs, j.iodepth, j.numjobs, j.size
    );
    if j.rw == Rw::RandRw {
        s.push_str(&format!("rwmixread={}\n", j.rwmixread));
    }
    if let Some(rt) = j.runtime {
        s.push_str(&format!("runtime={}\n", rt.as_secs()));
    }
    if j.time_based {
        s.push_str("time_based=1\n");
    }
    if !j.ramp_time.is_zero() {
        s.push_str(&format!("ramp_time={}\n", j.ramp_time.as_secs()));
    }
    if let Some(r) = j.rate_iops {
        s.push_str(&format!("rate_iops={r}\n"));
    }
    if j.verify {
        s.push_str("verify=meta\n");
    }
    s.push_str(if j.shared {
        "filename=shared\n"
    } else {
        "filename=per-job\n"
    });
    s
}

fn secs(at: Instant, zero: Instant) -> f64 {
    match at.checked_duration_since(zero) {
        Some(d) => d.as_secs_f64(),
        None => -zero.duration_since(at).as_secs_f64(),
    }
}

/// The verify verdict of a report (none when the run did not verify).
pub fn verify_verdict(r: &Report) -> Option<VerdictLine> {
    let v = r.verify.as_ref()?;
    let label = if v.ok() { "PASS" } else { "FAIL" };
    let mut detail = format!(
        "{} reads checked as they returned, {} blocks read back; {} problems",
        v.reads_checked, v.blocks_checked, v.problem_count
    );
    for p in &v.problems {
        detail.push('\n');
        detail.push_str(p);
    }
    Some(VerdictLine {
        name: "acknowledged writes durable (verify)".into(),
        label: label.into(),
        detail,
    })
}

pub(crate) fn probe_map(
    probe: Option<&Probe>,
    usage: Option<&Usage>,
    bytes: u64,
) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    if let Some(p) = probe {
        m.insert(
            format!("disk_write_mibs_{}streams", p.write_qd),
            p.disk_write_mibs,
        );
        m.insert(format!("disk_read_mibs_qd{}", p.qd), p.disk_read_mibs);
        m.insert(format!("rand_read_iops_qd{}", p.qd), p.rand_read_iops);
        m.insert(
            "disk_write_buffered_mibs".into(),
            p.disk_write_buffered_mibs,
        );
        m.insert("loopback_mibs".into(), p.loopback_mibs);
        m.insert("loopback_streams".into(), p.loopback_streams as f64);
        m.insert("age_s".into(), p.age().as_secs_f64());
    }
    if let Some(u) = usage {
        m.insert("host_cpu_busy_pct".into(), u.host_busy * 100.0);
        m.insert("host_iowait_pct".into(), u.host_iowait * 100.0);
        m.insert("cores".into(), u.cores as f64);
        for (role, s) in u.per_gib(bytes) {
            m.insert(format!("cpu_s_per_gib_{role}"), s);
        }
    }
    m
}

pub(crate) fn roofline(rows: &[Row], usage: Option<&Usage>) -> Vec<RooflineLine> {
    rows.iter()
        .map(|r| {
            let (binding, _) = r.binding();
            let saturated = usage.map_or_else(String::new, |u| {
                crate::cpu::limit(r.percent(), binding, u) + &r.context_text()
            });
            RooflineLine {
                op: r.op.into(),
                unit: r.unit.into(),
                measured: r.measured,
                bounds: r
                    .bounds
                    .iter()
                    .map(|(name, value)| Bound {
                        name: name.clone(),
                        value: *value,
                    })
                    .collect(),
                binding: binding.into(),
                percent: r.percent(),
                saturated,
            }
        })
        .collect()
}

fn series(r: &Report) -> (Series, BTreeMap<String, Vec<hdrhistogram::Histogram<u64>>>) {
    let n = (r.elapsed.as_secs_f64().ceil() as usize).max(1);
    let mut ops = BTreeMap::new();
    let mut lat = BTreeMap::new();
    for (op, s) in &r.ops {
        let mut hs = s.intervals.clone();
        hs.resize_with(n.max(hs.len()), crate::bench_report::hist);
        ops.insert(op.to_string(), hs.iter().map(|h| h.len()).collect());
        if s.errors > 0 {
            let mut f = s.failed.clone();
            f.resize(n.max(f.len()), 0);
            ops.insert(format!("{op}-failed"), f);
        }
        lat.insert(op.to_string(), hs);
    }
    let series = Series {
        interval: 1.0,
        ops,
        counters: BTreeMap::new(),
    };
    (series, lat)
}

/// The run data of `run`.
pub fn run_data(run: &RealRun) -> RunData {
    let r = run.report;
    let zero = r.zero;
    let bytes: u64 = r.ops.values().map(|s| s.bytes).sum();
    let mut verdicts = run.verdicts.clone();
    verdicts.extend(verify_verdict(r));
    let failed: Vec<&VerdictLine> = verdicts.iter().filter(|v| v.label != "PASS").collect();
    let mut counters = BTreeMap::new();
    for (op, s) in &r.ops {
        counters.insert(format!("bench.{op}.ios"), s.hist.len());
        counters.insert(format!("bench.{op}.bytes"), s.bytes);
        counters.insert(format!("bench.{op}.errors"), s.errors);
    }
    let manifest = Manifest {
        scenario: run.name.clone(),
        about: run.about.clone(),
        mode: "real".into(),
        command: run.command.clone(),
        config: job_file(r),
        exit: i32::from(!failed.is_empty()),
        reason: failed
            .iter()
            .map(|v| format!("{}: {}", v.name, v.label))
            .collect::<Vec<_>>()
            .join("; "),
        seconds: r.elapsed.as_secs_f64(),
        verdicts,
        counters,
        shape: run.shape.clone(),
        probe: probe_map(run.probe, Some(&r.usage), bytes),
        roofline: roofline(&run.rows, Some(&r.usage)),
        ..Manifest::default()
    };
    let mut events: Vec<EventLine> = run
        .marks
        .iter()
        .map(|m| EventLine {
            t: secs(m.at, zero),
            kind: m.kind.into(),
            node: m.node.clone(),
            what: m.what.clone(),
        })
        .collect();
    events.extend(chain_events(&run.seen, zero));
    events.sort_by(|a, b| a.t.total_cmp(&b.t));
    let (series, latencies) = series(r);
    RunData {
        manifest,
        events,
        series,
        chains: chain_points(&run.seen, zero),
        latencies,
        history: Vec::new(),
    }
}
