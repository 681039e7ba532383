//! Storage throughput over time for workload runs (checkpoints, KVCache, GraySort): MiB/s per
//! interval of every `bytes.<op>` counter, with each phase's start drawn as a grey rule and
//! named at the top, as 3FS's GraySort charts draw their phases.
//!
//! Invariant: only counters named `bytes.<op>` are drawn, as bytes per interval turned into
//! MiB/s; a run without any gets no chart. Not here: operations per second (charts.rs).

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::charts::{err, finish, H, W};
use crate::rundir::RunData;

const PALETTE: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// The chart, or `None` when the run counted no bytes.
pub fn bandwidth(d: &RunData) -> Option<Result<String, String>> {
    let lines: Vec<(&str, &Vec<u64>)> = d
        .series
        .counters
        .iter()
        .filter_map(|(k, v)| k.strip_prefix("bytes.").map(|op| (op, v)))
        .filter(|(_, v)| v.iter().any(|x| *x > 0))
        .collect();
    if lines.is_empty() {
        return None;
    }
    Some(draw(d, &lines))
}

fn draw(d: &RunData, lines: &[(&str, &Vec<u64>)]) -> Result<String, String> {
    let iv = d.series.interval.max(1e-9);
    let mib = |c: u64| c as f64 / (1u64 << 20) as f64 / iv;
    let n = lines.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
    let t_max = (n as f64 * iv).max(d.manifest.seconds).max(1.0);
    let y_max = lines
        .iter()
        .flat_map(|(_, v)| v.iter().map(|c| mib(*c)))
        .fold(1.0, f64::max)
        * 1.15;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Storage throughput by phase (MiB/s)", ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..t_max, 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("MiB/s")
            .draw()
            .map_err(err)?;
        let grey = RGBColor(120, 120, 120);
        let label = TextStyle::from(("sans-serif", 12).into_font())
            .color(&grey)
            .pos(Pos::new(HPos::Left, VPos::Top));
        for e in d.events.iter().filter(|e| e.kind == "phase") {
            chart
                .draw_series(LineSeries::new(
                    vec![(e.t, 0.0), (e.t, y_max)],
                    grey.mix(0.6),
                ))
                .map_err(err)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    e.what.clone(),
                    (e.t + t_max * 0.005, y_max * 0.99),
                    label.clone(),
                )))
                .map_err(err)?;
        }
        for (k, (op, counts)) in lines.iter().enumerate() {
            let color = PALETTE[k % PALETTE.len()];
            let pts: Vec<(f64, f64)> = counts
                .iter()
                .enumerate()
                .map(|(i, c)| ((i as f64 + 0.5) * iv, mib(*c)))
                .collect();
            chart
                .draw_series(LineSeries::new(pts, color.stroke_width(2)))
                .map_err(err)?
                .label(op.to_string())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
        }
        finish(chart, &root)?;
    }
    Ok(svg)
}
