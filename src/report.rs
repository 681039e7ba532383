//! `t3fs report DIR` (re-render a run directory) and `t3fs report compare A B`, and writing a
//! simulated run's directory (via t3fs-sim's `rundir` and t3fs-reports) with its report. The
//! commit, host and profile helpers serve real runs too (real_run.rs).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;

use t3fs_scenario::Scenario;
use t3fs_sim::run::Outcome;

/// The source commit of the working tree (`unknown` outside git).
pub fn commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// This host in words: name, cores, OS and architecture.
pub fn host() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "{} ({cores} cores, {} {})",
        name.trim(),
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// The build profile of this binary.
pub fn profile() -> String {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
    .into()
}

/// Writes `runs/<scenario>-seed<N>/` and its report; returns the directory.
pub fn write(
    o: &Outcome,
    sc: &Scenario,
    mode: &str,
    command: &str,
    out: &Path,
) -> std::io::Result<PathBuf> {
    let dir = out.join(format!("{}-seed{}", sc.name, o.seed));
    let mut data = t3fs_sim::rundir::run_data(o, sc, command);
    data.manifest.commit = commit();
    data.manifest.host = host();
    data.manifest.profile = profile();
    data.manifest.mode = format!("sim ({mode})");
    t3fs_reports::rundir::write(&dir, &data)?;
    t3fs_reports::render(&dir)?;
    Ok(dir)
}

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
