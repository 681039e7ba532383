//! One peer: its outbound queue, its connections, and the writer task that drains the queue
//! into the current connection (dialing, with backoff, when there is none).
//!
//! Connections to a peer are *active* (the one the writer uses), *standby* (authenticated,
//! read from, not written to) or *retiring* (no longer in the peer's state: our write half is
//! shut, its reader drains what the peer still sends until end of stream or a linger timeout).
//! Every authenticated connection is read until it ends, whatever its role, so frames already
//! written on a connection that loses a race are still delivered.
//!
//! Placement of a new connection `new` when `old` is active ([`PeerState::place`]):
//! - the peer restarted (another incarnation) or both were dialed by the same end (that end
//!   only dials when it has no connection, so it gave `old` up): `new` wins, `old` retires;
//! - otherwise both ends dialed at once: the connection dialed by the lower `NodeId` wins at
//!   both ends. The higher node retires its own dial (its peer then reads it to the end and
//!   closes it); the lower node keeps the other as standby, promoted if the active one ends
//!   (this covers the higher node having given up the winner already).
//!
//! Both ends apply the same rule to the same facts, so they converge on one connection without
//! a further message; a queue belongs to the peer, never to a connection, so switching loses no
//! queued frame.

use std::net::SocketAddr;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use t3fs_core::ids::NodeId;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, Notify};

use super::counters::Counters;
use super::frame::write_batch;
use super::handshake;
use super::Frame;

/// What a peer's writer task needs from the transport that owns the peer: its settings and
/// counters, whether it shut down, randomness for backoff, and a dial. A bound rather than the
/// TCP transport's state (`tcp::Inner`, which holds the peers) so that this file does not name
/// its owner.
pub(crate) trait Dialer: Send + Sync + 'static {
    /// The backoff between failed dials.
    fn backoff(&self) -> Range<Duration>;
    /// The transport's counters.
    fn counters(&self) -> &Counters;
    /// Whether the transport shut down.
    fn is_closed(&self) -> bool;
    /// A random number (backoff jitter).
    fn random(&self) -> u64;
    /// Dials `addr` for `slot`: true if a connection was established and placed.
    fn dial(
        self: &Arc<Self>,
        slot: &Arc<PeerSlot>,
        addr: SocketAddr,
    ) -> impl std::future::Future<Output = bool> + Send;
}

/// Most frames per write batch.
const BATCH_FRAMES: usize = 64;
/// A batch stops growing past this many bytes.
const BATCH_BYTES: usize = 1 << 20;
/// A retiring connection is closed after this long even if the peer never ends it.
pub(crate) const RETIRE_LINGER: Duration = Duration::from_secs(10);

/// One authenticated connection.
pub(crate) struct Conn {
    pub(crate) id: u64,
    pub(crate) peer: handshake::Peer,
    pub(crate) dialed_by_me: bool,
    /// `None` once retired or closed: the writer then looks for the new active connection.
    pub(crate) writer: tokio::sync::Mutex<Option<super::net::WriteHalf>>,
    /// Ends the reader (one stored permit: only the reader waits).
    pub(crate) kill: Notify,
    /// Abandons a batch being written (set when the connection is closed, so a writer blocked
    /// on a peer that stopped reading cannot hold the connection open).
    pub(crate) abort_write: Notify,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("id", &self.id)
            .field("peer", &self.peer)
            .field("dialed_by_me", &self.dialed_by_me)
            .finish_non_exhaustive()
    }
}

impl Conn {
    /// Retires: shuts our write half after any batch in progress, closes after the linger.
    pub(crate) async fn retire(self: Arc<Self>) {
        if let Some(mut w) = self.writer.lock().await.take() {
            let _ = w.shutdown().await;
        }
        tokio::time::sleep(RETIRE_LINGER).await;
        self.kill.notify_one();
    }
}

/// What is known about a peer.
#[derive(Debug, Default)]
pub(crate) struct PeerState {
    pub(crate) addr: Option<SocketAddr>,
    pub(crate) active: Option<Arc<Conn>>,
    pub(crate) standby: Vec<Arc<Conn>>,
    pub(crate) ever_connected: bool,
}

impl PeerState {
    /// Places an authenticated connection (rules in the module docs); returns the connections
    /// to retire.
    pub(crate) fn place(&mut self, me: NodeId, new: Arc<Conn>) -> Vec<Arc<Conn>> {
        self.ever_connected = true;
        let mut retire = Vec::new();
        // Standby connections the peer gave up (a restart, or a newer dial of its own).
        self.standby.retain(|s| {
            let stale = s.peer.incarnation != new.peer.incarnation || !new.dialed_by_me;
            if stale {
                retire.push(s.clone());
            }
            !stale
        });
        let Some(old) = self.active.take() else {
            self.active = Some(new);
            return retire;
        };
        if old.peer.incarnation != new.peer.incarnation || old.dialed_by_me == new.dialed_by_me {
            self.active = Some(new);
            retire.push(old);
            return retire;
        }
        let lower_dialed_new = new.dialed_by_me == (me < new.peer.node);
        let (win, lose) = if lower_dialed_new {
            (new, old)
        } else {
            (old, new)
        };
        self.active = Some(win);
        if lose.dialed_by_me {
            retire.push(lose);
        } else {
            self.standby.push(lose);
        }
        retire
    }

    /// Whether `new` (accepted from a client) claims an id that a live connection of another
    /// credential or transport incarnation holds: a client restarts under a fresh id, so
    /// that is a second process, or one trying to take the first one's replies.
    pub(crate) fn taken_by_another(&self, new: &handshake::Peer) -> bool {
        !new.id.role.is_server()
            && self
                .active
                .iter()
                .chain(&self.standby)
                .any(|c| c.peer.incarnation != new.incarnation || c.peer.id != new.id)
    }

    /// Forgets a connection that ended; promotes a standby one if it was active.
    pub(crate) fn detach(&mut self, id: u64) {
        if self.active.as_ref().is_some_and(|c| c.id == id) {
            self.active = self.standby.pop();
        } else {
            self.standby.retain(|c| c.id != id);
        }
    }
}

/// A peer's queue and state, shared by the transport handle and the peer's tasks.
#[derive(Debug)]
pub(crate) struct PeerSlot {
    pub(crate) node: NodeId,
    pub(crate) tx: mpsc::Sender<Frame>,
    state: Mutex<PeerState>,
    /// Wakes the writer: a connection came or went, or the address changed.
    pub(crate) wake: Notify,
    /// Ends the writer: the slot was forgotten (an idle client's).
    pub(crate) gone: Notify,
}

impl PeerSlot {
    /// A slot and the receiving end of its queue (for [`drive`]).
    pub(crate) fn new(node: NodeId, queue_frames: usize) -> (Arc<Self>, mpsc::Receiver<Frame>) {
        let (tx, rx) = mpsc::channel(queue_frames.max(1));
        let slot = Self {
            node,
            tx,
            state: Mutex::default(),
            wake: Notify::new(),
            gone: Notify::new(),
        };
        (Arc::new(slot), rx)
    }

    /// The peer's state (never held across an await).
    pub(crate) fn state(&self) -> MutexGuard<'_, PeerState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Exponential backoff with jitter: `[d/2, d]`, doubling up to the cap.
#[derive(Debug)]
struct Backoff {
    range: Range<Duration>,
    next: Duration,
}

impl Backoff {
    /// A zero first wait is raised to 1 ms, so a dead peer is never dialed in a busy loop.
    fn new(range: Range<Duration>) -> Self {
        let start = range.start.max(Duration::from_millis(1));
        let range = start..range.end.max(start);
        Self { next: start, range }
    }
    fn reset(&mut self) {
        self.next = self.range.start;
    }
    fn wait(&mut self, random: u64) -> Duration {
        let d = self.next;
        self.next = (d * 2).min(self.range.end);
        let half = d / 2;
        let nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
        half + Duration::from_nanos(random % nanos.saturating_add(1))
    }
}

/// The writer task of one peer: takes frames off the queue in batches and writes them to the
/// active connection, dialing when there is none. Ends when the transport shuts down.
pub(crate) async fn drive<D: Dialer>(
    inner: Arc<D>,
    slot: Arc<PeerSlot>,
    mut queue: mpsc::Receiver<Frame>,
) {
    let mut backoff = Backoff::new(inner.backoff());
    let mut batch: Vec<Frame> = Vec::with_capacity(BATCH_FRAMES);
    loop {
        if batch.is_empty() {
            let next = tokio::select! {
                biased;
                f = queue.recv() => f,
                () = slot.gone.notified() => None,
            };
            match next {
                Some(f) => batch.push(f),
                None => return,
            }
        }
        let mut bytes: usize = batch.iter().map(Frame::len).sum();
        while batch.len() < BATCH_FRAMES && bytes < BATCH_BYTES {
            match queue.try_recv() {
                Ok(f) => {
                    bytes += f.len();
                    batch.push(f);
                }
                Err(_) => break,
            }
        }
        let Some(conn) = connection(&inner, &slot, &mut backoff).await else {
            return;
        };
        let mut writer = conn.writer.lock().await;
        let Some(w) = writer.as_mut() else {
            continue; // retired meanwhile: keep the batch for the next connection
        };
        let c = inner.counters();
        let written = tokio::select! {
            biased;
            r = write_batch(w, &batch) => r.is_ok(),
            () = conn.abort_write.notified() => false,
        };
        if written {
            Counters::add(&c.frames_out, batch.len() as u64);
            Counters::add(&c.bytes_out, bytes as u64);
        } else {
            // The connection is broken: close it (its reader counts the disconnect).
            Counters::add(&c.dropped_write, batch.len() as u64);
            writer.take();
            drop(writer);
            slot.state().detach(conn.id);
            conn.kill.notify_one();
        }
        batch.clear();
    }
}

/// The active connection, dialing (with backoff) while there is none and an address is known.
/// `None` once the transport is shut down.
async fn connection<D: Dialer>(
    inner: &Arc<D>,
    slot: &Arc<PeerSlot>,
    backoff: &mut Backoff,
) -> Option<Arc<Conn>> {
    loop {
        if inner.is_closed() {
            return None;
        }
        let woken = slot.wake.notified();
        let (active, addr) = {
            let st = slot.state();
            (st.active.clone(), st.addr)
        };
        if let Some(c) = active {
            return Some(c);
        }
        let Some(addr) = addr else {
            woken.await; // an inbound connection or an address will wake us
            continue;
        };
        if inner.dial(slot, addr).await {
            backoff.reset();
            continue;
        }
        let wait = backoff.wait(inner.random());
        tokio::select! {
            biased;
            () = tokio::time::sleep(wait) => {}
            () = woken => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(id: u64, node: u32, incarnation: u64, dialed_by_me: bool) -> Arc<Conn> {
        Arc::new(Conn {
            id,
            peer: handshake::Peer {
                node: NodeId(node.into()),
                incarnation,
                id: crate::transport::Identity {
                    role: crate::transport::PeerRole::Storage,
                    uid: 0,
                    gid: 0,
                },
            },
            dialed_by_me,
            writer: tokio::sync::Mutex::new(None),
            kill: Notify::new(),
            abort_write: Notify::new(),
        })
    }

    fn ids(v: &[Arc<Conn>]) -> Vec<u64> {
        v.iter().map(|c| c.id).collect()
    }

    fn active(st: &PeerState) -> Option<u64> {
        st.active.as_ref().map(|c| c.id)
    }

    #[test]
    fn simultaneous_dials_keep_the_lower_nodes_dial_at_both_ends() {
        // Node 1 dialed connection 10, node 2 dialed connection 20; arrival order differs.
        let mut at1 = PeerState::default();
        assert!(at1.place(NodeId(1), conn(20, 2, 7, false)).is_empty());
        assert!(at1.place(NodeId(1), conn(10, 2, 7, true)).is_empty());
        assert_eq!((active(&at1), ids(&at1.standby)), (Some(10), vec![20]));
        let mut at2 = PeerState::default();
        assert!(at2.place(NodeId(2), conn(10, 1, 3, false)).is_empty());
        assert_eq!(ids(&at2.place(NodeId(2), conn(20, 1, 3, true))), vec![20]);
        assert_eq!((active(&at2), at2.standby.len()), (Some(10), 0));
        // The other arrival order at node 2.
        let mut at2 = PeerState::default();
        assert!(at2.place(NodeId(2), conn(20, 1, 3, true)).is_empty());
        assert_eq!(ids(&at2.place(NodeId(2), conn(10, 1, 3, false))), vec![20]);
        assert_eq!(active(&at2), Some(10));
        // Node 1's winner ends: the standby one is promoted.
        at1.detach(10);
        assert_eq!((active(&at1), at1.standby.len()), (Some(20), 0));
    }

    #[test]
    fn a_restarted_peer_or_a_newer_dial_by_the_same_end_replaces_the_old_connection() {
        let mut st = PeerState::default();
        st.place(NodeId(1), conn(1, 2, 7, true));
        // The peer restarted (new incarnation) and dialed us: it wins although node 2 is higher.
        assert_eq!(ids(&st.place(NodeId(1), conn(2, 2, 8, false))), vec![1]);
        assert_eq!(active(&st), Some(2));
        // The peer dialed again (it gave connection 2 up).
        assert_eq!(ids(&st.place(NodeId(1), conn(3, 2, 8, false))), vec![2]);
        assert_eq!(active(&st), Some(3));
        st.detach(3);
        assert!(st.active.is_none() && st.ever_connected);
    }

    #[test]
    fn backoff_doubles_to_the_cap_with_jitter_in_the_upper_half() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(100)..ms(400));
        let waits: Vec<Duration> = (0..5).map(|i| b.wait(i * 7919)).collect();
        for (w, d) in waits.iter().zip([100, 200, 400, 400, 400]) {
            assert!(
                *w >= ms(d) / 2 && *w <= ms(d),
                "{w:?} not in [{d}/2, {d}] ms"
            );
        }
        b.reset();
        assert!(b.wait(u64::MAX) <= ms(100));
        let mut zero = Backoff::new(Duration::ZERO..Duration::ZERO);
        assert!(zero.wait(0) >= ms(1) / 2);
    }
}
