//! The hop log end to end: a real loopback cluster and `t3fs bench io` run with
//! `T3FS_HOP_LOG` set, every node writes its `NAME.hops`, and `scripts/calibration/hops.py`
//! merges them into each write's and read's hops in the order the chain takes them (the
//! decomposition the simulator-fidelity issue compares with the simulator's `--log`).
//!
//! Reproduce: `cargo nextest run -p t3fs --test hop_log`. Every process the test starts is
//! stopped, pass or fail (`cluster down`, else the scratch directory's guard); traffic stays on 127.0.0.1.

mod support;

use std::path::Path;
use std::process::Command;

use support::{have_or_skip, text_of, Scratch};

/// `t3fs ARGS` in `tmp` with the hop log in `hops`; its output, or the test fails with it.
fn t3fs_logged(args: &[&str], tmp: &Path, hops: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_t3fs"))
        .args(args)
        .current_dir(tmp)
        .env("TMPDIR", tmp)
        .env("T3FS_HOP_LOG", hops)
        .output()
        .expect("t3fs runs");
    let text = text_of(&out);
    assert!(out.status.success(), "t3fs {args:?} failed:\n{text}");
    text
}

/// The p50 of `hop` in hops.py's table of `kind`, in microseconds.
fn p50(table: &str, kind: &str, hop: &str) -> f64 {
    let section = table
        .split(&format!("{kind} (us"))
        .nth(1)
        .unwrap_or_else(|| panic!("no {kind} table in:\n{table}"));
    let line = section
        .lines()
        .find(|l| l.starts_with(hop))
        .unwrap_or_else(|| panic!("no hop `{hop}` for {kind} in:\n{table}"));
    line[hop.len()..]
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no p50 in `{line}`"))
}

/// Depth-1 1 MiB writes on three replicas with a built-in hardware profile.
const SIM_WRITE: &str = r#"
name = "hops-write"
about = "depth-1 1 MiB writes, for the hop table"
duration = "300ms"

[cluster]
mgmtd = 1
storage_nodes = 3
replicas = 3
clients = 1

[workload]
chunks = 4
write_size = 1048576
read_fraction = 0.0
think = "0us..1us"
prefill = false

[hardware]
profile = "gbe-sata"
"#;

/// The simulated p50 of a write's `hop` (the table's third figure).
fn sim_p50(table: &str, hop: &str) -> f64 {
    let section = table.split("Write (us").nth(1).expect("a Write table");
    let line = section
        .lines()
        .find(|l| l.starts_with(hop))
        .expect("the hop");
    let v: Vec<f64> = line[hop.len()..]
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    assert_eq!(v.len(), 4, "real and simulated p50 and p90 in `{line}`");
    v[2]
}

#[test]
fn every_node_logs_its_hops_and_the_script_orders_each_request_along_the_chain() {
    if !have_or_skip("python3", "python3") {
        return;
    }
    let tmp = Scratch(std::env::temp_dir().join(format!("t3fs-hops-{}", std::process::id())));
    let hops = tmp.0.join("hops");
    std::fs::create_dir_all(&hops).unwrap();
    let cluster = tmp.0.join("cluster");
    let c = cluster.to_string_lossy().to_string();
    t3fs_logged(&["cluster", "up", "--dir", &c], &tmp.0, &hops);
    for rw in ["write", "read"] {
        let out = tmp.0.join(format!("bench-{rw}"));
        let args = [
            "bench",
            "io",
            "--cluster",
            &c,
            "--rw",
            rw,
            "--bs",
            "1m",
            "--size",
            "16m",
        ];
        let o = out.to_string_lossy().to_string();
        t3fs_logged(&[&args[..], &["--out", &o]].concat(), &tmp.0, &hops);
    }
    // The nodes write what they buffered as they stop (on a failure before this, the
    // scratch directory's guard kills them).
    support::stop_cluster(&cluster);
    for node in ["storage-0", "storage-1", "storage-2", "mgmtd-0"] {
        let f = hops.join(format!("{node}.hops"));
        assert!(f.exists(), "{} was not written", f.display());
    }
    // The same job simulated: its `--log` is the script's second side.
    let scenario = tmp.0.join("write.toml");
    std::fs::write(&scenario, SIM_WRITE).unwrap();
    let sim = t3fs_logged(
        &[
            "sim",
            "run",
            &scenario.to_string_lossy(),
            "--log",
            "--no-report",
        ],
        &tmp.0,
        &hops,
    );
    let sim_log = tmp.0.join("sim.log");
    std::fs::write(&sim_log, sim).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/calibration/hops.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(&hops)
        .arg(&sim_log)
        .output()
        .unwrap();
    let table = text_of(&out);
    assert!(out.status.success(), "hops.py failed:\n{table}");
    // 16 MiB in 1 MiB writes, then reads, one at a time (the bench may add a few of its own).
    for kind in ["Write", "Read"] {
        let head = format!("{kind} (us from the head receiving it; requests: real ");
        let n: usize = table
            .split(&head)
            .nth(1)
            .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {kind} requests in:\n{table}"));
        assert!(n >= 16, "{n} {kind} requests:\n{table}");
    }
    // Along the chain and back: each hop the protocol takes after the one before it.
    let chain = [
        "middle received Update",
        "tail received Update",
        "tail chunk_update",
        "middle received UpdateReply",
        "head received UpdateReply",
        "client answered",
    ];
    let at: Vec<f64> = chain.iter().map(|h| p50(&table, "Write", h)).collect();
    assert!(
        at.windows(2).all(|w| w[0] <= w[1]),
        "hops out of order: {at:?}\n{table}"
    );
    assert!(at[0] > 0.0, "{table}");
    for (after, before) in [
        ("middle chunk_commit", "middle received UpdateReply"),
        ("head chunk_commit", "head received UpdateReply"),
    ] {
        assert!(
            p50(&table, "Write", after) >= p50(&table, "Write", before),
            "{table}"
        );
    }
    // The simulated side has the same hops, in the same order.
    let sim_at: Vec<f64> = chain.iter().map(|h| sim_p50(&table, h)).collect();
    assert!(
        sim_at.windows(2).all(|w| w[0] <= w[1]) && sim_at[0] > 0.0,
        "{sim_at:?}\n{table}"
    );
    let read = p50(&table, "Read", "head chunk_read");
    assert!(
        read > 0.0 && read <= p50(&table, "Read", "client answered"),
        "{table}"
    );
}
