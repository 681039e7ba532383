//! Every planted bug is caught by the swarm within a bounded number of seeds (the checkers can
//! fail); the correct protocol passes the same seeds.

use t3fs_sim::{bugs, run, swarm};

/// Seeds the swarm may take to catch a bug.
const BOUND: u64 = 200;

/// `unfenced-writes` needs a rarer seed: at least two mgmtd, the primary frozen in the middle of
/// a chain-update commit for longer than its lease while a standby takes over, and the frozen
/// commit landing on rows the standby did not rewrite (the chain-row read conflict fences the
/// rest). The KV row audit then sees the stored routing or chain version go back.
/// `skip-chain-version-check` too, since storage's `forward` refuses to forward or commit an
/// update on a target that is not SERVING (107b158): the swarm caught it within 200 seeds
/// before, and first at seed 740 after (then 1767 in 2,000), through a read at a stale chain
/// version. The new check stands in the bug's way (a stale update landing on a SYNCING target
/// is now refused there), which is what defence in depth is for. Pipelined forwarding
/// (2026-11-29) changed every seed's interleavings; the first seed to catch it became 1227
/// (`t3fs sim swarm --bug skip-chain-version-check --seeds 1300`: updates left in progress).
/// `lease-ignored` was caught within 200 seeds until the namespace workload began to draw
/// special files and setgid modes (issue 41): every seed with a namespace workload then draws
/// differently, and the first seed to catch it became 342 (a stale read in the storage lease's
/// window: `t3fs sim swarm --bug lease-ignored --seeds 400`).
const RARE: &[(&str, u64)] = &[
    ("unfenced-writes", 400),
    ("skip-chain-version-check", 1300),
    ("lease-ignored", 400),
];

/// Bugs a catalog scenario must catch with one of its seeds. The swarm cannot reach
/// `meta-gc-ignores-sessions`: GC meets a file still held by a write session only with a GC
/// delay shorter than the swarm's (3FS's 5 minutes, scaled), which is safe only on a network
/// without delayed duplicates (core/src/meta/gc.rs). The swarm catches the others too.
/// `lease-during-demotion` needs a node cut from every mgmtd just long enough that its
/// heartbeat returns while the chain update excluding it is being committed: one seed in
/// thousands (4000194, outside CI's range), kept as a catalog scenario.
const BY_CATALOG: &[(&str, &str)] = &[
    ("meta-gc-ignores-sessions", "meta_gc_open_for_write"),
    ("meta-stale-length-hint", "meta_truncate_racing_write"),
    ("lease-during-demotion", "lease_race_pending_demotion"),
];

/// Bugs only a catalog scenario reaches (the swarm test skips them).
const SWARM_UNREACHABLE: &[&str] = &["meta-gc-ignores-sessions", "lease-during-demotion"];

#[test]
fn catalog_scenarios_catch_the_bugs_the_swarm_cannot_reach() {
    for (bug, scenario) in BY_CATALOG {
        let path = format!(
            "{}/scenarios/catalog/{scenario}.toml",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut sc = t3fs_scenario::load_file(std::path::Path::new(&path)).expect("loads");
        let seeds = sc.seeds.clone();
        let clean = sc.clone();
        sc.bug = Some(bug.to_string());
        let caught = seeds.iter().find(|&&seed| {
            !run::run(&sc, seed, false).expect("runs").passed()
                && run::run(&clean, seed, false).expect("runs").passed()
        });
        assert!(
            caught.is_some(),
            "{bug}: {scenario} catches it with none of {seeds:?}"
        );
        eprintln!("{bug}: caught by {scenario} seed {}", caught.unwrap());
    }
}

#[test]
fn the_swarm_catches_every_planted_bug() {
    let mut missed = Vec::new();
    for (name, _) in bugs::list() {
        if SWARM_UNREACHABLE.contains(&name) {
            continue;
        }
        let bound = RARE
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(BOUND, |(_, b)| *b);
        // Caught: the seed fails with the bug and passes without it.
        let caught = (1..=bound).find(|&seed| {
            let sc = swarm::scenario(seed, Some(name));
            !run::run(&sc, seed, false).expect("runs").passed()
                && run::run(&swarm::scenario(seed, None), seed, false)
                    .expect("runs")
                    .passed()
        });
        match caught {
            Some(seed) => eprintln!("{name}: caught by seed {seed}"),
            None => missed.push(name),
        }
    }
    assert!(
        missed.is_empty(),
        "not caught within their seed bounds: {missed:?}"
    );
}
