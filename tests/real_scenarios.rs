//! `t3fs cluster run SCENARIO`: catalog scenarios on real processes, judged by the simulator's
//! checkers. A replaced disk must pass every verdict with the resync visible in the real
//! routing history; a planted bug must make a real run fail (the checkers can fail on real
//! histories); `--plan` must say, before anything starts, which steps cannot run for real; a
//! failed disk must take its target OFFLINE and be replaced; a soak's schedule must be a pure
//! function of its seed made only of steps that run for real; crashing meta servers under a
//! namespace workload must pass the namespace checkers, and meta servers that skip idempotency
//! records must fail them. No process may outlive a run, pass or fail.

mod support;

use std::path::PathBuf;

use support::{processes_under, t3fs, t3fs_code, Scratch};

fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("t3fs-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// A real run of `scenario` with `extra` flags, its cluster under the test's directory so that
/// no process of it can escape the check: the directory, its run directories, the exit code and
/// the output.
fn cluster_run(
    tag: &str,
    scenario: &str,
    extra: &[&str],
) -> (Scratch, PathBuf, Option<i32>, String) {
    let tmp = scratch(tag);
    let runs = tmp.0.join("runs");
    let runs_s = runs.to_string_lossy().to_string();
    let dir_s = tmp.0.join("cluster").to_string_lossy().to_string();
    let mut args = vec![
        "cluster", "run", scenario, "--out", &runs_s, "--dir", &dir_s,
    ];
    args.extend_from_slice(extra);
    let (code, text) = t3fs_code(&args, &tmp.0);
    (tmp, runs, code, text)
}

#[test]
fn a_replaced_disk_on_real_processes_passes_every_verdict() {
    let (tmp, runs, code, text) = cluster_run("run-replaced", "replaced_disk", &[]);
    assert_eq!(
        code,
        Some(0),
        "t3fs cluster run replaced_disk failed:\n{text}"
    );
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
        "restart storage-0 with its data directory wiped (1 target directories)",
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
    let args = ["cluster", "run", "double_fault_loss", "--plan"];
    let (ok, text) = t3fs(&args, &tmp.0);
    assert!(ok, "{text}");
    // Bit rot at rest runs for real (the chunk store flips a committed byte).
    assert_eq!(text.matches("does not run").count(), 0, "{text}");
    assert_eq!(
        text.matches("corrupt_chunk          runs for real").count(),
        2,
        "{text}"
    );
    // KV, clock, disk and heartbeat faults all run for real.
    let args = ["cluster", "run", "appendix_b_late_heartbeats", "--plan"];
    let (ok, text) = t3fs(&args, &tmp.0);
    assert!(ok, "{text}");
    assert_eq!(text.matches("does not run").count(), 0, "{text}");
    assert!(
        text.contains("kv_unavailable         runs for real")
            && text.contains("slow_disk              runs for real")
            && text.contains("not honoured: [faults] torn_write"),
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
    // The runner's own clients crash and restart in its process.
    let (ok, text) = t3fs(
        &["cluster", "run", "meta_gc_open_for_write", "--plan"],
        &tmp.0,
    );
    assert!(ok, "{text}");
    assert_eq!(text.matches("runs for real").count(), 6, "{text}");
    assert!(!text.contains("does not run"), "{text}");
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
    let (tmp, runs, code, text) = cluster_run(
        "run-bug",
        "head_crash_mid_write",
        &["--bug", "commit-before-successor-ack"],
    );
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
    // The head's versions no other replica has show in the dump the running targets gave. The
    // dump is taken once the cluster converges; a divergence left by the bug can keep a chain
    // from SERVING within the bound (which half-written update the SIGKILL strikes is not chosen
    // from outside, seen once in CI), and then the run must still fail, on its convergence.
    let agree = verdict_line(&text, "replicas agree");
    if verdict_line(&text, "converged").contains("PASS") {
        assert!(
            agree.contains("FAIL") && agree.contains("in the live dump"),
            "{text}"
        );
    } else {
        assert!(verdict_line(&text, "converged").contains("FAIL"), "{text}");
        assert!(agree.contains("UNKNOWN"), "{text}");
    }
}

#[test]
fn a_replica_partitioned_from_mgmtd_goes_offline_and_resyncs_after_the_repair() {
    // The partition runs in the transports' fault layer, set through each node's fault RPC.
    let (tmp, runs, code, text) = cluster_run("run-partition", "partition_replica_from_mgmtd", &[]);
    assert_eq!(
        code,
        Some(0),
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

#[test]
fn a_replica_cut_from_mgmtd_by_kernel_rules_goes_offline_and_resyncs_after_the_repair() {
    // `--hosts netns`: every server in a namespace of its own, the partition an nftables table
    // in the storage node's and the mgmtds' namespaces, so the services' TCP meets a real cut.
    if !t3fs_real::netns::Net::permitted() {
        support::skip("root (network namespaces)", "host:root");
        return;
    }
    if !t3fs_real::netns_rules::nft_available() {
        support::skip("nft", "pkg:nftables");
        return;
    }
    let scenario = "partition_replica_from_mgmtd";
    let (tmp, runs, code, text) = cluster_run("run-cut-netns", scenario, &["--hosts", "netns"]);
    assert_eq!(
        code,
        Some(0),
        "t3fs cluster run {scenario} --hosts netns failed:\n{text}"
    );
    let run = runs.join(format!("{scenario}-real-seed1"));
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        report.contains("TCP between network namespaces (cuts: nftables)"),
        "{report}"
    );
    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    for want in [
        "partition storage-2 ↔ mgmtd-0,mgmtd-1 (nftables in the nodes' namespaces)",
        "t3 Serving→Offline",
        "t3 Syncing→Serving",
    ] {
        assert!(
            events.contains(want),
            "{want} missing from events:\n{events}"
        );
    }
    assert!(processes_under(&tmp.0).is_empty());
    let dir = std::fs::canonicalize(&tmp.0).unwrap().join("cluster");
    let net = t3fs_real::netns::Net::of(&dir, 1);
    assert!(!net.present(), "the run's namespaces and bridge are gone");
}

#[test]
fn bits_rotted_on_disk_are_caught_by_the_stores_checksums_and_the_disks_replaced() {
    let scenario = "silent_corruption";
    let (tmp, runs, code, text) = cluster_run("run-rot", scenario, &[]);
    assert_eq!(code, Some(0), "t3fs cluster run {scenario} failed:\n{text}");
    assert!(
        verdict_line(&text, "no silent corruption").contains("PASS"),
        "{text}"
    );
    let events =
        std::fs::read_to_string(runs.join(format!("{scenario}-real-seed1/events.jsonl"))).unwrap();
    // The damaged disks are replaced in the liveness phase, and convergence waits for their
    // resync even when no read had noticed the damage.
    for want in [
        "corrupt a committed chunk on storage-",
        "Serving→Offline",
        "(failed or damaged disks): restart storage-",
        "Syncing→Serving",
    ] {
        assert!(
            events.contains(want),
            "{want} missing from events:\n{events}"
        );
    }
    // The rot happened on disk. Whether a read meets it before a write replaces the chunk
    // (copy-on-write: the rotten extent is then dropped) is a race of the workload: about 30
    // writes a second per chunk here. So a read's `Corrupt` is not required; the verdict above
    // is (no rotten byte reached a client), and the replaced disk's resync below. The store's
    // catching every rot it reads is chunk_store::faults' unit test.
    let logs: String = ["storage-0", "storage-1", "storage-2"]
        .iter()
        .filter_map(|n| std::fs::read_to_string(tmp.0.join("cluster").join(n).join("log")).ok())
        .collect();
    let asked = events
        .matches("corrupt a committed chunk on storage-")
        .count();
    assert!(asked >= 1, "{events}");
    assert_eq!(logs.matches("flipped at rest").count(), asked, "{logs}");
    assert!(processes_under(&tmp.0).is_empty());
}

#[test]
fn a_failing_disk_takes_its_target_offline_and_is_replaced_and_resynced() {
    let (tmp, runs, code, text) = cluster_run("run-disk-eio", "disk_eio", &[]);
    assert_eq!(code, Some(0), "t3fs cluster run disk_eio failed:\n{text}");
    assert!(processes_under(&tmp.0).is_empty(), "processes left");
    let events =
        std::fs::read_to_string(runs.join("disk_eio-real-seed1").join("events.jsonl")).unwrap();
    for want in [
        "fail disks of storage-",
        "(EIO on every I/O",
        "Serving→Offline",
        "(failed or damaged disks): restart storage-",
        "Offline→Syncing",
        "Syncing→Serving",
    ] {
        assert!(
            events.contains(want),
            "{want} missing from events:\n{events}"
        );
    }
    // The target went OFFLINE because its disk failed, long before the liveness phase.
    let offline_at = events
        .lines()
        .find(|l| l.contains("Serving→Offline"))
        .and_then(|l| {
            l.split("\"t\":")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<f64>()
                .ok()
        })
        .expect("an OFFLINE event with its time");
    assert!(offline_at < 20.0, "OFFLINE at {offline_at} s:\n{events}");
}

#[test]
fn a_soak_schedule_is_drawn_from_its_seed_and_only_runs_real_steps() {
    let tmp = scratch("soak-plan");
    let plan = |seed: &str| {
        let (ok, text) = t3fs(
            &[
                "cluster",
                "soak",
                "--minutes",
                "10",
                "--seed",
                seed,
                "--plan",
            ],
            &tmp.0,
        );
        assert!(ok, "{text}");
        text
    };
    let a = plan("4");
    assert_eq!(a, plan("4"), "the same seed draws the same schedule");
    assert_ne!(a, plan("5"));
    assert!(a.contains("replicas = 3"), "{a}");
    assert!(
        a.contains("do = \"kv_unavailable\"") || a.contains("do = \"step_clock\""),
        "KV and clock faults run for real, so a soak draws them:\n{a}"
    );
    let verbs: Vec<&str> = a.lines().filter_map(|l| l.strip_prefix("do = ")).collect();
    assert!(
        verbs.len() >= 20,
        "{} steps in 10 minutes:\n{a}",
        verbs.len()
    );
    for v in &verbs {
        assert!(
            !["\"pause_on_commit\"", "\"crash_after_forward\""].contains(v),
            "{v} does not run for real but was drawn:\n{a}"
        );
    }
    let (code, text) = t3fs_code(&["cluster", "soak", "--minutes", "0"], &tmp.0);
    assert_eq!(code, Some(2), "{text}");
    assert!(processes_under(&tmp.0).is_empty());
}

#[test]
fn a_tail_acking_before_its_commit_is_caught_behind_a_slow_disk() {
    // The tail's commit waits on a slow disk; a tail that acknowledges before it lands lets a
    // later read at the tail return the value the acknowledged write replaced. The scenario has
    // one client on one chunk, so no two writes overlap and the regular checker has no
    // concurrent write to excuse a stale read with (with several writers queued on one chunk
    // it caught the bug in 2 of 6 runs tried; this one saw 7 to 16 stale reads per run).
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/scenarios/slow_tail_read_window.toml"
    );
    let (tmp, _runs, code, text) = cluster_run("run-window", scenario, &[]);
    assert_eq!(code, Some(0), "correct code passes the scenario:\n{text}");
    assert!(processes_under(&tmp.0).is_empty(), "processes left");
    let (tmp, _runs, code, text) = cluster_run(
        "run-bug-tail",
        scenario,
        &["--bug", "tail-ack-before-commit"],
    );
    assert_eq!(
        code,
        Some(129),
        "a correctness failure was expected:\n{text}"
    );
    assert!(verdict_line(&text, "regular ").contains("FAIL"), "{text}");
    assert!(
        verdict_line(&text, "no acknowledged write lost").contains("PASS"),
        "{text}"
    );
    assert!(processes_under(&tmp.0).is_empty(), "processes left");
}

/// The line of verdict `name` in a run's output.
fn verdict_line(text: &str, name: &str) -> String {
    text.lines()
        .find(|l| l.trim_start().starts_with(name))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn meta_servers_crashing_under_a_namespace_workload_pass_the_namespace_checkers() {
    // Three real meta servers over the embedded KV, with one crashed, one cut off and 10% of KV
    // commits answered "unknown": every namespace answer must be explained by one serial order
    // ending in the KV's final tree, the tree must pass the fsck once GC drained, and every
    // file read must be explained by the file writes.
    let (tmp, runs, code, text) = cluster_run("run-meta", "meta_server_crash", &[]);
    assert_eq!(code, Some(0), "meta_server_crash failed:\n{text}");
    for name in [
        "namespace serializable",
        "namespace integrity",
        "file reads",
    ] {
        assert!(
            verdict_line(&text, name).contains("PASS"),
            "{name}:\n{text}"
        );
    }
    assert!(
        !text.contains("not honoured: [namespace]"),
        "the namespace workload runs for real:\n{text}"
    );
    let events =
        std::fs::read_to_string(runs.join("meta_server_crash-real-seed1/events.jsonl")).unwrap();
    for want in [
        "kill -9 meta-0",
        "restart meta-2",
        "GC and session pruning done",
    ] {
        assert!(events.contains(want), "missing {want}:\n{events}");
    }
    assert!(processes_under(&tmp.0).is_empty(), "processes left");
}

#[test]
fn meta_servers_that_skip_idempotency_records_fail_serializability() {
    // A retry after an unknown commit or a crashed server runs the request a second time: a
    // create answers EEXIST to its own creator, a rename moves twice. The real history must show
    // it. meta_server_crash's 10% unknown commits left that to timing (missed in 2 of 4 runs);
    // this scenario's 30% gives tens of re-run commits per run.
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/scenarios/meta_unknown_commits.toml"
    );
    let (tmp, _runs, code, text) = cluster_run(
        "run-meta-bug",
        scenario,
        &["--bug", "meta-skip-idempotency"],
    );
    assert_eq!(
        code,
        Some(129),
        "a correctness failure was expected:\n{text}"
    );
    assert!(
        verdict_line(&text, "namespace serializable").contains("FAIL"),
        "{text}"
    );
    assert!(processes_under(&tmp.0).is_empty(), "processes left");
}

#[test]
fn the_storage_data_path_on_the_software_rdma_fabric_passes_every_verdict() {
    // Every node and client on the software verbs fabric (a process of its own): payloads move
    // one-sided, and a storage process killed with SIGKILL mid-run takes its queue pairs with
    // it, so its peers must reconnect after the restart for the resync.
    let (tmp, _runs, code, text) = cluster_run(
        "run-soft-rdma",
        "replaced_disk",
        &["--transport", "soft-rdma"],
    );
    assert_eq!(code, Some(0), "replaced_disk on soft-rdma failed:\n{text}");
    for name in [
        "no acknowledged write lost",
        "replicas agree",
        "linearizable",
    ] {
        assert!(verdict_line(&text, name).contains("PASS"), "{text}");
    }
    let wire = text
        .lines()
        .find(|l| l.contains("wire: storage pulled"))
        .unwrap_or_else(|| panic!("no wire line:\n{text}"));
    let num = |after: &str| -> u64 {
        let rest = &wire[wire.find(after).unwrap() + after.len()..];
        rest.split_whitespace().next().unwrap().parse().unwrap()
    };
    // Writes are pulled by storage (the head from the client, each successor from its
    // predecessor), reads pushed into the client; frames other than connection set-up go
    // over RDMA (TCP carries the offers and answers only).
    assert!(
        num("pulled ") > 0,
        "writes were pulled with RDMA READ: {wire}"
    );
    assert!(
        num("pushed ") > 0,
        "reads were pushed with RDMA WRITE: {wire}"
    );
    let (rdma, all) = (num("; "), num("of "));
    assert!(rdma * 100 >= all * 95, "frames over RDMA: {wire}");
    let left = processes_under(&tmp.0);
    assert!(left.is_empty(), "processes left after the run: {left:?}");
}
