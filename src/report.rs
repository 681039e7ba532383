//! `t3fs report DIR` (re-render a run directory) and `t3fs report compare A B`. Writing a run
//! directory is t3fs-crosscheck's `provenance` (simulated runs) and `real_run` (real ones).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum ReportCommand {
    /// Two runs side by side (sim vs real, before vs after): throughput over time, percentile
    /// spectra, roofline rows and chain timelines, as compare.md and compare.html.
    Compare {
        /// The first run directory (A).
        a: PathBuf,
        /// The second run directory (B).
        b: PathBuf,
        /// Where compare.md, compare.html and the charts go (default: B/compare-with-<A>).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// `t3fs report DIR` and `t3fs report compare A B`.
pub fn run(cmd: Option<ReportCommand>, dir: Option<PathBuf>) -> ExitCode {
    let (r, shown) = match (cmd, dir) {
        (Some(ReportCommand::Compare { a, b, out }), _) => {
            let name = a
                .file_name()
                .map_or("a".into(), |n| n.to_string_lossy().to_string());
            let out = out.unwrap_or_else(|| b.join(format!("compare-with-{name}")));
            (
                t3fs_reports::compare(&a, &b, &out),
                out.join("compare.html"),
            )
        }
        (None, Some(dir)) => (t3fs_reports::render(&dir), dir.join("report.html")),
        (None, None) => {
            eprintln!("error: give a run directory, or `compare RUN_A RUN_B`\n\nUsage: t3fs report <DIR>\n       t3fs report compare <A> <B> [--out DIR]");
            return ExitCode::from(2);
        }
    };
    match r {
        Ok(()) => {
            println!("{}", shown.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
