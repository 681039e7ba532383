//! The comparison and the real-run sections of the report, end to end through run directories:
//! two small runs (one simulated, one real with a probe and a roofline) are written with
//! `rundir::write`, then rendered and compared, and the files are checked for what a reader
//! needs to see. Also: run directories written before the real-run fields existed still read.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use t3fs_reports::rundir::{self, new_histogram};
use t3fs_reports::{
    Bound, ChainPoint, EventLine, Manifest, RooflineLine, RunData, Series, VerdictLine,
};

/// A fresh, empty scratch directory for one test (its name keeps parallel tests apart).
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("t3fs-reports-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Four one-second intervals of `op` with latencies around `base_us`.
fn add_op(d: &mut RunData, op: &str, counts: [u64; 4], base_us: u64) {
    d.series.ops.insert(op.into(), counts.to_vec());
    let hists = counts
        .iter()
        .map(|n| {
            let mut h = new_histogram();
            for i in 0..*n {
                h.record(base_us + i % 50 * base_us / 10).unwrap();
            }
            h
        })
        .collect();
    d.latencies.insert(op.into(), hists);
}

fn verdict(name: &str, label: &str) -> VerdictLine {
    VerdictLine {
        name: name.into(),
        label: label.into(),
        detail: format!("{name} checked"),
    }
}

fn chain(t: f64, serving: u32) -> ChainPoint {
    ChainPoint {
        t,
        chain: "c1".into(),
        version: 1 + serving,
        serving,
        targets: 3,
        render: String::new(),
    }
}

/// A simulated run that writes and reads, with a fault that degrades its chain.
fn sim_run() -> RunData {
    let mut d = RunData {
        manifest: Manifest {
            scenario: "smoke".into(),
            mode: "sim".into(),
            seed: 7,
            events: 1234,
            trace: "feedbeef".into(),
            seconds: 4.0,
            command: "t3fs sim smoke --seed 7".into(),
            commit: "abc123".into(),
            profile: "debug".into(),
            host: "sim".into(),
            verdicts: vec![verdict("linearizability", "PASS")],
            ..Manifest::default()
        },
        series: Series {
            interval: 1.0,
            ..Series::default()
        },
        events: vec![EventLine {
            t: 1.5,
            kind: "fault".into(),
            node: "s1".into(),
            what: "crash".into(),
        }],
        chains: vec![chain(0.0, 3), chain(1.5, 2)],
        ..RunData::default()
    };
    add_op(&mut d, "write", [100, 120, 80, 110], 900);
    add_op(&mut d, "read", [200, 210, 190, 205], 300);
    d
}

/// A real run that only writes, measured against a probe: 132 of 200 MiB/s is 66%.
fn real_run() -> RunData {
    let probe: BTreeMap<String, f64> = [("disk_write_mibs", 600.0), ("age_s", 12.5)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let roofline = vec![RooflineLine {
        op: "write".into(),
        unit: "MiB/s".into(),
        measured: 132.0,
        bounds: vec![Bound {
            name: "disk write (fdatasync) ÷ 3".into(),
            value: 200.0,
        }],
        binding: "disk write (fdatasync) ÷ 3".into(),
        percent: 66.0,
        saturated: "client CPU 97%".into(),
    }];
    let mut d = RunData {
        manifest: Manifest {
            scenario: "bench io".into(),
            mode: "real".into(),
            shape: "3 storage nodes × 2 targets, 3 replicas".into(),
            seconds: 4.0,
            exit: 1,
            reason: "latency budget".into(),
            verdicts: vec![verdict("latency", "FAIL")],
            probe,
            roofline,
            ..Manifest::default()
        },
        series: Series {
            interval: 1.0,
            ..Series::default()
        },
        chains: vec![chain(0.0, 3)],
        ..RunData::default()
    };
    add_op(&mut d, "write", [50, 60, 55, 52], 2000);
    d
}

/// Writes both runs under `root`, as `sim-run` and `real-run`.
fn write_both(root: &std::path::Path) -> (PathBuf, PathBuf) {
    let (sim, real) = (root.join("sim-run"), root.join("real-run"));
    rundir::write(&sim, &sim_run()).unwrap();
    rundir::write(&real, &real_run()).unwrap();
    (sim, real)
}

#[test]
fn compare_puts_both_runs_side_by_side() {
    let root = scratch("compare");
    let (sim, real) = write_both(&root);
    let out = root.join("out");
    t3fs_reports::compare(&sim, &real, &out).unwrap();
    let md = fs::read_to_string(out.join("compare.md")).unwrap();
    assert!(md.contains("| label | sim-run | real-run |"), "{md}");
    assert!(md.contains("| mode | sim | real |"), "{md}");
    assert!(md.contains("| cluster | – | 3 storage nodes × 2 targets, 3 replicas |"));
    assert!(md.contains("| verdict | **PASS** | **FAIL (exit 1): latency budget** |"));
    assert!(
        md.contains("| checker linearizability | PASS | – |"),
        "{md}"
    );
    // Only A read: B's read row is all dashes.
    assert!(
        md.contains("| read | B | – | – | – | – | – | – | – |"),
        "{md}"
    );
    assert!(md.contains("| write | A | 410 |"), "{md}");
    assert!(md.contains("| write | B | 217 |"), "{md}");
    assert!(md.contains("| disk_write_mibs | – | 600 |"), "{md}");
    assert!(md.contains("| write | A | – | – | – | – | – |\n"), "{md}");
    assert!(md.contains("| 66.0% | client CPU 97% |"), "{md}");
    for svg in ["compare-throughput.svg", "compare-latency.svg"] {
        assert!(md.contains(&format!("![{svg}]({svg})")), "{md}");
    }
    let throughput = fs::read_to_string(out.join("compare-throughput.svg")).unwrap();
    for label in ["A: write", "A: read", "B: write", "A: faults"] {
        assert!(throughput.contains(label), "{label} missing");
    }
    assert!(!throughput.contains("B: read") && !throughput.contains("B: faults"));
    let spectra = fs::read_to_string(out.join("compare-latency.svg")).unwrap();
    assert!(spectra.contains("B: write") && spectra.contains("p99.99"));
    let chains_b = fs::read_to_string(out.join("compare-chains-b.svg")).unwrap();
    assert!(chains_b.contains("B (real-run)"));
    let html = fs::read_to_string(out.join("compare.html")).unwrap();
    assert!(html.contains("<td>real-run</td>") && html.contains("66.0%"));
    assert_eq!(html.matches("<svg").count(), 4, "charts inline");
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn compare_creates_the_output_directory_and_compares_a_run_with_itself() {
    let root = scratch("self");
    let (sim, _) = write_both(&root);
    let out = root.join("deep").join("out");
    t3fs_reports::compare(&sim, &sim, &out).unwrap();
    let md = fs::read_to_string(out.join("compare.md")).unwrap();
    assert!(md.starts_with("# t3fs comparison: smoke\n"), "{md}");
    assert!(!md.contains("## Roofline") && !md.contains("## Host bounds"));
    // A simulated run records no cluster shape; everything else is there on both sides.
    let missing: Vec<&str> = md.lines().filter(|l| l.contains('–')).collect();
    assert_eq!(missing, ["| cluster | – | – |"], "{md}");
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn the_real_report_shows_cluster_bounds_and_roofline_and_the_sim_report_does_not() {
    let root = scratch("render");
    let (sim, real) = write_both(&root);
    t3fs_reports::render(&real).unwrap();
    let md = fs::read_to_string(real.join("report.md")).unwrap();
    assert!(md.contains("| cluster | 3 storage nodes × 2 targets, 3 replicas |"));
    assert!(md.contains("| run length | 4.0 s |"), "{md}");
    assert!(md.contains("## Host bounds (probed)\n\n| bound | value |"));
    assert!(md.contains("| age_s | 12.5 |"), "{md}");
    assert!(md.contains(
        "| write | 132 MiB/s | disk write (fdatasync) ÷ 3 = 200 MiB/s | \
         disk write (fdatasync) ÷ 3 | 66.0% | client CPU 97% |"
    ));
    let html = fs::read_to_string(real.join("report.html")).unwrap();
    assert!(html.contains("<h2>Roofline</h2>") && html.contains("<td>66.0%</td>"));

    t3fs_reports::render(&sim).unwrap();
    let md = fs::read_to_string(sim.join("report.md")).unwrap();
    assert!(md.contains("| run length | 4.0 s, 1234 events, trace feedbeef |"));
    for absent in ["## Roofline", "## Host bounds", "| cluster |"] {
        assert!(!md.contains(absent), "{absent} in a sim report");
    }
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn a_manifest_from_before_the_real_run_fields_still_reads() {
    let root = scratch("old");
    let dir = root.join("run");
    rundir::write(&dir, &sim_run()).unwrap();
    let mut json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let obj = json.as_object_mut().unwrap();
    for field in ["shape", "probe", "roofline"] {
        assert!(obj.remove(field).is_some(), "{field} is written");
    }
    fs::write(dir.join("manifest.json"), json.to_string()).unwrap();
    let back = rundir::read(&dir).unwrap();
    assert_eq!(back.manifest, sim_run().manifest);
    assert!(back.manifest.shape.is_empty() && back.manifest.roofline.is_empty());
    t3fs_reports::render(&dir).unwrap();
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn a_roofline_row_without_saturated_reads_and_round_trips() {
    let root = scratch("roofline");
    let dir = root.join("run");
    let mut run = real_run();
    rundir::write(&dir, &run).unwrap();
    let text = fs::read_to_string(dir.join("manifest.json")).unwrap();
    let old = text.replace(",\n      \"saturated\": \"client CPU 97%\"", "");
    assert_ne!(old, text, "the field was removed");
    fs::write(dir.join("manifest.json"), old).unwrap();
    run.manifest.roofline[0].saturated.clear();
    assert_eq!(rundir::read(&dir).unwrap().manifest, run.manifest);
    let _ = fs::remove_dir_all(&root);
}
