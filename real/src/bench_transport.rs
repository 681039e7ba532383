//! `t3fs bench transport`: round-trip latency and one-way bandwidth between two endpoints in
//! this process, through the transport nodes use: TCP over loopback, or RDMA (TCP underneath
//! for set-up) on the software provider or on a real device (two queue pairs of one device,
//! looped back).
//!
//! Round trips carry `size`-byte frames one at a time (a latency, not a throughput); the
//! bandwidth phase moves `mib` MiB one way as frames with a 1 MiB bulk part (on RDMA, pulled
//! one-sided from a registered pool, as a chunk write is). The software provider's figures are
//! in-process copies and bookkeeping, not a network: they show the transport's overhead,
//! nothing about hardware. Each figure comes with its bound measured in the same run: for TCP
//! the same round trips and bytes over one plain loopback socket; for RDMA the bare message
//! channel on the same device (SEND round trips and 1 MiB one-sided WRITEs, no frames, pools
//! or tasks), and on the software provider also a 1 MiB memory copy. Not here: many
//! connections at once, or a cluster (`t3fs bench io`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use t3fs_core::ids::NodeId;

use t3fs_services::rdma::channel::{Channel, ChannelConfig};
use t3fs_services::rdma::verbs::Verbs;
use t3fs_services::transport::{Frame, RdmaWire, Transport, TransportConfig};

/// Which transport.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Kind {
    /// The TCP transport on 127.0.0.1.
    Tcp,
    /// The RDMA transport on the software provider.
    SoftRdma,
    /// The RDMA transport on the first RDMA device (the `rdma` feature).
    Rdma,
}

/// What a run measured.
pub struct Figures {
    /// What ran, in words.
    pub what: String,
    /// Round-trip times, nanoseconds.
    pub rtt: Histogram<u64>,
    /// One-way bandwidth, MiB/s.
    pub mib_s: f64,
    /// The same measured in the same run without the transport, as its bound.
    pub bound: Bound,
    /// A second bandwidth bound from the same run, if any: (what, MiB/s).
    pub extra: Option<(&'static str, f64)>,
}

/// What the transport is measured against: a plain loopback socket for TCP, a memory copy
/// for the software provider (a real device has no bound here yet).
pub struct Bound {
    /// What it is, in words.
    pub what: &'static str,
    /// Round-trip times, nanoseconds (None where there is no round trip to bound it).
    pub rtt: Option<Histogram<u64>>,
    /// One-way bandwidth, MiB/s (0: not measured).
    pub mib_s: f64,
}

impl std::fmt::Display for Figures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let us = |q: f64| self.rtt.value_at_quantile(q) as f64 / 1000.0;
        writeln!(f, "{}", self.what)?;
        writeln!(
            f,
            "  round trip over {}: p50 {:.1} us, p99 {:.1} us, max {:.1} us",
            self.rtt.len(),
            us(0.5),
            us(0.99),
            self.rtt.max() as f64 / 1000.0
        )?;
        write!(f, "  one way, 1 MiB pieces: {:.1} MiB/s", self.mib_s)?;
        let b = &self.bound;
        if let Some(rtt) = &b.rtt {
            let p50 = rtt.value_at_quantile(0.5) as f64;
            write!(
                f,
                "\n  bound, {} (same run): round trip p50 {:.1} us; the transport's p50 is {:.1}x it",
                b.what,
                p50 / 1000.0,
                self.rtt.value_at_quantile(0.5) as f64 / p50.max(1.0)
            )?;
        }
        if b.mib_s > 0.0 {
            write!(
                f,
                "\n  bound, {} (same run): {:.1} MiB/s one way; the transport reaches {:.0}% of it",
                b.what,
                b.mib_s,
                100.0 * self.mib_s / b.mib_s
            )?;
        }
        if let Some((what, mib_s)) = self.extra {
            write!(
                f,
                "\n  bound, {what} (same run): {mib_s:.1} MiB/s; the transport reaches {:.0}% of it",
                100.0 * self.mib_s / mib_s
            )?;
        }
        Ok(())
    }
}

/// Measures `kind` with `round_trips` round trips of `size` bytes and `mib` MiB one way.
pub fn run(kind: Kind, size: usize, round_trips: u32, mib: u32) -> Result<Figures, String> {
    match kind {
        Kind::Tcp => {
            let mut f = transport(None, size, round_trips, mib)?;
            f.what = format!("TCP transport on 127.0.0.1, {size}-byte frames");
            Ok(f)
        }
        Kind::SoftRdma => {
            let f = t3fs_services::rdma::soft::SoftFabric::new();
            let (a, b) = (f.device("soft-a"), f.device("soft-b"));
            let (a, b): (Arc<dyn Verbs>, Arc<dyn Verbs>) = (Arc::new(a), Arc::new(b));
            let what = "software provider (in-process copies, not a network)";
            rdma_pair(what, a, b, size, round_trips, mib, true)
        }
        Kind::Rdma => rdma(size, round_trips, mib),
    }
}

/// The RDMA transport between devices `a` and `b`, bounded by the bare channel on them (and
/// by a memory copy when `copies`: the software provider's one-sided operations are copies).
fn rdma_pair(
    what: &str,
    a: Arc<dyn Verbs>,
    b: Arc<dyn Verbs>,
    size: usize,
    round_trips: u32,
    mib: u32,
    copies: bool,
) -> Result<Figures, String> {
    let wires = (RdmaWire::new(a.clone()), RdmaWire::new(b.clone()));
    let mut f = transport(Some(wires), size, round_trips, mib)?;
    f.what = format!("RDMA transport, {what}, {size}-byte frames");
    let ch = channel(a, b, size, round_trips, mib)?;
    f.bound = Bound {
        what: "the bare RDMA channel on the same devices",
        rtt: Some(ch.rtt),
        mib_s: ch.mib_s,
    };
    if copies {
        f.extra = Some(("a 1 MiB memory copy", memcpy_mib_s(mib.max(64))));
    }
    Ok(f)
}

#[cfg(feature = "rdma")]
fn rdma(size: usize, round_trips: u32, mib: u32) -> Result<Figures, String> {
    let d = t3fs_services::rdma::ibv::IbvDevice::open(None, 1, 0).map_err(|e| e.to_string())?;
    let what = format!("{} (two queue pairs looped back)", d.name());
    let d: Arc<dyn Verbs> = Arc::new(d);
    rdma_pair(&what, d.clone(), d, size, round_trips, mib, false)
}

#[cfg(not(feature = "rdma"))]
fn rdma(_: usize, _: u32, _: u32) -> Result<Figures, String> {
    Err(
        "this build has no RDMA provider: build with `--features rdma` (needs libibverbs-dev, \
         librdmacm-dev and libclang-dev)"
            .into(),
    )
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds")
}

/// The bare channel's round trips and one-sided bandwidth between devices `da` and `db`.
fn channel(
    da: Arc<dyn Verbs>,
    db: Arc<dyn Verbs>,
    size: usize,
    round_trips: u32,
    mib: u32,
) -> Result<Measured, String> {
    let cfg = ChannelConfig {
        slots: 16,
        slot_bytes: size.max(1) as u32,
        bulk_bytes: 1 << 20,
    };
    let e = |e: t3fs_services::rdma::channel::ChannelError| format!("{e:?}");
    let (mut a, ea) = Channel::new(da, cfg).map_err(|e| e.to_string())?;
    let (mut b, eb) = Channel::new(db, cfg).map_err(|e| e.to_string())?;
    a.connect(eb).map_err(|e| e.to_string())?;
    b.connect(ea).map_err(|e| e.to_string())?;
    let msg = vec![7u8; size];
    let mut rtt = histogram();
    let deadline = Instant::now() + Duration::from_secs(60);
    for _ in 0..round_trips {
        let t = Instant::now();
        a.send(&msg).map_err(e)?;
        let got = wait(&mut b, deadline).map_err(e)?;
        b.send(&got).map_err(e)?;
        wait(&mut a, deadline).map_err(e)?;
        rtt.saturating_record(t.elapsed().as_nanos() as u64);
    }
    let bulk = a.bulk();
    let t = Instant::now();
    for _ in 0..mib {
        b.write_remote(0, 1 << 20, bulk.addr, bulk.rkey)
            .map_err(e)?;
    }
    let secs = t.elapsed().as_secs_f64().max(1e-9);
    Ok(Measured {
        rtt,
        mib_s: f64::from(mib) / secs,
    })
}

/// Round trips and bandwidth of one measurement.
struct Measured {
    rtt: Histogram<u64>,
    mib_s: f64,
}

/// MiB/s of copying 1 MiB `mib` times in memory (what every software one-sided op does).
fn memcpy_mib_s(mib: u32) -> f64 {
    let (src, mut dst) = (vec![9u8; 1 << 20], vec![0u8; 1 << 20]);
    let t = Instant::now();
    for k in 0..mib {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst)[0] = k as u8;
    }
    f64::from(mib) / t.elapsed().as_secs_f64().max(1e-9)
}

/// Polls `ch` until a message arrives (or `deadline` passes: a hang is an error here).
fn wait(
    ch: &mut Channel,
    deadline: Instant,
) -> Result<Vec<u8>, t3fs_services::rdma::channel::ChannelError> {
    loop {
        ch.poll()?;
        if let Some(m) = ch.recv() {
            return Ok(m);
        }
        if Instant::now() > deadline {
            return Err(t3fs_services::rdma::channel::ChannelError::Verbs(
                t3fs_services::rdma::verbs::VerbsError::Device("no answer within 60 s".into()),
            ));
        }
    }
}

/// The transport's figures on loopback: TCP, or RDMA on `wires` (one per end).
fn transport(
    wires: Option<(RdmaWire, RdmaWire)>,
    size: usize,
    round_trips: u32,
    mib: u32,
) -> Result<Figures, String> {
    let rt = t3fs_client::client::bench_runtime()?;
    rt.block_on(async {
        let run = transport_async(wires, size, round_trips, mib);
        tokio::time::timeout(Duration::from_secs(120), run)
            .await
            .map_err(|_| "no answer within 120 s".to_string())?
    })
}

async fn transport_async(
    wires: Option<(RdmaWire, RdmaWire)>,
    size: usize,
    round_trips: u32,
    mib: u32,
) -> Result<Figures, String> {
    let local: Option<SocketAddr> = Some("127.0.0.1:0".parse().expect("an address"));
    let token = "t3fs-bench-transport-token";
    let e = |e: std::io::Error| e.to_string();
    let (mut ca, mut cb) = (
        TransportConfig::new(NodeId(1), local, token),
        TransportConfig::new(NodeId(2), local, token),
    );
    (ca.rdma, cb.rdma) = wires.map_or((None, None), |(a, b)| (Some(a), Some(b)));
    let (a, mut ra) = Transport::start(ca).await.map_err(e)?;
    let (b, mut rb) = Transport::start(cb).await.map_err(e)?;
    a.set_addr(NodeId(2), b.local_addr().expect("listening"));
    b.set_addr(NodeId(1), a.local_addr().expect("listening"));
    // The echo side: every frame back as it came; the end of the bulk phase answered once.
    let echo = b.clone();
    let server = tokio::spawn(async move {
        let mut bulk = 0u64;
        while let Some(inb) = rb.recv().await {
            if inb.bulk.is_empty() {
                let _ = echo.send(NodeId(1), Bytes::from(inb.frame.to_vec())).await;
            } else {
                bulk += inb.bulk.len() as u64;
                if inb.frame.as_ref() == b"last" {
                    let _ = echo
                        .send(NodeId(1), Bytes::from(bulk.to_be_bytes().to_vec()))
                        .await;
                }
            }
        }
    });
    let msg = Bytes::from(vec![7u8; size.max(1)]);
    let mut rtt = histogram();
    let s = |e: t3fs_services::transport::SendError| e.to_string();
    for _ in 0..round_trips {
        let t = Instant::now();
        a.send(NodeId(2), msg.clone()).await.map_err(s)?;
        ra.recv().await.ok_or("the transport closed")?;
        rtt.saturating_record(t.elapsed().as_nanos() as u64);
    }
    let piece = Bytes::from(vec![9u8; 1 << 20]);
    let t = Instant::now();
    for k in 0..mib {
        let head = if k + 1 == mib { "last" } else { "more" };
        let f = Frame {
            head: Bytes::from_static(head.as_bytes()),
            bulk: piece.clone(),
        };
        a.send(NodeId(2), f).await.map_err(s)?;
    }
    if mib > 0 {
        ra.recv().await.ok_or("the transport closed")?;
    }
    let secs = t.elapsed().as_secs_f64().max(1e-9);
    a.shutdown().await;
    b.shutdown().await;
    server.abort();
    let (raw_rtt, raw_mib_s) = raw_tcp(size.max(1), round_trips, mib)
        .await
        .map_err(|e| format!("the plain-socket bound: {e}"))?;
    Ok(Figures {
        what: String::new(),
        extra: None,
        rtt,
        mib_s: f64::from(mib) / secs,
        bound: Bound {
            what: "a plain loopback TCP socket",
            rtt: Some(raw_rtt),
            mib_s: raw_mib_s,
        },
    })
}

/// The same round trips and bytes over one plain TCP connection on loopback (no frames, no
/// queues, no tasks between the socket and the caller): the transport's bound.
async fn raw_tcp(
    size: usize,
    round_trips: u32,
    mib: u32,
) -> std::io::Result<(Histogram<u64>, f64)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = l.local_addr()?;
    let echo = tokio::spawn(async move {
        let (mut s, _) = l.accept().await?;
        s.set_nodelay(true)?;
        let mut buf = vec![0u8; size];
        for _ in 0..round_trips {
            s.read_exact(&mut buf).await?;
            s.write_all(&buf).await?;
        }
        let mut piece = vec![0u8; 1 << 20];
        for _ in 0..mib {
            s.read_exact(&mut piece).await?;
        }
        s.write_all(&[1]).await
    });
    let mut c = tokio::net::TcpStream::connect(addr).await?;
    c.set_nodelay(true)?;
    let mut buf = vec![7u8; size];
    let mut rtt = histogram();
    for _ in 0..round_trips {
        let t = Instant::now();
        c.write_all(&buf).await?;
        c.read_exact(&mut buf).await?;
        rtt.saturating_record(t.elapsed().as_nanos() as u64);
    }
    let piece = vec![9u8; 1 << 20];
    let t = Instant::now();
    for _ in 0..mib {
        c.write_all(&piece).await?;
    }
    c.read_exact(&mut [0u8; 1]).await?;
    let secs = t.elapsed().as_secs_f64().max(1e-9);
    echo.await.map_err(std::io::Error::other)??;
    Ok((rtt, f64::from(mib) / secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_transport_measures_what_it_was_asked_or_says_why_it_cannot() {
        for kind in [Kind::Tcp, Kind::SoftRdma] {
            let f = run(kind, 512, 50, 4).unwrap();
            assert_eq!(f.rtt.len(), 50, "{kind:?}");
            assert!(f.mib_s > 0.0, "{kind:?}");
            assert!(f.to_string().contains("p99"), "{kind:?}");
            assert!(f.bound.mib_s > 0.0, "{kind:?}: the bound is measured");
            assert!(f.bound.rtt.is_some(), "{kind:?}: the round trip is bounded");
            assert!(f.to_string().contains("bound"), "{kind:?}");
        }
        let soft = run(Kind::SoftRdma, 512, 10, 2).unwrap().to_string();
        assert!(
            soft.contains("RDMA transport") && soft.contains("bare RDMA channel"),
            "{soft}"
        );
        // This host has no RDMA device (or the build no provider): the reason is named.
        if !std::path::Path::new("/sys/class/infiniband").exists() {
            let err = run(Kind::Rdma, 512, 1, 1).err().expect("no device here");
            assert!(
                err.contains("/sys/class/infiniband") || err.contains("--features rdma"),
                "{err}"
            );
        }
    }
}
