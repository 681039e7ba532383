//! Where a run directory says it came from: the source commit, the host and the build profile
//! (its manifest's provenance), and writing a simulated run's directory with them (via
//! t3fs-sim's `rundir` and t3fs-reports). Real runs stamp the same fields (`real_run.rs`).
//!
//! Not here: what a run directory holds (t3fs-reports) or how an outcome becomes one
//! (t3fs-sim's `rundir`).

use std::path::{Path, PathBuf};

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
pub fn write_sim(
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
