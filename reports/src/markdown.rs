//! The small markdown dialect the reports write (headings, pipe tables, fenced code, `**bold**`
//! and `` `code` `` inside a line) and its conversion to HTML, plus the HTML page around it.
//!
//! Invariant: every piece of text that reaches the HTML is escaped once, here; callers pass
//! markdown, never HTML, except the inline SVG charts handed to `page` as ready HTML.
//! Not here: what the reports say (render.rs, compare.rs) or a general markdown parser: lists,
//! links and nested emphasis are not converted.

use std::fmt::Write;

/// `s` with the three characters HTML gives meaning to in text escaped.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `s` made safe for one cell of a pipe table (a `|` would end the cell).
pub(crate) fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The report dialect of markdown to HTML.
pub(crate) fn md_to_html(md: &str) -> String {
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
            if !in_table {
                html.push_str("<table>\n");
                in_table = true;
            }
            // The separator row only tells markdown where the header ends; CSS styles the
            // first row instead.
            if !line.starts_with("| ---") {
                table_row(&mut html, line);
            }
            continue;
        }
        if in_table {
            html.push_str("</table>\n");
            in_table = false;
        }
        block(&mut html, line);
    }
    if in_table {
        html.push_str("</table>\n");
    }
    html
}

/// One pipe-table row as `<tr>`. Escaped pipes (`\|`) stay inside their cell.
fn table_row(html: &mut String, line: &str) {
    html.push_str("<tr>");
    for c in line.trim_matches('|').split(" | ") {
        let c = esc(c.trim()).replace("\\|", "|");
        let _ = write!(html, "<td>{}</td>", inline(&c));
    }
    html.push_str("</tr>\n");
}

/// A heading or paragraph line outside tables and code.
fn block(html: &mut String, line: &str) {
    if let Some(h) = line.strip_prefix("## ") {
        let _ = writeln!(html, "<h2>{}</h2>", esc(h));
    } else if let Some(h) = line.strip_prefix("# ") {
        let _ = writeln!(html, "<h1>{}</h1>", esc(h));
    } else if !line.trim().is_empty() {
        let _ = writeln!(html, "<p>{}</p>", inline(&esc(line)));
    }
}

/// Bold and code spans of an already escaped line.
fn inline(s: &str) -> String {
    wrap(&wrap(s, "`", "<code>", "</code>"), "**", "<b>", "</b>")
}

/// Replaces paired `mark`s by `open`/`close`; a line with a single mark is left alone.
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

/// A whole HTML page titled `title` (plain text) around `body` (HTML).
pub(crate) fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{}</title>\n<style>\
         body{{font-family:sans-serif;max-width:980px;margin:2em auto;color:#222}}\
         table{{border-collapse:collapse;margin:1em 0}}td{{border:1px solid #ccc;padding:3px 8px;font-size:13px}}\
         tr:first-child td{{background:#f3f3f3;font-weight:bold}}pre{{background:#f6f6f6;padding:8px;overflow:auto}}\
         .chart{{margin:1em 0}}</style></head><body>\n{}</body></html>\n",
        esc(title),
        body
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_keep_escaped_pipes_and_drop_the_separator_row() {
        let html = md_to_html("| a | b |\n| --- | --- |\n| x \\| y | **z** |\n\ntext");
        assert!(html.contains("<td>x | y</td><td><b>z</b></td>"));
        assert!(!html.contains("---"));
        assert!(html.contains("</table>\n<p>text</p>"));
    }

    #[test]
    fn code_blocks_are_escaped_verbatim() {
        let html = md_to_html("```text\na <b> **c**\n```");
        assert_eq!(html, "<pre>a &lt;b&gt; **c**\n</pre>\n");
    }
}
