//! Catalog scenarios in the simulator: each passes with its pinned seeds.

use t3fs_sim::run;

fn run_named(name: &str, seed: u64) -> run::Outcome {
    let path = t3fs_scenario::find(name).expect("catalog scenario");
    let sc = t3fs_scenario::load_file(&path).expect("valid scenario");
    let o = run::run(&sc, seed, false).expect("runs");
    for (n, v) in &o.verdicts {
        eprintln!("{n}: {} {}", v.label(), v.detail());
    }
    eprintln!("events {} sim {:.1}s trace {:016x}", o.events, o.sim_ns as f64 / 1e9, o.trace);
    o
}

#[test]
fn smoke() {
    let o = run_named("smoke", 1);
    assert!(o.passed(), "{}", o.reason);
}

#[test]
fn head_crash_mid_write() {
    let o = run_named("head_crash_mid_write", 1);
    assert!(o.passed(), "{}", o.reason);
}
