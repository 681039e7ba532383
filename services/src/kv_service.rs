//! The `kv` role: serves the embedded persistent engine ([`crate::wal_kv`]) to every node of a
//! one-host cluster over the transport. Each [`KvReq`] runs against a shared handle of the engine:
//! reads on the runtime, commits appended on the runtime and made durable by one syncer thread
//! (commits from many callers share one WAL fsync: group commit; `kv_commits.rs`)
//! and is answered with a [`KvReply`] carrying the same id.
//!
//! Faults a real run injects (unavailability, spurious conflicts, unknown commits) come from
//! [`crate::kv_faults`], set through the kv node's control endpoint.
//!
//! Invariants: a reply is sent only after the engine answered (a commit reply means durable);
//! a request that cannot be decoded is dropped and counted, never answered. At most
//! [`MAX_IN_FLIGHT`] requests are being executed or answered at once: the next frame is taken
//! from the transport only once a slot is free, so a flood of requests fills the transport's
//! bounded inbound channel, which stops reading sockets and pushes back through TCP onto the
//! senders, instead of piling up tasks and memory here. That wait cannot deadlock the cluster:
//! the nodes send KV requests with `try_send` (node/host.rs), so none blocks its own reading on
//! this service, and a reply waits for room in its peer's queue at most
//! [`crate::node::host::KV_TIMEOUT`] (past it the caller has given up), so a gone peer cannot
//! hold slots forever.
//!
//! Not here: retries and timeouts (the caller's driver answers an unanswered step with
//! `Unavailable` or `CommitUnknown`), fairness between peers (one peer's flood takes slots from
//! the others), a `Busy` answer (the protocol has none; a full service just reads slower), and
//! the remote side of the contract ([`RemoteKv`], below).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Semaphore};

use t3fs_core::ids::NodeId;
use t3fs_core::kv::{
    self, CommitReq, Key, KeyRange, KvDone, KvEngine, KvError, KvOp, KvVersion, Value,
};
use t3fs_core::msg::kv::{KvReply, KvReq};
use t3fs_core::msg::Msg;

use crate::kv_commits::Commits;
use crate::kv_faults::{KvFate, KvFaultLayer};
use crate::transport::{Inbound, Transport, TransportConfig};
use crate::wal_kv::SharedWalKv;

/// Requests executing or being answered at once, at most. Commits serialize on the engine's one
/// WAL, so more in flight buys no throughput, only memory (each holds its decoded request, up to
/// a frame, and a task); 256 is well above what one host's mgmtd and meta nodes keep
/// outstanding, so the bound only bites on a flood.
pub const MAX_IN_FLIGHT: usize = 256;

/// How long a reply waits for room in its peer's queue: past the caller's own timeout the
/// reply is useless, and the wait holds one of the [`MAX_IN_FLIGHT`] slots.
const REPLY_WAIT: Duration = crate::node::host::KV_TIMEOUT;

/// Counters of the KV service.
#[derive(Debug, Default)]
pub struct KvServiceCounters {
    /// Requests answered (whether or not the reply could be sent).
    pub answered: AtomicU64,
    /// Frames that were not KV requests (dropped).
    pub dropped: AtomicU64,
    /// Replies not sent: no route to the peer, or its queue stayed full for `REPLY_WAIT`.
    pub unsent: AtomicU64,
}

/// Serves `engine` to every peer of `transport` until `inbound` closes, obeying `faults`, with at
/// most [`MAX_IN_FLIGHT`] requests in flight.
pub async fn serve(
    engine: SharedWalKv,
    transport: Transport,
    inbound: mpsc::Receiver<Inbound>,
    counters: Arc<KvServiceCounters>,
    faults: Arc<KvFaultLayer>,
) {
    let commits = match Commits::start(engine.clone()) {
        Ok(c) => c,
        Err(e) => {
            // Ends the serving task, which the kv node reports as its failure.
            tracing::error!("kv: cannot start the syncer thread: {e}");
            return;
        }
    };
    let exec = move |op| run(engine.clone(), commits.clone(), op);
    serve_bounded(transport, inbound, counters, faults, MAX_IN_FLIGHT, exec).await;
}

/// Runs `op` on the engine.
async fn run(mut e: SharedWalKv, commits: Commits, op: KvOp) -> Result<KvDone, KvError> {
    match op {
        // A read holds the engine's lock only for its lookups (a commit drops it while it
        // syncs): run it here rather than hand it to another thread and back, which costs a
        // metadata call more than the read.
        KvOp::Read { .. } => kv::execute(&mut e, op),
        KvOp::Commit(req) => commits.commit(req).await.map(KvDone::Committed),
    }
}

/// [`serve`] with the bound `limit` and the executor `exec` as parameters, so a test can hold
/// requests in an executor it controls and count how many run at once.
async fn serve_bounded<X, F>(
    transport: Transport,
    mut inbound: mpsc::Receiver<Inbound>,
    counters: Arc<KvServiceCounters>,
    faults: Arc<KvFaultLayer>,
    limit: usize,
    exec: X,
) where
    X: Fn(KvOp) -> F,
    F: Future<Output = Result<KvDone, KvError>> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(limit));
    let mut jitter = crate::jitter::Jitter::new();
    loop {
        // The slot comes before the frame: while none is free, frames stay in the transport's
        // channel and, once it is full, in the senders' sockets (backpressure).
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return; // never closed
        };
        let Some(mut inb) = inbound.recv().await else {
            return;
        };
        // The whole metadata store: only meta, mgmtd and the operator may ask (the transport
        // counts `refused_role` when another role does).
        let req = transport.decode(&mut inb).ok();
        let req = req.filter(|m| transport.admit(&inb, m));
        let Some(Msg::KvReq(KvReq { id, op })) = req else {
            counters.dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let fate = faults.fate(&op, [jitter.bits(), jitter.bits(), jitter.bits()]);
        let running = matches!(fate, KvFate::Run | KvFate::UnknownApplied).then(|| exec(op));
        let (t, c, from) = (transport.clone(), counters.clone(), inb.from);
        tokio::spawn(async move {
            let _slot = slot;
            let result = match running {
                None => Err(match fate {
                    KvFate::Conflict => KvError::Conflict,
                    KvFate::UnknownDropped => KvError::CommitUnknown,
                    _ => KvError::Unavailable,
                }),
                Some(r) => {
                    let r = r.await;
                    if fate == KvFate::UnknownApplied {
                        Err(KvError::CommitUnknown)
                    } else {
                        r
                    }
                }
            };
            let reply = Msg::KvReply(KvReply { id, result });
            let sent = tokio::time::timeout(REPLY_WAIT, t.send(from, reply)).await;
            if !matches!(sent, Ok(Ok(()))) {
                c.unsent.fetch_add(1, Ordering::Relaxed);
            }
            c.answered.fetch_add(1, Ordering::Relaxed);
        });
    }
}

/// A KV engine reached over the transport: the remote side of the KV contract, for tools and
/// tests that own an engine directly (machines go through the node driver instead). Blocking:
/// it runs its own small runtime, so call it from a plain thread, not from async code.
pub struct RemoteKv {
    rt: tokio::runtime::Runtime,
    transport: Transport,
    inbound: mpsc::Receiver<Inbound>,
    kv_node: NodeId,
    next: u64,
    timeout: Duration,
}

impl RemoteKv {
    /// Connects as node `me` to the kv service `kv_node` at `addr` with `token`.
    pub fn connect(
        me: NodeId,
        kv_node: NodeId,
        addr: SocketAddr,
        token: &str,
    ) -> std::io::Result<Self> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        // Inside the runtime: the transport spawns its peer tasks on it (they run whenever a
        // call blocks on the runtime).
        let (transport, inbound) = rt.block_on(async {
            let (t, inbound) = Transport::start(TransportConfig::new(me, None, token)).await?;
            t.set_addr(kv_node, addr);
            Ok::<_, std::io::Error>((t, inbound))
        })?;
        Ok(Self {
            rt,
            transport,
            inbound,
            kv_node,
            next: 0,
            timeout: Duration::from_secs(10),
        })
    }

    fn run(&mut self, op: KvOp) -> Result<KvDone, KvError> {
        let commit = matches!(op, KvOp::Commit(_));
        self.next += 1;
        let id = self.next;
        let msg = Msg::KvReq(KvReq { id, op });
        let (t, node, timeout) = (self.transport.clone(), self.kv_node, self.timeout);
        let inbound = &mut self.inbound;
        let lost = if commit {
            KvError::CommitUnknown
        } else {
            KvError::Unavailable
        };
        self.rt.block_on(async move {
            if t.send(node, msg).await.is_err() {
                return Err(KvError::Unavailable);
            }
            let wait = async {
                while let Some(mut inb) = inbound.recv().await {
                    if let Ok(Msg::KvReply(r)) = t.decode(&mut inb) {
                        if r.id == id {
                            return r.result;
                        }
                    }
                }
                Err(lost)
            };
            tokio::time::timeout(timeout, wait)
                .await
                .unwrap_or(Err(lost))
        })
    }
}

impl Drop for RemoteKv {
    fn drop(&mut self) {
        let t = self.transport.clone();
        self.rt.block_on(async move { t.shutdown().await });
    }
}

impl KvEngine for RemoteKv {
    fn read_version(&mut self) -> Result<KvVersion, KvError> {
        match self.run(KvOp::Read {
            at: None,
            keys: Vec::new(),
            ranges: Vec::new(),
        })? {
            KvDone::Read { version, .. } => Ok(version),
            KvDone::Committed(_) => Err(KvError::Unavailable),
        }
    }

    fn get(&mut self, at: KvVersion, key: &[u8]) -> Result<Option<Value>, KvError> {
        let op = KvOp::Read {
            at: Some(at),
            keys: vec![key.to_vec()],
            ranges: Vec::new(),
        };
        match self.run(op)? {
            KvDone::Read { mut values, .. } if values.len() == 1 => Ok(values.remove(0)),
            _ => Err(KvError::Unavailable),
        }
    }

    fn range(
        &mut self,
        at: KvVersion,
        range: &KeyRange,
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, KvError> {
        let limit = u32::try_from(limit).unwrap_or(u32::MAX);
        let op = KvOp::Read {
            at: Some(at),
            keys: Vec::new(),
            ranges: vec![(range.clone(), limit)],
        };
        match self.run(op)? {
            KvDone::Read { mut ranges, .. } if ranges.len() == 1 => Ok(ranges.remove(0)),
            _ => Err(KvError::Unavailable),
        }
    }

    fn commit(&mut self, req: CommitReq) -> Result<KvVersion, KvError> {
        match self.run(KvOp::Commit(req))? {
            KvDone::Committed(v) => Ok(v),
            KvDone::Read { .. } => Err(KvError::CommitUnknown),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    /// Starts a kv service on its own thread and runtime; returns its address.
    fn start_service(dir: &std::path::Path) -> SocketAddr {
        let engine = crate::wal_kv::WalKv::open(dir).unwrap().into_shared();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listen = Some("127.0.0.1:0".parse().unwrap());
                let (t, inbound) = Transport::start(TransportConfig::new(NodeId(9), listen, "tok"))
                    .await
                    .unwrap();
                tx.send(t.local_addr().unwrap()).unwrap();
                serve(engine, t, inbound, Arc::default(), Arc::default()).await;
            });
        });
        rx.recv().unwrap()
    }

    #[test]
    fn remote_kv_passes_the_kv_suite() {
        static N: AtomicU32 = AtomicU32::new(0);
        let root = std::env::temp_dir().join(format!("t3fs-remote-kv-{}", std::process::id()));
        t3fs_core::testing::kv_suite(|| {
            let k = N.fetch_add(1, Ordering::Relaxed);
            let dir = root.join(k.to_string());
            let _ = std::fs::remove_dir_all(&dir);
            let addr = start_service(&dir);
            RemoteKv::connect(NodeId(100 + u64::from(k)), NodeId(9), addr, "tok").unwrap()
        });
        let _ = std::fs::remove_dir_all(&root);
    }

    /// Waits (polling) until `cond` holds; panics naming `what` if it never does.
    async fn until(what: &str, cond: impl Fn() -> bool) {
        for _ in 0..20_000 {
            if cond() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("never: {what}");
    }

    /// Every request spawned a task at once, unbounded, so a flood of KvReq frames grew tasks
    /// and memory without limit. With requests held in a blocked executor, no more than the
    /// bound may run at once, the rest must wait in the transport (not in tasks here), and
    /// every one must be answered once the executor moves.
    #[tokio::test(flavor = "current_thread")]
    async fn a_flood_of_requests_runs_at_most_the_bound_at_once_and_all_are_answered() {
        const LIMIT: usize = 8;
        const N: u64 = 200;
        let listen = Some("127.0.0.1:0".parse().unwrap());
        let (kv_t, kv_in) = Transport::start(TransportConfig::new(NodeId(9), listen, "tok"))
            .await
            .unwrap();
        let (client, mut replies) =
            Transport::start(TransportConfig::new(NodeId(100), None, "tok"))
                .await
                .unwrap();
        client.set_addr(NodeId(9), kv_t.local_addr().unwrap());

        let running = Arc::new(AtomicU64::new(0));
        let most = Arc::new(AtomicU64::new(0));
        let gate = Arc::new(Semaphore::new(0));
        let exec = {
            let (running, most, gate) = (running.clone(), most.clone(), gate.clone());
            move |_op: KvOp| {
                let (running, most, gate) = (running.clone(), most.clone(), gate.clone());
                async move {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    gate.acquire().await.unwrap().forget();
                    running.fetch_sub(1, Ordering::SeqCst);
                    Err(KvError::Unavailable)
                }
            }
        };
        let counters = Arc::new(KvServiceCounters::default());
        tokio::spawn(serve_bounded(
            kv_t.clone(),
            kv_in,
            counters.clone(),
            Arc::default(),
            LIMIT,
            exec,
        ));

        for id in 1..=N {
            let op = KvOp::Read {
                at: None,
                keys: vec![id.to_le_bytes().to_vec()],
                ranges: Vec::new(),
            };
            client
                .send(NodeId(9), Msg::KvReq(KvReq { id, op }))
                .await
                .unwrap();
        }
        // Every frame has reached the kv node, and the bound is full ...
        until("all frames in", || kv_t.counters().frames_in >= N).await;
        until("the bound full", || {
            running.load(Ordering::SeqCst) >= LIMIT as u64
        })
        .await;
        // ... then every task that could run has had its turns: an unbounded service admits
        // the whole flood here.
        for _ in 0..1_000 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            most.load(Ordering::SeqCst),
            LIMIT as u64,
            "ran at once, at most"
        );
        assert_eq!(counters.answered.load(Ordering::Relaxed), 0);

        gate.add_permits(N as usize);
        let mut ids = std::collections::BTreeSet::new();
        while (ids.len() as u64) < N {
            let mut inb = tokio::time::timeout(Duration::from_secs(20), replies.recv())
                .await
                .expect("every request is answered")
                .unwrap();
            match client.decode(&mut inb) {
                Ok(Msg::KvReply(r)) => {
                    assert_eq!(r.result, Err(KvError::Unavailable));
                    assert!(ids.insert(r.id), "one reply per request");
                }
                other => panic!("not a KV reply: {other:?}"),
            }
        }
        assert_eq!(ids, (1..=N).collect());
        assert_eq!(most.load(Ordering::SeqCst), LIMIT as u64);
        until("all counted", || {
            counters.answered.load(Ordering::Relaxed) == N
        })
        .await;
        assert_eq!(counters.unsent.load(Ordering::Relaxed), 0);
        client.shutdown().await;
        kv_t.shutdown().await;
    }
}
