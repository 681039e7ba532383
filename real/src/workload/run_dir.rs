//! A workload run as a run directory of t3fs-reports, the format every real and simulated run
//! shares: the manifest (mode `real`, the job, the store and cluster shape, the probed bounds,
//! the roofline of the workload's headline figures, the verdicts of its validators),
//! operations and bytes per interval (`bytes.<op>` counters, drawn as MiB/s with the phases),
//! latency histograms per operation, and the phases as events.
//!
//! Invariant: a run whose validator did not PASS has a non-zero exit in its manifest. Not here:
//! running the workload, or the commit and host (the CLI fills them, as for every run).

use std::collections::BTreeMap;

use t3fs_reports::{EventLine, Manifest, RunData, Series, VerdictLine};

use super::recorder::Tally;
use crate::cpu::Usage;
use crate::probe::Probe;
use crate::roofline::Row;

/// Everything a workload run's directory is made from.
pub struct WorkloadRun<'a> {
    /// Run name (the report's title).
    pub name: String,
    /// One line on what it did.
    pub about: String,
    /// The command that reproduces it.
    pub command: String,
    /// The job's knobs, one `key = value` per line.
    pub config: String,
    /// The store and cluster shape in words.
    pub shape: String,
    /// What was recorded.
    pub tally: &'a Tally,
    /// The host's bounds, if probed.
    pub probe: Option<&'a Probe>,
    /// The CPU the cluster's processes and this one used over the run.
    pub usage: Option<&'a Usage>,
    /// The headline figures beside their bounds.
    pub rows: Vec<Row>,
    /// The validators' verdicts.
    pub verdicts: Vec<VerdictLine>,
}

/// A verdict line: PASS when `ok`.
pub fn verdict(name: &str, ok: bool, detail: String) -> VerdictLine {
    VerdictLine {
        name: name.into(),
        label: if ok { "PASS" } else { "FAIL" }.into(),
        detail,
    }
}

/// The run data of `run`.
pub fn run_data(run: &WorkloadRun) -> RunData {
    let t = run.tally;
    let failed: Vec<&VerdictLine> = run.verdicts.iter().filter(|v| v.label != "PASS").collect();
    let mut counters = BTreeMap::new();
    for op in t.ops.keys() {
        counters.insert(format!("workload.{op}.ops"), t.total_ops(op));
        counters.insert(format!("workload.{op}.bytes"), t.total_bytes(op));
    }
    let bytes: u64 = t.bytes.values().flatten().sum();
    let manifest = Manifest {
        scenario: run.name.clone(),
        about: run.about.clone(),
        mode: "real".into(),
        command: run.command.clone(),
        config: run.config.clone(),
        exit: i32::from(!failed.is_empty()),
        reason: failed
            .iter()
            .map(|v| format!("{}: {}", v.name, v.label))
            .collect::<Vec<_>>()
            .join("; "),
        seconds: t.seconds,
        verdicts: run.verdicts.clone(),
        counters,
        shape: run.shape.clone(),
        probe: crate::bench_run::probe_map(run.probe, run.usage, bytes),
        roofline: crate::bench_run::roofline(&run.rows, run.usage),
        ..Manifest::default()
    };
    let events = t
        .phases
        .iter()
        .map(|(at, name)| EventLine {
            t: *at,
            kind: "phase".into(),
            node: String::new(),
            what: name.clone(),
        })
        .collect();
    let counters = t
        .bytes
        .iter()
        .filter(|(_, v)| v.iter().any(|b| *b > 0))
        .map(|(op, v)| (format!("bytes.{op}"), v.clone()))
        .collect();
    RunData {
        manifest,
        events,
        series: Series {
            interval: t.interval,
            ops: t.ops.clone(),
            counters,
        },
        chains: Vec::new(),
        latencies: t.latencies.clone(),
        history: Vec::new(),
    }
}

/// A throughput row: `measured` MiB/s of `op` against the named bounds (MiB/s).
pub fn mibs_row(op: &'static str, measured: f64, bounds: Vec<(String, f64)>) -> Row {
    Row {
        op,
        unit: "MiB/s",
        measured,
        bounds,
        context: None,
    }
}
