//! The performance model's scenarios at small scale: reads never beat the roofline and come
//! close to the binding bound when clients outnumber it; a recovery under the balanced table
//! spreads its copies over every peer and ends no later than under the naive one; scenario
//! files load, and a bad one names its line and key.

use t3fs_scenario::chain_table::ChainTable;

use super::engine;
use super::hardware::Hardware;
use super::layout::Layout;
use super::peak_read::Readers;
use super::recovery::Recovery;
use super::scenario::{self, PerfScenario};

/// Storage bytes per second over the second half of a peak-read run.
fn peak(storage: u32, clients: u32, concurrency: u32, seed: u64) -> (f64, Layout) {
    let hw = Hardware::threefs_2025();
    let layout = Layout::new(
        &hw,
        storage,
        clients,
        ChainTable::balanced(storage, 6, 3).unwrap(),
        0.0,
    );
    let mut src = Readers::new(
        &layout,
        seed,
        4.0 * 1048576.0,
        concurrency,
        hw.request_latency,
    );
    let (mut bytes, mut secs) = (0.0, 0.0);
    engine::run(&layout.caps, &mut src, 0.2, 0.01, 50e-6, |s| {
        if s.t > 0.1 + 1e-9 {
            secs += s.dt;
            bytes += (0..storage)
                .map(|n| s.bytes[layout.storage_out(n) as usize])
                .sum::<f64>();
        }
    });
    (bytes / secs, layout)
}

#[test]
fn reads_stay_under_the_roofline_and_near_the_binding_bound_when_clients_are_plenty() {
    let (rate, l) = peak(12, 60, 8, 1);
    let bound = 12.0 * l.caps[0];
    assert!(
        rate <= bound * 1.001,
        "{rate} over the storage NIC bound {bound}"
    );
    assert!(
        rate >= bound * 0.8,
        "{rate} far below {bound} with 5 clients per node"
    );
    // Few clients: the client NICs bind instead.
    let (few, l) = peak(12, 2, 8, 1);
    let clients = 2.0 * l.caps[l.client_in(0) as usize];
    assert!(
        few <= clients * 1.001 && few >= clients * 0.8,
        "{few} vs {clients}"
    );
    // Same seed, same figure.
    assert_eq!(peak(12, 60, 8, 1).0, rate);
}

#[test]
fn the_balanced_table_spreads_recovery_over_every_peer_and_is_no_slower() {
    let hw = Hardware::threefs_2025();
    let mut results = Vec::new();
    // 12 targets per disk: enough chains per node for a balanced table to meet every peer.
    for table in [
        ChainTable::round_robin(25, 12, 3).unwrap(),
        ChainTable::balanced(25, 12, 3).unwrap(),
    ] {
        let layout = Layout::new(&hw, 25, 10, table, 0.0);
        let mut src = Recovery::new(
            &layout,
            0,
            0.25 * (1u64 << 30) as f64,
            1,
            4.0 * 1048576.0,
            4,
            hw.request_latency,
        );
        engine::run(&layout.caps, &mut src, 30.0, 0.1, 50e-6, |_| {});
        let peers = src.served.iter().filter(|&&b| b > 0.0).count();
        let most = src.served.iter().copied().fold(0.0, f64::max);
        results.push((src.done_at.expect("recovery ended"), peers, most));
    }
    let ((naive_t, naive_peers, naive_most), (bal_t, bal_peers, bal_most)) =
        (results[0], results[1]);
    assert_eq!(bal_peers, 24, "every peer serves copies");
    assert!(
        naive_peers <= 6,
        "the naive table leans on a few peers: {naive_peers}"
    );
    assert!(bal_most < naive_most / 2.0, "{bal_most} vs {naive_most}");
    assert!(
        bal_t <= naive_t * 1.01,
        "balanced {bal_t} s vs naive {naive_t} s"
    );
}

#[test]
fn catalog_scenarios_load_and_a_bad_one_names_its_line_and_key() {
    let names: Vec<String> = scenario::catalog().into_iter().map(|(n, _)| n).collect();
    assert!(
        names.contains(&"3fs_peak_read".to_string())
            && names.contains(&"recovery_traffic".to_string()),
        "{names:?}"
    );
    for (_, p) in scenario::catalog() {
        PerfScenario::load(&p).unwrap();
    }
    let dir = std::env::temp_dir().join(format!("t3fs-perf-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = std::fs::read_to_string(scenario::perf_dir().join("3fs_peak_read.toml")).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        good.replace("table = \"balanced\"", "table = \"random\""),
    )
    .unwrap();
    let e = PerfScenario::load(&bad).unwrap_err();
    assert!(e.contains("cluster.table") && e.contains(":24:"), "{e}");
    std::fs::write(&bad, good.replace("clients = 500", "clients = \"many\"")).unwrap();
    let e = PerfScenario::load(&bad).unwrap_err();
    assert!(e.contains(":21:"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_pipeline_names_what_its_phases_lack() {
    let dir = std::env::temp_dir().join(format!("t3fs-perf-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = std::fs::read_to_string(scenario::perf_dir().join("3fs_graysort.toml")).unwrap();
    let f = dir.join("p.toml");
    let cases = [
        // A rate with no cores to run it on.
        ("client_cores = 192", "", "hardware.client_cores"),
        // Neither a rate nor a slot count.
        ("core_mib_s = 27.7", "", "give either a positive core_mib_s"),
        // Amdahl's share outside 0..=1.
        (
            "serial_fraction = 0.34",
            "serial_fraction = 1.5",
            "serial_fraction",
        ),
        // A pipeline's phases say what moves: no [workload].
        (
            "[cluster]",
            "[workload]\nread_kib = 4\n\n[cluster]",
            "leave [workload] out",
        ),
    ];
    for (from, to, want) in cases {
        assert!(good.contains(from), "{from}");
        std::fs::write(&f, good.replace(from, to)).unwrap();
        let e = PerfScenario::load(&f).expect_err(from);
        assert!(e.contains(want), "{from} -> {to}: {e}");
    }
    let peak = std::fs::read_to_string(scenario::perf_dir().join("3fs_peak_read.toml")).unwrap();
    std::fs::write(&f, peak.replace("concurrency = 8", "")).unwrap();
    let e = PerfScenario::load(&f).unwrap_err();
    assert!(e.contains("read_kib and concurrency"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
