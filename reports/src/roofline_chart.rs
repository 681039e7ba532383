//! The roofline of a real run as a picture: per operation, the measured figure and every
//! probed bound as horizontal bars on one scale, percent of that operation's binding bound, so
//! the gap a reader should look at (measured against the binding bound) is the first thing seen.
//!
//! Invariant: every bar is labelled with its absolute value and unit, so rows with different
//! units (MiB/s, IOPS) share the percent axis without being mistaken for each other. Not here:
//! the roofline table (tables.rs) or deciding what binds (the real crate's roofline.rs).

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::charts::{err, W};
use crate::rundir::RooflineLine;

const MEASURED: RGBColor = RGBColor(31, 119, 180);
const BINDING: RGBColor = RGBColor(90, 90, 90);
const OTHER: RGBColor = RGBColor(190, 190, 190);

/// One bar: its label on the axis, its value as a percent of the binding bound, its text.
struct Bar {
    label: String,
    percent: f64,
    text: String,
    color: RGBColor,
}

fn bars(rows: &[RooflineLine]) -> Vec<Bar> {
    let mut out = Vec::new();
    for r in rows {
        let binding = r
            .bounds
            .iter()
            .find(|b| b.name == r.binding)
            .map_or(0.0, |b| b.value);
        let pct = |v: f64| {
            if binding > 0.0 {
                100.0 * v / binding
            } else {
                0.0
            }
        };
        out.push(Bar {
            label: format!("{}: measured", r.op),
            percent: r.percent,
            text: format!("{:.0} {} ({:.0}%)", r.measured, r.unit, r.percent),
            color: MEASURED,
        });
        for b in &r.bounds {
            let binds = b.name == r.binding;
            out.push(Bar {
                label: format!("{}: {}", r.op, b.name),
                percent: pct(b.value),
                text: format!(
                    "{:.0} {}{}",
                    b.value,
                    r.unit,
                    if binds { " binds" } else { "" }
                ),
                color: if binds { BINDING } else { OTHER },
            });
        }
    }
    out
}

/// The chart, or `None` for a run without a roofline (a simulated run).
pub fn roofline(rows: &[RooflineLine]) -> Option<Result<String, String>> {
    if rows.is_empty() {
        return None;
    }
    Some(draw(&bars(rows)))
}

fn draw(bars: &[Bar]) -> Result<String, String> {
    let h = 90 + 34 * bars.len() as u32;
    // Room on the right for the label of the longest bar.
    let x_max = bars.iter().map(|b| b.percent).fold(100.0, f64::max) * 1.35;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, h)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let n = bars.len();
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "Roofline: measured against the probed bounds (% of the binding bound)",
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(330)
            .build_cartesian_2d(0f64..x_max, 0f64..n as f64)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .max_light_lines(0)
            .x_label_formatter(&|x| format!("{x:.0}%"))
            .x_desc("% of the binding bound")
            .draw()
            .map_err(err)?;
        for (i, b) in bars.iter().enumerate() {
            let top = (n - i) as f64 - 0.15;
            let bottom = (n - 1 - i) as f64 + 0.15;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(0.0, bottom), (b.percent, top)],
                    b.color.filled(),
                )))
                .map_err(err)?;
            // The bar's name, right-aligned in the label area at the bar's middle.
            let (px, py) = chart.backend_coord(&(0.0, (top + bottom) / 2.0));
            let style = TextStyle::from(("sans-serif", 13).into_font())
                .pos(Pos::new(HPos::Right, VPos::Center));
            root.draw(&Text::new(b.label.clone(), (px - 8, py), style))
                .map_err(err)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    b.text.clone(),
                    (b.percent + x_max * 0.01, (top + bottom) / 2.0 + 0.2),
                    ("sans-serif", 13),
                )))
                .map_err(err)?;
        }
        // The line every bar is measured against.
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(100.0, 0.0), (100.0, n as f64)],
                RED.stroke_width(1),
            )))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rundir::Bound;

    fn row() -> RooflineLine {
        RooflineLine {
            op: "write".into(),
            unit: "MiB/s".into(),
            measured: 486.0,
            bounds: vec![
                Bound {
                    name: "disk ÷ 3".into(),
                    value: 1350.0,
                },
                Bound {
                    name: "loopback ÷ 3".into(),
                    value: 2315.0,
                },
            ],
            binding: "disk ÷ 3".into(),
            percent: 36.0,
            saturated: String::new(),
        }
    }

    #[test]
    fn bars_are_percent_of_the_binding_bound_and_labelled_with_their_values() {
        let b = bars(&[row()]);
        assert_eq!(b.len(), 3);
        assert_eq!(
            (b[0].percent, b[0].text.as_str()),
            (36.0, "486 MiB/s (36%)")
        );
        assert_eq!(
            (b[1].percent, b[1].text.as_str()),
            (100.0, "1350 MiB/s binds")
        );
        assert!((b[2].percent - 100.0 * 2315.0 / 1350.0).abs() < 1e-9);
        let svg = roofline(&[row()]).expect("a chart").expect("drawn");
        assert!(
            svg.contains("486 MiB/s (36%)") && svg.contains("write: loopback"),
            "labels"
        );
        assert!(roofline(&[]).is_none(), "no roofline, no chart");
    }
}
