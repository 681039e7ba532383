//! The model's prediction for fixed profiles, pinned: calibrate's jobs simulated on six
//! committed, dated profiles measured by `t3fs calibrate` must give exactly these figures —
//! one from a 16-core host (every message's cost queued on the NIC, as profiles were measured
//! before 2026-11-27), one from the 2-core host with the CPU split (a message's CPU queued
//! on the cores, its wait overlapped as `nic_latency`), one from the same host with the
//! CPU beside the path (`cpu_overlap_*`, measured from real I/O 8 at a time), one from a
//! 2-core Intel host with the measured round trip (`nic_latency_trip`), one from a 2-core
//! AMD host with the store's own CPU on its path (`cpu_store_*`), and one from the same host
//! with its disk shared by what is in service (`ssd_*_concurrency`). A change to the performance
//! model or the resources that moves them fails here, so it is made deliberately: check the
//! new figures against calibrate on a real host, then pin them anew. Not a timing test: the
//! simulator is deterministic, so the figures are exact for a seed.

use super::jobs::{CONCURRENT_JOBS, JOBS, WORKLOAD_JOBS};
use super::*;

/// Simulated seconds of each job: calibrate's default, which leaves the 8-stream read job time
/// to read after its clients' prefill.
const SIM_SECONDS: u64 = 3;

/// One job's pinned figures: its name, simulated IOPS and p99 in microseconds.
type Pin = (&'static str, f64, f64);

/// Each committed profile's host, text and pins: the three jobs, then their concurrency
/// variants (the mixed job's reads and writes last), then the AI workloads' twins (pinned
/// 2026-11-29 when `calibrate --workloads` came). Re-pinned 2026-11-29 for pipelined
/// forwarding: a simulated 1 MiB write's store updates now overlap down the chain, as on a real
/// cluster (seq-write-1m 205.7 -> 311.3 IOPS on the 16-core profile). The shared-disk profile
/// re-pinned 2026-12-03 for the flush barrier (a mutation's sync waits for the writes in flight
/// beside it, `sharing.rs`): randrw-1m-x8-w p99 27278 -> 29850 us, checkpoint-save 472 -> 435
/// IOPS; the other profiles have no shared disk and do not move.
const PINNED: [(&str, &str, [Pin; 11]); 6] = [
    (
        "2026-11-27-h100-16core",
        include_str!("../../../docs/calibration/2026-11-27-h100-16core/this-host.toml"),
        [
            ("seq-write-1m", 311.3, 4687.9),
            ("seq-read-1m", 643.2, 3168.4),
            ("randread-4k", 7466.0, 208.5),
            ("seq-write-1m-x8", 434.0, 20984.9),
            ("seq-read-1m-x8", 1261.1, 7275.3),
            ("randread-4k-x8", 10728.9, 926.1),
            ("randrw-1m-x8-r", 340.6, 8616.5),
            ("randrw-1m-x8-w", 324.8, 33301.9),
            ("checkpoint-save", 420.3, 11647.2),
            ("checkpoint-load", 1294.1, 3548.9),
            ("kvcache-read", 922.2, 28997.1),
        ],
    ),
    (
        "2026-11-27-2core-cpu-split",
        include_str!("../../../docs/calibration/2026-11-27-2core-cpu-split/this-host.toml"),
        [
            ("seq-write-1m", 321.0, 3690.7),
            ("seq-read-1m", 764.8, 1691.4),
            ("randread-4k", 5688.8, 244.0),
            ("seq-write-1m-x8", 476.7, 19070.1),
            ("seq-read-1m-x8", 1366.1, 6270.3),
            ("randread-4k-x8", 13649.9, 654.1),
            ("randrw-1m-x8-r", 369.5, 10199.2),
            ("randrw-1m-x8-w", 359.7, 31846.1),
            ("checkpoint-save", 454.3, 9843.2),
            ("checkpoint-load", 1396.2, 2899.8),
            ("kvcache-read", 1039.3, 29891.9),
        ],
    ),
    (
        "2026-11-27-2core-cpu-overlap",
        include_str!("../../../docs/calibration/2026-11-27-2core-cpu-overlap/this-host.toml"),
        [
            ("seq-write-1m", 355.7, 3413.5),
            ("seq-read-1m", 737.1, 1791.0),
            ("randread-4k", 5594.1, 265.9),
            ("seq-write-1m-x8", 559.3, 18017.4),
            ("seq-read-1m-x8", 1244.0, 6403.1),
            ("randread-4k-x8", 23715.8, 396.0),
            ("randrw-1m-x8-r", 407.2, 7065.0),
            ("randrw-1m-x8-w", 401.8, 25961.1),
            ("checkpoint-save", 552.0, 9811.1),
            ("checkpoint-load", 1262.0, 3227.0),
            ("kvcache-read", 1015.3, 26186.3),
        ],
    ),
    (
        "2026-12-01-2core-xeon-trip",
        include_str!("../../../docs/calibration/2026-12-01-2core-xeon-trip/this-host.toml"),
        [
            ("seq-write-1m", 359.3, 3361.4),
            ("seq-read-1m", 738.1, 1988.3),
            ("randread-4k", 8555.8, 193.2),
            ("seq-write-1m-x8", 556.0, 19615.1),
            ("seq-read-1m-x8", 1580.7, 5186.2),
            ("randread-4k-x8", 29239.8, 352.9),
            ("randrw-1m-x8-r", 409.5, 7249.5),
            ("randrw-1m-x8-w", 419.0, 22325.9),
            ("checkpoint-save", 548.3, 10632.4),
            ("checkpoint-load", 1596.6, 2565.0),
            ("kvcache-read", 1281.6, 20441.2),
        ],
    ),
    (
        "2026-12-02-2core-epyc-store-cpu",
        include_str!("../../../docs/calibration/2026-12-02-2core-epyc-store-cpu/this-host.toml"),
        [
            ("seq-write-1m", 332.3, 3699.8),
            ("seq-read-1m", 817.3, 1531.4),
            ("randread-4k", 4478.2, 391.9),
            ("seq-write-1m-x8", 570.7, 19107.5),
            ("seq-read-1m-x8", 1741.0, 4709.2),
            ("randread-4k-x8", 17100.1, 828.5),
            ("randrw-1m-x8-r", 444.5, 6534.6),
            ("randrw-1m-x8-w", 441.6, 22040.3),
            ("checkpoint-save", 555.7, 10849.9),
            ("checkpoint-load", 1771.4, 2403.9),
            ("kvcache-read", 1425.8, 20192.5),
        ],
    ),
    (
        "2026-12-02-2core-epyc-shared-disk",
        include_str!("../../../docs/calibration/2026-12-02-2core-epyc-shared-disk/this-host.toml"),
        [
            ("seq-write-1m", 302.7, 4518.9),
            ("seq-read-1m", 749.0, 2067.2),
            ("randread-4k", 4364.3, 372.2),
            ("seq-write-1m-x8", 469.7, 25791.4),
            ("seq-read-1m-x8", 1484.9, 9793.6),
            ("randread-4k-x8", 16592.0, 1059.7),
            ("randrw-1m-x8-r", 342.8, 9992.5),
            ("randrw-1m-x8-w", 353.0, 29849.8),
            ("checkpoint-save", 434.7, 15240.0),
            ("checkpoint-load", 1479.5, 4838.2),
            ("kvcache-read", 1122.3, 36752.6),
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
    // Every host's figures first, so that a deliberate change is re-pinned in one pass.
    let mut moved = Vec::new();
    for (host, profile, pinned) in PINNED {
        let mut got = Vec::new();
        for (j, pin) in (JOBS.iter().chain(&CONCURRENT_JOBS).chain(&WORKLOAD_JOBS)).zip(pinned) {
            assert_eq!(j.name, pin.0);
            let f = predict(j, profile);
            got.push(row(j.name, f.iops, f.p99 * 1e6));
        }
        let want: Vec<String> = pinned.iter().map(|&(n, i, p)| row(n, i, p)).collect();
        if got != want {
            moved.push(format!("{host}:\n  {}", got.join(",\n  ")));
        }
    }
    assert!(
        moved.is_empty(),
        "the model's prediction moved: if deliberate, pin the new figures in {}\n{}",
        file!(),
        moved.join("\n")
    );
}
