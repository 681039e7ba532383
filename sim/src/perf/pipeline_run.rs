//! Runs a pipeline scenario (smallpond GraySort, a checkpoint's save and load) and writes its
//! report: each phase's predicted time beside its floor (the least time the phase's data needs
//! on the binding resource: the clients' CPU, NICs or SSDs) and what binds it, the whole run's
//! rate against a published figure, and read and write throughput over time with the phases
//! drawn, as 3FS's GraySort charts draw them.
//!
//! Not here: the model of a phase (`pipeline.rs`) or the engine.

use std::fmt::Write as _;
use std::path::Path;

use super::engine::{Sample, Stats};
use super::hardware::Hardware;
use super::layout::Layout;
use super::pipeline::{Phase, Pipeline};
use super::scenario::{PerfScenario, PhaseSection};
use super::setup::{assumptions, hardware, layout, simulate, write};

const TIB: f64 = (1u64 << 40) as f64;
const GIB: f64 = (1u64 << 30) as f64;
const MIB: f64 = (1u64 << 20) as f64;

/// A pipeline run's figures.
#[derive(Clone, Debug)]
pub struct Pipelined {
    /// The first phase's data over the whole run, TiB/min.
    pub tib_min: f64,
    /// Simulated seconds of the whole run.
    pub seconds: f64,
    /// Per phase: name, predicted seconds, floor seconds, the binding resource.
    pub phases: Vec<(String, f64, f64, &'static str)>,
    /// Per sample: its end (s), and the clients' read, the clients' write and the storage
    /// nodes' receive throughput over it (GiB/s).
    pub samples: Vec<(f64, f64, f64, f64)>,
}

/// The cores' worth a task of `p` gets from its `task_cores`: Amdahl's speedup.
pub fn speedup(p: &PhaseSection) -> f64 {
    let (s, k) = (p.serial_fraction, f64::from(p.task_cores));
    1.0 / (s + (1.0 - s) / k)
}

/// `p`'s task slots per client, and each slot's CPU rate (bytes per second), if it has one.
fn slots_of(sc: &PerfScenario, p: &PhaseSection) -> (u32, Option<f64>) {
    match p.core_mib_s {
        Some(r) => {
            let cores = sc.hardware.client_cores.expect("checked at load");
            (cores / p.task_cores, Some(speedup(p) * r * MIB))
        }
        None => (p.slots_per_client.expect("checked at load"), None),
    }
}

/// The scenario's phases, with each slot's CPU added to `layout` as a resource.
fn plan(sc: &PerfScenario, layout: &mut Layout) -> Vec<Phase> {
    sc.phases
        .iter()
        .map(|p| {
            let (per, rate) = slots_of(sc, p);
            let slots = (0..sc.cluster.clients)
                .map(|_| (0..per).map(|_| rate.map(|r| layout.add(r))).collect())
                .collect();
            Phase {
                name: p.name.clone(),
                tasks: p.tasks,
                task_bytes: p.tib * TIB / f64::from(p.tasks),
                read: p.read,
                write: p.write,
                slots,
                unit: p.unit_mib * MIB,
                startup: p.task_startup_s,
            }
        })
        .collect()
}

/// The roofline of phase `p`: (resource, bytes per second of the phase's data).
fn bounds(
    sc: &PerfScenario,
    hw: &Hardware,
    l: &Layout,
    p: &PhaseSection,
) -> Vec<(&'static str, f64)> {
    let c = &sc.cluster;
    let (s_nic, c_nic) = (
        l.caps[l.storage_out(0) as usize],
        l.caps[l.client_in(0) as usize],
    );
    let (rd, wr, reps) = (
        f64::from(u8::from(p.read)),
        f64::from(u8::from(p.write)),
        f64::from(c.replicas),
    );
    let mut b = Vec::new();
    if let (Some(_), (per, Some(rate))) = (p.core_mib_s, slots_of(sc, p)) {
        let running = p.tasks.min(per * c.clients);
        b.push(("client CPU", f64::from(running) * rate));
    }
    if p.read {
        b.push(("client NICs (receive)", f64::from(c.clients) * c_nic));
    }
    if p.write {
        b.push(("client NICs (send)", f64::from(c.clients) * c_nic));
        b.push((
            "storage NICs (receive)",
            f64::from(c.storage_nodes) * s_nic / reps,
        ));
    }
    let sends = rd + (reps - 1.0) * wr;
    if sends > 0.0 {
        b.push((
            "storage NICs (send)",
            f64::from(c.storage_nodes) * s_nic / sends,
        ));
    }
    let ssd_bytes = rd + reps * wr;
    if ssd_bytes > 0.0 {
        let all = f64::from(c.storage_nodes * hw.storage.ssds) * hw.storage.ssd_bytes;
        b.push(("SSDs", all / ssd_bytes));
    }
    if let Some(core) = l.core_capacity() {
        b.push(("fabric core", core / (rd + wr).max(1.0)));
    }
    b
}

/// What the run's samples held: per sample (t, client read, client write, storage receive),
/// GiB/s.
fn sample_rates(l: &Layout, sc: &PerfScenario, s: &Sample) -> (f64, f64, f64, f64) {
    let c = &sc.cluster;
    let sum = |ids: &mut dyn Iterator<Item = u32>| -> f64 {
        ids.map(|x| s.bytes[x as usize]).sum::<f64>() / s.dt.max(1e-12) / GIB
    };
    (
        s.t,
        sum(&mut (0..c.clients).map(|k| l.client_in(k))),
        sum(&mut (0..c.clients).map(|k| l.client_out(k))),
        sum(&mut (0..c.storage_nodes).map(|k| l.storage_in(k))),
    )
}

/// Runs a pipeline scenario, writing its report in `dir`: the summary line and the figures.
pub fn pipeline(
    sc: &PerfScenario,
    dir: &Path,
    progress: &mut dyn FnMut(f64),
) -> Result<(String, Pipelined), String> {
    let hw = hardware(sc);
    let mut l = layout(sc, &hw, &sc.cluster.table)?;
    let phases = plan(sc, &mut l);
    let mut samples = Vec::new();
    let (ended, stats) = {
        let mut src = Pipeline::new(&l, phases, sc.seed, hw.request_latency);
        let stats = simulate(sc, &l, &mut src, |s: &Sample| {
            samples.push(sample_rates(&l, sc, s));
            progress(s.t / sc.duration_s);
        });
        (src.ended, stats)
    };
    if ended.len() < sc.phases.len() {
        return Err(format!(
            "{}: phase `{}` had not ended after duration_s = {} simulated seconds; raise \
             duration_s",
            sc.name,
            sc.phases[ended.len()].name,
            sc.duration_s
        ));
    }
    let mut fig = figures(sc, &hw, &l, &ended);
    write_chart(sc, dir, &samples, &fig)?;
    fig.samples = samples;
    write(dir, "report.md", &report(sc, &hw, &fig, &stats))?;
    Ok((summary(sc, &fig), fig))
}

/// Each phase's time, floor and binding resource from the phases' end times.
fn figures(sc: &PerfScenario, hw: &Hardware, l: &Layout, ended: &[f64]) -> Pipelined {
    let mut start = 0.0;
    let phases = sc
        .phases
        .iter()
        .zip(ended)
        .map(|(p, &end)| {
            let b = bounds(sc, hw, l, p);
            let (bind, rate) = b
                .iter()
                .copied()
                .min_by(|x, y| x.1.total_cmp(&y.1))
                .expect("a phase has a bound");
            let row = (p.name.clone(), end - start, p.tib * TIB / rate, bind);
            start = end;
            row
        })
        .collect();
    let seconds = *ended.last().expect("a pipeline has phases");
    Pipelined {
        tib_min: sc.phases[0].tib / (seconds / 60.0),
        seconds,
        phases,
        samples: Vec::new(),
    }
}

fn published(sc: &PerfScenario, fig: &Pipelined) -> String {
    sc.published_tib_min.map_or(String::new(), |p| {
        format!(
            " Published: {p} TiB/min ({:+.1}%).",
            100.0 * (fig.tib_min / p - 1.0)
        )
    })
}

/// Seconds with the precision their size deserves.
fn secs(t: f64) -> String {
    if t < 10.0 {
        format!("{t:.2} s")
    } else {
        format!("{t:.0} s")
    }
}

/// Phase `p`'s data per second over `t` seconds, GiB/s.
fn gib_s(p: &PhaseSection, t: f64) -> f64 {
    p.tib * TIB / GIB / t.max(1e-12)
}

fn summary(sc: &PerfScenario, fig: &Pipelined) -> String {
    let phases: Vec<String> = sc
        .phases
        .iter()
        .zip(&fig.phases)
        .map(|(p, (n, t, floor, bind))| {
            format!(
                "{n} {} at {:.0} GiB/s ({:.0}% of its {bind} floor)",
                secs(*t),
                gib_s(p, *t),
                100.0 * floor / t
            )
        })
        .collect();
    let rate = if sc.published_tib_min.is_some() {
        format!("{:.2} TiB/min, ", fig.tib_min)
    } else {
        String::new()
    };
    format!(
        "{}: predicted {rate}{} in all: {}.{}\n",
        sc.name,
        secs(fig.seconds),
        phases.join(", "),
        published(sc, fig)
    )
}

/// The `report.md`: the prediction, a table of phases and their rooflines, the chart, the model.
fn report(sc: &PerfScenario, hw: &Hardware, fig: &Pipelined, stats: &Stats) -> String {
    let mut md = format!("# {}\n\n{}\n\n", sc.name, sc.about);
    let clock = if fig.seconds >= 60.0 {
        format!(
            " ({}m{:02}s)",
            (fig.seconds / 60.0) as u64,
            (fig.seconds % 60.0) as u64
        )
    } else {
        String::new()
    };
    let rate = if sc.published_tib_min.is_some() {
        format!(
            ", **{:.2} TiB/min** of the first phase's {} TiB",
            fig.tib_min, sc.phases[0].tib
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        md,
        "Predicted: **{} in all**{clock}{rate}.{}\n",
        secs(fig.seconds),
        published(sc, fig)
    );
    md.push_str(
        "| phase | TiB | tasks | cores per task | predicted s | GiB/s | floor s | binding \
         resource | time at the floor |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for (p, (name, t, floor, bind)) in sc.phases.iter().zip(&fig.phases) {
        let cores = p.core_mib_s.map_or("-".to_string(), |r| {
            format!(
                "{} at {r} MiB/s each, serial share {} (x{:.2})",
                p.task_cores,
                p.serial_fraction,
                speedup(p)
            )
        });
        let _ = writeln!(
            md,
            "| {name} | {:.1} | {} | {cores} | {t:.2} | {:.1} | {floor:.2} | {bind} | {:.0}% |",
            p.tib,
            p.tasks,
            gib_s(p, *t),
            100.0 * floor / t
        );
    }
    md.push_str(
        "\nThe floor is the phase's data over its binding resource's capacity (the least time \
         it could take); the predicted time is longer by the tasks' waves, the last wave's \
         tail and the random spread of chunks over chains.\n\n![throughput](throughput.svg)\n\n",
    );
    md.push_str(&assumptions(sc, hw, stats));
    md
}

/// The throughput chart (client read and write, storage receive) with the phases' ends drawn,
/// and its CSV.
fn write_chart(
    sc: &PerfScenario,
    dir: &Path,
    samples: &[(f64, f64, f64, f64)],
    fig: &Pipelined,
) -> Result<(), String> {
    let pick = |f: fn(&(f64, f64, f64, f64)) -> f64| -> Vec<(f64, f64)> {
        samples.iter().map(|s| (s.0, f(s))).collect()
    };
    let lines = vec![
        ("clients read".to_string(), pick(|s| s.1)),
        ("clients write".to_string(), pick(|s| s.2)),
        (
            "storage NICs receive (writes x replicas)".to_string(),
            pick(|s| s.3),
        ),
    ];
    let mut start = 0.0;
    let marks: Vec<(String, f64)> = fig
        .phases
        .iter()
        .map(|(n, t, _, _)| {
            let m = (n.clone(), start);
            start += t;
            m
        })
        .collect();
    let svg = t3fs_reports::perf_charts::series_with_phases(
        &format!("{}: storage throughput by phase", sc.name),
        "GiB/s",
        &lines,
        &marks,
    )?;
    write(dir, "throughput.svg", &svg)?;
    let mut csv = String::from("t_s,client_read_gib_s,client_write_gib_s,storage_receive_gib_s\n");
    for (t, r, w, s) in samples {
        let _ = writeln!(csv, "{t:.3},{r:.4},{w:.4},{s:.4}");
    }
    write(dir, "throughput.csv", &csv)
}
