//! t3fs-reports: the run-directory format (manifest.json, HdrHistogram logs, events.jsonl,
//! counters) and its rendering to report.md / report.html with charts (empty until the
//! simulator issue lands). It depends on no workspace crate: it only reads run directories.
#![forbid(unsafe_code)]
