//! Real runs on the command line: `t3fs demo --real` (t3fs-real's demo_real does the work) and
//! the run directory of a real run (commit, host and build profile filled in as for simulated
//! runs, then written and rendered by t3fs-reports).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use t3fs_reports::RunData;

/// Fills the manifest's commit, host and profile, writes `dir` and renders its report.
pub fn write(mut data: RunData, dir: &Path) -> std::io::Result<()> {
    data.manifest.commit = crate::provenance::commit();
    data.manifest.host = crate::provenance::host();
    data.manifest.profile = crate::provenance::profile();
    t3fs_reports::rundir::write(dir, &data)?;
    t3fs_reports::render(dir)
}

/// `t3fs demo --real`.
pub fn demo(out: PathBuf) -> ExitCode {
    let cluster = std::env::temp_dir().join(format!("t3fs-demo-real-{}", std::process::id()));
    let o = t3fs_real::demo_real::DemoOptions::new(cluster.clone(), out.join("probe.json"));
    println!(
        "t3fs demo --real: kill -9 the head of chain 1 mid-write on a real cluster ({} s of load, kill at {} s, restart {} s later)",
        o.load.as_secs(),
        o.kill_at.as_secs(),
        o.restart_after.as_secs()
    );
    let t0 = std::time::Instant::now();
    let say = move |s: &str| println!("  {:>6.1}s  {s}", t0.elapsed().as_secs_f64());
    let data = match t3fs_real::demo_real::run(&o, &say) {
        Ok(d) => d,
        Err(e) => {
            eprintln!(
                "error: {e}\n(the cluster's logs stay in {})",
                cluster.display()
            );
            return ExitCode::from(2);
        }
    };
    println!("timeline (seconds since the load began):");
    for e in &data.events {
        println!("  {:>7.2}s  {:<6} {:<10} {}", e.t, e.kind, e.node, e.what);
    }
    for r in &data.manifest.roofline {
        println!(
            "roofline {}: {:.1} {} = {:.0}% of {} (mixed load under a fault: a figure, not a target)",
            r.op, r.measured, r.unit, r.percent, r.binding
        );
    }
    println!("verdicts:");
    for v in &data.manifest.verdicts {
        println!(
            "  {:<40} {}  {}",
            v.name,
            v.label,
            v.detail.lines().next().unwrap_or("")
        );
    }
    let exit = data.manifest.exit;
    let dir = out.join("demo-real");
    match write(data, &dir) {
        Ok(()) => {
            println!("run directory: {}", dir.display());
            println!(
                "report: {} and {}",
                dir.join("report.md").display(),
                dir.join("report.html").display()
            );
            println!(
                "side by side with the simulated demo: t3fs report compare {} {}",
                out.join("head_crash_mid_write-seed1").display(),
                dir.display()
            );
        }
        Err(e) => eprintln!("warning: report not written: {e}"),
    }
    if exit == 0 {
        let _ = std::fs::remove_dir_all(&cluster);
    } else {
        println!(
            "the cluster's directory and logs stay in {}",
            cluster.display()
        );
    }
    ExitCode::from(exit as u8)
}
