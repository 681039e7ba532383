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
        .notes
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
