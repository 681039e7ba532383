//! A cluster outage under a FUSE mount: with every replica of the chain killed, a mount with the
//! default `--on-outage eio` fails reads and fsync with EIO once its retries are spent, and a
//! mount with `--on-outage block` waits; when the storage nodes are restarted the waiting read
//! completes with the file's bytes, and both mounts read them again: the outage cost time and
//! errors, never data. Needs /dev/fuse and fusermount3 (scripts/test.sh installs Debian's
//! fuse3); without them it says it skipped. Every process ends, pass or fail.

mod support;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{mount, processes_under, t3fs};

/// Storage nodes of the default `cluster up` (one chain of three replicas).
const STORAGE: [&str; 3] = ["storage-0", "storage-1", "storage-2"];

/// Runs `script` with `sh -c` in `dir`, bounded by `timeout` (a hung call is a failure here,
/// not a hang of the test).
fn sh(dir: &Path, script: &str) -> Output {
    Command::new("timeout")
        .args(["120", "sh", "-c", script])
        .current_dir(dir)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Waits for `child` at most `secs`; its output if it ended.
fn wait_for(child: &mut Child, secs: u64) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn an_outage_fails_with_eio_or_blocks_per_option_and_never_corrupts() {
    let Some((tmp, cluster)) = support::fuse_cluster("outage") else {
        return;
    };
    let cs = cluster.to_string_lossy().to_string();
    // direct_io: reads reach the cluster, not the page cache the outage cannot touch.
    let (a, b) = (tmp.0.join("eio"), tmp.0.join("block"));
    let ma = mount(&cluster, &a, &["--direct-io"], &tmp.0.join("eio.log"));
    let mb = mount(
        &cluster,
        &b,
        &["--direct-io", "--on-outage", "block"],
        &tmp.0.join("block.log"),
    );
    let local = tmp.0.join("want.bin");
    let o = sh(
        &tmp.0,
        &format!(
            "head -c 2500000 /dev/urandom > '{0}' && cp '{0}' '{1}/f' && sync '{1}/f' && cmp '{0}' '{2}/f'",
            local.display(),
            a.display(),
            b.display()
        ),
    );
    assert!(o.status.success(), "setup: {}", text(&o));

    for n in STORAGE {
        let (ok, out) = t3fs(&["cluster", "kill", n, "--dir", &cs], &tmp.0);
        assert!(ok, "kill {n}: {out}");
    }
    // The blocking reader starts first: it must still be waiting when the failing mount has
    // given up.
    let got = tmp.0.join("got.bin");
    let mut blocked = Command::new("cp")
        .arg(b.join("f"))
        .arg(&got)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = sh(&a, "cat f > /dev/null");
    assert!(!o.status.success(), "a read with no replica up succeeded");
    assert!(
        text(&o).contains("Input/output error"),
        "want EIO: {}",
        text(&o)
    );
    let o = sh(
        &a,
        &format!(
            "dd if='{}' of=h bs=100k count=1 conv=fsync 2>&1",
            local.display()
        ),
    );
    assert!(!o.status.success(), "fsync with no replica up succeeded");
    assert!(
        text(&o).contains("Input/output error"),
        "want EIO at fsync: {}",
        text(&o)
    );
    assert!(
        blocked.try_wait().unwrap().is_none(),
        "the blocking mount's read ended during the outage"
    );

    for n in STORAGE {
        let (ok, out) = t3fs(&["cluster", "restart", n, "--dir", &cs], &tmp.0);
        assert!(ok, "restart {n}: {out}");
    }
    let st = wait_for(&mut blocked, 120);
    if st.is_none() {
        let _ = blocked.kill();
    }
    let st = st.expect("the blocked read did not finish after the restart");
    assert!(st.success(), "the blocked read failed after the restart");
    assert_eq!(
        std::fs::read(&got).unwrap(),
        std::fs::read(&local).unwrap(),
        "the blocked read returned other bytes"
    );
    // The failing mount reads the file again: the outage lost nothing acknowledged.
    let o = sh(&a, &format!("cmp '{}' f", local.display()));
    assert!(o.status.success(), "after the outage: {}", text(&o));

    drop((ma, mb));
    let (ok, out) = t3fs(&["cluster", "down", "--dir", &cs], &tmp.0);
    assert!(ok, "{out}");
    assert!(processes_under(&tmp.0).is_empty(), "processes left");
}
