//! The run-directory format, shared by simulated and real runs:
//!
//! ```text
//! manifest.json     commit, scenario, seed, mode, command, host, config, verdicts, counters
//! events.jsonl      one JSON object per notable event (faults, chain changes, phases, verdicts)
//! series.json       completions per interval over (simulated or real) time, per operation, and
//!                   counter increments per interval
//! history.jsonl     every client operation: client, chunk, op, value, invoke, return, failed
//! chains.json       per chain: (time, serving targets, all targets, chain version) on change
//! hist/<op>.hlog    HdrHistogram interval log (V2, compressed) of latencies in microseconds
//! ```
//!
//! Invariant: everything here is plain data; writing then reading gives the same `RunData`.
//! Not here: how a run fills it (t3fs-sim, later t3fs-real) or draws it (render.rs).

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry,
};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// One checker verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VerdictLine {
    /// Checker name.
    pub name: String,
    /// PASS, FAIL or UNKNOWN.
    pub label: String,
    /// Evidence or what was checked.
    pub detail: String,
}

/// manifest.json.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Source commit the binary was built from.
    pub commit: String,
    /// Scenario name.
    pub scenario: String,
    /// Its one-line description.
    pub about: String,
    /// Seed (simulation).
    pub seed: u64,
    /// `sim` or `real`.
    pub mode: String,
    /// The command that reproduces the run.
    pub command: String,
    /// Host description.
    pub host: String,
    /// Build profile.
    pub profile: String,
    /// The scenario as TOML.
    pub config: String,
    /// Exit code (0 = pass).
    pub exit: i32,
    /// Failure reason.
    pub reason: String,
    /// Trace hash (simulation).
    pub trace: String,
    /// Events processed (simulation).
    pub events: u64,
    /// Duration of the run, seconds of its own time base.
    pub seconds: f64,
    /// Verdicts in order.
    pub verdicts: Vec<VerdictLine>,
    /// Named counters (network, disks, KV, machines).
    pub counters: BTreeMap<String, u64>,
    /// Fault classes exercised and how often.
    pub faults_reached: BTreeMap<String, u64>,
    /// §2.6.1 table rows exercised and how often.
    pub rows_reached: BTreeMap<String, u64>,
    /// Cluster shape in words (real runs; the scenario's `[cluster]` says it for simulated ones).
    #[serde(default)]
    pub shape: String,
    /// The host's probed bounds for this run, by name with the unit in the name
    /// (`disk_write_mibs`), plus `age_s`: how old the probe was when the run used it.
    #[serde(default)]
    pub probe: BTreeMap<String, f64>,
    /// The roofline: each measured figure next to the probed bounds (real runs).
    #[serde(default)]
    pub roofline: Vec<RooflineLine>,
}

/// One bound of a roofline row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    /// What it is (`disk write (fdatasync) ÷ 3`).
    pub name: String,
    /// Its value, in the row's unit.
    pub value: f64,
}

/// One roofline row: a measured figure, every bound considered, the binding one and the
/// fraction of it reached.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RooflineLine {
    /// The operation (`read`, `write`).
    pub op: String,
    /// Unit of `measured` and the bounds (`MiB/s`, `IOPS`).
    pub unit: String,
    /// What the run reached.
    pub measured: f64,
    /// Every bound considered.
    pub bounds: Vec<Bound>,
    /// The binding (lowest) bound's name.
    pub binding: String,
    /// Percentage of the binding bound reached.
    pub percent: f64,
    /// What limited the workload, if measured: the binding bound when reached, the saturated
    /// CPU (`host CPU 97% busy …`), or "none saturated: latency-bound …" (the JSON field keeps
    /// its first name, `saturated`, so older run directories still load).
    #[serde(default)]
    pub saturated: String,
}

/// One line of events.jsonl.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventLine {
    /// Seconds since the start.
    pub t: f64,
    /// `fault`, `chain`, `phase`, `verdict`, …
    pub kind: String,
    /// Node, if any.
    pub node: String,
    /// What happened.
    pub what: String,
}

/// series.json: completions per interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Interval length, seconds.
    pub interval: f64,
    /// Completed operations per interval, by operation name.
    pub ops: BTreeMap<String, Vec<u64>>,
    /// Counter increments per interval, by counter name (faults injected, retries, resync
    /// items, chain updates, …). Absent in older run directories.
    #[serde(default)]
    pub counters: BTreeMap<String, Vec<u64>>,
}

/// chains.json entry: a chain's state after a change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChainPoint {
    /// Seconds since the start.
    pub t: f64,
    /// Chain id.
    pub chain: String,
    /// Chain version.
    pub version: u32,
    /// SERVING targets.
    pub serving: u32,
    /// Targets.
    pub targets: u32,
    /// Rendered chain (`t1:SERVING t2:OFFLINE`).
    pub render: String,
}

/// One line of history.jsonl: a client operation as the checkers saw it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpLine {
    /// Client.
    pub client: u32,
    /// Chunk (workload index).
    pub chunk: u32,
    /// `write` or `read`.
    pub op: String,
    /// Value written or read (hex), `hole`, `garbage` or `?` (no answer).
    pub value: String,
    /// Invocation, seconds.
    pub invoke: f64,
    /// Response, seconds (absent: open).
    pub ret: Option<f64>,
    /// The call failed (outcome unknown).
    pub failed: bool,
}

/// Everything in a run directory.
#[derive(Clone, Debug, Default)]
pub struct RunData {
    /// manifest.json.
    pub manifest: Manifest,
    /// events.jsonl.
    pub events: Vec<EventLine>,
    /// series.json.
    pub series: Series,
    /// chains.json.
    pub chains: Vec<ChainPoint>,
    /// Latency histograms (µs) per operation, one per interval of `series`.
    pub latencies: BTreeMap<String, Vec<Histogram<u64>>>,
    /// history.jsonl (not read back by `read`: it can be large and reports do not draw it).
    pub history: Vec<OpLine>,
}

impl RunData {
    /// Every interval's histogram of an operation merged into one.
    pub fn merged_latencies(&self) -> BTreeMap<String, Histogram<u64>> {
        self.latencies
            .iter()
            .map(|(op, hs)| {
                let mut m = new_histogram();
                for h in hs {
                    let _ = m.add(h);
                }
                (op.clone(), m)
            })
            .collect()
    }
}

/// A new latency histogram (1 µs to 1 hour, 3 significant digits).
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// Writes `data` into `dir` (created if needed).
pub fn write(dir: &Path, data: &RunData) -> io::Result<()> {
    fs::create_dir_all(dir.join("hist"))?;
    fs::write(
        dir.join("manifest.json"),
        serde_json::to_string_pretty(&data.manifest).map_err(other)?,
    )?;
    let mut ev = io::BufWriter::new(fs::File::create(dir.join("events.jsonl"))?);
    for e in &data.events {
        writeln!(ev, "{}", serde_json::to_string(e).map_err(other)?)?;
    }
    ev.flush()?;
    let mut hist = io::BufWriter::new(fs::File::create(dir.join("history.jsonl"))?);
    for o in &data.history {
        writeln!(hist, "{}", serde_json::to_string(o).map_err(other)?)?;
    }
    hist.flush()?;
    fs::write(
        dir.join("series.json"),
        serde_json::to_string(&data.series).map_err(other)?,
    )?;
    fs::write(
        dir.join("chains.json"),
        serde_json::to_string_pretty(&data.chains).map_err(other)?,
    )?;
    for (op, hists) in &data.latencies {
        let mut f = io::BufWriter::new(fs::File::create(
            dir.join("hist").join(format!("{op}.hlog")),
        )?);
        let mut ser = V2DeflateSerializer::new();
        let mut w = IntervalLogWriterBuilder::new()
            .with_base_time(std::time::SystemTime::UNIX_EPOCH)
            .add_comment(&format!(
                "t3fs latency of {op} in microseconds; interval {} s",
                data.series.interval
            ))
            .begin_log_with(&mut f, &mut ser)
            .map_err(other)?;
        for (i, h) in hists.iter().enumerate() {
            let start = std::time::Duration::from_secs_f64(i as f64 * data.series.interval);
            let len = std::time::Duration::from_secs_f64(data.series.interval);
            w.write_histogram(
                h,
                start,
                len,
                hdrhistogram::serialization::interval_log::Tag::new(op),
            )
            .map_err(other)?;
        }
        drop(w);
        f.flush()?;
    }
    Ok(())
}

/// Reads a run directory.
pub fn read(dir: &Path) -> io::Result<RunData> {
    let manifest: Manifest =
        serde_json::from_str(&fs::read_to_string(dir.join("manifest.json"))?).map_err(other)?;
    let mut events = Vec::new();
    for line in io::BufReader::new(fs::File::open(dir.join("events.jsonl"))?).lines() {
        let line = line?;
        if !line.trim().is_empty() {
            events.push(serde_json::from_str(&line).map_err(other)?);
        }
    }
    let series: Series =
        serde_json::from_str(&fs::read_to_string(dir.join("series.json"))?).map_err(other)?;
    let chains: Vec<ChainPoint> =
        serde_json::from_str(&fs::read_to_string(dir.join("chains.json"))?).map_err(other)?;
    let mut latencies = BTreeMap::new();
    let hist_dir = dir.join("hist");
    let mut files: Vec<PathBuf> = fs::read_dir(&hist_dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    for p in files {
        let Some(op) = p.file_stem().and_then(|s| s.to_str()).map(str::to_string) else {
            continue;
        };
        let text = fs::read(&p)?;
        let mut hists = Vec::new();
        let mut de = Deserializer::new();
        for entry in IntervalLogIterator::new(&text) {
            if let Ok(LogEntry::Interval(h)) = entry {
                let bytes = base64_decode(h.encoded_histogram()).map_err(other)?;
                let hist: Histogram<u64> =
                    de.deserialize(&mut io::Cursor::new(bytes)).map_err(other)?;
                hists.push(hist);
            }
        }
        latencies.insert(op, hists);
    }
    Ok(RunData {
        manifest,
        events,
        series,
        chains,
        latencies,
        history: Vec::new(),
    })
}

fn base64_decode(s: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .map_err(|e| e.to_string())
}
