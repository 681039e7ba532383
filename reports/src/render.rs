//! Renders a run directory to report.md (charts as linked SVG files) and report.html (charts
//! inline): verdicts, throughput over time with fault markers, latency percentiles per
//! operation, the chain-state timeline, the fault timeline and the reachability counters; for
//! real runs also the cluster shape, the probed host bounds and the roofline.
//!
//! Invariant: rendering reads only the run directory, so `t3fs report DIR` re-renders any run;
//! sections about real-run fields are left out when the fields are empty, so a simulated run's
//! report does not change. Not here: collecting the data (the run's producer) or comparing two
//! runs (compare.rs).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use hdrhistogram::Histogram;

use crate::markdown::{cell, md_to_html, page};
use crate::rundir::{self, Manifest, RunData};
use crate::tables;

/// Events listed in the timeline table; the rest stay in events.jsonl.
const TIMELINE_ROWS: usize = 200;

/// Every interval's histogram of an operation merged into one (kept here for callers of the
/// render API; the function lives with the run data it reads).
pub fn merged(d: &RunData) -> BTreeMap<String, Histogram<u64>> {
    d.merged_latencies()
}

/// Title, verdict and the table of what ran where.
fn header(md: &mut String, m: &Manifest) {
    let _ = writeln!(md, "# t3fs run: {}\n\n{}\n", m.scenario, m.about);
    let _ = writeln!(md, "**Verdict: {}**\n", tables::verdict(m));
    let _ = writeln!(md, "| | |\n| --- | --- |");
    let _ = writeln!(md, "| reproduce | `{}` |", m.command);
    let _ = writeln!(md, "| mode | {} (seed {}) |", m.mode, m.seed);
    let _ = writeln!(md, "| commit | {} ({}) |", m.commit, m.profile);
    let _ = writeln!(md, "| host | {} |", m.host);
    if !m.shape.is_empty() {
        let _ = writeln!(md, "| cluster | {} |", cell(&m.shape));
    }
    let _ = writeln!(md, "| run length | {} |\n", tables::run_length(m));
}

/// The checkers' verdicts, with multi-line evidence in code blocks after the table.
fn verdicts(md: &mut String, m: &Manifest) {
    let _ = writeln!(
        md,
        "## Verdicts\n\n| checker | verdict | detail |\n| --- | --- | --- |"
    );
    for v in &m.verdicts {
        let detail = v.detail.lines().next().unwrap_or("");
        let _ = writeln!(md, "| {} | **{}** | {} |", v.name, v.label, cell(detail));
    }
    for v in m.verdicts.iter().filter(|v| v.detail.contains('\n')) {
        let _ = writeln!(md, "\n**{}**\n\n```text\n{}\n```", v.name, v.detail);
    }
}

/// The probed host bounds the run was measured against (real runs).
fn probe(md: &mut String, m: &Manifest) {
    if m.probe.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\n## Host bounds (probed)\n\n| bound | value |\n| --- | --- |"
    );
    for (k, v) in &m.probe {
        let _ = writeln!(md, "| {} | {} |", cell(k), tables::num(*v));
    }
}

/// Each measured figure against its bounds (real runs).
fn roofline(md: &mut String, m: &Manifest) {
    if m.roofline.is_empty() {
        return;
    }
    let sat = tables::any_saturated(&m.roofline);
    let header = tables::roofline_header(sat);
    let cols = header.split(" | ").count() + 1;
    let _ = writeln!(
        md,
        "\n## Roofline\n\n| op | {header} |\n|{}",
        " --- |".repeat(cols)
    );
    for r in &m.roofline {
        let cells = tables::roofline_cells(r, sat);
        let _ = writeln!(md, "| {} | {cells} |", cell(&r.op));
    }
}

fn latency(md: &mut String, d: &RunData) {
    let _ = writeln!(
        md,
        "\n## Latency percentiles (ms)\n\n| operation | {} |\n|{}",
        tables::PERCENTILE_HEADER,
        " --- |".repeat(8)
    );
    for (op, h) in merged(d) {
        let _ = writeln!(md, "| {op} | {} |", tables::percentile_cells(&h));
    }
}

/// Notable events in time order (verdicts have their own table).
fn timeline(md: &mut String, d: &RunData) {
    let _ = writeln!(
        md,
        "\n## Timeline\n\n| time (s) | kind | node | event |\n| --- | --- | --- | --- |"
    );
    let shown: Vec<_> = d.events.iter().filter(|e| e.kind != "verdict").collect();
    for e in shown.iter().take(TIMELINE_ROWS) {
        let _ = writeln!(
            md,
            "| {:.3} | {} | {} | {} |",
            e.t,
            e.kind,
            e.node,
            cell(&e.what)
        );
    }
    if shown.len() > TIMELINE_ROWS {
        let more = shown.len() - TIMELINE_ROWS;
        let _ = writeln!(md, "\n({more} more events in events.jsonl)");
    }
}

fn counters(md: &mut String, m: &Manifest) {
    let _ = writeln!(
        md,
        "\n## Reachability\n\n| fault class | times |\n| --- | --- |"
    );
    for (k, v) in &m.faults_reached {
        let _ = writeln!(md, "| {k} | {v} |");
    }
    let _ = writeln!(md, "\n| §2.6.1 row | times |\n| --- | --- |");
    for (k, v) in &m.rows_reached {
        let _ = writeln!(md, "| {k} | {v} |");
    }
    let _ = writeln!(md, "\n## Counters\n\n| counter | value |\n| --- | --- |");
    for (k, v) in &m.counters {
        let _ = writeln!(md, "| {k} | {v} |");
    }
}

/// The markdown before the charts and the markdown after them.
fn body(d: &RunData) -> (String, String) {
    let m = &d.manifest;
    let mut head = String::new();
    header(&mut head, m);
    verdicts(&mut head, m);
    probe(&mut head, m);
    roofline(&mut head, m);
    let mut tail = String::new();
    latency(&mut tail, d);
    timeline(&mut tail, d);
    counters(&mut tail, m);
    (head, tail)
}

/// Writes each drawn chart into `dir`, links it from `md` and inlines it into `html`; a chart
/// that could not be drawn is named with the reason instead, so the rest of the report stands.
pub(crate) fn emit_charts(
    dir: &Path,
    charts: &[(&str, Result<String, String>)],
    md: &mut String,
    html: &mut String,
) -> std::io::Result<()> {
    for (file, svg) in charts {
        match svg {
            Ok(svg) => {
                std::fs::write(dir.join(file), svg)?;
                let _ = writeln!(md, "![{file}]({file})\n");
                let _ = writeln!(html, "<div class=\"chart\">{svg}</div>");
            }
            Err(e) => {
                let _ = writeln!(md, "({file} not drawn: {e})\n");
            }
        }
    }
    Ok(())
}

/// Renders `dir`'s report.md, report.html and chart SVGs.
pub fn render(dir: &Path) -> std::io::Result<()> {
    let d = rundir::read(dir)?;
    let mut charts = vec![
        ("throughput.svg", crate::charts::throughput(&d)),
        ("counters.svg", crate::charts::counters(&d)),
        ("latency.svg", crate::charts::latency(&d)),
        ("chains.svg", crate::charts::chain_timeline(&d)),
    ];
    if let Some(svg) = crate::bandwidth_chart::bandwidth(&d) {
        charts.insert(0, ("bandwidth.svg", svg));
    }
    if let Some(svg) = crate::roofline_chart::roofline(&d.manifest.roofline) {
        charts.insert(0, ("roofline.svg", svg));
    }
    let (head, tail) = body(&d);
    let mut md = head.clone();
    let mut html_charts = String::new();
    md.push_str("\n## Charts\n\n");
    emit_charts(dir, &charts, &mut md, &mut html_charts)?;
    md.push_str(&tail);
    std::fs::write(dir.join("report.md"), &md)?;
    let body = format!(
        "{}<h2>Charts</h2>\n{}{}",
        md_to_html(&head),
        html_charts,
        md_to_html(&tail)
    );
    let title = format!("t3fs run: {}", d.manifest.scenario);
    std::fs::write(dir.join("report.html"), page(&title, &body))?;
    Ok(())
}
