//! The RDMA transport on the software fabric, with TCP on 127.0.0.1 underneath: frames both
//! ways in order (inline and 1 MiB one-sided, pulled and pushed), a peer without RDMA reached
//! over TCP, a cut link mid-transfer and the reconnect, backpressure from a stalled reader,
//! and the same transport across processes through the fabric's socket. Each test runs under
//! a deadline, so a bug fails instead of hanging.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use t3fs_core::ids::NodeId;
use tokio::sync::mpsc::Receiver;
use tokio::time::{sleep, timeout};

use crate::rdma::channel::ChannelConfig;
use crate::rdma::soft::{SoftDevice, SoftFabric};
use crate::rdma::verbs::Verbs;
use crate::transport::tests::{bounded, local, recv, until, TOKEN};
use crate::transport::{Frame, Inbound, RdmaWire, SendError, Transport, TransportConfig};

fn wire(dev: Arc<dyn Verbs>) -> RdmaWire {
    let mut w = RdmaWire::new(dev);
    w.channel = ChannelConfig {
        slots: 8,
        slot_bytes: 4096,
        bulk_bytes: 4 << 20,
    };
    w.connect_timeout = Duration::from_millis(500);
    w
}

async fn start(me: u32, dev: Option<&SoftDevice>) -> (Transport, Receiver<Inbound>) {
    let mut c = TransportConfig::new(NodeId(me.into()), local(), TOKEN);
    c.connect_backoff = Duration::from_millis(10)..Duration::from_millis(100);
    c.rdma = dev.map(|d| wire(Arc::new(d.clone())));
    Transport::start(c).await.expect("start")
}

/// Frame `i`: a small head, and a bulk part of `bulk` bytes derived from `i`.
fn frame(i: u32, bulk: usize) -> Frame {
    Frame {
        head: Bytes::from(i.to_be_bytes().to_vec()),
        bulk: Bytes::from((0..bulk).map(|k| (k as u32 ^ i) as u8).collect::<Vec<_>>()),
    }
}

fn check(m: &Inbound, from: u32, i: u32, bulk: usize) {
    let want = frame(i, bulk);
    assert_eq!(m.from, NodeId(from.into()));
    assert_eq!(m.frame, want.head, "frame {i} out of order or damaged");
    assert!(m.bulk == want.bulk, "frame {i}: bulk damaged");
}

/// Two RDMA transports on one fabric; b knows a's address.
async fn pair() -> (
    Arc<SoftFabric>,
    [SoftDevice; 2],
    [(Transport, Receiver<Inbound>); 2],
) {
    let f = SoftFabric::new();
    let (da, db) = (f.device("soft-a"), f.device("soft-b"));
    let a = start(1, Some(&da)).await;
    let b = start(2, Some(&db)).await;
    a.0.set_addr(NodeId(2), b.0.local_addr().unwrap());
    (f, [da, db], [a, b])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_go_both_ways_in_order_with_payloads_moved_one_sided() {
    bounded(async {
        let (_f, _d, [(a, mut arx), (b, mut brx)]) = pair().await;
        // a dials (as a client does): b pulls a's payloads with READ, pushes its own with WRITE.
        let sizes = [0, 100, 1 << 20, 0, 4096, 1 << 20];
        for (i, n) in sizes.iter().enumerate() {
            a.send(NodeId(2), frame(i as u32, *n)).await.unwrap();
        }
        for (i, n) in sizes.iter().enumerate() {
            let m = recv(&mut brx).await;
            check(&m, 1, i as u32, *n);
            b.send(NodeId(1), frame(100 + i as u32, *n)).await.unwrap();
        }
        for (i, n) in sizes.iter().enumerate() {
            check(&recv(&mut arx).await, 2, 100 + i as u32, *n);
        }
        let moved: u64 = sizes
            .iter()
            .filter(|n| **n > 0)
            .map(|n| *n as u64 + 4)
            .sum();
        let (ca, cb) = (a.counters(), b.counters());
        assert_eq!(
            cb.rdma_read_bytes, moved,
            "the acceptor pulled every payload"
        );
        assert_eq!(
            cb.rdma_write_bytes, moved,
            "the acceptor pushed every payload"
        );
        assert_eq!(
            (ca.rdma_read_bytes, ca.rdma_write_bytes),
            (0, 0),
            "the dialer only stages"
        );
        assert_eq!((ca.rdma_frames_out, cb.rdma_frames_in), (6, 6));
        assert_eq!((cb.rdma_frames_out, ca.rdma_frames_in), (6, 6));
        assert_eq!((ca.connects, cb.connects), (1, 1));
        assert_eq!(a.connections(), 1);
        a.shutdown().await;
        b.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_without_rdma_refuses_and_gets_its_frames_over_tcp() {
    bounded(async {
        let f = SoftFabric::new();
        let da = f.device("soft-a");
        let (a, mut arx) = start(1, Some(&da)).await;
        let (b, mut brx) = start(2, None).await;
        a.set_addr(NodeId(2), b.local_addr().unwrap());
        for i in 0..20 {
            a.send(NodeId(2), frame(i, 1000)).await.unwrap();
        }
        // b reads its frames through decode (which answers the offer); these are not codec
        // frames, so each fails to decode and is checked raw instead.
        for i in 0..20 {
            let mut m = recv(&mut brx).await;
            if crate::transport::rdma_ctl::is_ctl(&m.frame) {
                assert!(b.decode(&mut m).is_err(), "the offer is refused");
                m = recv(&mut brx).await;
            }
            check(&m, 1, i, 1000);
        }
        b.try_send(NodeId(1), frame(7, 10)).unwrap();
        check(&recv(&mut arx).await, 2, 7, 10);
        let c = a.counters();
        assert_eq!(
            (c.rdma_frames_out, c.connects),
            (0, 0),
            "nothing went over RDMA"
        );
        a.shutdown().await;
        b.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_link_fails_the_connection_and_the_next_frames_reconnect() {
    bounded(async {
        let (f, [da, db], [(a, mut arx), (b, mut brx)]) = pair().await;
        a.send(NodeId(2), frame(0, 4096)).await.unwrap();
        check(&recv(&mut brx).await, 1, 0, 4096);
        // Mid-transfer: a burst of 1 MiB frames, and the link cut under it.
        for i in 1..=8 {
            a.send(NodeId(2), frame(i, 1 << 20)).await.unwrap();
        }
        f.cut(&da, &db);
        until(|| a.counters().rdma_failures >= 1 && b.counters().rdma_failures >= 1).await;
        f.heal(&da, &db);
        // Whatever got through came in order and whole; the rest was lost, as on TCP.
        let mut last = 0;
        while let Ok(Some(m)) = timeout(Duration::from_millis(300), brx.recv()).await {
            let i = u32::from_be_bytes(m.frame[..4].try_into().unwrap());
            assert!(i > last, "frame {i} after {last}");
            check(&m, 1, i, if i == 100 { 64 } else { 1 << 20 });
            last = i;
        }
        // New frames start a new connection and arrive, both ways.
        a.send(NodeId(2), frame(100, 64)).await.unwrap();
        check(&recv(&mut brx).await, 1, 100, 64);
        b.send(NodeId(1), frame(200, 1 << 20)).await.unwrap();
        check(&recv(&mut arx).await, 2, 200, 1 << 20);
        let c = a.counters();
        assert!(c.connects >= 2 && c.disconnects >= 1, "{c:?}");
        a.shutdown().await;
        b.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_reader_pushes_back_to_the_sender_and_nothing_is_lost() {
    bounded(async {
        let f = SoftFabric::new();
        let (da, db) = (f.device("soft-a"), f.device("soft-b"));
        let mut ca = TransportConfig::new(NodeId(1), local(), TOKEN);
        ca.rdma = Some(wire(Arc::new(da)));
        ca.queue_frames = 16;
        let mut cb = TransportConfig::new(NodeId(2), local(), TOKEN);
        cb.rdma = Some(wire(Arc::new(db)));
        cb.inbound_frames = 4;
        let (a, _arx) = Transport::start(ca).await.unwrap();
        let (b, mut brx) = Transport::start(cb).await.unwrap();
        a.set_addr(NodeId(2), b.local_addr().unwrap());
        // b does not read: its inbound queue, its pending frames, the channel's window and
        // a's queue fill, and then try_send refuses.
        let mut sent = 0u32;
        loop {
            match a.try_send(NodeId(2), frame(sent, 8192)) {
                Ok(()) => sent += 1,
                Err(SendError::Full) => break,
                Err(e) => panic!("{e}"),
            }
            if sent.is_multiple_of(16) {
                sleep(Duration::from_millis(20)).await;
            }
            assert!(sent < 10_000, "no backpressure");
        }
        for i in 0..sent {
            check(&recv(&mut brx).await, 1, i, 8192);
        }
        assert_eq!(
            f.rnr_waits(),
            0,
            "flow control kept a receive posted for every SEND"
        );
        a.shutdown().await;
        b.shutdown().await;
    })
    .await;
}

#[test]
fn the_transport_runs_across_processes_on_the_fabric_socket() {
    // The fabric serves from its own thread here (a process of its own in a cluster); each
    // transport's device reaches it through the socket, as another process's would.
    let dir = std::env::temp_dir().join(format!("t3fs-fabric-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("fabric.sock");
    let s2 = sock.clone();
    std::thread::spawn(move || crate::rdma::soft::remote::serve_fabric(&s2));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(bounded(async {
        use crate::rdma::soft::remote::RemoteDevice;
        let dev = |name: &str| loop {
            match RemoteDevice::connect(&sock, name) {
                Ok(d) => return Arc::new(d) as Arc<dyn Verbs>,
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        };
        let mut ca = TransportConfig::new(NodeId(1), local(), TOKEN);
        ca.rdma = Some(wire(dev("a")));
        let mut cb = TransportConfig::new(NodeId(2), local(), TOKEN);
        cb.rdma = Some(wire(dev("b")));
        let (a, mut arx) = Transport::start(ca).await.unwrap();
        let (b, mut brx) = Transport::start(cb).await.unwrap();
        a.set_addr(NodeId(2), b.local_addr().unwrap());
        for i in 0..4 {
            a.send(NodeId(2), frame(i, 1 << 20)).await.unwrap();
            check(&recv(&mut brx).await, 1, i, 1 << 20);
            b.send(NodeId(1), frame(i, 1 << 20)).await.unwrap();
            check(&recv(&mut arx).await, 2, i, 1 << 20);
        }
        assert_eq!(b.counters().rdma_read_bytes, 4 * ((1 << 20) + 4));
        a.shutdown().await;
        b.shutdown().await;
    }));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simultaneous_offers_converge_on_one_connection_without_loss() {
    bounded(async {
        let (_f, _d, [(a, mut arx), (b, mut brx)]) = pair().await;
        b.set_addr(NodeId(1), a.local_addr().unwrap());
        // Both have frames queued before either connection exists: both offer, the lower id
        // wins, and the winner's acceptor (b) must not send before a's queue pair is ready.
        for i in 0..50 {
            a.try_send(NodeId(2), frame(i, if i % 5 == 0 { 65536 } else { 0 }))
                .unwrap();
            b.try_send(NodeId(1), frame(i, if i % 7 == 0 { 65536 } else { 0 }))
                .unwrap();
        }
        for i in 0..50 {
            check(
                &recv(&mut brx).await,
                1,
                i,
                if i % 5 == 0 { 65536 } else { 0 },
            );
            check(
                &recv(&mut arx).await,
                2,
                i,
                if i % 7 == 0 { 65536 } else { 0 },
            );
        }
        let (ca, cb) = (a.counters(), b.counters());
        assert_eq!(
            (ca.rdma_failures, cb.rdma_failures),
            (0, 0),
            "{ca:?} {cb:?}"
        );
        assert_eq!((ca.connects, cb.connects), (1, 1), "one connection");
        a.shutdown().await;
        b.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_stops_reading_still_sends() {
    bounded(async {
        let f = SoftFabric::new();
        let (da, db) = (f.device("soft-a"), f.device("soft-b"));
        let mut ca = TransportConfig::new(NodeId(1), local(), TOKEN);
        ca.rdma = Some(wire(Arc::new(da)));
        let mut cb = TransportConfig::new(NodeId(2), local(), TOKEN);
        cb.rdma = Some(wire(Arc::new(db)));
        cb.inbound_frames = 2;
        let (a, mut arx) = Transport::start(ca).await.unwrap();
        let (b, _brx) = Transport::start(cb).await.unwrap();
        a.set_addr(NodeId(2), b.local_addr().unwrap());
        // a floods b, which never reads: b's delivery blocks. b's own frames to a must still
        // go (credits and completions keep flowing while its delivery waits), as on TCP.
        for i in 0..200 {
            let _ = a.try_send(NodeId(2), frame(i, 0));
        }
        sleep(Duration::from_millis(100)).await;
        for i in 0..100 {
            b.send(NodeId(1), frame(i, 4096)).await.unwrap();
        }
        for i in 0..100 {
            check(&recv(&mut arx).await, 2, i, 4096);
        }
        a.shutdown().await;
        b.shutdown().await;
    })
    .await;
}
