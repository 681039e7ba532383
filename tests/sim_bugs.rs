//! Every planted bug is caught by the swarm within a bounded number of seeds (the checkers can
//! fail), with one exception documented below; the correct protocol passes the same seeds.

use t3fs_sim::{bugs, run, swarm};

/// Seeds the swarm may take to catch a bug.
const BOUND: u64 = 200;

/// `unfenced-writes` is not reachable by the swarm: a deposed primary's chain write also holds a
/// read conflict on the chain rows it changes, so every stale write the swarm provokes is
/// fenced by that conflict; the lease re-read is defence in depth, covered by mgmtd's handler
/// tests (`cargo nextest run -p t3fs-core deposed`).
const NOT_BY_SWARM: &[&str] = &["unfenced-writes"];

#[test]
fn the_swarm_catches_every_planted_bug() {
    let mut missed = Vec::new();
    for (name, _) in bugs::list() {
        if NOT_BY_SWARM.contains(&name) {
            continue;
        }
        // Caught: the seed fails with the bug and passes without it.
        let caught = (1..=BOUND).find(|&seed| {
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
        "not caught within {BOUND} seeds: {missed:?}"
    );
}
