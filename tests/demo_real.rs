//! `t3fs demo --real` end to end, as a user runs it: a real 3-node cluster on loopback whose
//! head storage process is killed mid-write and restarted. The run directory must show the
//! failover, resync and promotion from the cluster's own routing, every verdict must pass, no
//! process may outlive the demo, and `t3fs report compare` must put the simulated demo and the
//! real one side by side.

mod support;

use support::{processes_under, t3fs, Scratch};

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
