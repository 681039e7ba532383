//! The tokio driver: runs one node's machine through the shared node runtime
//! (`t3fs_core::node::step`) with real I/O.
//!
//! One task owns the [`Process`] and its tables and waits on six sources in turn (`sources.rs`):
//! inbound frames from the transport (decoded with the core codec, dropped unless the sender's
//! role may send them (`transport::policy`), a client's namespace requests set to act for its
//! credential's user; KV replies and address lists are the driver's own), loopback messages, timer fires, I/O completions, local calls (the
//! native client, admin), and a status tick (`T3FS_HOP_LOG` adds a line per input, `hops.rs`). Each input is one `step`; the actions go through
//! [`host::RealHost`]. Chunk stores run on their own threads and KV steps leave the runtime (a
//! remote `kv` service, or the blocking pool), so nothing here blocks, unless [`NodeEnv`] asks
//! for inline I/O (a driver under turmoil).
//!
//! Time: a machine's `now` is the system clock as nanoseconds since the Unix epoch, the cluster-
//! wide epoch of `t3fs_core::time`, shifted by the node's clock fault when a run sets one
//! (`clock.rs`); under a simulation, the runtime's clock from a given epoch.
//!
//! Shutdown ([`NodeHandle::shutdown`], SIGTERM in the services): stop taking input, let the chunk
//! I/O in flight complete (bounded), then close the store threads, which drain and exit. Not
//! here: building the process from a config (`serve.rs`), the transport and stores themselves.

pub mod clock;
pub mod hops;
pub mod host;
mod sources;
pub mod stats;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot};

use t3fs_core::chunk::{ChunkError, ChunkStore};
use t3fs_core::ids::{IoId, NodeId, RequestId, TargetId};
use t3fs_core::machine::IoResult;
use t3fs_core::msg::Msg;
use t3fs_core::node::{self, AnyCall, AnyRet, AnyTimer, Input, IoDest, Process, Tables};
use t3fs_core::time::Instant;

use crate::chunk_store::{StoreHandle, StoreThread};
use crate::transport::{Inbound, Transport};

use crate::jitter::Jitter;
pub use host::KvBackend;
use host::RealHost;
use sources::{Event, Sources};
use stats::IoStats;

/// The system clock as a machine instant (ns since the Unix epoch).
pub fn now() -> Instant {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Instant(d.as_nanos() as u64)
}

/// What a node is made of.
pub struct NodeParts {
    /// Its id.
    pub id: NodeId,
    /// Its name in logs (`storage-1`).
    pub name: String,
    /// The machine, constructed from durable state.
    pub process: Process,
    /// Chunk stores by target (storage nodes).
    pub stores: BTreeMap<TargetId, Box<dyn ChunkStore + Send>>,
    /// Where KV steps go.
    pub kv: KvBackend,
    /// The transport, started.
    pub transport: Transport,
    /// Its inbound frames.
    pub inbound: mpsc::Receiver<Inbound>,
    /// The clock fault its machine reads time through.
    pub clock: Arc<clock::ClockLayer>,
    /// How it runs what is not its machine.
    pub env: NodeEnv,
}

/// How a node runs the work around its machine. The default is a service's: timer jitter from
/// the OS, chunk stores on threads of their own, KV engines on the blocking pool. A driver under
/// a one-thread simulation (turmoil) seeds its jitter and runs store and KV operations inline
/// on its own task, so that a run is a function of its seed; its clock is the layer's
/// [`clock::TimeSource::Runtime`]. Inline I/O blocks the node's task for the operation's length.
#[derive(Clone, Copy, Debug, Default)]
pub struct NodeEnv {
    /// Seed of the timer jitter (`None`: drawn from the OS).
    pub jitter_seed: Option<u64>,
    /// Run chunk and KV operations on the node's task.
    pub inline_io: bool,
    /// A chunk I/O unanswered this long is answered as failed (`None`: never).
    pub chunk_io_deadline: Option<Duration>,
}

/// A snapshot of a running node, refreshed every status tick, for metrics and status.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Prometheus text of the machine, I/O and transport counters.
    pub metrics: String,
    /// Human-readable status (mgmtd: nodes, offsets, chains in chain notation).
    pub status: String,
    /// The node is serving (mgmtd: primary with routing loaded; others: started).
    pub ready: bool,
    /// A client's routing info (the native client resolves file layouts with it).
    pub routing: Option<t3fs_core::routing::RoutingInfo>,
}

enum Cmd {
    Call(AnyCall, oneshot::Sender<AnyRet>),
    Shutdown(oneshot::Sender<()>),
}

/// Handle on a running node.
#[derive(Clone)]
pub struct NodeHandle {
    cmds: mpsc::Sender<Cmd>,
    /// The latest snapshot.
    pub snapshot: Arc<Mutex<Snapshot>>,
}

/// The node stopped before answering.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct Stopped;

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("node stopped")
    }
}

impl std::error::Error for Stopped {}

impl NodeHandle {
    /// Runs a local call (a client call or an mgmtd admin verb) and waits for its answer.
    pub async fn call(&self, call: AnyCall) -> Result<AnyRet, Stopped> {
        self.submit(call).await?.await.map_err(|_| Stopped)
    }

    /// Hands a local call to the node (waiting only for room in its command queue) and returns
    /// the receiver of its answer, so that many calls can be in flight at once.
    pub async fn submit(&self, call: AnyCall) -> Result<oneshot::Receiver<AnyRet>, Stopped> {
        let (tx, rx) = oneshot::channel();
        self.cmds
            .send(Cmd::Call(call, tx))
            .await
            .map_err(|_| Stopped)?;
        Ok(rx)
    }

    /// Stops the node gracefully and waits until its stores are closed.
    pub async fn shutdown(&self) {
        let (tx, rx) = oneshot::channel();
        if self.cmds.send(Cmd::Shutdown(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }
}

/// Starts `parts` on the current tokio runtime. The returned future of the task resolves with
/// the halt reason, if the machine halted.
pub fn spawn(
    parts: NodeParts,
) -> std::io::Result<(NodeHandle, tokio::task::JoinHandle<Option<String>>)> {
    let (io_tx, io_rx) = mpsc::unbounded_channel();
    let mut stores = BTreeMap::new();
    for (t, s) in parts.stores {
        let tx = io_tx.clone();
        let done = Box::new(move |id, r| {
            let _ = tx.send((id, IoResult::Chunk(r)));
        });
        let h = if parts.env.inline_io {
            StoreHandle::inline(s, done)
        } else {
            StoreThread::spawn(&format!("store-{t}"), s, done)?
        };
        stores.insert(t, h);
    }
    let (cmd_tx, cmd_rx) = mpsc::channel(1024);
    let snapshot = Arc::new(Mutex::new(Snapshot::default()));
    let (timer_tx, timer_rx) = mpsc::unbounded_channel();
    let (loop_tx, loop_rx) = mpsc::unbounded_channel();
    let tick = tokio::time::interval(Duration::from_millis(500));
    let sources = Sources::new(parts.inbound, loop_rx, timer_rx, io_rx, cmd_rx, tick);
    let hops = hops::HopLog::from_env(&parts.name);
    let driver = Driver {
        id: parts.id,
        name: parts.name,
        process: parts.process,
        tables: Tables::default(),
        stores,
        kv: parts.kv,
        transport: parts.transport,
        jitter: parts
            .env
            .jitter_seed
            .map_or_else(Jitter::new, Jitter::seeded),
        inline_io: parts.env.inline_io,
        chunk_io_deadline: parts.env.chunk_io_deadline,
        stats: IoStats::new(),
        hops,
        io_tx,
        timer_tx,
        loop_tx,
        calls: BTreeMap::new(),
        next_req: 0,
        published_routing: 0,
        snapshot: snapshot.clone(),
        malformed: 0,
        clock: parts.clock,
    };
    let join = tokio::spawn(driver.run(sources));
    Ok((
        NodeHandle {
            cmds: cmd_tx,
            snapshot,
        },
        join,
    ))
}

struct Driver {
    id: NodeId,
    name: String,
    process: Process,
    tables: Tables,
    stores: BTreeMap<TargetId, StoreHandle>,
    kv: KvBackend,
    transport: Transport,
    jitter: Jitter,
    inline_io: bool,
    chunk_io_deadline: Option<Duration>,
    stats: IoStats,
    /// The hop log, when `T3FS_HOP_LOG` asks for one (`hops.rs`).
    hops: Option<hops::HopLog>,
    io_tx: mpsc::UnboundedSender<(IoId, IoResult)>,
    timer_tx: mpsc::UnboundedSender<(AnyTimer, u64)>,
    loop_tx: mpsc::UnboundedSender<Msg>,
    calls: BTreeMap<RequestId, oneshot::Sender<AnyRet>>,
    next_req: u64,
    snapshot: Arc<Mutex<Snapshot>>,
    malformed: u64,
    clock: Arc<clock::ClockLayer>,
    /// The routing version last published: a client's routing is published as soon as its
    /// version changes (layout lookups need it current); everything else on the tick.
    published_routing: u64,
}

impl Driver {
    async fn run(mut self, mut src: Sources) -> Option<String> {
        if let Some(h) = self.step(Input::Start) {
            return Some(h);
        }
        let done = loop {
            let input = match src.next().await {
                Event::Frame(inb) => match self.on_frame(inb) {
                    Some(i) => i,
                    None => continue,
                },
                Event::Loopback(msg) => Input::Recv(self.id, msg),
                Event::Timer(t, gen) => {
                    if !self.tables.timers.fire(t, gen) {
                        continue;
                    }
                    Input::Timer(t)
                }
                Event::Io(id, r) => match self.on_io(id, r) {
                    Some(i) => i,
                    None => continue,
                },
                Event::Cmd(Some(Cmd::Call(call, tx))) => {
                    self.next_req += 1;
                    let req = RequestId(self.next_req);
                    self.calls.insert(req, tx);
                    Input::Call(req, call)
                }
                Event::Cmd(Some(Cmd::Shutdown(tx))) => break Some(tx),
                Event::Cmd(None) => break None,
                Event::Tick => {
                    self.publish();
                    if let Some(h) = &mut self.hops {
                        h.flush();
                    }
                    for late in self.expire_chunk_io() {
                        if let Some(h) = self.step(late) {
                            tracing::error!(node = %self.name, "halted: {h}");
                            self.close(&mut src.io).await;
                            return Some(h);
                        }
                    }
                    continue;
                }
            };
            self.log_hop(&input);
            let ran = self.step(input);
            self.publish_routing();
            if let Some(h) = ran {
                tracing::error!(node = %self.name, "halted: {h}");
                self.close(&mut src.io).await;
                return Some(h);
            }
        };
        self.close(&mut src.io).await;
        if let Some(tx) = done {
            let _ = tx.send(());
        }
        None
    }

    /// Chunk I/Os past the deadline, each answered `Failed` now: the machine takes the target
    /// OFFLINE (so heartbeats stop claiming it and the chain fails over) and releases what the
    /// I/O held. The store's answer, if it ever comes, finds no in-flight record and is dropped.
    fn expire_chunk_io(&mut self) -> Vec<Input> {
        let Some(deadline) = self.chunk_io_deadline else {
            return Vec::new();
        };
        let mut late = Vec::new();
        for (id, kind) in self.stats.older_than(deadline) {
            let Some(IoDest::Chunk(target)) = self.tables.inflight.get(id) else {
                continue;
            };
            self.tables.inflight.complete(id);
            self.stats.forget(id);
            tracing::error!(
                node = %self.name, %target, io = id.0,
                "{kind} unanswered for {deadline:?}: the target's store is failed"
            );
            late.push(Input::IoDone(id, IoResult::Chunk(Err(ChunkError::Failed))));
        }
        late
    }

    /// A message or a local call in the hop log (completions are logged in `on_io`).
    fn log_hop(&mut self, input: &Input) {
        let Some(h) = &mut self.hops else { return };
        match input {
            Input::Recv(from, msg) => h.line(format_args!("recv from {from}: {}", msg.name())),
            Input::Call(..) => h.line(format_args!("call")),
            _ => {}
        }
    }

    /// An I/O completion, unless it was answered already (a KV timeout raced its reply).
    fn on_io(&mut self, id: IoId, r: IoResult) -> Option<Input> {
        let dest = self.tables.inflight.complete(id)?;
        let kind = self.stats.completed(id);
        if let (Some(h), IoDest::Chunk(target), Some(kind)) = (&mut self.hops, &dest, kind) {
            h.line(format_args!("disk {target} done: {kind}"));
        }
        if let IoResult::Chunk(Err(e @ (ChunkError::Failed | ChunkError::Corrupt))) = &r {
            // The machine takes the target OFFLINE for good: say why in the log.
            tracing::error!(node = %self.name, io = ?dest, "chunk I/O answered {e:?}");
        }
        Some(Input::IoDone(id, r))
    }

    /// Decodes an inbound frame; driver-level messages are handled here.
    fn on_frame(&mut self, mut inb: Inbound) -> Option<Input> {
        let msg = match self.transport.decode(&mut inb) {
            Ok(m) => m,
            Err(e) => {
                self.malformed += 1;
                tracing::debug!(node = %self.name, from = %inb.from, "malformed frame dropped: {e}");
                return None;
            }
        };
        if !self.transport.admit(&inb, &msg) {
            return None;
        }
        match msg {
            Msg::MetaReq(mut req) => {
                // Meta acts for the credential's user unless the sender may act for users.
                req.user = crate::transport::policy::user_of(inb.id, req.user);
                Some(Input::Recv(inb.from, Msg::MetaReq(req)))
            }
            Msg::KvReply(r) => {
                let _ = self.io_tx.send((IoId(r.id), IoResult::Kv(r.result)));
                None
            }
            Msg::NodeAddrs(a) => {
                for (node, addr) in &a.addrs {
                    if let Ok(sa) = addr.parse() {
                        self.transport.set_addr(*node, sa);
                    }
                }
                None
            }
            msg => Some(Input::Recv(inb.from, msg)),
        }
    }

    /// One step; returns the halt reason if the machine halted.
    fn step(&mut self, input: Input) -> Option<String> {
        let mut host = RealHost {
            me: self.id,
            transport: &self.transport,
            loopback: &self.loop_tx,
            timers: &self.timer_tx,
            io: &self.io_tx,
            stores: &self.stores,
            kv: &self.kv,
            jitter: &mut self.jitter,
            inline_io: self.inline_io,
            stats: &mut self.stats,
            returns: Vec::new(),
            halted: None,
        };
        let now = self.clock.now();
        node::step(&mut self.process, &mut self.tables, &mut host, now, input);
        let RealHost {
            returns, halted, ..
        } = host;
        for (req, ret) in returns {
            if let Some(h) = &mut self.hops {
                h.line(format_args!("return"));
            }
            if let Some(tx) = self.calls.remove(&req) {
                let _ = tx.send(ret);
            }
        }
        halted.map(|h| format!("{h:?}"))
    }

    /// Lets chunk I/O in flight finish (bounded), then closes the stores.
    async fn close(&mut self, io_rx: &mut mpsc::UnboundedReceiver<(IoId, IoResult)>) {
        // Chunk I/O is drained (the store threads finish it anyway); KV requests are not
        // awaited, so that a node whose KV stopped first still stops at once.
        self.tables.inflight.forget_kv();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !self.tables.inflight.is_empty() {
            match tokio::time::timeout_at(deadline, io_rx.recv()).await {
                Ok(Some((id, _))) => {
                    self.tables.inflight.complete(id);
                }
                _ => break,
            }
        }
        for (_, s) in std::mem::take(&mut self.stores) {
            if s.is_inline() {
                s.shutdown();
            } else {
                tokio::task::spawn_blocking(move || s.shutdown()).await.ok();
            }
        }
        if let Some(h) = &mut self.hops {
            h.flush();
        }
        self.publish();
    }

    fn publish_routing(&mut self) {
        let Process::Client(c) = &self.process else {
            return;
        };
        if c.routing().version.0 != self.published_routing {
            self.published_routing = c.routing().version.0;
            if let Ok(mut s) = self.snapshot.lock() {
                s.routing = Some(c.routing().clone());
            }
        }
    }

    fn publish(&mut self) {
        let snap = status::snapshot(
            self.id,
            &self.process,
            &self.stats,
            &self.transport,
            self.malformed,
        );
        if let Ok(mut s) = self.snapshot.lock() {
            // The routing is publish_routing's, kept across ticks.
            let routing = s.routing.take();
            *s = snap;
            s.routing = routing;
        }
    }
}

mod status;
