//! The metrics endpoint of a service: a minimal HTTP/1.0 server on the `[node] metrics`
//! address answering `GET /metrics` (Prometheus text), `GET /ready` (200 once the node serves,
//! 503 before: the readiness signal `t3fs cluster up` waits on) and `GET /status` (the node's
//! status text; on the primary mgmtd, the cluster's nodes and chains).
//!
//! Invariants: a request is read with a size and time limit and any malformed one gets a 400;
//! the server never blocks the node (it only reads the latest snapshot). Not here: producing the
//! snapshot (node/status.rs).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::node::Snapshot;

/// Serves `snapshot` on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, snapshot: Arc<Mutex<Snapshot>>) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            continue;
        };
        let snap = snapshot.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 2048];
            let mut n = 0;
            let read = async {
                while n < buf.len() {
                    let k = sock.read(&mut buf[n..]).await?;
                    if k == 0 {
                        break;
                    }
                    n += k;
                    if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") || buf[..n].ends_with(b"\n\n")
                    {
                        break;
                    }
                }
                Ok::<_, std::io::Error>(())
            };
            if tokio::time::timeout(Duration::from_secs(5), read)
                .await
                .is_err()
            {
                return;
            }
            let req = String::from_utf8_lossy(&buf[..n]);
            let path = req
                .lines()
                .next()
                .and_then(|l| l.strip_prefix("GET "))
                .and_then(|l| l.split_whitespace().next());
            let (code, body) = {
                let s = snap.lock().map(|s| s.clone()).unwrap_or_default();
                match path {
                    Some("/metrics") => ("200 OK", s.metrics),
                    Some("/status") => ("200 OK", s.status),
                    Some("/ready") if s.ready => ("200 OK", "ready\n".to_string()),
                    Some("/ready") => ("503 Service Unavailable", "not ready\n".to_string()),
                    Some(_) => ("404 Not Found", "not found\n".to_string()),
                    None => ("400 Bad Request", "bad request\n".to_string()),
                }
            };
            let head = format!(
                "HTTP/1.0 {code}\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(body.as_bytes()).await;
            let _ = sock.shutdown().await;
        });
    }
}

/// Fetches `path` from a metrics endpoint (blocking, for the CLI): the status code and body.
pub fn get(
    addr: std::net::SocketAddr,
    path: &str,
    timeout: Duration,
) -> std::io::Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let code = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((code, body))
}
