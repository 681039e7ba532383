//! The model's prediction for fixed profiles, pinned: calibrate's six jobs simulated on three
//! committed, dated profiles measured by `t3fs calibrate` must give exactly these figures —
//! one from a 16-core host (every message's cost queued on the NIC, as profiles were measured
//! before 2026-11-27), one from the 2-core host with the CPU split (a message's CPU queued
//! on the cores, its wait overlapped as `nic_latency`), and one from the same host with the
//! CPU beside the path (`cpu_overlap_*`, measured from real I/O 8 at a time). A change to the performance model or the
//! resources that moves them fails here, so it is made deliberately: check the new figures
//! against calibrate on a real host, then pin them anew. Not a timing test: the simulator is
//! deterministic, so the figures are exact for a seed.

use super::*;

/// Simulated seconds of each job: calibrate's default, which leaves the 8-stream read job time
/// to read after its clients' prefill.
const SIM_SECONDS: u64 = 3;

/// One job's pinned figures: its name, simulated IOPS and p99 in microseconds.
type Pin = (&'static str, f64, f64);

/// Each committed profile's host, text and pins: the three jobs, then their concurrency
/// variants (the mixed job's reads and writes last).
const PINNED: [(&str, &str, [Pin; 8]); 3] = [
    (
        "2026-11-27-h100-16core",
        include_str!("../../../docs/calibration/2026-11-27-h100-16core/this-host.toml"),
        [
            ("seq-write-1m", 205.7, 7061.7),
            ("seq-read-1m", 633.2, 3516.3),
            ("randread-4k", 7468.2, 206.6),
            ("seq-write-1m-x8", 433.7, 21225.2),
            ("seq-read-1m-x8", 1261.1, 6213.7),
            ("randread-4k-x8", 10726.7, 922.8),
            ("randrw-1m-x8-r", 347.4, 5908.8),
            ("randrw-1m-x8-w", 327.8, 33711.2),
        ],
    ),
    (
        "2026-11-27-2core-cpu-split",
        include_str!("../../../docs/calibration/2026-11-27-2core-cpu-split/this-host.toml"),
        [
            ("seq-write-1m", 220.7, 5640.9),
            ("seq-read-1m", 762.6, 1691.2),
            ("randread-4k", 5688.4, 244.0),
            ("seq-write-1m-x8", 480.0, 18160.4),
            ("seq-read-1m-x8", 1367.0, 5751.5),
            ("randread-4k-x8", 13639.5, 652.9),
            ("randrw-1m-x8-r", 375.5, 5438.9),
            ("randrw-1m-x8-w", 365.2, 33354.6),
        ],
    ),
    (
        "2026-11-27-2core-cpu-overlap",
        include_str!("../../../docs/calibration/2026-11-27-2core-cpu-overlap/this-host.toml"),
        [
            ("seq-write-1m", 250.3, 4631.5),
            ("seq-read-1m", 737.0, 1741.1),
            ("randread-4k", 5599.6, 267.4),
            ("seq-write-1m-x8", 558.0, 19733.7),
            ("seq-read-1m-x8", 1234.6, 6379.1),
            ("randread-4k-x8", 23713.7, 396.6),
            ("randrw-1m-x8-r", 405.1, 5231.8),
            ("randrw-1m-x8-w", 397.7, 28246.1),
        ],
    ),
];

fn predict(j: &Job, profile: &str) -> Figures {
    let text = sim_scenario_text(j, profile, SIM_SECONDS);
    let sc = t3fs_scenario::parse("<pinned>", &text).expect("the pinned profile parses");
    let o = t3fs_sim::run::run(&sc, 1, false).expect("the simulation runs");
    let load = o.world.as_ref().expect("a world").load();
    sim_figures(if j.side == "write" {
        &load.writes
    } else {
        &load.reads
    })
}

fn row(name: &str, iops: f64, p99_us: f64) -> String {
    format!("(\"{name}\", {iops:.1}, {p99_us:.1})")
}

#[test]
fn the_models_predictions_for_committed_profiles_are_pinned() {
    for (host, profile, pinned) in PINNED {
        let mut got = Vec::new();
        for (j, pin) in JOBS.iter().chain(&CONCURRENT_JOBS).zip(pinned) {
            assert_eq!(j.name, pin.0);
            let f = predict(j, profile);
            got.push(row(j.name, f.iops, f.p99 * 1e6));
        }
        let want: Vec<String> = pinned.iter().map(|&(n, i, p)| row(n, i, p)).collect();
        assert_eq!(
            got,
            want,
            "the model's prediction on {host} moved: if deliberate, pin the new figures in {}",
            file!()
        );
    }
}
