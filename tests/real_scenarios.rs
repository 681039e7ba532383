//! `t3fs cluster run SCENARIO`: catalog scenarios on real processes, judged by the simulator's
//! checkers. A replaced disk must pass every verdict with the resync visible in the real
//! routing history; a planted bug must make a real run fail (the checkers can fail on real
//! histories); `--plan` must say, before anything starts, which steps cannot run for real. No
//! process may outlive a run, pass or fail.

mod support;

use support::{processes_under, t3fs, t3fs_code, Scratch};

fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("t3fs-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

#[test]
fn a_replaced_disk_on_real_processes_passes_every_verdict() {
    let tmp = scratch("run-replaced");
    let runs = tmp.0.join("runs");
    let runs_s = runs.to_string_lossy().to_string();
    let (ok, text) = t3fs(
        &["cluster", "run", "replaced_disk", "--out", &runs_s],
        &tmp.0,
    );
    assert!(ok, "t3fs cluster run replaced_disk failed:\n{text}");
    assert!(text.contains("PASS"), "{text}");
    let left = processes_under(&tmp.0);
    assert!(left.is_empty(), "processes left after the run: {left:?}");
    let run = runs.join("replaced_disk-real-seed1");
    let manifest = std::fs::read_to_string(run.join("manifest.json")).unwrap();
    assert!(manifest.contains("\"mode\": \"real\""), "{manifest}");
    for name in [
        "chain invariants",
        "linearizable",
        "regular",
        "no acknowledged write lost",
        "no silent corruption",
        "replicas agree",
        "converged (liveness)",
        "steps on real processes",
    ] {
        assert!(
            manifest.contains(&format!("\"name\": \"{name}\"")),
            "verdict {name} missing:\n{manifest}"
        );
    }
    assert!(
        !manifest.contains("\"FAIL\"") && !manifest.contains("\"UNKNOWN\""),
        "{manifest}"
    );
    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    for want in [
        "kill -9 storage-0",
        "restart storage-0 with 1 empty target directories",
        "Serving→Offline",
        "Offline→Syncing",
        "Syncing→Serving",
    ] {
        assert!(
            events.contains(want),
            "{want} missing from events:\n{events}"
        );
    }
    let history = std::fs::read_to_string(run.join("history.jsonl")).unwrap();
    assert!(
        history.lines().count() > 100,
        "a real workload ran: {} operations",
        history.lines().count()
    );
    assert!(run.join("report.md").exists() && run.join("report.html").exists());
}

#[test]
fn plan_lists_the_steps_that_cannot_run_for_real_and_starts_nothing() {
    let tmp = scratch("run-plan");
    let args = ["cluster", "run", "appendix_b_late_heartbeats", "--plan"];
    let (ok, text) = t3fs(&args, &tmp.0);
    assert!(ok, "{text}");
    // kv_unavailable, kv_available, slow_disk and heal_disk have no real fault layer yet.
    assert_eq!(text.matches("does not run").count(), 4, "{text}");
    assert!(
        text.contains("isolate") && text.contains("not honoured: [faults] torn_write"),
        "{text}"
    );
    let (ok, text) = t3fs(
        &["cluster", "run", "head_crash_mid_write", "--plan"],
        &tmp.0,
    );
    assert!(ok, "{text}");
    assert!(
        text.contains("crash_after_forward") && text.contains("runs approximately"),
        "{text}"
    );
    assert!(
        text.contains("restart") && text.contains("runs for real"),
        "{text}"
    );
    let (code, text) = t3fs_code(&["cluster", "run", "no_such_scenario", "--plan"], &tmp.0);
    assert_eq!(code, Some(2), "{text}");
    let (code, text) = t3fs_code(&["cluster", "run", "smoke", "--bug", "no-such-bug"], &tmp.0);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("unknown planted bug"), "{text}");
    assert!(processes_under(&tmp.0).is_empty());
}

#[test]
fn a_planted_bug_makes_a_real_run_fail() {
    // A predecessor that commits before its successor acknowledges: killing the head mid-write
    // leaves it with versions no other replica has, which the checkers must catch on the real
    // history and the real stores.
    let tmp = scratch("run-bug");
    let runs = tmp.0.join("runs");
    let runs_s = runs.to_string_lossy().to_string();
    let args = [
        "cluster",
        "run",
        "head_crash_mid_write",
        "--bug",
        "commit-before-successor-ack",
        "--out",
        &runs_s,
    ];
    let (code, text) = t3fs_code(&args, &tmp.0);
    assert_eq!(
        code,
        Some(129),
        "a correctness failure was expected:\n{text}"
    );
    assert!(text.contains("FAIL (exit 129)"), "{text}");
    assert!(
        text.contains("reproduce: t3fs cluster run head_crash_mid_write --seed 1 --bug commit-before-successor-ack"),
        "{text}"
    );
    let left = processes_under(&tmp.0);
    assert!(
        left.is_empty(),
        "processes left after a failing run: {left:?}"
    );
    let manifest =
        std::fs::read_to_string(runs.join("head_crash_mid_write-real-seed1/manifest.json"))
            .unwrap();
    assert!(manifest.contains("\"exit\": 129"), "{manifest}");
}

#[test]
fn a_replica_partitioned_from_mgmtd_goes_offline_and_resyncs_after_the_repair() {
    // The partition runs in the transports' fault layer, set through each node's fault RPC.
    let tmp = scratch("run-partition");
    let runs = tmp.0.join("runs");
    let runs_s = runs.to_string_lossy().to_string();
    let args = [
        "cluster",
        "run",
        "partition_replica_from_mgmtd",
        "--out",
        &runs_s,
    ];
    let (ok, text) = t3fs(&args, &tmp.0);
    assert!(
        ok,
        "t3fs cluster run partition_replica_from_mgmtd failed:\n{text}"
    );
    assert!(text.contains("4 steps ran as in the simulator"), "{text}");
    let events =
        std::fs::read_to_string(runs.join("partition_replica_from_mgmtd-real-seed1/events.jsonl"))
            .unwrap();
    for want in [
        "partition storage-2 ↔ mgmtd-0,mgmtd-1",
        "t3 Serving→Offline",
        "t3 Syncing→Serving",
        "partition storage-1 → mgmtd-0,mgmtd-1",
        "t2 Serving→Offline",
        "t2 Syncing→Serving",
    ] {
        assert!(
            events.contains(want),
            "{want} missing from events:\n{events}"
        );
    }
    assert!(processes_under(&tmp.0).is_empty());
}
