//! The metrics endpoint of a service: a minimal HTTP/1.0 server on the `[node] metrics`
//! address answering `GET /metrics` (Prometheus text), `GET /ready` (200 once the node serves,
//! 503 before: the readiness signal `t3fs cluster up` waits on) and `GET /status` (the node's
//! status text; on the primary mgmtd, the cluster's nodes and chains). With a [`Control`], it
//! also answers the fault control RPC: `PUT /fault?QUERY` replaces the node's network faults
//! (the transport's fault layer, `transport::NetFaults` query syntax) and `GET /fault` reads
//! them; on a storage node `PUT /disk?QUERY` and `GET /disk` do the same for its targets' disk
//! faults (`chunk_store::DiskFaults`), and `PUT /clock?QUERY`/`GET /clock` the offset and drift of the
//! time its machine reads (`node::clock::ClockFaults`); on the kv node `PUT /kv?QUERY`/`GET /kv` the
//! KV service's faults (`kv_faults::KvFaults`). All only with the cluster token in an `x-t3fs-token`
//! header (403 otherwise).
//!
//! Invariants: a request is read with a size and time limit and any malformed one gets a 400;
//! the server never blocks the node (it only reads the latest snapshot). Not here: producing the
//! snapshot (node/status.rs).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::node::Snapshot;

/// What the fault control RPC acts on.
#[derive(Clone)]
pub struct Control {
    /// The cluster token a request must carry.
    pub token: String,
    /// The node's fault layers by path (`/fault`, `/disk`, `/clock`, `/kv`).
    pub resources: crate::fault_query::Resources,
}

/// Compares without an early exit, so the time taken does not tell how much of a guess matched.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Whether `path` is one of the fault RPC's resources.
fn is_control(path: &str) -> bool {
    let r = path.split_once('?').map_or(path, |(r, _)| r);
    ["/fault", "/disk", "/clock", "/kv"].contains(&r)
}

/// The fault RPC's answer to `method` `path` with the request's header `lines`.
fn fault_rpc(c: Option<&Control>, method: &str, path: &str, req: &str) -> (&'static str, String) {
    let Some(c) = c else {
        return (
            "404 Not Found",
            "fault injection is off on this node (a node started for testing turns it on: \
             [node] fault_injection = true)\n"
                .into(),
        );
    };
    let token = req.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("x-t3fs-token")
            .then(|| v.trim().to_string())
    });
    if !token.is_some_and(|t| same(t.as_bytes(), c.token.as_bytes())) {
        return ("403 Forbidden", "the cluster token is required\n".into());
    }
    let (resource, query) = match path.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (path, None),
    };
    let Some((_, layer)) = c.resources.iter().find(|(p, _)| *p == resource) else {
        return (
            "404 Not Found",
            format!("no {resource} faults on this node\n"),
        );
    };
    match (method, query) {
        ("GET", None) => ("200 OK", layer.describe()),
        ("PUT", q) => match layer.put(q.unwrap_or("")) {
            Ok(now) => ("200 OK", now),
            Err(e) => ("400 Bad Request", format!("{e}\n")),
        },
        _ => ("400 Bad Request", "use GET, or PUT with a query\n".into()),
    }
}

/// Serves `snapshot` on `listener` until the task is dropped; with `control`, the fault RPC too.
pub async fn serve(
    listener: TcpListener,
    snapshot: Arc<Mutex<Snapshot>>,
    control: Option<Control>,
) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            continue;
        };
        let snap = snapshot.clone();
        let control = control.clone();
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
            let mut first = req.lines().next().unwrap_or("").split_whitespace();
            let (method, path) = (first.next().unwrap_or(""), first.next());
            let path = match (method, path) {
                (_, Some(p)) if is_control(p) => {
                    let (code, body) = fault_rpc(control.as_ref(), method, p, &req);
                    return reply(&mut sock, code, &body).await;
                }
                ("GET", p) => p,
                _ => None,
            };
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
            reply(&mut sock, code, &body).await;
        });
    }
}

async fn reply(sock: &mut tokio::net::TcpStream, code: &str, body: &str) {
    let head = format!(
        "HTTP/1.0 {code}\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = sock.write_all(head.as_bytes()).await;
    let _ = sock.write_all(body.as_bytes()).await;
    let _ = sock.shutdown().await;
}

/// Sets a node's network faults through its fault RPC (blocking, for the CLI and runners).
pub fn put_faults(
    addr: std::net::SocketAddr,
    token: &str,
    f: &crate::transport::NetFaults,
    timeout: Duration,
) -> Result<(), String> {
    put(addr, token, &format!("/fault?{}", f.to_query()), timeout)
}

/// Sets a storage node's disk faults through its fault RPC (blocking).
pub fn put_disk_faults(
    addr: std::net::SocketAddr,
    token: &str,
    f: &crate::chunk_store::DiskFaults,
    timeout: Duration,
) -> Result<(), String> {
    put(addr, token, &format!("/disk?{}", f.to_query()), timeout)
}

/// `PUT path_query` on a node's fault RPC with the cluster token (blocking).
pub fn put(
    addr: std::net::SocketAddr,
    token: &str,
    path_query: &str,
    timeout: Duration,
) -> Result<(), String> {
    let (code, body) = request(
        addr,
        &format!("PUT {path_query} HTTP/1.0\r\nx-t3fs-token: {token}"),
        timeout,
    )
    .map_err(|e| format!("{addr}: {e}"))?;
    if code == 200 {
        Ok(())
    } else {
        Err(format!("{addr}: {code} {}", body.trim()))
    }
}

/// Fetches `path` from a metrics endpoint (blocking, for the CLI): the status code and body.
pub fn get(
    addr: std::net::SocketAddr,
    path: &str,
    timeout: Duration,
) -> std::io::Result<(u16, String)> {
    request(addr, &format!("GET {path} HTTP/1.0"), timeout)
}

/// Sends `head` (request line and header lines) and returns the status code and body.
fn request(
    addr: std::net::SocketAddr,
    head: &str,
    timeout: Duration,
) -> std::io::Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    s.write_all(format!("{head}\r\n\r\n").as_bytes())?;
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

#[cfg(test)]
mod tests {
    use super::fault_rpc;

    /// A node not started for testing has no fault-injection endpoint, whatever the request
    /// carries (before, every node served it behind the token alone).
    #[test]
    fn without_fault_injection_the_fault_paths_are_absent() {
        let req = "PUT /disk?hang=1 HTTP/1.0\r\nx-t3fs-token: secret\r\n\r\n";
        for path in [
            "/disk?hang=1",
            "/fault?loss=1",
            "/clock?offset_ns=5",
            "/kv?unknown=1",
        ] {
            let (code, body) = fault_rpc(None, "PUT", path, req);
            assert_eq!(code, "404 Not Found", "{path}");
            assert!(body.contains("fault injection is off"), "{body}");
        }
    }
}
