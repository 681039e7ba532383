//! Storage throughput over time for workload runs (checkpoints, KVCache, GraySort): MiB/s per
//! interval of every `bytes.<op>` counter, with each phase's start drawn as a rule and
//! named at the top, as 3FS's GraySort charts draw their phases.
//!
//! Invariant: only counters named `bytes.<op>` are drawn, as bytes per interval turned into
//! MiB/s; a run without any gets no chart. Not here: operations per second (charts.rs).

use crate::charts::rate_chart;
use crate::rundir::RunData;

/// MiB/s per interval of every `bytes.<op>` counter that counted anything, by op.
pub(crate) fn mib_per_s(d: &RunData) -> Vec<(String, Vec<f64>)> {
    let iv = d.series.interval.max(1e-9);
    (d.series.counters.iter())
        .filter_map(|(k, v)| k.strip_prefix("bytes.").map(|op| (op, v)))
        .filter(|(_, v)| v.iter().any(|x| *x > 0))
        .map(|(op, v)| {
            let mibs = v.iter().map(|b| *b as f64 / (1u64 << 20) as f64 / iv);
            (op.to_string(), mibs.collect())
        })
        .collect()
}

/// The chart, or `None` when the run counted no bytes.
pub fn bandwidth(d: &RunData) -> Option<Result<String, String>> {
    let lines = mib_per_s(d);
    if lines.is_empty() {
        return None;
    }
    Some(rate_chart(
        d,
        "Storage throughput by phase (MiB/s)",
        "MiB/s",
        &lines,
        true,
    ))
}
