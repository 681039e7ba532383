//! The model's prediction for a fixed profile, pinned: calibrate's three jobs simulated on a
//! committed, dated profile (`docs/calibration/2026-11-27-h100-16core/this-host.toml`, measured
//! by `t3fs calibrate` on a 16-core host) must give exactly these figures. A change to the
//! performance model or the resources that moves them fails here, so it is made deliberately:
//! rerun this test, check the new figures against calibrate on a real host, and pin them anew.
//! Not a timing test: the simulator is deterministic, so the figures are exact for a seed.

use super::*;

/// The committed profile this test simulates on.
const PROFILE: &str =
    include_str!("../../../docs/calibration/2026-11-27-h100-16core/this-host.toml");

/// Simulated seconds of each job: calibrate's default, which leaves the 8-stream read job time
/// to read after its clients' prefill.
const SIM_SECONDS: u64 = 3;

/// (job, simulated IOPS, simulated p99 in microseconds), pinned: the three jobs, then their
/// concurrency variants.
const PINNED: [(&str, f64, f64); 6] = [
    ("seq-write-1m", 205.7, 7061.7),
    ("seq-read-1m", 633.2, 3516.3),
    ("randread-4k", 7468.2, 206.6),
    ("seq-write-1m-x8", 433.7, 21225.2),
    ("seq-read-1m-x8", 1261.1, 6213.7),
    ("randread-4k-x8", 10726.7, 922.8),
];

fn predict(j: &Job) -> Figures {
    let text = sim_scenario_text(j, PROFILE, SIM_SECONDS);
    let sc = t3fs_scenario::parse("<pinned>", &text).expect("the pinned profile parses");
    let o = t3fs_sim::run::run(&sc, 1, false).expect("the simulation runs");
    let load = o.world.as_ref().expect("a world").load();
    sim_figures(if j.rw == "write" {
        &load.writes
    } else {
        &load.reads
    })
}

#[test]
fn the_models_prediction_for_a_committed_profile_is_pinned() {
    let mut got = Vec::new();
    for (j, pin) in JOBS.iter().chain(&CONCURRENT_JOBS).zip(PINNED) {
        assert_eq!(j.name, pin.0);
        let f = predict(j);
        got.push(format!(
            "(\"{}\", {:.1}, {:.1})",
            j.name,
            f.iops,
            f.p99 * 1e6
        ));
    }
    let want: Vec<String> = PINNED
        .iter()
        .map(|(n, iops, p99)| format!("(\"{n}\", {iops:.1}, {p99:.1})"))
        .collect();
    assert_eq!(
        got,
        want,
        "the model's prediction moved: if deliberate, pin the new figures in {}",
        file!()
    );
}
