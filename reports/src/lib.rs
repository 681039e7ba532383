//! t3fs-reports: the run-directory format (manifest.json, HdrHistogram interval logs,
//! events.jsonl, series and chain timelines) and its rendering to report.md / report.html with
//! charts drawn by plotters.
//!
//! It depends on no workspace crate: it only reads and writes run directories, so simulated and
//! real runs share one report. Not here: producing the data.
#![forbid(unsafe_code)]

pub mod charts;
pub mod render;
pub mod rundir;

pub use render::render;
pub use rundir::{
    Bound, ChainPoint, EventLine, Manifest, OpLine, RooflineLine, RunData, Series, VerdictLine,
};
