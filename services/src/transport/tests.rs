//! Transport tests on 127.0.0.1 (port 0). Each runs under a deadline, so a bug fails instead of
//! hanging.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use t3fs_core::ids::{ChunkId, ChunkVersion, NodeId, RequestId, RoutingVersion};
use t3fs_core::msg::{Msg, ReadReply, Status};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc::Receiver;
use tokio::time::{sleep, timeout};

use super::handshake::{self, Me};
use super::{Credential, PeerRole};
use super::{Frame, Inbound, SendError, Transport, TransportConfig};

pub(crate) const DEADLINE: Duration = Duration::from_secs(20);
pub(crate) const TOKEN: &str = "t3fs-test-token-0123456789abcdef";

pub(crate) fn local() -> Option<SocketAddr> {
    Some("127.0.0.1:0".parse().unwrap())
}

fn cfg(me: u32, listen: Option<SocketAddr>) -> TransportConfig {
    let mut c = TransportConfig::new(NodeId(me.into()), listen, TOKEN);
    c.connect_backoff = Duration::from_millis(10)..Duration::from_millis(200);
    c.handshake_timeout = Duration::from_secs(2);
    c
}

async fn start(c: TransportConfig) -> (Transport, Receiver<Inbound>) {
    Transport::start(c).await.expect("start")
}

/// Runs a test body under the deadline.
pub(crate) async fn bounded(body: impl Future<Output = ()>) {
    timeout(DEADLINE, body)
        .await
        .expect("test exceeded its deadline");
}

/// Waits until `cond` holds (the outer deadline bounds it).
pub(crate) async fn until(mut cond: impl FnMut() -> bool) {
    while !cond() {
        sleep(Duration::from_millis(5)).await;
    }
}

pub(crate) async fn recv(rx: &mut Receiver<Inbound>) -> Inbound {
    rx.recv().await.expect("inbound channel open")
}

fn frame(tag: u8, i: u32) -> Bytes {
    let mut v = vec![tag];
    v.extend_from_slice(&i.to_be_bytes());
    Bytes::from(v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_exchange_frames_both_ways_over_one_connection() {
    bounded(async {
        let (a, mut arx) = start(cfg(1, local())).await;
        let (b, mut brx) = start(cfg(2, local())).await;
        a.set_addr(NodeId(2), b.local_addr().unwrap());
        // b never learns a's address: it answers over a's connection.
        for i in 0..100 {
            a.send(NodeId(2), frame(b'a', i)).await.unwrap();
        }
        for i in 0..100 {
            let m = recv(&mut brx).await;
            assert_eq!((m.from, m.frame), (NodeId(1), frame(b'a', i)));
            b.try_send(NodeId(1), frame(b'b', i)).unwrap();
        }
        for i in 0..100 {
            let m = recv(&mut arx).await;
            assert_eq!((m.from, m.frame), (NodeId(2), frame(b'b', i)));
        }
        until(|| a.counters().frames_out == 100).await;
        let (ca, cb) = (a.counters(), b.counters());
        assert_eq!((a.connections(), b.connections()), (1, 1));
        assert_eq!((ca.connects, cb.connects), (1, 1));
        assert_eq!((ca.frames_out, ca.frames_in, cb.frames_in), (100, 100, 100));
        assert_eq!(ca.bytes_out, 500);
        a.shutdown().await;
        b.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_without_listen_address_gets_replies() {
    bounded(async {
        let (server, mut srx) = start(cfg(1, local())).await;
        let (client, mut crx) = start(cfg(100, None)).await;
        assert_eq!(client.local_addr(), None);
        // Nothing known about the client yet, nor about an unknown node.
        assert_eq!(
            server.try_send(NodeId(100), frame(0, 0)),
            Err(SendError::NoRoute)
        );
        assert_eq!(
            client.try_send(NodeId(7), frame(0, 0)),
            Err(SendError::NoRoute)
        );
        assert_eq!(
            client.try_send(NodeId(100), frame(0, 0)),
            Err(SendError::NoRoute)
        );
        assert_eq!(server.counters().no_route, 1);
        assert_eq!(client.counters().no_route, 2);
        client.set_addr(NodeId(1), server.local_addr().unwrap());
        let big = Bytes::from(vec![0u8; client_frame_max() + 1]);
        assert_eq!(client.try_send(NodeId(1), big), Err(SendError::TooLarge));
        assert_eq!(client.counters().oversized, 1);
        for i in 0..10 {
            client.try_send(NodeId(1), frame(b'q', i)).unwrap();
            let req = recv(&mut srx).await;
            assert_eq!(req.from, NodeId(100));
            server.try_send(req.from, frame(b'r', i)).unwrap();
            assert_eq!(recv(&mut crx).await.frame, frame(b'r', i));
        }
        client.shutdown().await;
        server.shutdown().await;
        assert_eq!(
            client.try_send(NodeId(1), frame(0, 0)),
            Err(SendError::Closed)
        );
    })
    .await;
}

fn client_frame_max() -> usize {
    cfg(0, None).frame_max
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_token_is_rejected_and_counted_at_both_ends() {
    bounded(async {
        let (a, _arx) = start(cfg(1, local())).await;
        let mut bc = cfg(2, local());
        bc.credential = Credential::trusted("another-cluster", PeerRole::Admin);
        let (b, mut brx) = start(bc).await;
        a.set_addr(NodeId(2), b.local_addr().unwrap());
        a.try_send(NodeId(2), frame(0, 1)).unwrap();
        until(|| a.counters().auth_rejected >= 2 && b.counters().auth_rejected >= 2).await;
        assert_eq!(a.counters().connects + b.counters().connects, 0);
        assert_eq!((a.connections(), b.connections()), (0, 0));
        assert!(
            brx.try_recv().is_err(),
            "no frame crosses a refused connection"
        );
        a.shutdown().await;
        b.shutdown().await;
    })
    .await;
}

/// Opens a raw socket to `to` and authenticates as node 50 with the test token.
async fn raw_authenticated(to: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(to).await.unwrap();
    let cred = Credential::trusted(TOKEN, PeerRole::Admin);
    let me = Me {
        node: NodeId(50),
        incarnation: 5,
        cred: &cred,
        roster: None,
    };
    handshake::dial(&mut s, &me, NodeId(1))
        .await
        .expect("raw handshake");
    s
}

/// Reads until the server closes the socket.
async fn closed_by_server(mut s: TcpStream) {
    let mut buf = [0u8; 64];
    while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
}

/// A frame prefix: the head's and the bulk part's lengths.
fn prefix(head: u32, bulk: u32) -> [u8; 8] {
    let mut p = [0; 8];
    p[..4].copy_from_slice(&head.to_be_bytes());
    p[4..].copy_from_slice(&bulk.to_be_bytes());
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_truncated_and_oversized_input_is_dropped_and_counted() {
    bounded(async {
        let mut sc = cfg(1, local());
        sc.handshake_timeout = Duration::from_millis(300);
        sc.frame_max = 1 << 20;
        let (server, mut srx) = start(sc).await;
        let addr = server.local_addr().unwrap();

        // Garbage instead of a hello.
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(&[0xAB; 200]).await.unwrap();
        closed_by_server(s).await;
        until(|| server.counters().auth_rejected == 1).await;

        // Silence: the handshake times out.
        let s = TcpStream::connect(addr).await.unwrap();
        closed_by_server(s).await;
        until(|| server.counters().auth_rejected == 2).await;

        // An authenticated peer announcing a frame over the limit.
        // (Head and bulk part: each within it, together one byte over.)
        let mut s = raw_authenticated(addr).await;
        s.write_all(&prefix(1 << 19, (1 << 19) + 1)).await.unwrap();
        closed_by_server(s).await;
        until(|| server.counters().oversized == 1).await;

        // An authenticated peer that sends one good frame and stops inside the next.
        let mut s = raw_authenticated(addr).await;
        s.write_all(&prefix(3, 0)).await.unwrap();
        s.write_all(b"abc").await.unwrap();
        s.write_all(&prefix(2, 10)).await.unwrap();
        s.write_all(b"abcd").await.unwrap();
        s.shutdown().await.unwrap();
        let m = recv(&mut srx).await;
        assert_eq!((m.from, &m.frame[..]), (NodeId(50), &b"abc"[..]));
        until(|| server.counters().truncated == 1).await;
        until(|| server.connections() == 0).await;

        // The listener still serves a proper peer.
        let (client, _crx) = start(cfg(2, None)).await;
        client.set_addr(NodeId(1), addr);
        client.try_send(NodeId(1), frame(1, 2)).unwrap();
        assert_eq!(recv(&mut srx).await.frame, frame(1, 2));
        let c = server.counters();
        assert_eq!(
            (c.auth_rejected, c.oversized, c.truncated, c.connects),
            (2, 1, 1, 3)
        );
        assert_eq!(c.disconnects, 2);
        client.shutdown().await;
        server.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_after_peer_restart_and_delivers_queued_frames() {
    bounded(async {
        let (a, _arx) = start(cfg(1, local())).await;
        let (b, mut brx) = start(cfg(2, local())).await;
        let baddr = b.local_addr().unwrap();
        a.set_addr(NodeId(2), baddr);
        a.try_send(NodeId(2), frame(b'x', 0)).unwrap();
        assert_eq!(recv(&mut brx).await.frame, frame(b'x', 0));

        b.shutdown().await;
        drop(brx);
        until(|| a.connections() == 0).await;
        for i in 1..=20 {
            a.try_send(NodeId(2), frame(b'x', i)).unwrap();
        }
        // Let a few dials fail while the peer is down.
        until(|| a.counters().connect_failures >= 2).await;

        let (b2, mut brx2) = loop {
            match Transport::start(cfg(2, Some(baddr))).await {
                Ok(t) => break t,
                Err(_) => sleep(Duration::from_millis(20)).await,
            }
        };
        for i in 1..=20 {
            assert_eq!(recv(&mut brx2).await.frame, frame(b'x', i));
        }
        until(|| a.counters().frames_out == 21).await;
        let c = a.counters();
        assert_eq!((c.connects, c.reconnects, c.disconnects), (2, 1, 1));
        a.shutdown().await;
        b2.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_receiver_makes_try_send_full_with_bounded_memory() {
    bounded(async {
        let mut ac = cfg(1, local());
        ac.queue_frames = 8;
        let (a, _arx) = start(ac).await;
        let mut bc = cfg(2, local());
        bc.inbound_frames = 4;
        let (b, mut brx) = start(bc).await;
        a.set_addr(NodeId(2), b.local_addr().unwrap());
        let payload = Bytes::from(vec![7u8; 64 * 1024]);
        // b does not read: socket buffers fill, then a's queue.
        let (mut accepted, mut full) = (0u64, 0u64);
        while full < 50 {
            match a.try_send(NodeId(2), payload.clone()) {
                Ok(()) => accepted += 1,
                Err(SendError::Full) => {
                    full += 1;
                    sleep(Duration::from_millis(2)).await;
                }
                Err(e) => panic!("{e}"),
            }
            assert!(accepted < 20_000, "a queue that never fills is unbounded");
        }
        assert_eq!(a.counters().dropped_full, full);
        // Still full while nobody reads: what is held is bounded.
        sleep(Duration::from_millis(100)).await;
        assert_eq!(a.try_send(NodeId(2), payload.clone()), Err(SendError::Full));
        full += 1;
        assert_eq!(a.counters().dropped_full, full);
        // Reading again drains everything that was accepted, nothing else.
        for _ in 0..accepted {
            assert_eq!(recv(&mut brx).await.frame.len(), payload.len());
        }
        assert_eq!(b.counters().frames_in, accepted);
        until(|| a.counters().frames_out == accepted).await;
        assert!(brx.try_recv().is_err(), "a refused frame was delivered");
        a.shutdown().await;
        b.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_msg_payload_is_counted_by_decode() {
    bounded(async {
        let (a, _arx) = start(cfg(1, local())).await;
        let (b, mut brx) = start(cfg(2, local())).await;
        a.set_addr(NodeId(2), b.local_addr().unwrap());
        let msg = Msg::GetRouting {
            known: RoutingVersion(9),
        };
        // A message with a payload travels as a head and a bulk part and decodes whole.
        let reply = Msg::ReadReply(ReadReply {
            read_id: RequestId(1),
            chunk: ChunkId::new(3, 4),
            status: Status::Ok,
            data: (0..300_000u32).map(|i| i as u8).collect::<Vec<u8>>().into(),
            version: ChunkVersion(2),
            checksum: 5,
        });
        a.try_send(NodeId(2), msg.clone()).unwrap();
        a.try_send(NodeId(2), reply.clone()).unwrap();
        a.try_send(NodeId(2), Bytes::from_static(b"\x33\xF5\x01\xFFjunk"))
            .unwrap();
        let stray = Frame {
            head: Bytes::from(msg.encode()),
            bulk: Bytes::from_static(b"a payload for a message without one"),
        };
        a.try_send(NodeId(2), stray).unwrap();
        let mut good = recv(&mut brx).await;
        assert_eq!(b.decode(&mut good), Ok(msg));
        let mut big = recv(&mut brx).await;
        assert_eq!(
            big.bulk.len(),
            300_000,
            "the payload arrives as the bulk part"
        );
        assert_eq!(b.decode(&mut big), Ok(reply));
        for _ in 0..2 {
            let mut bad = recv(&mut brx).await;
            assert!(b.decode(&mut bad).is_err());
        }
        assert_eq!(b.counters().malformed, 2);
        a.shutdown().await;
        b.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simultaneous_dials_converge_on_one_connection_without_loss() {
    bounded(async {
        for round in 0..5u32 {
            let (a, mut arx) = start(cfg(1, local())).await;
            let (b, mut brx) = start(cfg(2, local())).await;
            a.set_addr(NodeId(2), b.local_addr().unwrap());
            b.set_addr(NodeId(1), a.local_addr().unwrap());
            for i in 0..200 {
                a.try_send(NodeId(2), frame(b'a', i)).unwrap();
                b.try_send(NodeId(1), frame(b'b', i)).unwrap();
            }
            let mut got_a: Vec<Bytes> = Vec::new();
            let mut got_b: Vec<Bytes> = Vec::new();
            for _ in 0..200 {
                got_b.push(recv(&mut brx).await.frame);
                got_a.push(recv(&mut arx).await.frame);
            }
            got_a.sort();
            got_b.sort();
            assert_eq!(got_a, (0..200).map(|i| frame(b'b', i)).collect::<Vec<_>>());
            assert_eq!(got_b, (0..200).map(|i| frame(b'a', i)).collect::<Vec<_>>());
            // Converged: every connection but one was closed, at both ends.
            let one = |t: &Transport| {
                let c = t.counters();
                t.connections() == 1 && c.connects - c.disconnects == 1
            };
            until(|| one(&a) && one(&b)).await;
            let lost = a.counters().dropped_write + b.counters().dropped_write;
            assert_eq!(lost, 0, "round {round}");
            a.shutdown().await;
            b.shutdown().await;
        }
    })
    .await;
}
