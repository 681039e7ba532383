//! Charts of a run as SVG (plotters): throughput and key counters over time with fault
//! markers, latency percentiles per operation, and the chain-state timeline.
//!
//! Invariant: every chart renders from `RunData` alone and an empty run gives an empty but valid
//! chart. Not here: the page around the charts (render.rs) or the charts that overlay two runs
//! (compare_charts.rs, which shares the helpers marked `pub(crate)`).

use plotters::prelude::*;

use crate::rundir::RunData;

pub(crate) const W: u32 = 900;
pub(crate) const H: u32 = 360;
const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// When the run's faults and phase changes happened, in seconds.
pub(crate) fn fault_times(d: &RunData) -> Vec<f64> {
    d.events
        .iter()
        .filter(|e| e.kind == "fault" || e.kind == "phase")
        .map(|e| e.t)
        .collect()
}

pub(crate) fn err(e: impl std::fmt::Debug) -> String {
    format!("chart: {e:?}")
}

/// Draws the legend of a line chart and flushes the drawing.
pub(crate) fn finish<'a, X, Y>(
    mut chart: ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    root: &DrawingArea<SVGBackend<'a>, plotters::coord::Shift>,
) -> Result<(), String>
where
    X: Ranged,
    Y: Ranged,
{
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// Completed operations per second over time, one line per operation, faults as red rules.
pub fn throughput(d: &RunData) -> Result<String, String> {
    per_second(
        d,
        "Throughput (completed operations per second)",
        "ops/s",
        d.series.ops.iter().collect(),
    )
}

/// The counters a reader looks at first when a run misbehaves, in this order.
const KEY_COUNTERS: [&str; 12] = [
    "net.lost",
    "net.cut",
    "storage.forward_retries",
    "storage.stale_chain_version",
    "storage.resync_items",
    "mgmtd.chain_updates",
    "storage.force_commits",
    "mgmtd.heartbeats_refused",
    "net.duplicated",
    "kv.conflicts_injected",
    "disk.eio",
    "disk.spikes",
];

/// Key counters per second over time (up to six that moved), faults as red rules: where the
/// retries, resyncs and chain updates happened relative to the faults.
pub fn counters(d: &RunData) -> Result<String, String> {
    let lines: Vec<(&String, &Vec<u64>)> = KEY_COUNTERS
        .iter()
        .filter_map(|k| d.series.counters.get_key_value(*k))
        .filter(|(_, v)| v.iter().any(|x| *x > 0))
        .take(PALETTE.len())
        .collect();
    per_second(d, "Counters (increments per second)", "per second", lines)
}

/// One line per named series of per-interval counts, as rates, with fault markers.
fn per_second(
    d: &RunData,
    title: &str,
    y_desc: &str,
    lines: Vec<(&String, &Vec<u64>)>,
) -> Result<String, String> {
    let iv = d.series.interval.max(1e-9);
    let rates: Vec<(String, Vec<f64>)> = lines
        .iter()
        .map(|(n, v)| (n.to_string(), v.iter().map(|c| *c as f64 / iv).collect()))
        .collect();
    rate_chart(d, title, y_desc, &rates, false)
}

/// One line per named series of per-interval rates over time, with the run's faults and phase
/// starts as red rules; `name_phases` writes each phase's name at the top of its rule.
pub(crate) fn rate_chart(
    d: &RunData,
    title: &str,
    y_desc: &str,
    lines: &[(String, Vec<f64>)],
    name_phases: bool,
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let iv = d.series.interval.max(1e-9);
        let n = lines.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
        let t_max = (n as f64 * iv).max(1.0);
        let y_max = lines
            .iter()
            .flat_map(|(_, v)| v.iter().copied())
            .fold(1.0, f64::max)
            * 1.1;
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
            .y_desc(y_desc)
            .draw()
            .map_err(err)?;
        for t in fault_times(d) {
            chart
                .draw_series(LineSeries::new(vec![(t, 0.0), (t, y_max)], RED.mix(0.35)))
                .map_err(err)?;
        }
        if name_phases {
            let grey = BLACK.mix(0.6);
            let style = TextStyle::from(("sans-serif", 12).into_font()).color(&grey);
            for e in d.events.iter().filter(|e| e.kind == "phase") {
                let at = (e.t + t_max * 0.005, y_max * 0.97);
                chart
                    .draw_series(std::iter::once(Text::new(
                        e.what.clone(),
                        at,
                        style.clone(),
                    )))
                    .map_err(err)?;
            }
        }
        for (k, (name, rates)) in lines.iter().enumerate() {
            let color = PALETTE[k % PALETTE.len()];
            let pts: Vec<(f64, f64)> = rates
                .iter()
                .enumerate()
                .map(|(i, r)| ((i as f64 + 0.5) * iv, *r))
                .collect();
            chart
                .draw_series(LineSeries::new(pts, color.stroke_width(2)))
                .map_err(err)?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
        }
        finish(chart, &root)?;
    }
    Ok(svg)
}

/// Percentiles of every operation's latency (whole run), milliseconds on a log axis.
pub fn latency(d: &RunData) -> Result<String, String> {
    const QS: [f64; 6] = crate::tables::QUANTILES;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let merged = d.merged_latencies();
        let max_ms = merged
            .values()
            .map(|h| h.max() as f64 / 1000.0)
            .fold(1.0, f64::max)
            * 2.0;
        let mut chart = ChartBuilder::on(&root)
            .caption("Latency percentiles", ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(0usize..QS.len() - 1, (0.001f64..max_ms).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_labels(QS.len())
            .x_label_formatter(&|i| QS.get(*i).map(|q| format!("p{q}")).unwrap_or_default())
            .y_desc("ms")
            .draw()
            .map_err(err)?;
        for (k, (op, h)) in merged.iter().enumerate() {
            let color = PALETTE[k % PALETTE.len()];
            let pts: Vec<(usize, f64)> = QS
                .iter()
                .enumerate()
                .map(|(i, q)| {
                    (
                        i,
                        (h.value_at_quantile(q / 100.0) as f64 / 1000.0).max(0.001),
                    )
                })
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(err)?
                .label(op.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
                .map_err(err)?;
        }
        finish(chart, &root)?;
    }
    Ok(svg)
}

/// One row per chain: green while every target serves, amber while degraded, red with no
/// serving target; faults as rules.
pub fn chain_timeline(d: &RunData) -> Result<String, String> {
    chain_timeline_titled(
        d,
        "Chain states (green: all SERVING, amber: degraded, red: none serving)",
    )
}

/// `chain_timeline` under another caption (the comparison names the run in it).
pub(crate) fn chain_timeline_titled(d: &RunData, title: &str) -> Result<String, String> {
    let mut chains: Vec<String> = d.chains.iter().map(|c| c.chain.clone()).collect();
    chains.sort();
    chains.dedup();
    chains.truncate(24);
    let rows = chains.len().max(1);
    let height = (80 + 28 * rows as u32).max(160);
    let t_end = d
        .manifest
        .seconds
        .max(d.chains.iter().map(|c| c.t).fold(1.0, f64::max));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..t_end, -0.5..rows as f64 - 0.5)
            .map_err(err)?;
        let names = chains.clone();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(rows)
            .y_label_formatter(&|y| {
                let r = y.round();
                if (y - r).abs() < 1e-6 && r >= 0.0 {
                    names.get(r as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .x_desc("time (s)")
            .draw()
            .map_err(err)?;
        for (row, name) in chains.iter().enumerate() {
            let mut pts: Vec<&crate::rundir::ChainPoint> =
                d.chains.iter().filter(|c| &c.chain == name).collect();
            pts.sort_by(|a, b| a.t.total_cmp(&b.t));
            for (k, p) in pts.iter().enumerate() {
                let end = pts.get(k + 1).map_or(t_end, |n| n.t);
                let color = if p.serving == p.targets {
                    RGBColor(76, 175, 80)
                } else if p.serving > 0 {
                    RGBColor(255, 179, 0)
                } else {
                    RGBColor(229, 57, 53)
                };
                let y = row as f64;
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(p.t, y - 0.35), (end, y + 0.35)],
                        color.filled(),
                    )))
                    .map_err(err)?;
            }
        }
        for t in fault_times(d) {
            chart
                .draw_series(LineSeries::new(
                    vec![(t, -0.5), (t, rows as f64 - 0.5)],
                    RED.mix(0.5),
                ))
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}
