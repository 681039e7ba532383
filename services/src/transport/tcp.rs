//! [`Transport`]: the handle, the listener, dialing, and the reader task of each connection.
//!
//! Tasks (all in one `JoinSet`, aborted by [`Transport::shutdown`]): the accept loop; one
//! handshake task per accepted socket; one writer task per peer (`peer::drive`, which also
//! dials); one reader task per authenticated connection, which owns the connection's end: when
//! it stops (end of stream, error, bad frame, kill) it forgets the connection, drops our write
//! half and counts the disconnect.
//!
//! Not here: placement of duplicate connections and the writer (`peer.rs`), the wire formats
//! (`frame.rs`, `handshake.rs`).

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use t3fs_core::ids::NodeId;
use t3fs_core::msg::Msg;
use t3fs_core::wire::codec::DecodeError;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinSet;
use tokio::time::timeout;

use super::counters::{Counters, TransportCounters};
use super::faults::{send_faulted, Fate, Faulted, NetFaults};
use super::frame::{FrameError, FrameReader};
use super::handshake::{self, HandshakeError, Me};
use super::net::{Listener, ReadHalf, Stream};
use super::peer::{drive, Conn, Dialer, PeerSlot};
use super::rdma_ctl;
use super::{Frame, Inbound, SendError, TransportConfig};
use crate::vec_pool::{VecPool, CHUNK};

/// A running TCP transport. Clones share it.
#[derive(Clone, Debug)]
pub struct TcpTransport {
    inner: Arc<Inner>,
}

/// State shared by the handle and the tasks.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) cfg: TransportConfig,
    /// This node's id and transport incarnation (the credential is `cfg.credential`).
    node: NodeId,
    incarnation: u64,
    local_addr: Option<SocketAddr>,
    pub(crate) counters: Counters,
    inbound: mpsc::Sender<Inbound>,
    peers: Mutex<HashMap<NodeId, Arc<PeerSlot>>>,
    /// `None` once shut down.
    tasks: Mutex<Option<JoinSet<()>>>,
    closed: AtomicBool,
    next_conn: AtomicU64,
    open_conns: AtomicUsize,
    rng: AtomicU64,
    pub(crate) faults: super::faults::FaultLayer,
    /// Inbound bulk parts (payloads) are read into its vectors and go back when dropped.
    bulk_pool: Arc<VecPool>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl TcpTransport {
    /// Binds the listener (if `cfg.listen` is set) and starts the tasks. Returns the handle and
    /// the receiver of inbound frames. Must run inside a tokio runtime.
    pub async fn start(cfg: TransportConfig) -> io::Result<(Self, mpsc::Receiver<Inbound>)> {
        let listener = match cfg.listen {
            Some(a) => Some(cfg.net.bind(a).await?),
            None => None,
        };
        let mut seed = [0u8; 16];
        match cfg.seed {
            // A simulation draws the incarnation and the jitter from its own seed.
            Some(s) => {
                seed[..8].copy_from_slice(&s.to_le_bytes());
                seed[8..].copy_from_slice(&(!s).to_le_bytes());
            }
            None => getrandom::fill(&mut seed).map_err(io::Error::other)?,
        }
        let [inc, rng] = [&seed[..8], &seed[8..]].map(|b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_le_bytes(a)
        });
        let (inbound, rx) = mpsc::channel(cfg.inbound_frames.max(1));
        let inner = Arc::new(Inner {
            node: cfg.me,
            incarnation: inc,
            local_addr: listener.as_ref().map(|l| l.local_addr()).transpose()?,
            cfg,
            counters: Counters::default(),
            inbound,
            peers: Mutex::default(),
            tasks: Mutex::new(Some(JoinSet::new())),
            closed: AtomicBool::new(false),
            next_conn: AtomicU64::new(1),
            open_conns: AtomicUsize::new(0),
            bulk_pool: Arc::new(VecPool::new(CHUNK)),
            rng: AtomicU64::new(rng),
            faults: Default::default(),
        });
        if let Some(l) = listener {
            inner.spawn(accept_loop(inner.clone(), l));
        }
        Ok((Self { inner }, rx))
    }

    /// This node.
    pub fn me(&self) -> NodeId {
        self.inner.node
    }

    /// The address the listener is bound to (`None` for a client that does not listen).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.inner.local_addr
    }

    /// Records (or changes) where `node` listens (from config or routing info). A change takes
    /// effect at the next dial; an open connection is kept. Ignored for this node itself.
    pub fn set_addr(&self, node: NodeId, addr: SocketAddr) {
        if node == self.me() {
            return;
        }
        if let Some(slot) = self.inner.slot(node) {
            let changed = slot.state().addr.replace(addr) != Some(addr);
            if changed {
                slot.wake.notify_one(); // a writer waiting for an address, or in backoff
            }
        }
    }

    /// Queues `frame` for `to` without waiting; a full queue drops it (`Err(Full)`). `Ok` means
    /// queued, not delivered (or taken by the fault layer, as the wire would).
    pub fn try_send(&self, to: NodeId, frame: impl Into<Frame>) -> Result<(), SendError> {
        send_faulted(self, to, frame.into())
    }

    fn enqueue_now(&self, to: NodeId, frame: Frame) -> Result<(), SendError> {
        let slot = self.inner.route(to, frame.len())?;
        slot.tx.try_send(frame).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => {
                Counters::bump(&self.inner.counters.dropped_full);
                SendError::Full
            }
            mpsc::error::TrySendError::Closed(_) => SendError::Closed,
        })
    }

    /// Replaces this transport's network faults (the fault layer, `faults.rs`); frames held for
    /// peers no longer held are sent now, in the order they were held.
    pub fn set_faults(&self, f: NetFaults) {
        for (to, frame) in self.inner.faults.set(f) {
            let _ = self.enqueue_now(to, frame);
        }
    }

    /// This transport's network faults now.
    pub fn faults(&self) -> NetFaults {
        self.inner.faults.get()
    }

    /// Queues `frame` for `to`, waiting for queue space (backpressure). The route is checked
    /// once, on entry: if the peer never comes back this waits until shutdown, so callers that
    /// must not stall wrap it in a timeout or use [`try_send`](Self::try_send).
    pub async fn send(&self, to: NodeId, frame: impl Into<Frame>) -> Result<(), SendError> {
        let frame = frame.into();
        let hb = t3fs_core::msg::is_heartbeat_frame(&frame.head);
        if self.inner.faults.outbound(to, hb, || self.inner.random()) != Fate::Send {
            // Faulted frames take try_send's path: dropped, doubled or delayed, never waited on.
            return self.try_send(to, frame);
        }
        let slot = self.inner.route(to, frame.len())?;
        slot.tx.send(frame).await.map_err(|_| SendError::Closed)
    }

    /// Decodes an inbound frame (head and bulk part, which it takes) with the core codec; a
    /// failure is counted `malformed` (the caller drops the frame).
    pub fn decode(&self, inb: &mut Inbound) -> Result<Msg, DecodeError> {
        if refuse(self, inb) {
            return Err(DecodeError::BadMagic);
        }
        let bulk = self.inner.bulk_pool.payload(std::mem::take(&mut inb.bulk));
        Msg::decode_with(&inb.frame, Some(bulk))
            .inspect_err(|_| Counters::bump(&self.inner.counters.malformed))
    }

    /// Whether frames for `to` have a way to go (an address or a connection).
    pub(crate) fn routable(&self, to: NodeId) -> bool {
        lock(&self.inner.peers).get(&to).is_some_and(|s| {
            let st = s.state();
            st.addr.is_some() || st.active.is_some()
        })
    }

    /// Counts a frame refused by the sender's role.
    pub(crate) fn count_refused(&self) {
        Counters::bump(&self.inner.counters.refused_role);
    }

    /// A snapshot of the counters.
    pub fn counters(&self) -> TransportCounters {
        self.inner.counters.snapshot()
    }

    /// Authenticated connections open now (active, standby and retiring).
    pub fn connections(&self) -> usize {
        self.inner.open_conns.load(Ordering::Relaxed)
    }

    /// Stops every task and closes every socket and the listener; queued frames are dropped.
    /// Later sends return `Err(Closed)`.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        inner.closed.store(true, Ordering::SeqCst);
        let tasks = lock(&inner.tasks).take();
        if let Some(mut tasks) = tasks {
            tasks.shutdown().await;
        }
        let peers = std::mem::take(&mut *lock(&inner.peers));
        for slot in peers.values() {
            let mut st = slot.state();
            st.active = None;
            st.standby.clear();
        }
    }
}

impl Faulted for TcpTransport {
    fn layer(&self) -> &super::faults::FaultLayer {
        &self.inner.faults
    }
    fn counts(&self) -> &Counters {
        &self.inner.counters
    }
    fn random(&self) -> u64 {
        self.inner.random()
    }
    fn enqueue(&self, to: NodeId, frame: Frame) -> Result<(), SendError> {
        self.enqueue_now(to, frame)
    }
    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        self.inner.spawn(task);
    }
}

impl Dialer for Inner {
    fn backoff(&self) -> std::ops::Range<std::time::Duration> {
        self.cfg.connect_backoff.clone()
    }
    fn counters(&self) -> &Counters {
        &self.counters
    }
    fn is_closed(&self) -> bool {
        Inner::is_closed(self)
    }
    fn random(&self) -> u64 {
        Inner::random(self)
    }
    fn dial(
        self: &Arc<Self>,
        slot: &Arc<PeerSlot>,
        addr: SocketAddr,
    ) -> impl std::future::Future<Output = bool> + Send {
        Inner::dial(self, slot, addr)
    }
}

impl Inner {
    /// This end, as the handshake presents it.
    pub(crate) fn hello_me(&self) -> Me<'_> {
        Me {
            node: self.node,
            incarnation: self.incarnation,
            cred: &self.cfg.credential,
            roster: self.cfg.roster.as_ref(),
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// A pseudo-random number for backoff jitter (splitmix64 over a random seed).
    pub(crate) fn random(&self) -> u64 {
        super::splitmix(&self.rng)
    }

    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        if let Some(tasks) = lock(&self.tasks).as_mut() {
            while tasks.try_join_next().is_some() {}
            tasks.spawn(task);
        }
    }

    /// The slot of `node`, created (with its writer task) on first use; `None` once shut down.
    fn slot(self: &Arc<Self>, node: NodeId) -> Option<Arc<PeerSlot>> {
        if self.is_closed() {
            return None;
        }
        let mut peers = lock(&self.peers);
        if let Some(s) = peers.get(&node) {
            return Some(s.clone());
        }
        let (slot, queue) = PeerSlot::new(node, self.cfg.queue_frames);
        peers.insert(node, slot.clone());
        drop(peers);
        self.spawn(drive(self.clone(), slot.clone(), queue));
        Some(slot)
    }

    /// The checks common to both sends.
    fn route(&self, to: NodeId, len: usize) -> Result<Arc<PeerSlot>, SendError> {
        if self.is_closed() {
            return Err(SendError::Closed);
        }
        if len > self.cfg.frame_max || u32::try_from(len).is_err() {
            Counters::bump(&self.counters.oversized);
            return Err(SendError::TooLarge);
        }
        let slot = lock(&self.peers).get(&to).cloned();
        if let Some(s) = slot {
            let routable = {
                let st = s.state();
                st.addr.is_some() || st.active.is_some()
            };
            if routable {
                return Ok(s);
            }
        }
        Counters::bump(&self.counters.no_route);
        Err(SendError::NoRoute)
    }

    /// Dials `slot`'s peer at `addr` and registers the connection; false if that failed.
    pub(crate) async fn dial(self: &Arc<Self>, slot: &Arc<PeerSlot>, addr: SocketAddr) -> bool {
        let attempt = async {
            let mut s = self.cfg.net.connect(addr).await?;
            let peer = handshake::dial(&mut s, &self.hello_me(), slot.node).await?;
            Ok::<_, HandshakeError>((s, peer))
        };
        let c = &self.counters;
        match timeout(self.cfg.handshake_timeout, attempt).await {
            Ok(Ok((s, peer))) => {
                if slot.state().ever_connected {
                    Counters::bump(&c.reconnects);
                }
                self.register(s, peer, true);
                true
            }
            Ok(Err(HandshakeError::Io)) | Err(_) => {
                Counters::bump(&c.connect_failures);
                false
            }
            Ok(Err(_)) => {
                Counters::bump(&c.connect_failures);
                Counters::bump(&c.auth_rejected);
                false
            }
        }
    }

    /// Places an authenticated connection and starts its reader. Under the peers lock, so a
    /// slot being forgotten ([`Self::forget_idle`]) never takes a connection with it.
    fn register(self: &Arc<Self>, s: Stream, peer: handshake::Peer, dialed_by_me: bool) {
        let mut peers = lock(&self.peers);
        if self.is_closed() {
            return;
        }
        let slot = match peers.get(&peer.node) {
            Some(s) => s.clone(),
            None if peers.len() >= self.cfg.peers_max => {
                // Full of peers with connections: refuse rather than grow (counted).
                Counters::bump(&self.counters.peers_full);
                return;
            }
            None => {
                let (slot, queue) = PeerSlot::new(peer.node, self.cfg.queue_frames);
                peers.insert(peer.node, slot.clone());
                self.spawn(drive(self.clone(), slot.clone(), queue));
                slot
            }
        };
        let (r, w) = s.into_inner();
        let conn = Arc::new(Conn {
            id: self.next_conn.fetch_add(1, Ordering::Relaxed),
            peer,
            dialed_by_me,
            writer: tokio::sync::Mutex::new(Some(w)),
            kill: Notify::new(),
            abort_write: Notify::new(),
        });
        let retire = {
            let mut st = slot.state();
            if !dialed_by_me && st.taken_by_another(&peer) {
                // A client id in use by another credential or incarnation: not a takeover.
                Counters::bump(&self.counters.id_taken);
                return;
            }
            st.place(self.node, conn.clone())
        };
        drop(peers);
        Counters::bump(&self.counters.connects);
        self.open_conns.fetch_add(1, Ordering::Relaxed);
        self.spawn(read_loop(self.clone(), slot.clone(), conn, r));
        for old in retire {
            self.spawn(old.retire());
        }
        slot.wake.notify_one();
    }

    /// Forgets a client's slot once its last connection ended and nothing is queued for it:
    /// clients come and go with fresh ids, and a server keeps no row for each one it ever saw.
    /// Servers' slots stay (their addresses are configuration).
    fn forget_idle(&self, slot: &Arc<PeerSlot>, peer: &handshake::Peer) {
        if peer.id.role.is_server() {
            return;
        }
        let mut peers = lock(&self.peers);
        let idle = {
            let st = slot.state();
            st.active.is_none() && st.standby.is_empty() && st.addr.is_none()
        };
        if idle && slot.tx.capacity() == slot.tx.max_capacity() {
            if peers.get(&slot.node).is_some_and(|s| Arc::ptr_eq(s, slot)) {
                peers.remove(&slot.node);
            }
            slot.gone.notify_one();
        }
    }
}

/// Accepts sockets and authenticates each in its own task, so a slow or hostile peer cannot
/// stall the listener.
async fn accept_loop(inner: Arc<Inner>, listener: Box<dyn Listener>) {
    loop {
        let s = match listener.accept().await {
            Ok(s) => s,
            Err(_) => {
                // Out of descriptors or a transient error: breathe, keep serving.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let inner2 = inner.clone();
        inner.spawn(async move {
            let mut s = s;
            let me = inner2.hello_me();
            let hs = handshake::accept(&mut s, &me);
            match timeout(inner2.cfg.handshake_timeout, hs).await {
                Ok(Ok(peer)) => inner2.register(s, peer, false),
                _ => Counters::bump(&inner2.counters.auth_rejected),
            }
        });
    }
}

/// Reads frames from one connection until it ends, then closes it (see the module docs).
async fn read_loop(inner: Arc<Inner>, slot: Arc<PeerSlot>, conn: Arc<Conn>, r: ReadHalf) {
    let c = &inner.counters;
    let mut frames = FrameReader::new(r, inner.cfg.frame_max, inner.bulk_pool.clone());
    loop {
        let next = tokio::select! {
            biased;
            () = conn.kill.notified() => break,
            next = frames.next() => next,
        };
        let (frame, bulk) = match next {
            Ok(Some(f)) => f,
            Ok(None) | Err(FrameError::Io) => break,
            Err(FrameError::Oversized) => {
                Counters::bump(&c.oversized);
                break;
            }
            Err(FrameError::Truncated) => {
                Counters::bump(&c.truncated);
                break;
            }
        };
        // Counted before the receiver can see the frame, so a snapshot taken after receiving it
        // includes it.
        Counters::bump(&c.frames_in);
        Counters::add(&c.bytes_in, (frame.len() + bulk.len()) as u64);
        if inner.faults.drops_inbound(conn.peer.node) {
            Counters::bump(&c.fault_dropped);
            continue;
        }
        let msg = Inbound {
            from: conn.peer.node,
            id: conn.peer.id,
            frame,
            bulk,
        };
        tokio::select! {
            biased;
            () = conn.kill.notified() => break,
            sent = inner.inbound.send(msg) => if sent.is_err() { break },
        }
    }
    drop(frames);
    slot.state().detach(conn.id);
    slot.wake.notify_one();
    inner.forget_idle(&slot, &conn.peer);
    conn.abort_write.notify_one();
    conn.writer.lock().await.take();
    Counters::bump(&c.disconnects);
    inner.open_conns.fetch_sub(1, Ordering::Relaxed);
}

/// On a TCP-only transport: answers an RDMA offer (`rdma_ctl.rs`) with a refusal, so the
/// dialer falls back to TCP. Whether `inb` was one.
fn refuse(tcp: &TcpTransport, inb: &Inbound) -> bool {
    if !rdma_ctl::is_ctl(&inb.frame) {
        return false;
    }
    if let Some(rdma_ctl::Ctl::Connect { conn, .. }) = rdma_ctl::Ctl::decode(&inb.frame) {
        let _ = tcp.try_send(
            inb.from,
            Bytes::from(rdma_ctl::Ctl::Refuse { conn }.encode()),
        );
    }
    true
}
