//! A chunk store that stops answering (the disk fault layer's `hang`: every operation held,
//! unanswered) on real processes: the node's chunk I/O deadline answers the held operations as
//! failed, the machine takes the target OFFLINE, heartbeats stop claiming it, the chain fails
//! over and writes continue; the late answers are dropped when the disk comes back. Without
//! the deadline the chain's writes waited on the hung replica for good while its heartbeats
//! kept it SERVING.
//!
//! Every process the test starts is stopped by its scratch guard, pass or fail. Traffic stays
//! on 127.0.0.1.

mod support;

use std::time::{Duration, Instant};

use support::{processes_under, t3fs, Scratch};
use t3fs_client::client::{Client, ClientOptions};
use t3fs_real::cluster;

const MIB: u64 = 1 << 20;

fn block(i: u64) -> Vec<u8> {
    (0..MIB).map(|k| (k.wrapping_mul(31) ^ i) as u8).collect()
}

fn wait_for(dir: &std::path::Path, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let st = cluster::status(dir).unwrap_or_default();
        if ok(&st) {
            return st;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}:\n{st}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_hung_store_fails_its_target_past_the_deadline_and_writes_continue() {
    let tmp = Scratch(std::env::temp_dir().join(format!("t3fs-hang-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&tmp.0);
    std::fs::create_dir_all(&tmp.0).unwrap();
    let dir = tmp.0.join("cluster");
    let d = dir.to_string_lossy().to_string();
    let (ok, text) = t3fs(
        &[
            "cluster",
            "up",
            "--dir",
            &d,
            "--storage",
            "3",
            "--chunk-size",
            "262144",
            "--chunk-io-deadline-ms",
            "1500",
            "--fault-injection",
        ],
        &tmp.0,
    );
    assert!(ok, "{text}");
    let nodes = cluster::nodes(&dir).unwrap();
    let node = |name: &str| nodes.iter().find(|n| n.name == name).unwrap().clone();
    let m = node("mgmtd-0");
    let opts = ClientOptions::new(
        m.cfg.node.listen.parse().unwrap(),
        m.cfg.cluster.token.clone(),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let st = wait_for(&dir, "every target SERVING", |s| cluster::all_serving(s, 1));
    let v0 = support::c1_version(&st);
    assert!(st.contains("t2 SERVING"), "{st}");
    let s1 = node("storage-1");
    let hang = |on: u8| {
        t3fs_services::metrics::put(
            s1.cfg.node.metrics.parse().unwrap(),
            &s1.cfg.cluster.token,
            &format!("/disk?hang={on}"),
            Duration::from_secs(2),
        )
        .unwrap();
    };
    rt.block_on(async {
        let cl = Client::connect(opts.clone()).await.unwrap();
        let f = cl.create("/f", 0o644).await.unwrap();
        for i in 0..3 {
            cl.write(&f, i * MIB, block(i)).await.unwrap();
        }
        // storage-1's disk stops answering; the writes that follow must still be acknowledged.
        hang(1);
        for i in 3..8 {
            cl.write(&f, i * MIB, block(i))
                .await
                .unwrap_or_else(|e| panic!("MiB {i} after the hang: {e}"));
        }
        cl.close_file(&f, 8 * MIB).await.unwrap();
        cl.close().await;
    });
    let st = wait_for(&dir, "t2 OFFLINE", |s| s.contains("t2 OFFLINE"));
    assert!(!st.contains("t2 SERVING"), "{st}");
    // Each process's stderr goes to `NAME/log` in the cluster directory.
    let logs = std::fs::read_to_string(dir.join("storage-1").join("log")).unwrap_or_default();
    assert!(
        logs.contains("the target's store is failed"),
        "the deadline is logged:\n{logs}"
    );
    // The disk answers again: the late answers are dropped; a restart resyncs the target.
    hang(0);
    let (ok, text) = t3fs(&["cluster", "restart", "storage-1", "--dir", &d], &tmp.0);
    assert!(ok, "{text}");
    wait_for(&dir, "t2 resynced", |s| {
        cluster::all_serving(s, 1) && support::c1_version(s) > v0
    });
    rt.block_on(async {
        let cl = Client::connect(opts.clone()).await.unwrap();
        let f = cl.open("/f", false).await.unwrap();
        for round in 0..3 {
            for i in 0..8 {
                let got = cl.read(&f, i * MIB, MIB).await.unwrap();
                assert!(got == block(i), "round {round}, MiB {i}");
            }
        }
        cl.close().await;
    });
    let (ok, text) = t3fs(&["cluster", "down", "--dir", &d], &tmp.0);
    assert!(ok, "{text}");
    assert!(processes_under(&tmp.0).is_empty());
}
