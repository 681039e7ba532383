//! Turns a simulated run into the run-directory data of t3fs-reports: the manifest (scenario,
//! seed, verdicts, counters, reachability), events, completions per second, latency histograms
//! per second (simulated time) and the chain-state timeline.
//!
//! Invariant: everything comes from the world's records, never from the wall clock, so the
//! data of a run is as reproducible as the run. Not here: writing files (t3fs-reports) or the
//! commit and host (the CLI fills them).

use std::collections::BTreeMap;

use t3fs_core::mgmtd::chain_update::Row;
use t3fs_core::routing::PublicState;
use t3fs_reports::{ChainPoint, EventLine, Manifest, OpLine, RunData, Series, VerdictLine};
use t3fs_scenario::workload::Payload;
use t3fs_scenario::Scenario;

use crate::history::{History, OpKind};

/// Counts per interval by operation.
pub type Counts = BTreeMap<String, Vec<u64>>;
/// Latency histograms (µs) per interval by operation.
pub type Latencies = BTreeMap<String, Vec<hdrhistogram::Histogram<u64>>>;
use crate::run::Outcome;
use crate::world::World;

/// Seconds per series interval.
pub const INTERVAL: f64 = 1.0;

/// The run data of `o`.
pub fn run_data(o: &Outcome, sc: &Scenario, command: &str) -> RunData {
    let mut m = manifest(o, sc, command);
    let mut data = RunData::default();
    let Some(w) = &o.world else {
        data.manifest = m;
        return data;
    };
    for (k, v) in &w.sim.reach().faults {
        m.faults_reached.insert(k.to_string(), *v);
    }
    for row in Row::ALL {
        m.rows_reached.insert(
            format!("{row:?}"),
            w.sim.reach().rows.get(&row).copied().unwrap_or(0),
        );
    }
    m.counters = w.counter_totals();
    data.events = event_lines(w);
    let buckets = (o.sim_ns as f64 / 1e9 / INTERVAL).ceil() as usize + 1;
    let (ops, lat) = history_series(w.sim.history(), o.sim_ns);
    let counters = counter_series(w, o.sim_ns, &m.counters, buckets);
    data.series = Series {
        interval: INTERVAL,
        ops,
        counters,
    };
    data.latencies = lat;
    data.chains = chain_points(w);
    data.history = history_lines(w.sim.history());
    data.manifest = m;
    data
}

/// The manifest as far as the outcome says without a world: scenario, seed, exit, verdicts.
fn manifest(o: &Outcome, sc: &Scenario, command: &str) -> Manifest {
    Manifest {
        scenario: sc.name.clone(),
        about: sc.about.clone(),
        seed: o.seed,
        mode: "sim".into(),
        command: command.into(),
        config: t3fs_scenario::write::to_toml(sc),
        exit: o.exit,
        reason: o.reason.clone(),
        trace: format!("{:016x}", o.trace),
        events: o.events,
        seconds: o.sim_ns as f64 / 1e9,
        verdicts: o
            .verdicts
            .iter()
            .map(|(n, v)| VerdictLine {
                name: n.to_string(),
                label: v.label().into(),
                detail: v.detail().into(),
            })
            .collect(),
        ..Manifest::default()
    }
}

/// The world's notes as `events.jsonl` lines.
fn event_lines(w: &World) -> Vec<EventLine> {
    w.sim
        .notes()
        .iter()
        .map(|n| EventLine {
            t: n.at as f64 / 1e9,
            kind: n.kind.into(),
            node: n.node.clone(),
            what: n.what.clone(),
        })
        .collect()
}

/// Each counter's increase per interval (of `buckets`), up to its `totals` at `end_ns`.
fn counter_series(
    w: &World,
    end_ns: u64,
    totals: &BTreeMap<String, u64>,
    buckets: usize,
) -> BTreeMap<String, Vec<u64>> {
    // Counter increments per interval from the whole-second samples (and the final totals).
    let mut counters: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let end = (end_ns, totals.clone());
    let points: Vec<&(u64, BTreeMap<String, u64>)> = w
        .sim
        .samples()
        .iter()
        .chain(std::iter::once(&end))
        .collect();
    for pair in points.windows(2) {
        let (t, before) = (pair[0].0, &pair[0].1);
        let after = &pair[1].1;
        let b = ((t as f64 / 1e9 / INTERVAL) as usize).min(buckets - 1);
        for (k, v) in after {
            let d = v.saturating_sub(before.get(k).copied().unwrap_or(0));
            if d > 0 {
                counters
                    .entry(k.clone())
                    .or_insert_with(|| vec![0; buckets])[b] += d;
            }
        }
    }
    counters
}

/// The chain-state timeline the world's audit kept.
fn chain_points(w: &World) -> Vec<ChainPoint> {
    w.sim
        .chain_timeline()
        .iter()
        .map(|(t, c)| ChainPoint {
            t: *t as f64 / 1e9,
            chain: c.chain.to_string(),
            version: c.version.0,
            serving: c
                .targets
                .iter()
                .filter(|t| t.state == PublicState::Serving)
                .count() as u32,
            targets: c.targets.len() as u32,
            render: t3fs_core::mgmtd::chain_update::render(&c.targets),
        })
        .collect()
}

/// Completions per interval and latency histograms per interval, by operation (`read`,
/// `write`, and `read-failed`/`write-failed` counted when they failed), of a history that ran
/// for `end_ns`. Simulated and real runs draw their throughput from this.
pub fn history_series(h: &History, end_ns: u64) -> (Counts, Latencies) {
    let buckets = (end_ns as f64 / 1e9 / INTERVAL).ceil() as usize + 1;
    let mut ops: Counts = BTreeMap::new();
    let mut lat: Latencies = BTreeMap::new();
    for op in &h.ops {
        let name = match op.kind {
            OpKind::Write(_) => "write",
            OpKind::Read(_) => "read",
        };
        let (name, at) = match op.ret_ns {
            Some(r) => (name.to_string(), r),
            None if op.failed => (format!("{name}-failed"), op.invoke_ns),
            None => continue,
        };
        let b = ((at as f64 / 1e9 / INTERVAL) as usize).min(buckets - 1);
        ops.entry(name.clone()).or_insert_with(|| vec![0; buckets])[b] += 1;
        if let Some(r) = op.ret_ns {
            let hs = lat.entry(name).or_insert_with(|| {
                (0..buckets)
                    .map(|_| t3fs_reports::rundir::new_histogram())
                    .collect()
            });
            let us = (r.saturating_sub(op.invoke_ns) / 1000).max(1);
            let _ = hs[b].record(us);
        }
    }
    (ops, lat)
}

/// The history as `history.jsonl` lines.
pub fn history_lines(h: &History) -> Vec<OpLine> {
    h.ops
        .iter()
        .map(|o| {
            let (op, value) = match o.kind {
                OpKind::Write(v) => ("write", format!("{v:#x}")),
                OpKind::Read(Some(Payload::Value(v))) => ("read", format!("{v:#x}")),
                OpKind::Read(Some(Payload::Hole)) => ("read", "hole".into()),
                OpKind::Read(Some(Payload::Garbage)) => ("read", "garbage".into()),
                OpKind::Read(None) => ("read", "?".into()),
            };
            OpLine {
                client: o.client,
                chunk: o.chunk,
                op: op.into(),
                value,
                invoke: o.invoke_ns as f64 / 1e9,
                ret: o.ret_ns.map(|r| r as f64 / 1e9),
                failed: o.failed,
            }
        })
        .collect()
}
