//! The simulator on the scenario catalog: every catalog scenario passes with each of its pinned
//! seeds; a run is a pure function of its seed (same seed, same trace hash; different seeds,
//! different traces); bad scenario files are rejected with file, line and field.

use t3fs_sim::run;

fn load(name: &str) -> t3fs_scenario::Scenario {
    let path = t3fs_scenario::find(name).expect("catalog scenario");
    t3fs_scenario::load_file(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn run_seed(sc: &t3fs_scenario::Scenario, seed: u64) -> run::Outcome {
    run::run(sc, seed, false).expect("runs")
}

/// Scenarios too large for a test-profile run on every CI (they run under `t3fs sim run`).
const SLOW: &[&str] = &["large_cluster"];

#[test]
fn every_catalog_scenario_passes_with_its_seeds() {
    let catalog = t3fs_scenario::catalog();
    assert!(
        catalog.len() >= 12,
        "the catalog holds at least 12 scenarios"
    );
    let mut failures = Vec::new();
    for (name, _) in &catalog {
        if SLOW.contains(&name.as_str()) {
            continue;
        }
        let sc = load(name);
        assert!(!sc.about.is_empty(), "{name} has an about line");
        for &seed in &sc.seeds {
            let o = run_seed(&sc, seed);
            if !o.passed() {
                failures.push(format!("t3fs sim run {name} --seed {seed}: {}", o.reason));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "failing runs:\n{}",
        failures.join("\n")
    );
}

#[test]
fn same_seed_same_trace_and_different_seeds_differ() {
    for (name, _) in t3fs_scenario::catalog() {
        if SLOW.contains(&name.as_str()) {
            continue;
        }
        let sc = load(&name);
        let a = run_seed(&sc, 7);
        let b = run_seed(&sc, 7);
        assert_eq!(a.trace, b.trace, "{name}: seed 7 twice gives two traces");
        assert_eq!(a.events, b.events, "{name}: event counts differ");
        let c = run_seed(&sc, 8);
        assert_ne!(
            a.trace, c.trace,
            "{name}: seeds 7 and 8 give the same trace"
        );
    }
}

#[test]
fn swarm_runs_are_deterministic_too() {
    for seed in [3, 11, 42] {
        let sc = t3fs_sim::swarm::scenario(seed, None);
        let a = run_seed(&sc, seed);
        let b = run_seed(&sc, seed);
        assert_eq!(
            (a.trace, a.events),
            (b.trace, b.events),
            "swarm seed {seed}"
        );
        assert!(a.passed(), "t3fs sim replay --seed {seed}: {}", a.reason);
    }
}

#[test]
fn demo_shows_a_failover_resync_and_promotion() {
    let sc = load("head_crash_mid_write");
    let o = run_seed(&sc, sc.seeds[0]);
    assert!(o.passed(), "{}", o.reason);
    let w = o.world.as_ref().expect("world kept");
    let chains: Vec<&str> = w
        .sim
        .notes()
        .iter()
        .filter(|n| n.kind == "chain")
        .map(|n| n.what.as_str())
        .collect();
    assert!(
        chains.iter().any(|c| c.contains("t1:OFFLINE")),
        "failover: {chains:?}"
    );
    assert!(
        chains.iter().any(|c| c.contains("t1:SYNCING")),
        "resync: {chains:?}"
    );
    assert!(
        chains
            .last()
            .is_some_and(|c| !c.contains("OFFLINE") && !c.contains("SYNCING")),
        "promotion: {chains:?}"
    );
}

#[test]
fn bad_scenario_files_name_file_line_and_field() {
    let cases = [
        ("name = \"x\"\nabout = \"y\"\n[cluster]\nreplicas = 3\nstorage_nodes = 2\n", 3, "cluster.storage_nodes"),
        ("name = \"x\"\nabout = \"y\"\n\n[[step]]\nat = \"1s\"\ndo = \"crash\"\nnode = \"storage-9\"\n", 7, "step[1].node"),
        ("name = \"x\"\nabout = \"y\"\n\n[[step]]\nat = \"1s\"\ndo = \"explode\"\n", 6, "step[1].do"),
        ("name = \"x\"\nabout = \"y\"\n[workload]\nthink = \"5\"\n", 4, "workload.think"),
        ("name = \"x\"\nabout = \"y\"\n[faults]\nloss = 2.0\n", 4, "faults.loss"),
        ("name = \"x\"\nabout = \"y\"\nduraton = \"5s\"\n", 3, "duraton"),
        ("name = \"x\"\nabout = \"y\"\n\n[[step]]\nat = \"1s\"\ndo = \"crash\"\nnode = \"storage-0\"\nnod = \"x\"\n", 8, "step[1].nod"),
    ];
    for (text, line, field) in cases {
        let e = t3fs_scenario::parse("bad.toml", text).expect_err(text);
        assert_eq!((e.line, e.field.as_str()), (line, field), "{e}");
        assert!(
            e.to_string()
                .starts_with(&format!("bad.toml:{line}: field `{field}`")),
            "{e}"
        );
    }
}

/// Evidence that a fault class was reached: a reachability counter of the run (the manifest's
/// `faults_reached`), every reachability counter with a prefix, or a world counter (the
/// manifest's counters) that counts the fault itself.
#[derive(Clone, Copy, Debug)]
enum Seen {
    Reach(&'static str),
    Counter(&'static str),
    /// Some buggify site the run switched on fired (two-tier BUGGIFY switches each site on with
    /// probability 1/4, so about a third of the runs with buggify on switch on none: vacuous).
    BuggifySite,
}

/// The fault classes a scenario file names, each with the evidence (any one suffices) that a
/// run reached it: every step's verb (the step ran before the run ended), the effect of each
/// fault step where the world counts one, and every background fault rate set above zero that
/// a counter measures. Derived from the file, so new scenarios are covered without a list.
fn named_classes(sc: &t3fs_scenario::Scenario) -> Vec<(String, Vec<Seen>)> {
    use t3fs_scenario::schema::Action;
    use Seen::*;
    let mut out: Vec<(String, Vec<Seen>)> = Vec::new();
    for st in &sc.steps {
        let verb = st.action.verb();
        out.push((format!("step `{verb}` ran"), vec![Reach(verb)]));
        let effect: Vec<Seen> = match &st.action {
            Action::Crash(_) | Action::CrashAfterForward(_) => vec![Reach("node crash")],
            Action::PauseOnCommit(_) => vec![Reach("pause mid-commit")],
            Action::Restart(_) => vec![Reach("node restart"), Reach("disk replaced")],
            Action::RestartEmpty(_) => vec![Reach("disk replaced")],
            Action::Partition { .. } | Action::Isolate(_) => vec![Counter("net.cut")],
            Action::Hold { .. } => vec![Counter("net.held")],
            Action::Flap { .. } => vec![Reach("link flap")],
            Action::Link { .. } => vec![Reach("per-link latency")],
            Action::SetLoss(r) if *r > 0.0 => vec![Counter("net.lost")],
            Action::SetDuplicate(r) if *r > 0.0 => vec![Counter("net.duplicated")],
            // Rot injected at rest (`disk.rotted`), or found by a read's checksum.
            Action::CorruptChunk(_) => vec![
                Counter("disk.rotted"),
                Reach("corruption detected"),
                Counter("disk.corrupt"),
            ],
            Action::FailDisk(_) => vec![Reach("disk EIO"), Counter("disk.eio")],
            Action::FillDisk(_) => vec![Counter("disk.nospace")],
            Action::DropHeartbeats { .. } => vec![Reach("heartbeat lost")],
            Action::KvUnavailable => vec![Counter("kv.unavailable")],
            Action::KvFaults {
                conflict,
                commit_unknown,
            } => {
                if *conflict > 0.0 {
                    out.push((
                        format!("step `{verb}` conflict effect"),
                        vec![Counter("kv.conflicts_injected")],
                    ));
                }
                if *commit_unknown > 0.0 {
                    vec![Counter("kv.unknown_applied"), Counter("kv.unknown_dropped")]
                } else {
                    Vec::new()
                }
            }
            // Recovery steps, and faults no counter measures (pause, slow disk, clocks,
            // latency): the step running is the evidence.
            _ => Vec::new(),
        };
        if !effect.is_empty() {
            out.push((format!("step `{verb}` effect"), effect));
        }
    }
    let f = &sc.faults;
    let rates: [(&str, f64, Vec<Seen>); 11] = [
        ("faults.loss", f.loss, vec![Counter("net.lost")]),
        (
            "faults.duplicate",
            f.duplicate,
            vec![Counter("net.duplicated")],
        ),
        ("faults.net_spike", f.net_spike, vec![Counter("net.spiked")]),
        (
            "faults.disk_spike",
            f.disk_spike,
            vec![Counter("disk.spikes")],
        ),
        (
            "faults.disk_eio",
            f.disk_eio,
            vec![Reach("disk EIO"), Counter("disk.eio")],
        ),
        (
            "faults.disk_corrupt",
            f.disk_corrupt,
            vec![
                Counter("disk.rotted"),
                Reach("corruption detected"),
                Counter("disk.corrupt"),
            ],
        ),
        (
            "faults.torn_write",
            f.torn_write,
            vec![Counter("disk.torn")],
        ),
        (
            "faults.kv_conflict",
            f.kv_conflict,
            vec![Counter("kv.conflicts_injected")],
        ),
        (
            "faults.kv_commit_unknown",
            f.kv_commit_unknown,
            vec![Counter("kv.unknown_applied"), Counter("kv.unknown_dropped")],
        ),
        (
            "faults.heartbeat_loss",
            f.heartbeat_loss,
            vec![Reach("heartbeat lost")],
        ),
        (
            "faults.buggify",
            if f.buggify { 1.0 } else { 0.0 },
            vec![BuggifySite],
        ),
    ];
    for (name, rate, seen) in rates {
        if rate > 0.0 {
            out.push((format!("{name} = {rate}"), seen));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

/// Classes a catalog scenario names but its first seed does not reach, with why: (scenario,
/// class prefix, reason). Most are swarm seeds kept as regressions, whose steps and background
/// rates were drawn at random, so not every class they name is what they are about. An entry
/// here is a finding to fix in the scenario or the simulator, not a silent pass; an entry whose
/// class is reached again is printed (seen with `--nocapture`) so the list can shrink.
const UNREACHED: &[(&str, &str, &str)] = &[
    // Background rates too low for the traffic, or a fault that needs what the run lacks.
    ("kv_faults", "faults.kv_conflict", "seed 1 commits only 34 KV transactions in 30 s; at 10% none drew a spurious conflict (its about line names them)"),
    ("appendix_b_late_heartbeats", "faults.kv_conflict", "few KV commits at 0.8%"),
    ("mgmtd_clock_step_mid_resync", "faults.kv_conflict", "few KV commits at 6%"),
    ("appendix_b_cut_off_tail", "faults.torn_write", "a torn write needs a storage crash with writes in flight; only meta-0 crashes"),
    ("appendix_b_late_heartbeats", "faults.torn_write", "no storage crash with unsynced writes in flight"),
    ("mgmtd_clock_step_mid_resync", "faults.torn_write", "no storage crash with unsynced writes in flight"),
    ("stalled_mgmtd_two_booting", "faults.torn_write", "no storage crash with unsynced writes in flight"),
    ("late_frame_after_convergence", "faults.net_spike", "601 messages at 0.12%"),
    ("mgmtd_clock_step_mid_resync", "faults.disk_spike", "few disk operations at 0.07%"),
    ("frozen_replica_stale_route", "faults.disk_eio", "few disk operations at 0.04%"),
    ("reload_after_commit_unknown", "faults.disk_eio", "few disk operations at 0.02%"),
    ("late_frame_after_convergence", "faults.disk_corrupt", "few reads at 0.01%"),
    ("late_sync_copies", "faults.disk_corrupt", "few reads at 0.01%"),
    // Steps the fault atlas refuses (faults stay recoverable: it never damages the last intact
    // copy) or that find nothing to act on.
    ("frozen_replica_stale_route", "step `corrupt_chunk` effect", "the atlas refuses at 9.519 s: storage-4 holds the only intact replica"),
    ("late_sync_copies", "step `corrupt_chunk` effect", "the atlas refuses at 5.927 s: storage-0 holds the only intact replica"),
    ("head_restart_retry", "step `restart_empty` effect", "the atlas keeps storage-1's disk at 18.175 s: no other intact replica"),
    ("reload_after_commit_unknown", "step `restart_empty` effect", "the atlas keeps storage-0's disk at 6.971 s: storage-1 is down and storage-2 is isolated, so the primary cannot hear the only other copy (a cut copy counts as intact no longer, swarm seed 170)"),
    ("late_frame_after_convergence", "step `pause_on_commit` effect", "mgmtd-1, a standby, makes no KV commit before its resume at 9.198 s"),
];

#[test]
fn every_catalog_scenario_reaches_the_fault_classes_it_names() {
    let mut gaps = Vec::new();
    for (name, _) in t3fs_scenario::catalog() {
        if SLOW.contains(&name.as_str()) {
            continue;
        }
        let sc = load(&name);
        let seed = sc.seeds[0];
        let o = run_seed(&sc, seed);
        let w = o.world.as_ref().expect("world kept");
        let counters = w.counter_totals();
        let reach = &w.sim.reach().faults;
        let reached = |k: &str| reach.get(k).copied().unwrap_or(0) > 0;
        let sites: Vec<&str> = w.sim.buggify_sites().collect();
        let hit = |s: &Seen| match s {
            Seen::Reach(k) => reached(k),
            Seen::Counter(k) => counters.get(*k).copied().unwrap_or(0) > 0,
            Seen::BuggifySite => sites.is_empty() || sites.iter().any(|k| reached(k)),
        };
        for (class, seen) in named_classes(&sc) {
            let excused = UNREACHED
                .iter()
                .any(|(s, c, _)| *s == name && class.starts_with(c));
            if seen.iter().any(hit) {
                if excused {
                    eprintln!(
                        "{name} --seed {seed}: {class} is reached now; drop its UNREACHED entry"
                    );
                }
                continue;
            }
            if excused {
                continue;
            }
            gaps.push(format!(
                "t3fs sim run {name} --seed {seed}: {class} not reached (looked for {seen:?})"
            ));
        }
    }
    assert!(
        gaps.is_empty(),
        "fault classes named but not reached:\n{}",
        gaps.join("\n")
    );
}
