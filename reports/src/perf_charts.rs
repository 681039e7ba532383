//! Charts of the performance model's runs (SVG, plotters): a throughput series against its
//! roofline (one dashed line per bound), per-node throughput as a scatter with its mean, and
//! grouped bars comparing two runs per node (recovery reads under two chain tables).
//!
//! Invariant: the y-axis starts at zero (a truncated axis exaggerates differences), every bound
//! is labelled with its value, and an empty input gives a valid, empty chart. Not here: the
//! model (t3fs-sim's `perf`).

use plotters::prelude::*;

use crate::charts::{err, finish, H, W};

const LINE: RGBColor = RGBColor(31, 119, 180);
const BOUNDS: [RGBColor; 4] = [
    RGBColor(214, 39, 40),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// `series` (x seconds, y in `unit`) with a dashed horizontal line per `bounds` entry.
pub fn series_with_bounds(
    title: &str,
    unit: &str,
    series: &[(f64, f64)],
    bounds: &[(String, f64)],
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let x_max = series.iter().map(|p| p.0).fold(0.0, f64::max).max(1e-3);
        let y_max = series
            .iter()
            .map(|p| p.1)
            .chain(bounds.iter().map(|b| b.1))
            .fold(0.0, f64::max)
            .max(1e-9)
            * 1.15;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("simulated time (s)")
            .y_desc(unit)
            .draw()
            .map_err(err)?;
        chart
            .draw_series(LineSeries::new(
                series.iter().copied(),
                LINE.stroke_width(2),
            ))
            .map_err(err)?
            .label("model")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], LINE));
        for (k, (name, v)) in bounds.iter().enumerate() {
            let c = BOUNDS[k % BOUNDS.len()];
            let dashes = (0..40).map(|i| {
                let a = x_max * f64::from(i) / 40.0;
                PathElement::new(vec![(a, *v), (a + x_max / 80.0, *v)], c.stroke_width(2))
            });
            chart
                .draw_series(dashes)
                .map_err(err)?
                .label(format!("{name}: {v:.2}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], c));
        }
        finish(chart, &root)?;
    }
    Ok(svg)
}

/// Lines over a parameter: the first series solid (the model), the rest dashed (bounds).
pub fn lines(
    title: &str,
    x_desc: &str,
    unit: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let pts = || series.iter().flat_map(|s| s.1.iter());
        let x_lo = pts().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let x_hi = pts().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
        let (x_lo, x_hi) = if x_lo < x_hi {
            (x_lo, x_hi)
        } else {
            (0.0, 1.0)
        };
        let y_max = pts().map(|p| p.1).fold(0.0, f64::max).max(1e-9) * 1.15;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(70)
            .build_cartesian_2d(x_lo..x_hi, 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(unit)
            .draw()
            .map_err(err)?;
        for (k, (name, pts)) in series.iter().enumerate() {
            let c = if k == 0 {
                LINE
            } else {
                BOUNDS[(k - 1) % BOUNDS.len()]
            };
            let style = c.stroke_width(if k == 0 { 3 } else { 1 });
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), style))
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], c));
            if k == 0 {
                chart
                    .draw_series(pts.iter().map(|p| Circle::new(*p, 3, c.filled())))
                    .map_err(err)?;
            }
        }
        finish(chart, &root)?;
    }
    Ok(svg)
}

/// Lines over simulated time (seconds), one colour each, with a grey rule at each phase's start
/// and its name at the top, as 3FS's GraySort charts mark their phases.
pub fn series_with_phases(
    title: &str,
    unit: &str,
    series: &[(String, Vec<(f64, f64)>)],
    phases: &[(String, f64)],
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let pts = || series.iter().flat_map(|s| s.1.iter());
        let x_max = pts().map(|p| p.0).fold(0.0, f64::max).max(1e-3);
        let y_max = pts().map(|p| p.1).fold(0.0, f64::max).max(1e-9) * 1.15;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("simulated time (s)")
            .y_desc(unit)
            .draw()
            .map_err(err)?;
        let grey = BLACK.mix(0.5);
        let text = TextStyle::from(("sans-serif", 12).into_font()).color(&grey);
        for (name, t) in phases {
            chart
                .draw_series(LineSeries::new(vec![(*t, 0.0), (*t, y_max)], grey))
                .map_err(err)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    name.clone(),
                    (*t + x_max / 200.0, y_max * 0.97),
                    text.clone(),
                )))
                .map_err(err)?;
        }
        for (k, (name, pts)) in series.iter().enumerate() {
            let c = if k == 0 {
                LINE
            } else {
                BOUNDS[(k - 1) % BOUNDS.len()]
            };
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], c));
        }
        finish(chart, &root)?;
    }
    Ok(svg)
}

/// One point per node (x: node index, y in `unit`) and a line at their mean.
pub fn scatter_with_mean(title: &str, unit: &str, ys: &[f64]) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let n = ys.len().max(1) as f64;
        let y_max = ys.iter().copied().fold(0.0, f64::max).max(1e-9) * 1.15;
        let mean = ys.iter().sum::<f64>() / n;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..n, 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("node")
            .y_desc(unit)
            .draw()
            .map_err(err)?;
        chart
            .draw_series(
                ys.iter()
                    .enumerate()
                    .map(|(i, y)| Circle::new((i as f64 + 0.5, *y), 2, LINE.filled())),
            )
            .map_err(err)?
            .label("per node")
            .legend(|(x, y)| Circle::new((x + 7, y), 3, LINE.filled()));
        let c = BOUNDS[0];
        chart
            .draw_series(LineSeries::new(
                vec![(0.0, mean), (n, mean)],
                c.stroke_width(2),
            ))
            .map_err(err)?
            .label(format!("mean {mean:.2}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], c));
        finish(chart, &root)?;
    }
    Ok(svg)
}

/// Bars per node for each of `groups` (name, one value per node), side by side.
pub fn grouped_bars(
    title: &str,
    unit: &str,
    groups: &[(String, Vec<f64>)],
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let n = groups.iter().map(|g| g.1.len()).max().unwrap_or(0).max(1);
        let y_max = groups
            .iter()
            .flat_map(|g| g.1.iter().copied())
            .fold(0.0, f64::max)
            .max(1e-9)
            * 1.15;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..n as f64, 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("node")
            .y_desc(unit)
            .draw()
            .map_err(err)?;
        let width = 0.8 / groups.len().max(1) as f64;
        for (g, (name, ys)) in groups.iter().enumerate() {
            let c = BOUNDS[g % BOUNDS.len()];
            let x0 = 0.1 + width * g as f64;
            chart
                .draw_series(ys.iter().enumerate().map(|(i, y)| {
                    let x = i as f64 + x0;
                    Rectangle::new([(x, 0.0), (x + width, *y)], c.filled())
                }))
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 12, y + 4)], c.filled()));
        }
        finish(chart, &root)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_render_with_their_bounds_labelled_and_empty_inputs_render_too() {
        let s = series_with_bounds(
            "t",
            "TiB/s",
            &[(0.0, 1.0), (1.0, 2.0)],
            &[("storage NICs".into(), 8.19)],
        )
        .unwrap();
        assert!(s.contains("<svg") && s.contains("storage NICs: 8.19"));
        assert!(series_with_bounds("t", "u", &[], &[])
            .unwrap()
            .contains("<svg"));
        assert!(scatter_with_mean("t", "u", &[1.0, 3.0])
            .unwrap()
            .contains("mean 2.00"));
        let b = grouped_bars(
            "t",
            "u",
            &[
                ("naive".into(), vec![1.0, 0.0]),
                ("balanced".into(), vec![0.5, 0.5]),
            ],
        )
        .unwrap();
        assert!(b.contains("naive") && b.contains("balanced"));
        let l = lines(
            "t",
            "clients",
            "TiB/s",
            &[("model".into(), vec![(1.0, 1.0), (2.0, 2.0)])],
        )
        .unwrap();
        assert!(l.contains("model") && l.contains("clients"));
    }
}
