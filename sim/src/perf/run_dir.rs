//! A pipeline or training run of the performance model as a run directory of t3fs-reports, the format
//! every real run and the message-level simulator write, so `t3fs report compare` lays a
//! prediction beside the real workload it predicts (a GraySort on this host beside its twin on
//! the this-host profile): the manifest (mode `sim`, the scenario file as its config, each
//! phase's simulated milliseconds as `phase.<name>.ms`, as the real GraySort's run directory
//! counts them), the clients' read and write bytes per sample interval as `bytes.read` and
//! `bytes.write`, and each phase's start as a `phase` event. A training run (DLIO's twin on
//! this host beside the real DLIO's) counts each accelerator count's AU and samples per second
//! as `python/bench/dlio.py` does (`au_pct_x100.N`, `samples_per_s_x1000.N`), with the
//! accelerators held at the floor as its roofline line.
//!
//! Invariant: the bytes per interval are the samples' rates times each sample's own length,
//! so their sum is what the clients moved. Not here: latencies (a flow model has no
//! operations), checkers (a prediction has no verdicts), or the model's own report
//! (`pipeline_run.rs` writes report.md beside these files).

use std::collections::BTreeMap;
use std::path::Path;

use t3fs_reports::{EventLine, Manifest, RooflineLine, RunData, Series};

use super::pipeline_run::Pipelined;
use super::scenario::PerfScenario;
use super::training_run::Held;

const GIB: f64 = (1u64 << 30) as f64;

/// Writes the run directory files of pipeline run `fig` of `sc` (loaded from `path`) into
/// `dir`.
pub fn write_pipeline(
    sc: &PerfScenario,
    path: &Path,
    dir: &Path,
    fig: &Pipelined,
) -> Result<(), String> {
    let config = std::fs::read_to_string(path).unwrap_or_default();
    let data = run_data(sc, &format!("t3fs sim run {}", path.display()), config, fig);
    t3fs_reports::rundir::write(dir, &data).map_err(|e| format!("{}: {e}", dir.display()))
}

/// Writes the run directory files of training run `held` of `sc` (loaded from `path`) into
/// `dir`.
pub fn write_training(
    sc: &PerfScenario,
    path: &Path,
    dir: &Path,
    held: &Held,
) -> Result<(), String> {
    let config = std::fs::read_to_string(path).unwrap_or_default();
    let data = training_data(
        sc,
        &format!("t3fs sim run {}", path.display()),
        config,
        held,
    );
    t3fs_reports::rundir::write(dir, &data).map_err(|e| format!("{}: {e}", dir.display()))
}

/// The run data of training run `held`.
fn training_data(sc: &PerfScenario, command: &str, config: String, held: &Held) -> RunData {
    let floor = sc.training.as_ref().map_or(0.9, |t| t.au_floor);
    let mut counters = BTreeMap::new();
    for r in &held.trials {
        let n = r.accelerators;
        counters.insert(format!("au_pct_x100.{n}"), (r.au * 1e4).round() as u64);
        let samples_s = (r.samples_s * 1e3).round() as u64;
        counters.insert(format!("samples_per_s_x1000.{n}"), samples_s);
    }
    let seconds = sc.duration_s * held.trials.len() as f64;
    let manifest = Manifest {
        roofline: vec![RooflineLine {
            op: format!("accelerators at AU >= {:.0}%", 100.0 * floor),
            unit: "accelerators".into(),
            measured: f64::from(held.accelerators),
            bounds: Vec::new(),
            binding: String::new(),
            percent: 0.0,
            saturated: if held.at_least {
                "every count tried held the floor".into()
            } else {
                String::new()
            },
        }],
        ..flow_manifest(sc, command, config, seconds, counters)
    };
    RunData {
        manifest,
        ..RunData::default()
    }
}

/// The run data of pipeline run `fig`.
fn run_data(sc: &PerfScenario, command: &str, config: String, fig: &Pipelined) -> RunData {
    let mut counters = BTreeMap::new();
    let mut events = Vec::new();
    let mut start = 0.0;
    for (name, secs, _, _) in &fig.phases {
        counters.insert(format!("phase.{name}.ms"), (secs * 1e3).round() as u64);
        events.push(EventLine {
            t: start,
            kind: "phase".into(),
            node: String::new(),
            what: name.clone(),
        });
        start += secs;
    }
    let manifest = flow_manifest(sc, command, config, fig.seconds, counters);
    RunData {
        manifest,
        events,
        series: series(sc.sample_ms * 1e-3, &fig.samples),
        ..RunData::default()
    }
}

/// The manifest of a flow-model run of `sc`: mode `sim`, its command, config and shape.
fn flow_manifest(
    sc: &PerfScenario,
    command: &str,
    config: String,
    seconds: f64,
    counters: BTreeMap<String, u64>,
) -> Manifest {
    Manifest {
        scenario: sc.name.clone(),
        about: sc.about.clone(),
        seed: sc.seed,
        mode: "sim".into(),
        command: command.into(),
        config,
        seconds,
        counters,
        shape: format!(
            "the performance model (flow): {} storage nodes, {} clients, {} replicas",
            sc.cluster.storage_nodes, sc.cluster.clients, sc.cluster.replicas
        ),
        ..Manifest::default()
    }
}

/// The samples' client throughput as bytes per interval of `interval` seconds.
fn series(interval: f64, samples: &[(f64, f64, f64, f64)]) -> Series {
    let (mut read, mut write) = (Vec::new(), Vec::new());
    let mut prev = 0.0;
    for &(t, r, w, _) in samples {
        let dt = (t - prev).max(0.0);
        prev = t;
        read.push((r * GIB * dt).round() as u64);
        write.push((w * GIB * dt).round() as u64);
    }
    Series {
        interval,
        ops: BTreeMap::new(),
        counters: BTreeMap::from([("bytes.read".into(), read), ("bytes.write".into(), write)]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_rates_times_each_samples_own_length() {
        // Two full 0.5 s samples and a last one of 0.25 s.
        let s = series(
            0.5,
            &[
                (0.5, 2.0, 1.0, 3.0),
                (1.0, 2.0, 0.0, 0.0),
                (1.25, 4.0, 0.0, 0.0),
            ],
        );
        let gib = 1u64 << 30;
        assert_eq!(s.counters["bytes.read"], [gib, gib, gib]);
        assert_eq!(s.counters["bytes.write"], [gib / 2, 0, 0]);
        assert!(s.ops.is_empty());
    }
}
