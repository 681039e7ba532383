//! `t3fs calibrate` end to end on loopback: it measures this host into a `this-host` profile that
//! loads as a scenario's `[hardware]`, runs the three jobs on a real cluster and in the
//! simulator (two rounds, each measuring the host, then running every job on the cluster and in
//! the simulator on that round's profile: the paired errors judged, both sides' ranges
//! printed), writes a comparison of each pair, judges each figure against its tolerance (exit
//! 0 or 1, never an error) and leaves no process behind; with `--workloads`, the same for the
//! checkpoint and KVCache benchmarks beside their simulated twins. The figures themselves are not
//! asserted: they are measurements of a shared machine (the closing notes report them).

use std::process::Command;

#[test]
fn calibrate_runs_both_sides_and_compares_them() {
    let out = std::env::temp_dir().join(format!("t3fs-calibrate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let run = Command::new(env!("CARGO_BIN_EXE_t3fs"))
        .args([
            "calibrate",
            "--seconds",
            "2",
            "--sim-seconds",
            "1",
            "--repeats",
            "2",
            "--workloads",
            "--out",
        ])
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
    for node in ["storage-0", "storage-1", "storage-2"] {
        let data = cluster.join(node).join("data");
        assert!(!data.exists(), "{} left behind", data.display());
        assert!(
            cluster.join(node).join("log").exists(),
            "{node}'s logs are kept"
        );
    }
    let workloads = ["checkpoint-save", "checkpoint-load", "kvcache-read"];
    for job in ["seq-write-1m", "seq-read-1m", "randread-4k"]
        .into_iter()
        .chain(workloads)
    {
        let row = text
            .lines()
            .find(|l| l.starts_with(job))
            .unwrap_or_else(|| panic!("no row for {job}:\n{text}"));
        assert!(row.ends_with("within") || row.ends_with("OUTSIDE"), "{row}");
        let compare = out.join(format!("compare-{job}/compare.html"));
        assert!(compare.is_file(), "{} missing", compare.display());
        for side in ["real IOPS", "sim  IOPS"] {
            let range = text
                .lines()
                .find(|l| l.trim_start().starts_with(job) && l.contains(side));
            assert!(range.is_some(), "no {side} range of {job}:\n{text}");
        }
        let errors = text
            .lines()
            .find(|l| l.trim_start().starts_with(job) && l.contains("errors by round"))
            .unwrap_or_else(|| panic!("no paired errors of {job}:\n{text}"));
        let values = errors
            .split_whitespace()
            .filter(|w| w.starts_with(['+', '-']));
        assert_eq!(values.count(), 4, "two rounds of IOPS and p99: {errors}");
        assert!(
            errors.contains(&format!("compare-{job} shows round ")),
            "{errors}"
        );
        for round in [1, 2] {
            // A workload's benchmark writes its run directory under the target it ran on.
            let summary = if workloads.contains(&job) {
                format!("real-{job}-{round}/native/manifest.json")
            } else {
                format!("real-{job}-{round}/summary.json")
            };
            let summary = out.join(summary);
            assert!(summary.is_file(), "{} missing", summary.display());
        }
    }
    for round in [1, 2] {
        let p = out.join(format!("this-host-round-{round}.toml"));
        assert!(p.is_file(), "{} missing", p.display());
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

#[test]
fn an_interrupted_calibration_stops_its_cluster() {
    use std::io::BufRead;
    let out = std::env::temp_dir().join(format!("t3fs-calibrate-int-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let mut child = Command::new(env!("CARGO_BIN_EXE_t3fs"))
        .args(["calibrate", "--seconds", "30", "--repeats", "1", "--out"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start t3fs calibrate");
    // Interrupt once the cluster is up and the real side has begun (its first job then runs
    // for 30 s); the progress lines say when.
    let mut lines = std::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.expect("a line");
        let started = line.starts_with("round 1: seq-write-1m");
        seen.push(line);
        if started {
            break;
        }
    }
    // Keep reading, so that its later lines do not meet a closed pipe.
    let drain = std::thread::spawn(move || lines.count());
    let up = t3fs_real::cluster::pids(&out.join("cluster"));
    assert!(up.len() >= 6, "the cluster never came up: {up:?}\n{seen:?}");
    std::thread::sleep(std::time::Duration::from_secs(1));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().expect("calibrate ends");
    drain.join().expect("stderr drained");
    // A stopped process may stay a zombie until init reaps it: running is what counts.
    let alive: Vec<_> = up
        .values()
        .filter(|&&pid| t3fs_real::cluster::alive(pid))
        .collect();
    let _ = std::fs::remove_dir_all(&out);
    assert!(alive.is_empty(), "processes left behind: {alive:?}");
    assert_eq!(status.code(), Some(130), "{status}");
}
