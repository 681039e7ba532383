//! The AI workloads end to end on a real loopback cluster, at sizes of seconds (issue 40,
//! item 7): `t3fs bench checkpoint` saves and loads a checkpoint through the native client, the
//! FUSE mount and a local directory in one run and every byte loads equal; `t3fs bench kvcache`
//! reads KV blocks while its GC removes expired ones in bursts, and every read is checked. Each
//! target leaves a run directory whose manifest carries the validator's verdict and whose report
//! draws the phases. GraySort runs through the real smallpond in scripts/python-tests.sh (its
//! environment is Python's).
//!
//! Reproduce: `cargo nextest run -p t3fs --test workloads`. Needs /dev/fuse and fusermount3 (the
//! README's test command installs them).

mod support;

use std::path::Path;

use support::{fuse_cluster, mount, t3fs};

/// The verdict labels and exit code in a run directory's manifest.
fn manifest_verdicts(dir: &Path) -> (Vec<String>, i64) {
    let text = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    let m: serde_json::Value = serde_json::from_str(&text).unwrap();
    let labels = m["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["label"].as_str().unwrap().to_string())
        .collect();
    (labels, m["exit"].as_i64().unwrap())
}

/// `t3fs bench KIND --cluster C --no-probe --out OUT ARGS…` in `tmp`; its output, or the test
/// fails with it.
fn bench(tmp: &Path, kind: &str, cluster: &Path, out: &Path, args: &[&str]) -> String {
    let (c, o) = (cluster.to_string_lossy(), out.to_string_lossy());
    let mut all = vec!["bench", kind, "--cluster", &c, "--no-probe", "--out", &o];
    all.extend_from_slice(args);
    let (ok, text) = t3fs(&all, tmp);
    assert!(ok, "{text}");
    text
}

fn assert_run_dir(dir: &Path) {
    let (labels, exit) = manifest_verdicts(dir);
    assert_eq!(labels, vec!["PASS".to_string()], "{}", dir.display());
    assert_eq!(exit, 0);
    for f in ["report.md", "report.html", "bandwidth.svg", "series.json"] {
        assert!(dir.join(f).exists(), "{} lacks {f}", dir.display());
    }
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(events.contains("\"phase\""), "no phases: {events}");
}

#[test]
fn checkpoints_and_kvcache_validate_on_the_native_client_the_mount_and_a_local_directory() {
    let Some((tmp, cluster)) = fuse_cluster("workloads") else {
        return;
    };
    let at = tmp.0.join("mnt");
    let local = tmp.0.join("local");
    std::fs::create_dir_all(&local).unwrap();
    let _m = mount(&cluster, &at, &[], &tmp.0.join("mount.log"));
    let (a, l) = (at.to_string_lossy(), local.to_string_lossy());
    let ck = tmp.0.join("ck");
    let text = bench(
        &tmp.0,
        "checkpoint",
        &cluster,
        &ck,
        &[
            "--on", "native", "--on", &a, "--on", &l, "--ranks", "3", "--size", "6m", "--piece",
            "1m",
        ],
    );
    for target in ["native", "mount", "local"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(target) && l.contains("PASS")),
            "{target}: {text}"
        );
        assert_run_dir(&ck.join(target));
    }
    // The shards are gone (the run removes its checkpoint), on the mount as elsewhere.
    let left = std::fs::read_dir(at.join("t3fs-bench-checkpoint")).map_or(0, |d| d.count());
    assert_eq!(left, 0);

    let kv = tmp.0.join("kv");
    let text = bench(
        &tmp.0,
        "kvcache",
        &cluster,
        &kv,
        &[
            "--on",
            "native",
            "--on",
            &a,
            "--clients",
            "2",
            "--depth",
            "4",
            "--blocks",
            "32",
            "--block",
            "64k",
            "--seconds",
            "2",
            "--ttl",
            "0.5",
            "--gc-interval",
            "0.5",
        ],
    );
    for target in ["native", "mount"] {
        assert_run_dir(&kv.join(target));
    }
    // Every target's GC ran at least one burst, and removed something.
    let bursts: Vec<u64> = text
        .lines()
        .filter_map(|l| {
            let (before, _) = l.split_once(" GC bursts")?;
            before.rsplit(' ').next()?.parse().ok()
        })
        .collect();
    assert_eq!(bursts.len(), 2, "{text}");
    assert!(bursts.iter().all(|b| *b > 0), "{text}");
}
