//! Compares two run directories, A and B, into compare.md (charts as linked SVG files) and
//! compare.html (charts inline): what ran where and the verdicts, latency percentiles per
//! operation, each phase's length (workload runs), the probed host bounds and the roofline,
//! side by side; then throughput over time (operations, and storage MiB/s where a run counted
//! bytes) and the latency spectra of both runs overlaid, and each run's chain-state timeline, A
//! above B.
//!
//! Invariant: only `out` is written; both run directories are read and left as they are, so a
//! comparison can be redone at any time, also of a run against itself. Where one run has no
//! value (an operation, a checker, a bound) its cell shows `–`. Not here: judging which run is
//! better (no thresholds and no regression verdict) or aligning the runs' clocks.

use std::collections::BTreeSet;
use std::fmt::Write;
use std::fs;
use std::io;
use std::path::Path;

use crate::charts::chain_timeline_titled;
use crate::compare_charts;
use crate::markdown::{cell, md_to_html, page};
use crate::render::{emit_charts, merged};
use crate::rundir::{self, Manifest, RunData};
use crate::tables::{self, MISSING};

/// The two runs' tags, in argument order.
const TAGS: [&str; 2] = ["A", "B"];

/// What a run is called in the comparison: its directory's name.
fn label(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

/// `| name | a | b |`, with `–` for an empty cell.
fn row(md: &mut String, name: &str, cells: [String; 2]) {
    let [a, b] = cells.map(|c| {
        if c.is_empty() {
            MISSING.into()
        } else {
            cell(&c)
        }
    });
    let _ = writeln!(md, "| {name} | {a} | {b} |");
}

/// `` `s` ``, or empty (shown as `–`) when `s` is.
fn code_or_empty(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!("`{s}`")
    }
}

/// `commit (profile)`, as much of it as the run recorded.
fn commit(m: &Manifest) -> String {
    match (m.commit.is_empty(), m.profile.is_empty()) {
        (true, _) => String::new(),
        (false, true) => m.commit.clone(),
        (false, false) => format!("{} ({})", m.commit, m.profile),
    }
}

/// Title and the side-by-side table of what ran where, with every checker's verdict.
fn header(md: &mut String, labels: &[String; 2], ms: [&Manifest; 2]) {
    let title = if ms[0].scenario == ms[1].scenario {
        ms[0].scenario.clone()
    } else {
        format!("{} vs {}", ms[0].scenario, ms[1].scenario)
    };
    let _ = writeln!(md, "# t3fs comparison: {title}\n");
    let _ = writeln!(md, "| | A | B |\n| --- | --- | --- |");
    row(md, "label", labels.clone());
    let field = |f: fn(&Manifest) -> String| ms.map(f);
    row(md, "scenario", field(|m| m.scenario.clone()));
    row(md, "mode", field(|m| m.mode.clone()));
    row(md, "reproduce", field(|m| code_or_empty(&m.command)));
    row(md, "commit", field(commit));
    row(md, "host", field(|m| m.host.clone()));
    row(md, "cluster", field(|m| m.shape.clone()));
    row(md, "run length (s)", field(|m| format!("{:.1}", m.seconds)));
    row(
        md,
        "verdict",
        field(|m| format!("**{}**", tables::verdict(m))),
    );
    for name in checkers(ms) {
        let label = |m: &Manifest| {
            let v = m.verdicts.iter().find(|v| v.name == name);
            v.map(|v| v.label.clone()).unwrap_or_default()
        };
        row(md, &format!("checker {}", cell(&name)), ms.map(label));
    }
}

/// Checker names of both runs, A's in its order, then those only B ran.
fn checkers(ms: [&Manifest; 2]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for v in ms.iter().flat_map(|m| &m.verdicts) {
        if !names.contains(&v.name) {
            names.push(v.name.clone());
        }
    }
    names
}

/// Per operation either run performed, A's percentiles above B's.
fn latency(md: &mut String, runs: [&RunData; 2]) {
    let hists = runs.map(merged);
    let ops: BTreeSet<&String> = hists.iter().flat_map(|h| h.keys()).collect();
    let _ = writeln!(
        md,
        "\n## Latency percentiles (ms)\n\n| operation | run | {} |\n|{}",
        tables::PERCENTILE_HEADER,
        " --- |".repeat(9)
    );
    for op in ops {
        for (tag, h) in TAGS.iter().zip(&hists) {
            let cells = h
                .get(op)
                .map_or_else(tables::missing_percentile_cells, tables::percentile_cells);
            let _ = writeln!(md, "| {} | {tag} | {cells} |", cell(op));
        }
    }
}

/// Each phase's length in a run, from its `phase` events: until the next phase starts, the
/// last until the run ends. In order of their starts.
fn phase_lengths(d: &RunData) -> Vec<(String, f64)> {
    let starts: Vec<(&str, f64)> = (d.events.iter())
        .filter(|e| e.kind == "phase")
        .map(|e| (e.what.as_str(), e.t))
        .collect();
    let ends = (starts.iter().skip(1).map(|p| p.1)).chain([d.manifest.seconds]);
    (starts.iter().zip(ends))
        .map(|((name, t), end)| (name.to_string(), (end - t).max(0.0)))
        .collect()
}

/// Both runs' phases side by side, by name, with B's length over A's (when either has
/// phases): how a workload's prediction splits against its real run.
fn phases(md: &mut String, runs: [&RunData; 2]) {
    let lengths = runs.map(phase_lengths);
    let mut names: Vec<&String> = Vec::new();
    for (n, _) in lengths.iter().flatten() {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    if names.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\n## Phases (s)\n\n| phase | A | B | B / A |\n| --- | --- | --- | --- |"
    );
    for name in names {
        let [a, b] = [0, 1].map(|i| lengths[i].iter().find(|(n, _)| n == name).map(|p| p.1));
        let ratio = match (a, b) {
            (Some(a), Some(b)) if a > 0.0 => format!("{:.2}", b / a),
            _ => MISSING.to_string(),
        };
        let secs = |v: Option<f64>| v.map_or_else(|| MISSING.to_string(), |v| format!("{v:.2}"));
        let _ = writeln!(
            md,
            "| {} | {} | {} | {ratio} |",
            cell(name),
            secs(a),
            secs(b)
        );
    }
}

/// The probed bounds of both runs, by name (when either has them).
fn probe(md: &mut String, ms: [&Manifest; 2]) {
    let names: BTreeSet<&String> = ms.iter().flat_map(|m| m.probe.keys()).collect();
    if names.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\n## Host bounds (probed)\n\n| bound | A | B |\n| --- | --- | --- |"
    );
    for name in names {
        let value = |m: &Manifest| m.probe.get(name).map(|v| tables::num(*v));
        row(md, &cell(name), ms.map(|m| value(m).unwrap_or_default()));
    }
}

/// The roofline rows of both runs, per operation A's above B's (when either has them).
fn roofline(md: &mut String, ms: [&Manifest; 2]) {
    let mut ops: Vec<&String> = Vec::new();
    for r in ms.iter().flat_map(|m| &m.roofline) {
        if !ops.contains(&&r.op) {
            ops.push(&r.op);
        }
    }
    if ops.is_empty() {
        return;
    }
    let sat = tables::any_saturated(ms.iter().flat_map(|m| &m.roofline));
    let header = tables::roofline_header(sat);
    let cols = header.split(" | ").count() + 2;
    let _ = writeln!(
        md,
        "\n## Roofline\n\n| op | run | {header} |\n|{}",
        " --- |".repeat(cols)
    );
    for op in ops {
        for (tag, m) in TAGS.iter().zip(ms) {
            let mut rows = m.roofline.iter().filter(|r| &r.op == op).peekable();
            if rows.peek().is_none() {
                let blanks = vec![MISSING; cols - 2].join(" | ");
                let _ = writeln!(md, "| {} | {tag} | {blanks} |", cell(op));
            }
            for r in rows {
                let cells = tables::roofline_cells(r, sat);
                let _ = writeln!(md, "| {} | {tag} | {cells} |", cell(op));
            }
        }
    }
}

/// The charts, each `(file name, SVG or why not)`.
fn charts(
    runs: [&RunData; 2],
    labels: &[String; 2],
) -> Vec<(&'static str, Result<String, String>)> {
    let tagged = [(TAGS[0], runs[0]), (TAGS[1], runs[1])];
    let chains = |i: usize| {
        let title = format!(
            "{} ({}): chain states (green: all SERVING, amber: degraded, red: none serving)",
            TAGS[i], labels[i]
        );
        chain_timeline_titled(runs[i], &title)
    };
    let mut charts = Vec::new();
    if compare_charts::any_ops(tagged) {
        charts.push(("compare-throughput.svg", compare_charts::throughput(tagged)));
    }
    if let Some(bandwidth) = compare_charts::bandwidth(tagged) {
        charts.push(("compare-bandwidth.svg", bandwidth));
    }
    charts.extend([
        ("compare-latency.svg", compare_charts::spectra(tagged)),
        ("compare-chains-a.svg", chains(0)),
        ("compare-chains-b.svg", chains(1)),
    ]);
    charts
}

/// Compares the run directories `a` and `b` into `out` (created if needed): compare.md,
/// compare.html and the chart SVGs that compare.md links.
pub fn compare(a: &Path, b: &Path, out: &Path) -> io::Result<()> {
    let data = [rundir::read(a)?, rundir::read(b)?];
    let runs = [&data[0], &data[1]];
    let ms = runs.map(|d| &d.manifest);
    let labels = [label(a), label(b)];
    fs::create_dir_all(out)?;
    let mut head = String::new();
    header(&mut head, &labels, ms);
    phases(&mut head, runs);
    latency(&mut head, runs);
    probe(&mut head, ms);
    roofline(&mut head, ms);
    let mut md = head.clone();
    let mut html_charts = String::new();
    md.push_str("\n## Charts\n\n");
    emit_charts(out, &charts(runs, &labels), &mut md, &mut html_charts)?;
    fs::write(out.join("compare.md"), &md)?;
    let body = format!("{}<h2>Charts</h2>\n{html_charts}", md_to_html(&head));
    let title = format!("t3fs comparison: {} vs {}", labels[0], labels[1]);
    fs::write(out.join("compare.html"), page(&title, &body))?;
    Ok(())
}
