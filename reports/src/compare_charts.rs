//! Charts that lay two runs over each other: throughput over time and the latency percentile
//! spectra. Run A is drawn solid in cool colours, run B dashed in warm ones, so a line's run is
//! clear even in a grey print; each run's faults and phase changes are rules in its own colour.
//! Every line is labelled `A: write`, `B: read`, … in the legend.
//!
//! Invariant: both runs are drawn on one axis from their own zero; nothing aligns their clocks
//! or rescales one to the other, so what differs in the picture differs in the runs. Not here:
//! the chain timelines (one `charts::chain_timeline_titled` per run) or the page (compare.rs).

use plotters::coord::types::RangedCoordf64;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::charts::{err, fault_times, finish, H, W};
use crate::rundir::RunData;
use crate::tables::QUANTILES;

/// How one run's lines look.
struct Look {
    /// Line colours, by operation; the first one also draws the run's fault rules.
    colors: [RGBColor; 4],
    dashed: bool,
}

/// A (index 0): blues, greens, purples, solid. B (index 1): oranges, reds, browns, dashed.
const LOOKS: [Look; 2] = [
    Look {
        colors: [
            RGBColor(31, 119, 180),
            RGBColor(44, 160, 44),
            RGBColor(148, 103, 189),
            RGBColor(23, 190, 207),
        ],
        dashed: false,
    },
    Look {
        colors: [
            RGBColor(255, 127, 14),
            RGBColor(214, 39, 40),
            RGBColor(140, 86, 75),
            RGBColor(227, 119, 194),
        ],
        dashed: true,
    },
];

/// One labelled line of a chart.
struct Line {
    label: String,
    pts: Vec<(f64, f64)>,
    color: RGBColor,
    dashed: bool,
}

type Chart<'a, Y> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, Y>>;

/// Draws `line` with its legend entry, and a marker on every point when `markers`.
fn draw_line<'a, Y>(chart: &mut Chart<'a, Y>, line: Line, markers: bool) -> Result<(), String>
where
    Y: Ranged<ValueType = f64>,
{
    let style = line.color.stroke_width(2);
    let anno = if line.dashed {
        chart
            .draw_series(DashedLineSeries::new(line.pts.clone(), 6, 4, style))
            .map_err(err)?
    } else {
        chart
            .draw_series(LineSeries::new(line.pts.clone(), style))
            .map_err(err)?
    };
    // The legend shows the dash too, or A and B of one operation would look alike there.
    if line.dashed {
        anno.label(line.label)
            .legend(move |(x, y)| DashedPathElement::new(vec![(x, y), (x + 18, y)], 5, 3, style));
    } else {
        anno.label(line.label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
    }
    if markers {
        let c = line.color;
        chart
            .draw_series(line.pts.into_iter().map(|p| Circle::new(p, 3, c.filled())))
            .map_err(err)?;
    }
    Ok(())
}

/// Each run's fault and phase rules from `y0` to `y1`, labelled `A: faults` once per run.
fn fault_rules<'a, Y>(
    chart: &mut Chart<'a, Y>,
    runs: [(&str, &RunData); 2],
    y0: f64,
    y1: f64,
) -> Result<(), String>
where
    Y: Ranged<ValueType = f64>,
{
    for ((tag, d), look) in runs.iter().zip(&LOOKS) {
        let times = fault_times(d);
        if times.is_empty() {
            continue;
        }
        let style = look.colors[0].mix(0.6).stroke_width(2);
        let rules = times
            .into_iter()
            .map(|t| PathElement::new(vec![(t, y0), (t, y1)], style));
        chart
            .draw_series(rules)
            .map_err(err)?
            .label(format!("{tag}: faults, phases"))
            .legend(move |(x, y)| PathElement::new(vec![(x + 9, y - 6), (x + 9, y + 6)], style));
    }
    Ok(())
}

/// One line per run × named series, A's in A's look and B's in B's.
fn run_lines(
    runs: [(&str, &RunData); 2],
    series: impl Fn(&RunData) -> Vec<(String, Vec<(f64, f64)>)>,
) -> Vec<Line> {
    let mut lines = Vec::new();
    for ((tag, d), look) in runs.iter().zip(&LOOKS) {
        for (j, (name, pts)) in series(d).into_iter().enumerate() {
            lines.push(Line {
                label: format!("{tag}: {name}"),
                pts,
                color: look.colors[j % look.colors.len()],
                dashed: look.dashed,
            });
        }
    }
    lines
}

/// Completions per second of every run × operation.
fn throughput_lines(runs: [(&str, &RunData); 2]) -> Vec<Line> {
    run_lines(runs, |d| {
        let iv = d.series.interval.max(1e-9);
        (d.series.ops.iter())
            .map(|(op, counts)| {
                let rates = counts.iter().map(|c| *c as f64 / iv).collect::<Vec<_>>();
                (op.clone(), midpoints(&rates, iv))
            })
            .collect()
    })
}

/// MiB/s of every run × `bytes.<op>` counter (the workload runs' storage throughput).
fn bandwidth_lines(runs: [(&str, &RunData); 2]) -> Vec<Line> {
    run_lines(runs, |d| {
        let iv = d.series.interval.max(1e-9);
        (crate::bandwidth_chart::mib_per_s(d).into_iter())
            .map(|(op, rates)| (op, midpoints(&rates, iv)))
            .collect()
    })
}

/// Per-interval rates as points at the intervals' midpoints.
fn midpoints(rates: &[f64], iv: f64) -> Vec<(f64, f64)> {
    (rates.iter().enumerate())
        .map(|(i, r)| ((i as f64 + 0.5) * iv, *r))
        .collect()
}

/// Throughput over time of both runs on one chart.
pub(crate) fn throughput(runs: [(&str, &RunData); 2]) -> Result<String, String> {
    let title = "Throughput (completed operations per second)";
    rates(runs, title, "ops/s", throughput_lines(runs))
}

/// Storage throughput (MiB/s of the runs' `bytes.<op>` counters) of both runs on one chart,
/// with each run's phase changes; `None` when neither run counted bytes.
pub(crate) fn bandwidth(runs: [(&str, &RunData); 2]) -> Option<Result<String, String>> {
    let lines = bandwidth_lines(runs);
    if lines.is_empty() {
        return None;
    }
    let title = "Storage throughput (MiB/s), phases as rules";
    Some(rates(runs, title, "MiB/s", lines))
}

/// How long a run's chart runs: its series' intervals, or its own length if longer (a phase
/// or fault rule after the last interval stays on the axis).
fn run_length(d: &RunData) -> f64 {
    let s = &d.series;
    let n = (s.ops.values().chain(s.counters.values()))
        .map(Vec::len)
        .max()
        .unwrap_or(0);
    (s.interval * n as f64).max(d.manifest.seconds)
}

/// Whether either run completed any operation (workload runs count bytes instead).
pub(crate) fn any_ops(runs: [(&str, &RunData); 2]) -> bool {
    (runs.iter()).any(|(_, d)| d.series.ops.values().flatten().any(|c| *c > 0))
}

/// `lines` of both runs over time on one chart, each run's faults and phases as rules.
fn rates(
    runs: [(&str, &RunData); 2],
    title: &str,
    unit: &str,
    lines: Vec<Line>,
) -> Result<String, String> {
    let t_max = runs.iter().map(|(_, d)| run_length(d)).fold(1.0, f64::max);
    let y_max = lines
        .iter()
        .flat_map(|l| l.pts.iter().map(|p| p.1))
        .fold(1.0, f64::max)
        * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..t_max, 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc(unit)
            .draw()
            .map_err(err)?;
        fault_rules(&mut chart, runs, 0.0, y_max)?;
        for line in lines {
            draw_line(&mut chart, line, false)?;
        }
        finish(chart, &root)?;
    }
    Ok(svg)
}

/// The x-axis name of `QUANTILES[i]`.
fn quantile_name(i: usize) -> String {
    match QUANTILES.get(i) {
        Some(q) if *q >= 100.0 => "max".to_string(),
        Some(q) => format!("p{q}"),
        None => String::new(),
    }
}

/// Every run × operation's latency at each of `QUANTILES`, in ms (at least 1 µs, for the log
/// axis).
fn spectrum_lines(runs: [(&str, &RunData); 2]) -> Vec<Line> {
    run_lines(runs, |d| {
        d.merged_latencies()
            .iter()
            .map(|(op, h)| {
                let pts = QUANTILES
                    .iter()
                    .enumerate()
                    .map(|(i, q)| {
                        let v = h.value_at_quantile(q / 100.0) as f64 / 1000.0;
                        (i as f64, v.max(0.001))
                    })
                    .collect();
                (op.clone(), pts)
            })
            .collect()
    })
}

/// Latency percentile spectra (p50 … p99.99 and max) of both runs, log milliseconds.
pub(crate) fn spectra(runs: [(&str, &RunData); 2]) -> Result<String, String> {
    let lines = spectrum_lines(runs);
    let max_ms = lines
        .iter()
        .flat_map(|l| l.pts.iter().map(|p| p.1))
        .fold(1.0, f64::max)
        * 2.0;
    let last = (QUANTILES.len() - 1) as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Latency percentiles", ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.2..last + 0.2, (0.001f64..max_ms).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_labels(QUANTILES.len() + 1)
            .x_label_formatter(&|x| {
                let r = x.round();
                if (x - r).abs() < 1e-6 && r >= 0.0 {
                    quantile_name(r as usize)
                } else {
                    String::new()
                }
            })
            .y_desc("ms")
            .draw()
            .map_err(err)?;
        for line in lines {
            draw_line(&mut chart, line, true)?;
        }
        finish(chart, &root)?;
    }
    Ok(svg)
}
