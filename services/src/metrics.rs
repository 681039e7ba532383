//! The metrics endpoint of a service: a minimal HTTP/1.0 server on the `[node] metrics`
//! address answering `GET /metrics` (Prometheus text), `GET /ready` (200 once the node serves,
//! 503 before: the readiness signal `t3fs cluster up` waits on) and `GET /status` (the node's
//! status text; on the primary mgmtd, the cluster's nodes and chains). On a node started with
//! fault injection it also answers the fault control RPC: `PUT /fault?QUERY` replaces the node's
//! network faults (the transport's fault layer, `transport::NetFaults` query syntax) and
//! `GET /fault` reads them; on a storage node `PUT /disk?QUERY` and `GET /disk` do the same for
//! its targets' disk faults (`chunk_store::DiskFaults`), and `PUT /clock?QUERY`/`GET /clock` the
//! offset and drift of the time its machine reads (`node::clock::ClockFaults`); on the kv node
//! `PUT /kv?QUERY`/`GET /kv` the KV service's faults (`kv_faults::KvFaults`).
//!
//! Access: `/status` and the fault RPC need the cluster token in an `x-t3fs-token` header (403
//! otherwise; [`get_authed`] sends it): the status text names every node, address and chain of
//! the cluster, which is the map an attacker on the host would want. `/metrics` and `/ready`
//! stay open, because scrapers and `cluster up`'s readiness poll hold no token and they carry
//! only counters and one bit.
//!
//! Invariants: a request is read with a size and time limit and any malformed one gets a 400;
//! the server never blocks the node (it only reads the latest snapshot); a failing `accept`
//! (EMFILE/ENFILE: out of file descriptors) never spins: the loop pauses 10 ms, doubling to 1 s
//! while accepts keep failing, warns once per run of failures, and counts every failure
//! (`t3fs_metrics_accept_failed_total` on `/metrics`). Not here: producing the snapshot
//! (node/status.rs), TLS, keep-alive or any HTTP beyond one request per connection.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::fault_query::Resources;
use crate::node::Snapshot;

/// The first pause after a failed accept. Out of descriptors, every accept fails at once until
/// one is freed; retrying immediately would burn a core the node's own work needs.
const ACCEPT_PAUSE_FIRST: Duration = Duration::from_millis(10);
/// The longest pause: a freed descriptor is picked up within about a second.
const ACCEPT_PAUSE_MAX: Duration = Duration::from_secs(1);

/// Failed accepts of the endpoint.
#[derive(Debug, Default)]
struct AcceptErrors {
    /// Every failed accept.
    failed: AtomicU64,
    /// Runs of consecutive failures (one warning each).
    streaks: AtomicU64,
}

/// What every connection of one endpoint shares.
struct Endpoint {
    snapshot: Arc<Mutex<Snapshot>>,
    /// The cluster token `/status` and the fault RPC require.
    token: String,
    /// The fault RPC's resources; `None` on a node without fault injection.
    faults: Option<Resources>,
    accept: AcceptErrors,
}

/// Compares without an early exit, so the time taken does not tell how much of a guess matched.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Whether the request's header lines `req` carry `token` in `x-t3fs-token`.
fn carries_token(req: &str, token: &str) -> bool {
    let sent = req.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("x-t3fs-token")
            .then(|| v.trim().to_string())
    });
    sent.is_some_and(|t| same(t.as_bytes(), token.as_bytes()))
}

fn forbidden() -> (&'static str, String) {
    ("403 Forbidden", "the cluster token is required\n".into())
}

/// Whether `path` is one of the fault RPC's resources.
fn is_control(path: &str) -> bool {
    let r = path.split_once('?').map_or(path, |(r, _)| r);
    ["/fault", "/disk", "/clock", "/kv"].contains(&r)
}

/// The fault RPC's answer to `method` `path`; `authed`: the request carried the token.
fn fault_rpc(
    faults: Option<&Resources>,
    method: &str,
    path: &str,
    authed: bool,
) -> (&'static str, String) {
    let Some(faults) = faults else {
        return (
            "404 Not Found",
            "fault injection is off on this node (a node started for testing turns it on: \
             [node] fault_injection = true)\n"
                .into(),
        );
    };
    if !authed {
        return forbidden();
    }
    let (resource, query) = match path.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (path, None),
    };
    let Some((_, layer)) = faults.iter().find(|(p, _)| *p == resource) else {
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

/// The answer to the request `req` (request line and header lines).
fn answer(ep: &Endpoint, req: &str) -> (&'static str, String) {
    let mut first = req.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (first.next().unwrap_or(""), first.next());
    let authed = || carries_token(req, &ep.token);
    if let Some(p) = path.filter(|p| is_control(p)) {
        return fault_rpc(ep.faults.as_ref(), method, p, authed());
    }
    if method != "GET" || path.is_none() {
        return ("400 Bad Request", "bad request\n".to_string());
    }
    if path == Some("/status") && !authed() {
        return forbidden();
    }
    let s = ep.snapshot.lock().map(|s| s.clone()).unwrap_or_default();
    match path {
        Some("/metrics") => {
            let mut m = s.metrics;
            if !m.is_empty() && !m.ends_with('\n') {
                m.push('\n');
            }
            m.push_str(&format!(
                "t3fs_metrics_accept_failed_total {}\n",
                ep.accept.failed.load(Ordering::Relaxed)
            ));
            ("200 OK", m)
        }
        Some("/status") => ("200 OK", s.status),
        Some("/ready") if s.ready => ("200 OK", "ready\n".to_string()),
        Some("/ready") => ("503 Service Unavailable", "not ready\n".to_string()),
        _ => ("404 Not Found", "not found\n".to_string()),
    }
}

/// Serves `snapshot` on `listener` until the task is dropped; `/status` and the fault RPC
/// only to requests carrying the cluster `token`; with `faults` (a node started with fault
/// injection), the fault RPC on those resources.
pub async fn serve(
    listener: TcpListener,
    snapshot: Arc<Mutex<Snapshot>>,
    token: String,
    faults: Option<Resources>,
) {
    let ep = Arc::new(Endpoint {
        snapshot,
        token,
        faults,
        accept: AcceptErrors::default(),
    });
    let accept = || listener.accept();
    let on_conn = |(sock, _)| {
        tokio::spawn(connection(sock, ep.clone()));
    };
    accept_loop(accept, tokio::time::sleep, &ep.accept, on_conn).await;
}

/// Accepts with `accept` forever, handing each connection to `on_conn`. After a failed accept
/// it waits `pause(d)`, `d` doubling from [`ACCEPT_PAUSE_FIRST`] to [`ACCEPT_PAUSE_MAX`] while
/// accepts keep failing and starting over after one succeeds. Generic over both so a test can
/// fail accepts at will and watch the pauses without waiting them out.
async fn accept_loop<C, A, AF, P, PF>(
    mut accept: A,
    mut pause: P,
    errors: &AcceptErrors,
    mut on_conn: impl FnMut(C),
) where
    A: FnMut() -> AF,
    AF: Future<Output = std::io::Result<C>>,
    P: FnMut(Duration) -> PF,
    PF: Future<Output = ()>,
{
    let mut backoff: Option<Duration> = None;
    loop {
        match accept().await {
            Ok(c) => {
                if backoff.take().is_some() {
                    tracing::info!("metrics endpoint: accepting connections again");
                }
                on_conn(c);
            }
            Err(e) => {
                errors.failed.fetch_add(1, Ordering::Relaxed);
                let d = match backoff {
                    Some(d) => (d * 2).min(ACCEPT_PAUSE_MAX),
                    None => {
                        // Once per run of failures: out of descriptors, every accept fails and
                        // a warning each would flood the log.
                        errors.streaks.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(
                            error = %e,
                            "metrics endpoint: accept failed; retrying with backoff up to {:?} \
                             (t3fs_metrics_accept_failed_total counts the failures)",
                            ACCEPT_PAUSE_MAX
                        );
                        ACCEPT_PAUSE_FIRST
                    }
                };
                backoff = Some(d);
                pause(d).await;
            }
        }
    }
}

/// Reads one request from `sock` and answers it.
async fn connection(mut sock: tokio::net::TcpStream, ep: Arc<Endpoint>) {
    let mut buf = vec![0u8; 2048];
    let mut n = 0;
    let read = async {
        while n < buf.len() {
            let k = sock.read(&mut buf[n..]).await?;
            if k == 0 {
                break;
            }
            n += k;
            if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") || buf[..n].ends_with(b"\n\n") {
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
    let (code, body) = answer(&ep, &req);
    reply(&mut sock, code, &body).await;
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

/// Fetches `path` from a metrics endpoint without the token (blocking, for the CLI): the status
/// code and body. Enough for `/metrics` and `/ready`; `/status` needs [`get_authed`].
pub fn get(
    addr: std::net::SocketAddr,
    path: &str,
    timeout: Duration,
) -> std::io::Result<(u16, String)> {
    request(addr, &format!("GET {path} HTTP/1.0"), timeout)
}

/// Fetches `path` with the cluster `token` (blocking): what `/status` needs.
pub fn get_authed(
    addr: std::net::SocketAddr,
    token: &str,
    path: &str,
    timeout: Duration,
) -> std::io::Result<(u16, String)> {
    request(
        addr,
        &format!("GET {path} HTTP/1.0\r\nx-t3fs-token: {token}"),
        timeout,
    )
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
    use super::*;
    use std::cell::RefCell;
    use std::collections::VecDeque;
    use std::pin::Pin;

    /// A node not started for testing has no fault-injection endpoint, whatever the request
    /// carries (before, every node served it behind the token alone).
    #[test]
    fn without_fault_injection_the_fault_paths_are_absent() {
        for path in [
            "/disk?hang=1",
            "/fault?loss=1",
            "/clock?offset_ns=5",
            "/kv?unknown=1",
        ] {
            let (code, body) = fault_rpc(None, "PUT", path, true);
            assert_eq!(code, "404 Not Found", "{path}");
            assert!(body.contains("fault injection is off"), "{body}");
        }
    }

    /// Serves a snapshot on its own thread and runtime, as a node without fault injection.
    fn start(token: &str) -> std::net::SocketAddr {
        let (tx, rx) = std::sync::mpsc::channel();
        let token = token.to_string();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(l.local_addr().unwrap()).unwrap();
                let snap = Snapshot {
                    metrics: "t3fs_up 1".into(),
                    status: "primary node mgmtd-1 at 127.0.0.1:1\n".into(),
                    ready: true,
                    ..Default::default()
                };
                serve(l, Arc::new(Mutex::new(snap)), token, None).await;
            });
        });
        rx.recv().unwrap()
    }

    /// `/status` maps the cluster (nodes, addresses, chains): it answered anyone who could
    /// connect, while the fault RPC next to it needed the token. `/metrics` and `/ready` stay
    /// open for scrapers and `cluster up`'s readiness poll.
    #[test]
    fn status_needs_the_cluster_token_metrics_and_ready_do_not() {
        let addr = start("secret");
        let t = Duration::from_secs(5);
        assert_eq!(get(addr, "/status", t).unwrap().0, 403, "no token");
        assert_eq!(get_authed(addr, "wrong", "/status", t).unwrap().0, 403);
        assert_eq!(get_authed(addr, "", "/status", t).unwrap().0, 403);
        let (code, body) = get_authed(addr, "secret", "/status", t).unwrap();
        assert_eq!(
            (code, body.as_str()),
            (200, "primary node mgmtd-1 at 127.0.0.1:1\n")
        );
        let (code, body) = get(addr, "/metrics", t).unwrap();
        assert_eq!(code, 200);
        assert_eq!(body, "t3fs_up 1\nt3fs_metrics_accept_failed_total 0\n");
        assert_eq!(get(addr, "/ready", t).unwrap().0, 200);
        assert_eq!(get_authed(addr, "secret", "/nothing", t).unwrap().0, 404);
        assert_eq!(get_authed(addr, "secret", "/fault", t).unwrap().0, 404);
    }

    #[derive(Debug, PartialEq)]
    enum Ev {
        Failed,
        Accepted(u32),
        Paused(u128),
    }

    /// Out of descriptors, `accept` fails at once every time; the loop used to `continue`
    /// straight into the next accept and spin a core. It must pause after each failure, 10 ms
    /// doubling to 1 s, start over after a success, and warn once per run of failures.
    /// Virtual pauses (recorded, not slept), so nothing here depends on the clock.
    #[tokio::test(flavor = "current_thread")]
    async fn a_failing_accept_backs_off_doubling_and_starts_over_after_a_success() {
        let emfile = || Err(std::io::Error::from_raw_os_error(libc::EMFILE));
        let mut script: VecDeque<std::io::Result<u32>> = VecDeque::new();
        script.extend((0..12).map(|_| emfile()));
        script.push_back(Ok(7));
        script.extend((0..3).map(|_| emfile()));
        let script = RefCell::new(script);
        let log = RefCell::new(Vec::new());
        let done = tokio::sync::Notify::new();
        type Accepting = Pin<Box<dyn Future<Output = std::io::Result<u32>>>>;
        let accept = || -> Accepting {
            match script.borrow_mut().pop_front() {
                Some(r) => {
                    log.borrow_mut().push(match &r {
                        Ok(c) => Ev::Accepted(*c),
                        Err(_) => Ev::Failed,
                    });
                    Box::pin(std::future::ready(r))
                }
                None => {
                    done.notify_one();
                    Box::pin(std::future::pending())
                }
            }
        };
        let pause = |d: Duration| {
            log.borrow_mut().push(Ev::Paused(d.as_millis()));
            std::future::ready(())
        };
        let errors = AcceptErrors::default();
        tokio::select! {
            _ = accept_loop(accept, pause, &errors, |c| log.borrow_mut().push(Ev::Accepted(c + 100))) => {
                unreachable!("the accept loop never ends")
            }
            _ = done.notified() => {}
        }
        let mut want = Vec::new();
        for ms in [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000, 1000, 1000] {
            want.extend([Ev::Failed, Ev::Paused(ms)]);
        }
        want.extend([Ev::Accepted(7), Ev::Accepted(107)]);
        for ms in [10, 20, 40] {
            want.extend([Ev::Failed, Ev::Paused(ms)]);
        }
        assert_eq!(log.into_inner(), want);
        // 16 accepts spread over 6.34 s of pauses, where the old loop made them back to back.
        assert_eq!(errors.failed.load(Ordering::Relaxed), 15);
        assert_eq!(
            errors.streaks.load(Ordering::Relaxed),
            2,
            "one warning per run"
        );
    }
}
