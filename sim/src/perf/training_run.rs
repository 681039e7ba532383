//! Runs a training scenario and writes its report: how many client nodes of
//! `accelerators_per_client` simulated accelerators the cluster keeps at or above the AU floor,
//! found as MLPerf Storage finds it (add accelerators until AU drops below the floor; here a
//! bisection over client nodes, each node's count a whole run), beside the estimate from the
//! binding read bound; AU and read throughput per run as a chart.
//!
//! Not here: the model of an accelerator (`training.rs`).

use std::fmt::Write as _;
use std::path::Path;

use super::engine::{Sample, Stats};
use super::hardware::Hardware;
use super::scenario::{PerfScenario, TrainingSection};
use super::setup::{assumptions, hardware, layout, simulate, write};
use super::training::Training;

const GIB: f64 = (1u64 << 30) as f64;

/// One run of the search.
#[derive(Clone, Debug)]
pub struct Trial {
    /// Client nodes.
    pub clients: u32,
    /// Accelerators in all.
    pub accelerators: u32,
    /// Mean AU over the accelerators in the measured window.
    pub au: f64,
    /// Aggregate read in the window, GiB/s.
    pub read_gib_s: f64,
    /// Samples the accelerators computed on per second in the window (DLIO's throughput):
    /// unlike the read rate, it leaves out what the loader read ahead.
    pub samples_s: f64,
}

/// A training scenario's answer.
#[derive(Clone, Debug)]
pub struct Held {
    /// Most accelerators at or above the floor (0: not even one node's).
    pub accelerators: u32,
    /// Whether the largest cluster tried still held (the answer is at least this many).
    pub at_least: bool,
    /// Every run, by client count.
    pub trials: Vec<Trial>,
    /// The engine's counts of the largest run.
    pub stats: Stats,
}

/// One run with `clients` client nodes.
fn trial(
    sc: &PerfScenario,
    hw: &Hardware,
    t: &TrainingSection,
    clients: u32,
) -> Result<(Trial, Stats), String> {
    let mut sc = sc.clone();
    sc.cluster.clients = clients;
    let mut l = layout(&sc, hw, &sc.cluster.table)?;
    let clock = l.add(1e30);
    let window = sc.duration_s / 2.0;
    let mut read = 0.0;
    let (au, accels, stats) = {
        let mut src = Training::new(&l, t.clone(), (sc.seed, hw.request_latency), clock, window);
        let stats = simulate(&sc, &l, &mut src, |s: &Sample| {
            if s.t > window + 1e-9 {
                read += (0..clients)
                    .map(|c| s.bytes[l.client_in(c) as usize])
                    .sum::<f64>();
            }
        });
        src.finish(sc.duration_s);
        (src.au(sc.duration_s), src.accelerators(), stats)
    };
    let span = sc.duration_s - window;
    let r = Trial {
        clients,
        accelerators: accels as u32,
        au,
        read_gib_s: read / span / GIB,
        // AU is computation over the window per accelerator (what arrived in it could feed):
        // a batch per `compute_s` of it.
        samples_s: au * accels as f64 * f64::from(t.batch) / t.compute_s,
    };
    Ok((r, stats))
}

/// Bisects client nodes for the most whose accelerators hold the floor (or runs `t.sweep`).
fn search(
    sc: &PerfScenario,
    hw: &Hardware,
    t: &TrainingSection,
    progress: &mut dyn FnMut(f64),
) -> Result<Held, String> {
    if !t.sweep.is_empty() {
        return sweep(sc, hw, t, progress);
    }
    let most = sc.cluster.clients;
    let steps = f64::from(32 - most.leading_zeros() + 1);
    let mut trials = Vec::new();
    let mut largest = Stats::default();
    let mut run = |n: u32, trials: &mut Vec<Trial>| -> Result<bool, String> {
        let (r, stats) = trial(sc, hw, t, n)?;
        if n == most {
            largest = stats;
        }
        let ok = r.au >= t.au_floor;
        trials.push(r);
        progress(trials.len() as f64 / steps);
        Ok(ok)
    };
    let per = t.accelerators_per_client;
    if run(most, &mut trials)? {
        return Ok(finish(most * per, true, trials, largest));
    }
    if !run(1, &mut trials)? {
        return Ok(finish(0, false, trials, largest));
    }
    // Invariant: `lo` client nodes hold the floor, `hi` do not.
    let (mut lo, mut hi) = (1, most);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if run(mid, &mut trials)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(finish(lo * per, false, trials, largest))
}

/// DLIO's own rule over `t.sweep`: each count of accelerators per client node in turn on the
/// scenario's client nodes, stopping after the first below the floor.
fn sweep(
    sc: &PerfScenario,
    hw: &Hardware,
    t: &TrainingSection,
    progress: &mut dyn FnMut(f64),
) -> Result<Held, String> {
    let clients = sc.cluster.clients;
    let (mut trials, mut held, mut largest) = (Vec::new(), 0, Stats::default());
    for (k, &per) in t.sweep.iter().enumerate() {
        let at = TrainingSection {
            accelerators_per_client: per,
            ..t.clone()
        };
        let (r, stats) = trial(sc, hw, &at, clients)?;
        progress((k + 1) as f64 / t.sweep.len() as f64);
        let ok = r.au >= t.au_floor;
        trials.push(r);
        largest = stats;
        if !ok {
            return Ok(finish(held, false, trials, largest));
        }
        held = per * clients;
    }
    Ok(finish(held, true, trials, largest))
}

fn finish(accelerators: u32, at_least: bool, mut trials: Vec<Trial>, stats: Stats) -> Held {
    // By accelerators: client nodes in a bisection (a fixed count each), counts in a sweep.
    trials.sort_by_key(|r| r.accelerators);
    Held {
        accelerators,
        at_least,
        trials,
        stats,
    }
}

/// One accelerator's read demand at the floor, bytes per second.
fn demand(t: &TrainingSection) -> f64 {
    t.au_floor * f64::from(t.batch) * t.sample_bytes / t.compute_s
}

/// Runs a training scenario, writing its report in `dir`: the summary line and the answer.
pub fn training(
    sc: &PerfScenario,
    dir: &Path,
    progress: &mut dyn FnMut(f64),
) -> Result<(String, Held), String> {
    let hw = hardware(sc);
    let t = sc.training.clone().expect("checked at load");
    let held = search(sc, &hw, &t, progress)?;
    let l = layout(sc, &hw, &sc.cluster.table)?;
    let storage = f64::from(sc.cluster.storage_nodes) * l.caps[l.storage_out(0) as usize];
    let estimate = storage / demand(&t);
    let per = if t.sweep.is_empty() {
        format!("{} per client node", t.accelerators_per_client)
    } else {
        format!(
            "on {} client node(s), DLIO's rule over {:?} per node",
            sc.cluster.clients, t.sweep
        )
    };
    let answer = format!(
        "{}{} accelerators ({per}) at AU >= {:.0}%",
        if held.at_least { "at least " } else { "" },
        held.accelerators,
        100.0 * t.au_floor
    );
    let line = format!(
        "{}: {answer}; the storage NICs' read bound over one accelerator's demand at the floor \
         ({:.2} GiB/s) gives {estimate:.0}.\n",
        sc.name,
        demand(&t) / GIB
    );
    write_chart(sc, dir, &held)?;
    let mut md = format!("# {}\n\n{}\n\n**{answer}.**\n\n", sc.name, sc.about);
    let _ = writeln!(
        md,
        "Each accelerator reads batches of {} samples of {:.1} MiB and computes {} s per batch: \
         {:.2} GiB/s at AU 100%, {:.2} GiB/s at the floor. The storage NICs' payload bound \
         ({:.0} GiB/s) over that gives {estimate:.0} accelerators; the model's answer is below \
         it by what random placement at finite read-ahead loses.\n",
        t.batch,
        t.sample_bytes / (1u64 << 20) as f64,
        t.compute_s,
        demand(&t) / t.au_floor / GIB,
        demand(&t) / GIB,
        storage / GIB
    );
    md.push_str(
        "| client nodes | accelerators | AU | read GiB/s | samples/s |\n|---|---|---|---|---|\n",
    );
    for r in &held.trials {
        let _ = writeln!(
            md,
            "| {} | {} | {:.1}% | {:.0} | {:.1} |",
            r.clients,
            r.accelerators,
            100.0 * r.au,
            r.read_gib_s,
            r.samples_s
        );
    }
    md.push_str("\n![AU by accelerators](au.svg)\n\n");
    md.push_str(&assumptions(sc, &hw, &held.stats));
    write(dir, "report.md", &md)?;
    Ok((line, held))
}

fn write_chart(sc: &PerfScenario, dir: &Path, held: &Held) -> Result<(), String> {
    let au: Vec<(f64, f64)> = held
        .trials
        .iter()
        .map(|r| (f64::from(r.accelerators), 100.0 * r.au))
        .collect();
    let floor = sc.training.as_ref().map_or(90.0, |t| 100.0 * t.au_floor);
    let line: Vec<(f64, f64)> = au.iter().map(|p| (p.0, floor)).collect();
    let svg = t3fs_reports::perf_charts::lines(
        &format!("{}: accelerator utilisation by accelerators", sc.name),
        "simulated accelerators",
        "AU (%)",
        &[("model".into(), au), (format!("floor {floor:.0}%"), line)],
    )?;
    write(dir, "au.svg", &svg)
}
