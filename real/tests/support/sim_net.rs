//! The transport's sockets on turmoil's simulated network: [`SimNet`] implements the
//! transport's `Net` with `turmoil::net`, optionally cutting every write into segments of a few
//! bytes (each a separate delivery with its own latency), so that frames arrive split across
//! reads.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};

use t3fs_services::transport::net::{stream, IoFuture, Listener, Net, Stream};
use tokio::io::AsyncWrite;

/// Simulated sockets.
#[derive(Clone, Copy, Debug, Default)]
pub struct SimNet {
    /// Largest segment a write sends (`None`: as much as the stream takes).
    pub segment: Option<usize>,
}

impl SimNet {
    fn split(self, s: turmoil::net::TcpStream) -> Stream {
        let (r, w) = s.into_split();
        match self.segment {
            Some(n) => stream(r, Trickle(w, n.max(1))),
            None => stream(r, w),
        }
    }
}

struct SimListener(turmoil::net::TcpListener, SimNet);

impl Net for SimNet {
    fn bind(&self, addr: SocketAddr) -> IoFuture<'_, Box<dyn Listener>> {
        let net = *self;
        Box::pin(async move {
            let l = turmoil::net::TcpListener::bind(addr).await?;
            Ok(Box::new(SimListener(l, net)) as Box<dyn Listener>)
        })
    }

    fn connect(&self, addr: SocketAddr) -> IoFuture<'_, Stream> {
        let net = *self;
        Box::pin(async move { Ok(net.split(turmoil::net::TcpStream::connect(addr).await?)) })
    }
}

impl Listener for SimListener {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }

    fn accept(&self) -> IoFuture<'_, Stream> {
        Box::pin(async move { Ok(self.1.split(self.0.accept().await?.0)) })
    }
}

/// A write half that sends at most `.1` bytes per write.
struct Trickle<W>(W, usize);

impl<W: AsyncWrite + Unpin> AsyncWrite for Trickle<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let n = buf.len().min(self.1);
        Pin::new(&mut self.0).poll_write(cx, &buf[..n])
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// The address a simulated host listens on.
pub fn listen_any(port: u16) -> SocketAddr {
    (Ipv4Addr::UNSPECIFIED, port).into()
}

/// Where `host` listens on `port` (inside the simulation).
pub fn addr_of(host: &str, port: u16) -> SocketAddr {
    SocketAddr::new(turmoil::lookup(host), port)
}
