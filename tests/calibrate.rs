//! `t3fs calibrate` end to end on loopback: it measures this host into a `this-host` profile that
//! loads as a scenario's `[hardware]`, runs the three jobs on a real cluster and in the
//! simulator, writes a comparison of each pair, judges each figure against its tolerance (exit 0
//! or 1, never an error) and leaves no process behind. The figures themselves are not asserted:
//! they are measurements of a shared machine (the closing notes report them).

use std::process::Command;

#[test]
fn calibrate_runs_both_sides_and_compares_them() {
    let out = std::env::temp_dir().join(format!("t3fs-calibrate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let run = Command::new(env!("CARGO_BIN_EXE_t3fs"))
        .args(["calibrate", "--seconds", "2", "--sim-seconds", "1", "--out"])
        .arg(&out)
        .output()
        .expect("run t3fs calibrate");
    let cluster = out.join("cluster");
    let left = t3fs_real::cluster::pids(&cluster);
    let alive: Vec<_> = left
        .values()
        .filter(|&&pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
        .collect();
    assert!(alive.is_empty(), "processes left behind: {alive:?}");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        matches!(run.status.code(), Some(0 | 1)),
        "calibrate judged nothing:\n{text}"
    );
    for job in ["seq-write-1m", "seq-read-1m", "randread-4k"] {
        let row = text
            .lines()
            .find(|l| l.starts_with(job))
            .unwrap_or_else(|| panic!("no row for {job}:\n{text}"));
        assert!(row.ends_with("within") || row.ends_with("OUTSIDE"), "{row}");
        let compare = out.join(format!("compare-{job}/compare.html"));
        assert!(compare.is_file(), "{} missing", compare.display());
    }
    let profile = std::fs::read_to_string(out.join("this-host.toml")).expect("profile");
    let sc = t3fs_scenario::parse(
        "this-host.toml",
        &format!("name = \"x\"\nabout = \"y\"\n{profile}"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let hw = sc.hardware.expect("hardware");
    assert_eq!(hw.profile, "this-host");
    assert!(hw.shared_host && hw.nic_bytes > 0.0 && hw.cpu_cores >= 1);
    let _ = std::fs::remove_dir_all(&out);
}
