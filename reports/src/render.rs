//! Renders a run directory to report.md (charts as linked SVG files) and report.html (charts
//! inline): verdicts, throughput over time with fault markers, latency percentiles per
//! operation, the chain-state timeline, the fault timeline and the reachability counters.
//!
//! Invariant: rendering reads only the run directory, so `t3fs report DIR` re-renders any run.
//! Not here: collecting the data (the run's producer).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use hdrhistogram::Histogram;

use crate::rundir::{self, RunData};

/// Every interval's histogram of an operation merged into one.
pub fn merged(d: &RunData) -> BTreeMap<String, Histogram<u64>> {
    d.latencies
        .iter()
        .map(|(op, hs)| {
            let mut m = rundir::new_histogram();
            for h in hs {
                let _ = m.add(h);
            }
            (op.clone(), m)
        })
        .collect()
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

/// The markdown body (without charts) shared by both formats.
fn body(d: &RunData) -> (String, String) {
    let m = &d.manifest;
    let mut md = String::new();
    let verdict = if m.exit == 0 {
        "PASS".to_string()
    } else {
        format!("FAIL (exit {}): {}", m.exit, m.reason)
    };
    let _ = writeln!(md, "# t3fs run: {}\n\n{}\n", m.scenario, m.about);
    let _ = writeln!(md, "**Verdict: {verdict}**\n");
    let _ = writeln!(md, "| | |\n| --- | --- |");
    let _ = writeln!(md, "| reproduce | `{}` |", m.command);
    let _ = writeln!(md, "| mode | {} (seed {}) |", m.mode, m.seed);
    let _ = writeln!(md, "| commit | {} ({}) |", m.commit, m.profile);
    let _ = writeln!(md, "| host | {} |", m.host);
    let _ = writeln!(
        md,
        "| run length | {:.1} s, {} events, trace {} |\n",
        m.seconds, m.events, m.trace
    );
    let _ = writeln!(
        md,
        "## Verdicts\n\n| checker | verdict | detail |\n| --- | --- | --- |"
    );
    for v in &m.verdicts {
        let detail = v.detail.lines().next().unwrap_or("");
        let _ = writeln!(
            md,
            "| {} | **{}** | {} |",
            v.name,
            v.label,
            detail.replace('|', "\\|")
        );
    }
    let mut evidence = String::new();
    for v in m.verdicts.iter().filter(|v| v.detail.contains('\n')) {
        let _ = writeln!(evidence, "\n**{}**\n\n```text\n{}\n```", v.name, v.detail);
    }
    md.push_str(&evidence);
    let mut tail = String::new();
    let _ = writeln!(tail, "\n## Latency percentiles (ms)\n\n| operation | count | p50 | p90 | p99 | p99.9 | p99.99 | max |\n| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (op, h) in merged(d) {
        let q = |x: f64| ms(h.value_at_quantile(x));
        let _ = writeln!(
            tail,
            "| {op} | {} | {} | {} | {} | {} | {} | {} |",
            h.len(),
            q(0.5),
            q(0.9),
            q(0.99),
            q(0.999),
            q(0.9999),
            ms(h.max())
        );
    }
    let _ = writeln!(
        tail,
        "\n## Timeline\n\n| time (s) | kind | node | event |\n| --- | --- | --- | --- |"
    );
    let shown: Vec<_> = d.events.iter().filter(|e| e.kind != "verdict").collect();
    for e in shown.iter().take(200) {
        let _ = writeln!(
            tail,
            "| {:.3} | {} | {} | {} |",
            e.t,
            e.kind,
            e.node,
            e.what.replace('|', "\\|")
        );
    }
    if shown.len() > 200 {
        let _ = writeln!(
            tail,
            "\n({} more events in events.jsonl)",
            shown.len() - 200
        );
    }
    let _ = writeln!(
        tail,
        "\n## Reachability\n\n| fault class | times |\n| --- | --- |"
    );
    for (k, v) in &m.faults_reached {
        let _ = writeln!(tail, "| {k} | {v} |");
    }
    let _ = writeln!(tail, "\n| §2.6.1 row | times |\n| --- | --- |");
    for (k, v) in &m.rows_reached {
        let _ = writeln!(tail, "| {k} | {v} |");
    }
    let _ = writeln!(tail, "\n## Counters\n\n| counter | value |\n| --- | --- |");
    for (k, v) in &m.counters {
        let _ = writeln!(tail, "| {k} | {v} |");
    }
    (md, tail)
}

/// Minimal markdown-table-and-heading to HTML, enough for the report body.
fn md_to_html(md: &str) -> String {
    let mut html = String::new();
    let mut in_table = false;
    let mut in_code = false;
    for line in md.lines() {
        if line.starts_with("```") {
            html.push_str(if in_code { "</pre>\n" } else { "<pre>" });
            in_code = !in_code;
            continue;
        }
        if in_code {
            let _ = writeln!(html, "{}", esc(line));
            continue;
        }
        if line.starts_with('|') {
            if line.starts_with("| ---") || line.starts_with("| --- ") {
                continue;
            }
            if !in_table {
                html.push_str("<table>\n");
                in_table = true;
            }
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
            html.push_str("<tr>");
            for c in cells {
                let c = esc(c.trim()).replace("\\|", "|");
                let c = bold(&code(&c));
                let _ = write!(html, "<td>{c}</td>");
            }
            html.push_str("</tr>\n");
            continue;
        }
        if in_table {
            html.push_str("</table>\n");
            in_table = false;
        }
        if let Some(h) = line.strip_prefix("## ") {
            let _ = writeln!(html, "<h2>{}</h2>", esc(h));
        } else if let Some(h) = line.strip_prefix("# ") {
            let _ = writeln!(html, "<h1>{}</h1>", esc(h));
        } else if !line.trim().is_empty() {
            let _ = writeln!(html, "<p>{}</p>", bold(&code(&esc(line))));
        }
    }
    if in_table {
        html.push_str("</table>\n");
    }
    html
}

fn wrap(s: &str, mark: &str, open: &str, close: &str) -> String {
    let parts: Vec<&str> = s.split(mark).collect();
    if parts.len() < 3 {
        return s.to_string();
    }
    let mut out = String::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push_str(if i % 2 == 1 { open } else { close });
        }
        out.push_str(p);
    }
    out
}

fn bold(s: &str) -> String {
    wrap(s, "**", "<b>", "</b>")
}

fn code(s: &str) -> String {
    wrap(s, "`", "<code>", "</code>")
}

/// Renders `dir`'s report.md, report.html and chart SVGs.
pub fn render(dir: &Path) -> std::io::Result<()> {
    let d = rundir::read(dir)?;
    let charts = [
        ("throughput.svg", crate::charts::throughput(&d)),
        ("counters.svg", crate::charts::counters(&d)),
        ("latency.svg", crate::charts::latency(&d)),
        ("chains.svg", crate::charts::chain_timeline(&d)),
    ];
    let (head, tail) = body(&d);
    let mut md = head.clone();
    let mut html_charts = String::new();
    md.push_str("\n## Charts\n\n");
    for (file, svg) in &charts {
        match svg {
            Ok(svg) => {
                std::fs::write(dir.join(file), svg)?;
                let _ = writeln!(md, "![{file}]({file})\n");
                let _ = writeln!(html_charts, "<div class=\"chart\">{svg}</div>");
            }
            Err(e) => {
                let _ = writeln!(md, "({file} not drawn: {e})\n");
            }
        }
    }
    md.push_str(&tail);
    std::fs::write(dir.join("report.md"), &md)?;
    let html = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>t3fs run: {}</title>\n<style>\
         body{{font-family:sans-serif;max-width:980px;margin:2em auto;color:#222}}\
         table{{border-collapse:collapse;margin:1em 0}}td{{border:1px solid #ccc;padding:3px 8px;font-size:13px}}\
         tr:first-child td{{background:#f3f3f3;font-weight:bold}}pre{{background:#f6f6f6;padding:8px;overflow:auto}}\
         .chart{{margin:1em 0}}</style></head><body>\n{}<h2>Charts</h2>\n{}{}</body></html>\n",
        esc(&d.manifest.scenario),
        md_to_html(&head),
        html_charts,
        md_to_html(&tail)
    );
    std::fs::write(dir.join("report.html"), html)?;
    Ok(())
}
