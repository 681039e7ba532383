//! Table pieces that the single-run report and the comparison both print, so that one figure
//! reads the same in both: the verdict line, the run length, a latency percentile row, a
//! roofline row and numbers.
//!
//! Invariant: every function returns markdown cell text (pipes escaped), never a whole table,
//! so each caller lays out its own columns. Not here: the layout itself (render.rs, compare.rs).

use hdrhistogram::Histogram;

use crate::markdown::cell;
use crate::rundir::{Manifest, RooflineLine};

/// Shown where a run has no value (an operation it did not perform, a checker it did not run).
pub(crate) const MISSING: &str = "–";

/// The latency quantiles every table and chart shows, in percent; 100 is the maximum.
pub(crate) const QUANTILES: [f64; 6] = [50.0, 90.0, 99.0, 99.9, 99.99, 100.0];

/// Header cells of a percentile row: `count | p50 | … | max`.
pub(crate) const PERCENTILE_HEADER: &str = "count | p50 | p90 | p99 | p99.9 | p99.99 | max";

/// `PASS`, or `FAIL (exit N): reason`.
pub(crate) fn verdict(m: &Manifest) -> String {
    if m.exit == 0 {
        "PASS".to_string()
    } else {
        format!("FAIL (exit {}): {}", m.exit, m.reason)
    }
}

/// Real runs are not driven by an event queue, so only simulated ones have events and a trace.
pub(crate) fn is_real(m: &Manifest) -> bool {
    m.mode.starts_with("real")
}

/// The run length, with the event count and trace hash for simulated runs.
pub(crate) fn run_length(m: &Manifest) -> String {
    if is_real(m) {
        format!("{:.1} s", m.seconds)
    } else {
        format!("{:.1} s, {} events, trace {}", m.seconds, m.events, m.trace)
    }
}

/// Microseconds as milliseconds with three decimals.
pub(crate) fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

/// A measured figure: whole numbers (queue depths, counts) without decimals, others with one.
pub(crate) fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// `count | p50 | … | max` of `h` in milliseconds.
pub(crate) fn percentile_cells(h: &Histogram<u64>) -> String {
    let mut cells = vec![h.len().to_string()];
    cells.extend(QUANTILES.iter().map(|q| ms(h.value_at_quantile(q / 100.0))));
    cells.join(" | ")
}

/// `PERCENTILE_HEADER`'s cells for a run without the operation.
pub(crate) fn missing_percentile_cells() -> String {
    [MISSING; 7].join(" | ")
}

/// Header cells of a roofline row after the operation (see `roofline_cells`).
pub(crate) fn roofline_header(with_saturated: bool) -> String {
    let mut h = "measured | bounds | binding | reached".to_string();
    if with_saturated {
        h.push_str(" | what limited it");
    }
    h
}

/// Whether any row names a saturated resource, i.e. whether the column is worth printing.
pub(crate) fn any_saturated<'a>(rows: impl IntoIterator<Item = &'a RooflineLine>) -> bool {
    rows.into_iter().any(|r| !r.saturated.is_empty())
}

/// `measured unit | bound = value; … | binding | 66.0%` (and `| saturated`); the caller puts
/// the operation first, so that a comparison can put the run's tag after it.
pub(crate) fn roofline_cells(r: &RooflineLine, with_saturated: bool) -> String {
    let bounds: Vec<String> = r
        .bounds
        .iter()
        .map(|b| format!("{} = {} {}", b.name, num(b.value), r.unit))
        .collect();
    let mut cells = format!(
        "{} {} | {} | {} | {:.1}%",
        num(r.measured),
        cell(&r.unit),
        cell(&bounds.join("; ")),
        cell(&r.binding),
        r.percent
    );
    if with_saturated {
        cells.push_str(" | ");
        cells.push_str(&cell(&r.saturated));
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rundir::Bound;

    #[test]
    fn a_roofline_row_lists_every_bound_and_the_percent_with_one_decimal() {
        let r = RooflineLine {
            op: "write".into(),
            unit: "MiB/s".into(),
            measured: 132.0,
            bounds: vec![
                Bound {
                    name: "disk write ÷ 3".into(),
                    value: 200.0,
                },
                Bound {
                    name: "loopback | tcp".into(),
                    value: 500.5,
                },
            ],
            binding: "disk write ÷ 3".into(),
            percent: 66.0,
            saturated: String::new(),
        };
        assert_eq!(
            roofline_cells(&r, false),
            "132 MiB/s | disk write ÷ 3 = 200 MiB/s; loopback \\| tcp = 500.5 MiB/s \
             | disk write ÷ 3 | 66.0%"
        );
        assert!(roofline_cells(&r, true).ends_with("66.0% | "));
    }

    #[test]
    fn real_runs_have_no_events_or_trace_in_their_length() {
        let mut m = Manifest {
            mode: "real".into(),
            seconds: 12.34,
            ..Manifest::default()
        };
        assert_eq!(run_length(&m), "12.3 s");
        m.mode = "sim".into();
        m.events = 7;
        m.trace = "ab".into();
        assert_eq!(run_length(&m), "12.3 s, 7 events, trace ab");
    }
}
