//! t3fs-reports: the run-directory format (manifest.json, HdrHistogram interval logs,
//! events.jsonl, series and chain timelines) and its rendering to report.md / report.html with
//! charts drawn by plotters, and the comparison of two run directories (compare.md /
//! compare.html).
//!
//! It depends on no workspace crate: it only reads and writes run directories, so simulated and
//! real runs share one report. Not here: producing the data.
#![forbid(unsafe_code)]

mod bandwidth_chart;
pub mod charts;
mod compare;
mod compare_charts;
mod markdown;
pub mod perf_charts;
pub mod render;
mod roofline_chart;
pub mod rundir;
mod tables;

pub use compare::compare;
pub use render::render;
pub use rundir::{
    Bound, ChainPoint, EventLine, Manifest, OpLine, RooflineLine, RunData, Series, VerdictLine,
};
