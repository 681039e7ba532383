//! What one message costs through the real TCP transport on loopback, alone (depth 1), by the
//! size of its bulk part: what `t3fs calibrate` takes the simulated line rate of a lone message
//! from.
//!
//! Two transports in this process; one sends a frame whose bulk part is `bulk` bytes (a small
//! head, as every payload-carrying message has), the other answers each with a small frame, and
//! the round trip is timed. The difference between a 1 MiB and an empty bulk part is what the
//! bytes add to a lone message: the kernel's copies at both ends, the socket buffers filling
//! and draining, the transport's reads and wake-ups, none of which overlap at depth 1 as they
//! do in a stream (the probe's loopback bandwidth).
//!
//! Not here: payload checksums (the decoded message's; `cpu_byte_ns` models them), many
//! messages at once (the probe's bound).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use t3fs_core::ids::NodeId;

use t3fs_services::transport::{Frame, Transport, TransportConfig};

/// `round_trips` round trips of a frame with a `bulk`-byte bulk part answered by a small frame
/// (sorted latencies).
pub fn round_trips(bulk: usize, round_trips: u32) -> Result<Vec<Duration>, String> {
    let rt = t3fs_client::client::bench_runtime()?;
    rt.block_on(async {
        let run = measure(bulk, round_trips);
        tokio::time::timeout(Duration::from_secs(120), run)
            .await
            .map_err(|_| "no answer within 120 s".to_string())?
    })
}

async fn measure(bulk: usize, round_trips: u32) -> Result<Vec<Duration>, String> {
    let local: Option<SocketAddr> = Some("127.0.0.1:0".parse().expect("an address"));
    let token = "t3fs-probe-message-token";
    let e = |e: std::io::Error| e.to_string();
    let (a, mut ra) = Transport::start(TransportConfig::new(NodeId(1), local, token))
        .await
        .map_err(e)?;
    let (b, mut rb) = Transport::start(TransportConfig::new(NodeId(2), local, token))
        .await
        .map_err(e)?;
    a.set_addr(NodeId(2), b.local_addr().expect("listening"));
    b.set_addr(NodeId(1), a.local_addr().expect("listening"));
    let echo = b.clone();
    let server = tokio::spawn(async move {
        while rb.recv().await.is_some() {
            let _ = echo.send(NodeId(1), Bytes::from_static(b"ack")).await;
        }
    });
    let piece = Bytes::from(vec![9u8; bulk]);
    let mut out = Vec::with_capacity(round_trips as usize);
    let s = |e: t3fs_services::transport::SendError| e.to_string();
    for _ in 0..round_trips {
        let f = Frame {
            head: Bytes::from_static(b"probe"),
            bulk: piece.clone(),
        };
        let t = Instant::now();
        a.send(NodeId(2), f).await.map_err(s)?;
        ra.recv().await.ok_or("the transport closed")?;
        out.push(t.elapsed());
    }
    a.shutdown().await;
    b.shutdown().await;
    server.abort();
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_round_trip_is_timed_and_sorted() {
        for (bulk, n) in [(0, 50), (1 << 20, 5)] {
            let v = super::round_trips(bulk, n).expect("round trips");
            assert_eq!(v.len(), n as usize);
            assert!(v.windows(2).all(|w| w[0] <= w[1]) && !v[0].is_zero());
        }
    }
}
