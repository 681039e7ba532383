//! The sockets a transport runs on: [`Net`] binds listeners and dials, and hands back byte
//! streams as a boxed read half and write half. [`TokioNet`] is the real one (tokio TCP with the
//! transport's socket options); tests put the same transport on a simulated network (turmoil,
//! `real/tests/turmoil_driver.rs`) by implementing [`Net`] there, so nothing simulated is built
//! into the services.
//!
//! Invariants: every stream a [`Net`] returns is connected and already tuned; the transport reads
//! and writes it only through `AsyncRead`/`AsyncWrite` (vectored writes pass through the boxes).
//! Not here: authentication and framing (`handshake.rs`, `frame.rs`), or which peer a stream
//! belongs to.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, Join};
use tokio::net::{TcpListener, TcpStream};

/// The read half of a connection.
pub type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;
/// The write half of a connection.
pub type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;
/// A connection, readable and writable (the handshake runs on it whole, then it is split).
pub type Stream = Join<ReadHalf, WriteHalf>;
/// A boxed future of an I/O result.
pub type IoFuture<'a, T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send + 'a>>;

/// Makes a [`Stream`] of two halves.
pub fn stream(
    r: impl AsyncRead + Send + Unpin + 'static,
    w: impl AsyncWrite + Send + Unpin + 'static,
) -> Stream {
    tokio::io::join(Box::new(r) as ReadHalf, Box::new(w) as WriteHalf)
}

/// Where connections come from.
pub trait Net: Send + Sync + 'static {
    /// Binds a listener at `addr` (port 0 picks a free one).
    fn bind(&self, addr: SocketAddr) -> IoFuture<'_, Box<dyn Listener>>;
    /// Connects to `addr`.
    fn connect(&self, addr: SocketAddr) -> IoFuture<'_, Stream>;
}

/// A bound listener.
pub trait Listener: Send + Sync {
    /// The address it is bound to.
    fn local_addr(&self) -> io::Result<SocketAddr>;
    /// The next inbound connection.
    fn accept(&self) -> IoFuture<'_, Stream>;
}

/// Idle time before the first keepalive probe.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
/// Time between keepalive probes.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// Unanswered probes before the kernel drops the connection (a dead peer is noticed in ~25 s).
const KEEPALIVE_RETRIES: u32 = 3;
/// Longest time written data may stay unacknowledged before the kernel drops the connection.
#[cfg(target_os = "linux")]
const UNACKED_MAX: Duration = Duration::from_secs(30);

/// Real TCP sockets through tokio.
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioNet;

impl Net for TokioNet {
    fn bind(&self, addr: SocketAddr) -> IoFuture<'_, Box<dyn Listener>> {
        Box::pin(async move { Ok(Box::new(bind_tcp(addr).await?) as Box<dyn Listener>) })
    }

    fn connect(&self, addr: SocketAddr) -> IoFuture<'_, Stream> {
        Box::pin(async move { tuned(TcpStream::connect(addr).await?) })
    }
}

/// How long [`bind_tcp`] retries an address that is still in use.
const BIND_RETRY_FOR: Duration = Duration::from_secs(10);

/// Binds a TCP listener on `addr`, retrying for [`BIND_RETRY_FOR`] while the address is in use.
///
/// Why retry: a node restarted at once after SIGKILL can find its own old listener not yet
/// closed (the kernel closes it when the killed process's last thread is gone). Another
/// program holding the port still fails, after the wait, with the address in the error.
pub async fn bind_tcp(
    addr: impl tokio::net::ToSocketAddrs + std::fmt::Display,
) -> io::Result<TcpListener> {
    let deadline = tokio::time::Instant::now() + BIND_RETRY_FOR;
    let mut warned = false;
    loop {
        match TcpListener::bind(&addr).await {
            Err(e)
                if e.kind() == io::ErrorKind::AddrInUse
                    && tokio::time::Instant::now() < deadline =>
            {
                if !warned {
                    tracing::warn!("{addr} is in use; retrying for up to {BIND_RETRY_FOR:?}");
                    warned = true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot listen on {addr}: {e}"),
                ))
            }
            Ok(l) => return Ok(l),
        }
    }
}

impl Listener for TcpListener {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        TcpListener::local_addr(self)
    }

    fn accept(&self) -> IoFuture<'_, Stream> {
        Box::pin(async move { tuned(TcpListener::accept(self).await?.0) })
    }
}

/// Socket options of every connection: no Nagle delay (frames are latency-sensitive and
/// already batched), and dead-peer detection: keepalive probes on an idle connection, and on
/// Linux a bound on how long written data may stay unacknowledged.
fn tuned(s: TcpStream) -> io::Result<Stream> {
    s.set_nodelay(true)?;
    let sock = socket2::SockRef::from(&s);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_RETRIES);
    sock.set_tcp_keepalive(&keepalive)?;
    #[cfg(target_os = "linux")]
    sock.set_tcp_user_timeout(Some(UNACKED_MAX))?;
    let (r, w) = s.into_split();
    Ok(stream(r, w))
}
