//! The RDMA transport: the same frames, handle and guarantees as TCP ([`super::Transport`]),
//! carried over one reliable-connected queue pair per peer on a verbs device (hardware through
//! rdma-sys, or the software fabric). Control frames go by SEND/RECV into pre-posted slots
//! with credit-based flow control (`rdma::channel`); a frame with a bulk part (a chunk's
//! payload) moves one-sided between registered pools, pulled by the acceptor with RDMA READ or
//! pushed by it with RDMA WRITE (`link.rs`), as 3FS's storage service does for clients.
//!
//! A TCP transport runs underneath, as rdma_cm would: it authenticates peers with the token,
//! knows their addresses, and carries connection management (`ctl.rs`). A peer that does not
//! speak RDMA refuses, and gets its frames over that TCP connection instead.
//!
//! Connections: frames queued for a peer with no connection start one (the lower node id wins
//! when both dial at once); an offer not answered in `connect_timeout` is retried; a failed
//! work request or a protocol breach fails the connection, whose staged and in-flight frames
//! are lost (counted `dropped_write`), and the next queued frame starts a new one. So a peer's
//! death or a cut link surfaces as it does on TCP: frames lost in flight, the rest delivered
//! after a reconnect, the machines' retries covering the gap. A peer that restarts offers a
//! new connection, which replaces the old.
//!
//! Progress: one task polls every connection's completions and moves frames both ways; idle,
//! it sleeps until a send or the device's completion event wakes it (the software fabric has
//! events; the hardware provider does not yet, so there it backs off to a 2 ms poll).
//! Invariants of TCP hold: bounded queues (`queue_frames` per peer, `inbound_frames` in),
//! frames in order per connection, no panic on a peer's bytes.
//!
//! Not here: shared receive queues, completion channels, more than one queue pair per peer,
//! and zero-copy hand-off of pool memory to the storage engine.

mod link;
mod msg;
mod pool;
mod setup;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use t3fs_core::ids::NodeId;
use t3fs_core::msg::Msg;
use t3fs_core::wire::codec::DecodeError;
use tokio::sync::{mpsc, Notify};

use super::counters::{Counters, TransportCounters};
use super::faults::{send_faulted, Fate, FaultLayer, Faulted, NetFaults};
use super::rdma_ctl::Ctl;
use super::tcp::TcpTransport;
use super::{Frame, Inbound, SendError, TransportConfig};
use crate::rdma::channel::{Channel, ChannelConfig};
use crate::rdma::verbs::Verbs;
use link::{Io, Up};
use setup::{idle, tcp_loop};

/// How the RDMA transport runs (in [`TransportConfig::rdma`]).
#[derive(Clone)]
pub struct RdmaWire {
    /// The device.
    pub device: Arc<dyn Verbs>,
    /// Sizes of each connection: receive slots, slot bytes, and the registered pool (half for
    /// frames going out, half for frames coming in; a frame must fit a half).
    pub channel: ChannelConfig,
    /// How long an offer waits for its answer before it is made again.
    pub connect_timeout: Duration,
}

impl RdmaWire {
    /// A wire on `device` with the default sizes (64 slots of 64 KiB, an 8 MiB pool).
    pub fn new(device: Arc<dyn Verbs>) -> Self {
        Self {
            device,
            channel: ChannelConfig {
                slots: 64,
                slot_bytes: 64 << 10,
                bulk_bytes: 8 << 20,
            },
            connect_timeout: Duration::from_secs(2),
        }
    }
}

impl std::fmt::Debug for RdmaWire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdmaWire")
            .field("device", &self.device.name())
            .field("channel", &self.channel)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

/// Where a peer's connection stands.
enum State {
    /// None; a new offer may go at `retry_at`.
    Idle {
        retry_at: Instant,
    },
    /// Offered (`conn`), waiting for the answer.
    Dialing {
        ch: Box<Channel>,
        conn: u64,
        since: Instant,
    },
    Up(Box<Up>),
    /// The peer does not speak RDMA: frames go over TCP.
    Tcp,
}

struct Peer {
    node: NodeId,
    /// What the peer proved on the TCP connection its RDMA connection was set up over; frames
    /// that arrive over RDMA carry it.
    id: Mutex<Option<super::Identity>>,
    queue: Mutex<VecDeque<Frame>>,
    space: Notify,
    state: Mutex<State>,
}

struct Inner {
    me: NodeId,
    tcp: TcpTransport,
    wire: RdmaWire,
    queue_frames: usize,
    frame_max: usize,
    peers: Mutex<BTreeMap<NodeId, Arc<Peer>>>,
    inbound: mpsc::Sender<Inbound>,
    counters: Counters,
    faults: FaultLayer,
    /// Rung by sends and, where the device has them, by completion events.
    wake: Arc<Notify>,
    /// Whether the device rings `wake` on completions (else idle rounds poll).
    events: bool,
    closed: AtomicBool,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    rng: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running RDMA transport. Clones share it.
#[derive(Clone)]
pub struct RdmaTransport {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RdmaTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdmaTransport")
            .field("me", &self.inner.me)
            .field("wire", &self.inner.wire)
            .finish_non_exhaustive()
    }
}

impl RdmaTransport {
    /// Starts the TCP transport underneath and the polling task. Must run inside tokio.
    pub async fn start(
        cfg: TransportConfig,
        wire: RdmaWire,
    ) -> io::Result<(Self, mpsc::Receiver<Inbound>)> {
        if wire.channel.slots < 2
            || wire.channel.bulk_bytes < 2 * u64::from(wire.channel.slot_bytes)
        {
            return Err(io::Error::other(
                "rdma: at least 2 slots and a pool of 2 slots",
            ));
        }
        // Frame lengths travel as u32: a pool half must not exceed that.
        if wire.channel.bulk_bytes / 2 > u64::from(u32::MAX) {
            return Err(io::Error::other("rdma: a pool half must be under 4 GiB"));
        }
        let (queue_frames, inbound_frames) = (cfg.queue_frames, cfg.inbound_frames);
        let frame_max = cfg.frame_max.min((wire.channel.bulk_bytes / 2) as usize);
        let seed = cfg.seed;
        let (tcp, tcp_in) = TcpTransport::start(cfg).await?;
        let (inbound, rx) = mpsc::channel(inbound_frames.max(1));
        let mut r = [0u8; 8];
        match seed {
            Some(s) => r = (s ^ 0x5244_4d41).to_le_bytes(),
            None => getrandom::fill(&mut r).map_err(io::Error::other)?,
        }
        let wake = Arc::new(Notify::new());
        let ring = wake.clone();
        let events = wire
            .device
            .on_completion(Arc::new(move || ring.notify_one()));
        let inner = Arc::new(Inner {
            me: tcp.me(),
            tcp,
            wire,
            queue_frames,
            frame_max,
            peers: Mutex::default(),
            inbound,
            counters: Counters::default(),
            faults: FaultLayer::default(),
            wake,
            events,
            closed: AtomicBool::new(false),
            tasks: Mutex::default(),
            rng: AtomicU64::new(u64::from_le_bytes(r)),
        });
        let tasks = vec![
            tokio::spawn(poll_loop(inner.clone())),
            tokio::spawn(tcp_loop(inner.clone(), tcp_in)),
        ];
        *lock(&inner.tasks) = tasks;
        Ok((Self { inner }, rx))
    }

    /// This node.
    pub fn me(&self) -> NodeId {
        self.inner.me
    }

    /// The TCP listener's address.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.inner.tcp.local_addr()
    }

    /// Records where `node` listens (its TCP address, for connection management).
    pub fn set_addr(&self, node: NodeId, addr: SocketAddr) {
        self.inner.tcp.set_addr(node, addr);
    }

    /// Queues `frame` for `to` without waiting (as [`TcpTransport::try_send`]).
    pub fn try_send(&self, to: NodeId, frame: impl Into<Frame>) -> Result<(), SendError> {
        send_faulted(self, to, frame.into())
    }

    /// Queues `frame`, waiting for queue space.
    pub async fn send(&self, to: NodeId, frame: impl Into<Frame>) -> Result<(), SendError> {
        let frame = frame.into();
        let hb = t3fs_core::msg::is_heartbeat_frame(&frame.head);
        if self.inner.faults.outbound(to, hb, || self.random()) != Fate::Send {
            // Faulted frames take try_send's path: dropped, doubled or delayed, never waited on.
            return self.try_send(to, frame);
        }
        loop {
            let peer = self.inner.route(to, frame.len())?;
            let room = peer.space.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                // Checked and queued under one lock, so a racing sender cannot take the room.
                let mut q = lock(&peer.queue);
                if q.len() < self.inner.queue_frames {
                    q.push_back(frame);
                    drop(q);
                    self.inner.wake.notify_one();
                    return Ok(());
                }
            }
            room.await;
        }
    }

    /// Decodes an inbound frame with the core codec (a failure is counted `malformed`).
    pub fn decode(&self, inb: &mut Inbound) -> Result<Msg, DecodeError> {
        let bulk = std::mem::take(&mut inb.bulk);
        Msg::decode_split(&inb.frame, bulk)
            .inspect_err(|_| Counters::bump(&self.inner.counters.malformed))
    }

    /// Counts a frame refused by the sender's role (on the TCP path's counters, which
    /// [`Self::counters`] adds in).
    pub(crate) fn count_refused(&self) {
        self.inner.tcp.count_refused();
    }

    /// Counters of both paths: RDMA frames and the TCP path's (connection management and
    /// peers without RDMA) added together; the `rdma_*` fields say what went over RDMA.
    pub fn counters(&self) -> TransportCounters {
        let mut t = self.inner.tcp.counters();
        let r = self.inner.counters.snapshot();
        t.frames_in += r.frames_in;
        t.bytes_in += r.bytes_in;
        t.frames_out += r.frames_out;
        t.bytes_out += r.bytes_out;
        t.dropped_full += r.dropped_full;
        t.dropped_write += r.dropped_write;
        t.no_route += r.no_route;
        t.malformed += r.malformed;
        t.oversized += r.oversized;
        t.fault_dropped += r.fault_dropped;
        t.fault_duplicated += r.fault_duplicated;
        t.fault_delayed += r.fault_delayed;
        t.rdma_frames_in = r.rdma_frames_in;
        t.rdma_frames_out = r.rdma_frames_out;
        t.rdma_read_bytes = r.rdma_read_bytes;
        t.rdma_write_bytes = r.rdma_write_bytes;
        t.rdma_failures = r.rdma_failures;
        t.connects = r.connects;
        t.disconnects = r.disconnects;
        t.connect_failures = r.connect_failures;
        t
    }

    /// RDMA connections up now.
    pub fn connections(&self) -> usize {
        let peers: Vec<_> = lock(&self.inner.peers).values().cloned().collect();
        peers
            .iter()
            .filter(|p| matches!(*lock(&p.state), State::Up(_)))
            .count()
    }

    /// Replaces the network faults (applied to frames on both paths).
    pub fn set_faults(&self, f: NetFaults) {
        self.inner.tcp.set_faults(f.clone());
        for (to, frame) in self.inner.faults.set(f) {
            let _ = self.enqueue(to, frame);
        }
    }

    /// The network faults now.
    pub fn faults(&self) -> NetFaults {
        self.inner.faults.get()
    }

    /// Stops the tasks, closes every queue pair and the TCP transport.
    pub async fn shutdown(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        let tasks = std::mem::take(&mut *lock(&self.inner.tasks));
        for t in tasks {
            t.abort();
            let _ = t.await;
        }
        let peers = std::mem::take(&mut *lock(&self.inner.peers));
        for p in peers.values() {
            *lock(&p.state) = State::Tcp;
            lock(&p.queue).clear();
        }
        self.inner.tcp.shutdown().await;
    }

    fn enqueue(&self, to: NodeId, frame: Frame) -> Result<(), SendError> {
        let peer = self.inner.route(to, frame.len())?;
        let mut q = lock(&peer.queue);
        if q.len() >= self.inner.queue_frames {
            Counters::bump(&self.inner.counters.dropped_full);
            return Err(SendError::Full);
        }
        q.push_back(frame);
        drop(q);
        self.inner.wake.notify_one();
        Ok(())
    }
}

impl Faulted for RdmaTransport {
    fn layer(&self) -> &FaultLayer {
        &self.inner.faults
    }
    fn counts(&self) -> &Counters {
        &self.inner.counters
    }
    fn random(&self) -> u64 {
        super::splitmix(&self.inner.rng)
    }
    fn enqueue(&self, to: NodeId, frame: Frame) -> Result<(), SendError> {
        RdmaTransport::enqueue(self, to, frame)
    }
    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let mut tasks = lock(&self.inner.tasks);
        if !self.inner.closed.load(Ordering::SeqCst) {
            tasks.retain(|t| !t.is_finished());
            tasks.push(tokio::spawn(task));
        }
    }
}

impl Inner {
    /// The checks of both sends: open, not too large, and a way to reach the peer.
    fn route(&self, to: NodeId, len: usize) -> Result<Arc<Peer>, SendError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(SendError::Closed);
        }
        if len > self.frame_max {
            Counters::bump(&self.counters.oversized);
            return Err(SendError::TooLarge);
        }
        if to == self.me || !(self.tcp.routable(to) || self.is_up(to)) {
            Counters::bump(&self.counters.no_route);
            return Err(SendError::NoRoute);
        }
        Ok(self.peer(to))
    }

    fn is_up(&self, to: NodeId) -> bool {
        let p = lock(&self.peers).get(&to).cloned();
        p.is_some_and(|p| matches!(*lock(&p.state), State::Up(_)))
    }

    fn peer(&self, node: NodeId) -> Arc<Peer> {
        lock(&self.peers)
            .entry(node)
            .or_insert_with(|| {
                Arc::new(Peer {
                    node,
                    id: Mutex::new(None),
                    queue: Mutex::default(),
                    space: Notify::new(),
                    state: Mutex::new(State::Idle {
                        retry_at: Instant::now(),
                    }),
                })
            })
            .clone()
    }

    fn conn_id(&self) -> u64 {
        self.rng.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed) | 1
    }

    /// Sends a connection-management frame over TCP.
    fn ctl(&self, to: NodeId, c: &Ctl) -> bool {
        self.tcp.try_send(to, Bytes::from(c.encode())).is_ok()
    }

    /// One round for one peer; whether anything moved.
    fn step(&self, p: &Peer) -> bool {
        let mut st = lock(&p.state);
        match &mut *st {
            State::Idle { retry_at } => {
                if lock(&p.queue).is_empty() || Instant::now() < *retry_at {
                    return false;
                }
                *st = self.offer(p.node);
                true
            }
            State::Dialing { since, .. } => {
                if since.elapsed() < self.wire.connect_timeout {
                    return false;
                }
                Counters::bump(&self.counters.connect_failures);
                *st = idle(Duration::ZERO);
                true
            }
            State::Tcp => {
                let frames: Vec<Frame> = lock(&p.queue).drain(..).collect();
                p.space.notify_waiters();
                let moved = !frames.is_empty();
                for f in frames {
                    let _ = self.tcp.try_send(p.node, f);
                }
                moved
            }
            State::Up(up) => {
                let Some(id) = *lock(&p.id) else {
                    return false;
                };
                let io = Io {
                    from: p.node,
                    id,
                    counters: &self.counters,
                    deliver: &|inb| self.deliver(inb),
                    next: &|| {
                        let f = lock(&p.queue).pop_front();
                        p.space.notify_waiters();
                        f
                    },
                    unsend: &|f| lock(&p.queue).push_front(f),
                };
                match up.pump(&io) {
                    Ok(busy) => busy,
                    Err(e) => {
                        tracing::info!(peer = p.node.0, error = %e, "rdma connection ended");
                        self.lost(up);
                        *st = idle(Duration::from_millis(50));
                        true
                    }
                }
            }
        }
    }

    /// Counts a failed connection and the frames it took with it.
    fn lost(&self, up: &Up) {
        let c = &self.counters;
        Counters::bump(&c.rdma_failures);
        Counters::bump(&c.disconnects);
        Counters::add(&c.dropped_write, up.in_flight() as u64);
    }

    /// Delivers a frame unless the fault layer drops it; gives it back on a full queue.
    fn deliver(&self, inb: Inbound) -> Result<(), Inbound> {
        if self.faults.drops_inbound(inb.from) {
            Counters::bump(&self.counters.fault_dropped);
            return Ok(());
        }
        match self.inbound.try_send(inb) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => Ok(()),
            Err(mpsc::error::TrySendError::Full(inb)) => Err(inb),
        }
    }
}

/// Polls every connection while anything moves; idle, it sleeps until a send or a completion
/// event rings (a 20 ms poll as a safety net), or, on a device without events, backs off to a
/// 2 ms poll.
async fn poll_loop(inner: Arc<Inner>) {
    let mut idle_rounds = 0u32;
    while !inner.closed.load(Ordering::SeqCst) {
        let peers: Vec<Arc<Peer>> = lock(&inner.peers).values().cloned().collect();
        let mut busy = false;
        for p in &peers {
            busy |= inner.step(p);
        }
        if busy {
            idle_rounds = 0;
            tokio::task::yield_now().await;
            continue;
        }
        idle_rounds = idle_rounds.saturating_add(1);
        if idle_rounds < 4 {
            tokio::task::yield_now().await;
            continue;
        }
        // A link waiting for room in the inbound queue has no event to wake it when the
        // receiver drains: poll it every millisecond.
        let blocked = peers
            .iter()
            .any(|p| matches!(&*lock(&p.state), State::Up(up) if up.blocked()));
        let wait = if blocked {
            Duration::from_millis(1)
        } else if inner.events {
            Duration::from_millis(20)
        } else {
            Duration::from_micros(50 << (idle_rounds - 4).min(6)).min(Duration::from_millis(2))
        };
        tokio::select! {
            biased;
            () = inner.wake.notified() => idle_rounds = 0,
            () = tokio::time::sleep(wait) => {}
        }
    }
}
