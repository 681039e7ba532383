//! `t3fs demo --real` end to end, as a user runs it: a real 3-node cluster on loopback whose
//! head storage process is killed mid-write and restarted. The run directory must show the
//! failover, resync and promotion from the cluster's own routing, every verdict must pass, no
//! process may outlive the demo, and `t3fs report compare` must put the simulated demo and the
//! real one side by side.

use std::path::{Path, PathBuf};
use std::process::Command;

fn t3fs(args: &[&str], tmp: &Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_t3fs"))
        .args(args)
        .env("TMPDIR", tmp)
        .output()
        .expect("t3fs runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Processes whose command line mentions `dir` (the demo's services run with configs under it).
fn processes_under(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().to_string();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(&needle) {
            found.push(format!("{}: {cmd}", e.file_name().to_string_lossy()));
        }
    }
    found
}

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        // Whatever happened, no service of this test may keep running.
        for p in processes_under(&self.0) {
            if let Some(pid) = p.split(':').next().and_then(|x| x.parse::<i32>().ok()) {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn demo_real_shows_failover_resync_and_promotion_from_the_real_cluster() {
    let tmp = Scratch(std::env::temp_dir().join(format!("t3fs-demo-test-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0).unwrap();
    let runs = tmp.0.join("runs");
    let runs_s = runs.to_string_lossy().to_string();
    let (ok, text) = t3fs(&["demo", "--real", "--out", &runs_s], &tmp.0);
    assert!(ok, "t3fs demo --real failed:\n{text}");
    let left = processes_under(&tmp.0);
    assert!(left.is_empty(), "processes left after the demo: {left:?}");
    let run = runs.join("demo-real");
    let manifest = std::fs::read_to_string(run.join("manifest.json")).unwrap();
    assert!(manifest.contains("\"mode\": \"real\""), "{manifest}");
    for name in [
        "failover",
        "resync and promotion",
        "every chain SERVING at the end",
        "acknowledged writes durable (verify)",
    ] {
        assert!(
            manifest.contains(name),
            "verdict {name} missing:\n{manifest}"
        );
    }
    assert!(!manifest.contains("\"FAIL\""), "{manifest}");
    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    assert!(events.contains("kill -9 storage-"), "{events}");
    assert!(events.contains("Serving→Offline"), "{events}");
    assert!(events.contains("Offline→Syncing"), "{events}");
    assert!(events.contains("Syncing→Serving"), "{events}");
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains("## Roofline"), "{report}");
    // The simulated demo next to the real one.
    let (ok, text) = t3fs(&["demo", "--out", &runs_s], &tmp.0);
    assert!(ok, "t3fs demo failed:\n{text}");
    let sim = runs.join("head_crash_mid_write-seed1");
    let out = tmp.0.join("cmp");
    let args = [
        "report",
        "compare",
        &sim.to_string_lossy(),
        &run.to_string_lossy(),
        "--out",
        &out.to_string_lossy(),
    ]
    .map(|s| s.to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, text) = t3fs(&args, &tmp.0);
    assert!(ok, "report compare failed:\n{text}");
    let cmp = std::fs::read_to_string(out.join("compare.md")).unwrap();
    assert!(
        cmp.contains("sim (demo)") && cmp.contains("| real |"),
        "{cmp}"
    );
    let svg = std::fs::read_to_string(out.join("compare-throughput.svg")).unwrap();
    assert!(svg.contains("A: write") && svg.contains("B: write"));
}
