//! The transports: move opaque frames (`bytes::Bytes`, one encoded `Msg` each) between nodes
//! over authenticated connections. [`Transport`] is the one handle nodes use, either TCP
//! ([`TcpTransport`], `tcp.rs`) or RDMA ([`RdmaTransport`], `rdma/`, with TCP underneath for
//! the handshake and connection management); both keep the contract below, so machines cannot
//! tell which carries their messages. Shared by both: the credentials and handshake
//! (`credential.rs`, `handshake.rs`), the per-message sender check ([`policy`], applied by
//! [`Transport::admit`]), the network fault layer (`faults.rs`), counters (`counters.rs`) and
//! the socket seam that lets turmoil stand in for the OS network ([`net`]). The caller encodes
//! and decodes; [`Transport::decode`] decodes an inbound frame with the core codec and counts
//! failures.
//!
//! Shape (of the TCP transport; the RDMA transport's own is in `rdma/mod.rs`):
//! - [`Transport::start`] binds the listener (if any) and returns the handle (cheap to clone)
//!   and the receiver of every [`Inbound`] frame from every peer;
//! - each peer has one bounded queue of outbound frames ([`TransportConfig::queue_frames`]) and
//!   one writer task draining it into the peer's current connection, several frames per
//!   vectored write; [`Transport::try_send`] never waits (a full queue drops the frame and
//!   counts it), [`Transport::send`] waits for queue space (backpressure);
//! - a connection is opened when frames are queued for a peer with a known address
//!   ([`Transport::set_addr`]) and none is up, retried with bounded, jittered exponential
//!   backoff while frames stay queued; frames queued before a drop stay queued;
//! - one connection per peer pair, used in both directions: a server answers a client that
//!   has no listen address over the connection the client opened (`peer.rs` keeps exactly one
//!   when both ends dial at once);
//! - every socket has TCP_NODELAY; every connection starts with the token handshake
//!   (`handshake.rs`, with a timeout) and then carries frames of a head and a bulk part (a
//!   message's payload, read and written without a user-space copy; `frame.rs`).
//!
//! Invariants:
//! - memory is bounded: per peer, `queue_frames` frames of at most `frame_max` bytes queued (plus
//!   one batch being written), and per connection, one frame being read (`frame.rs`); inbound
//!   frames wait in
//!   a channel of `inbound_frames`, and a full channel stops reading from sockets, so a slow
//!   receiver pushes back through TCP onto its senders' queues;
//! - untrusted input never panics and never allocates before it is checked: bad handshakes,
//!   oversized lengths and truncated frames close that connection only, and are counted
//!   ([`TransportCounters`]); the listener keeps serving;
//! - frames on one connection arrive in order; delivery is best effort: a frame may be lost
//!   when a connection breaks while it is being written (counted `dropped_write`) and frames
//!   may reorder when the connection to a peer changes. The protocol above tolerates both.
//!
//! Every `select!` here is `biased` (listed in priority order), so that on a simulated network
//! (turmoil, through [`net::Net`]) a run is a function of its seed.
//!
//! The RDMA transport (`rdma/`) keeps this contract over queue pairs; [`Transport`] is either.
//!
//! Not here: encryption or per-frame integrity (see `handshake.rs`), learning a peer's
//! listen address from its connection (addresses come from config and routing info), limits on
//! concurrent unauthenticated connections (each is bounded by the handshake timeout), and
//! forgetting peers (one small entry per peer ever seen). Call [`Transport::shutdown`]: dropping
//! the handles does not stop the tasks.

mod counters;
pub mod credential;
mod faults;
mod frame;
mod handshake;
pub mod net;
mod peer;
pub mod policy;
pub mod rdma;
mod rdma_ctl;
mod tcp;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::ops::Range;
use std::time::Duration;

use bytes::Bytes;
use t3fs_core::ids::NodeId;
use t3fs_core::limits::FRAME_BYTES_MAX;
use t3fs_core::msg::Msg;

pub use counters::TransportCounters;
pub use credential::{Credential, Identity, PeerRole};
pub use faults::{Link, NetFaults};
pub use handshake::Roster;
pub use rdma::{RdmaTransport, RdmaWire};
pub use tcp::TcpTransport;

/// How a transport runs. `Debug` does not show the token.
#[derive(Clone)]
pub struct TransportConfig {
    /// This node.
    pub me: NodeId,
    /// Where to listen; `None` for a client that only dials (port 0 picks a free port).
    pub listen: Option<SocketAddr>,
    /// What this end proves in the handshake (`credential.rs`); peers whose credential does not
    /// come from the same cluster secret are refused.
    pub credential: Credential,
    /// Servers: which node id holds which server role; a peer claiming otherwise is refused.
    pub roster: Option<Roster>,
    /// Most peers with a row at once (default 65,536); a new peer beyond it is refused and
    /// counted `peers_full`. A client's row goes when its last connection does.
    pub peers_max: usize,
    /// Outbound frames queued per peer before `try_send` refuses (default 1024).
    pub queue_frames: usize,
    /// Inbound frames waiting for the receiver before sockets stop being read (default 1024).
    pub inbound_frames: usize,
    /// Largest frame payload, either way (default the codec's `FRAME_BYTES_MAX`).
    pub frame_max: usize,
    /// Reconnect backoff: the first wait and the cap; each wait is jittered in `[d/2, d]`.
    pub connect_backoff: Range<Duration>,
    /// Time allowed to connect and authenticate (default 5 s).
    pub handshake_timeout: Duration,
    /// The sockets (default real TCP, [`net::TokioNet`]; tests may simulate a network).
    pub net: std::sync::Arc<dyn net::Net>,
    /// Seed of the incarnation number and the backoff jitter (`None`: drawn from the OS). A
    /// simulation sets it so that a run is a function of its seed.
    pub seed: Option<u64>,
    /// `Some`: frames go over RDMA on this device (TCP stays underneath for connection
    /// management); `None` (default): TCP.
    pub rdma: Option<RdmaWire>,
}

impl TransportConfig {
    /// A configuration with the default bounds for a holder of the cluster secret `token`
    /// that serves nothing (an admin tool, a test); a service sets its own role and
    /// roster, a client its credential ([`Self::with_credential`]).
    pub fn new(me: NodeId, listen: Option<SocketAddr>, token: impl Into<String>) -> Self {
        Self::with_credential(
            me,
            listen,
            Credential::trusted(&token.into(), PeerRole::Admin),
        )
    }

    /// A configuration with the default bounds that proves `credential`.
    pub fn with_credential(me: NodeId, listen: Option<SocketAddr>, credential: Credential) -> Self {
        Self {
            me,
            listen,
            credential,
            roster: None,
            peers_max: 1 << 16,
            queue_frames: 1024,
            inbound_frames: 1024,
            frame_max: FRAME_BYTES_MAX as usize,
            connect_backoff: Duration::from_millis(100)..Duration::from_secs(2),
            handshake_timeout: Duration::from_secs(5),
            net: std::sync::Arc::new(net::TokioNet),
            seed: None,
            rdma: None,
        }
    }
}

impl std::fmt::Debug for TransportConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransportConfig")
            .field("me", &self.me)
            .field("listen", &self.listen)
            .field("credential", &self.credential)
            .field("roster", &self.roster)
            .field("queue_frames", &self.queue_frames)
            .field("inbound_frames", &self.inbound_frames)
            .field("frame_max", &self.frame_max)
            .field("connect_backoff", &self.connect_backoff)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("seed", &self.seed)
            .field("rdma", &self.rdma)
            .finish_non_exhaustive()
    }
}

/// A frame received from a peer.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct Inbound {
    /// The authenticated sender.
    pub from: NodeId,
    /// What its credential proved (the role and user its messages are checked against).
    pub id: Identity,
    /// The head: an opaque frame, or an encoded `Msg` with its payload taken out.
    pub frame: Bytes,
    /// The bulk part: the message's payload, read into a buffer of its own (empty for most).
    pub bulk: Vec<u8>,
}

/// One outbound frame: a head and a bulk part (empty for most frames), written to the socket as
/// they are, so a message's payload is never copied into an encoding buffer (`frame.rs`).
#[derive(Clone, Debug, Default, Eq, PartialEq)]
pub struct Frame {
    /// An opaque frame, or an encoded `Msg` with its payload taken out.
    pub head: Bytes,
    /// The message's payload.
    pub bulk: Bytes,
}

impl Frame {
    /// Bytes of both parts.
    pub fn len(&self) -> usize {
        self.head.len() + self.bulk.len()
    }

    /// Whether both parts are empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl From<Bytes> for Frame {
    fn from(head: Bytes) -> Self {
        Self {
            head,
            bulk: Bytes::new(),
        }
    }
}

impl From<Msg> for Frame {
    /// Encodes `msg` with the core codec, its payload as the bulk part (moved, not copied).
    fn from(msg: Msg) -> Self {
        let (head, bulk) = msg.encode_split();
        Self {
            head: head.into(),
            bulk: bulk.map_or_else(Bytes::new, Bytes::from_owner),
        }
    }
}

/// Why a frame was not queued. Every refusal is counted.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum SendError {
    /// The peer's queue is full; the frame was dropped (`dropped_full`).
    Full,
    /// No address and no connection is known for the peer, or it is this node (`no_route`).
    NoRoute,
    /// The frame exceeds `frame_max` (`oversized`).
    TooLarge,
    /// The transport was shut down.
    Closed,
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Full => "peer queue full",
            Self::NoRoute => "no route to peer",
            Self::TooLarge => "frame too large",
            Self::Closed => "transport shut down",
        })
    }
}

impl std::error::Error for SendError {}

/// The next of a splitmix64 sequence kept in `state` (jitter and fault draws; lock-free).
pub(crate) fn splitmix(state: &std::sync::atomic::AtomicU64) -> u64 {
    let mut z = state
        .fetch_add(0x9E37_79B9_7F4A_7C15, std::sync::atomic::Ordering::Relaxed)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A running transport, TCP or RDMA, behind one handle: what nodes, clients and services hold.
/// Both kinds keep the same contract (module docs): bounded queues, best-effort delivery in
/// order per connection, no panic on a peer's bytes, and the same errors and counters.
#[derive(Clone, Debug)]
pub enum Transport {
    /// Frames over TCP.
    Tcp(TcpTransport),
    /// Frames over RDMA, TCP for connection management.
    Rdma(RdmaTransport),
}

macro_rules! each {
    ($self:ident, $t:ident => $e:expr) => {
        match $self {
            Transport::Tcp($t) => $e,
            Transport::Rdma($t) => $e,
        }
    };
}

impl Transport {
    /// Starts the transport `cfg` asks for (RDMA when `cfg.rdma` is set) and returns its
    /// handle and the receiver of inbound frames. Must run inside a tokio runtime.
    pub async fn start(
        mut cfg: TransportConfig,
    ) -> std::io::Result<(Self, tokio::sync::mpsc::Receiver<Inbound>)> {
        Ok(match cfg.rdma.take() {
            Some(wire) => {
                let (t, rx) = RdmaTransport::start(cfg, wire).await?;
                (Self::Rdma(t), rx)
            }
            None => {
                let (t, rx) = TcpTransport::start(cfg).await?;
                (Self::Tcp(t), rx)
            }
        })
    }

    /// This node.
    pub fn me(&self) -> NodeId {
        each!(self, t => t.me())
    }

    /// The TCP listener's address (`None` for a client that does not listen).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        each!(self, t => t.local_addr())
    }

    /// Records (or changes) where `node` listens.
    pub fn set_addr(&self, node: NodeId, addr: SocketAddr) {
        each!(self, t => t.set_addr(node, addr));
    }

    /// Queues `frame` for `to` without waiting; a full queue drops it (`Err(Full)`).
    pub fn try_send(&self, to: NodeId, frame: impl Into<Frame>) -> Result<(), SendError> {
        each!(self, t => t.try_send(to, frame))
    }

    /// Queues `frame` for `to`, waiting for queue space (backpressure).
    pub async fn send(&self, to: NodeId, frame: impl Into<Frame>) -> Result<(), SendError> {
        each!(self, t => t.send(to, frame).await)
    }

    /// Decodes an inbound frame with the core codec; a failure is counted `malformed`.
    pub fn decode(&self, inb: &mut Inbound) -> Result<Msg, t3fs_core::wire::codec::DecodeError> {
        each!(self, t => t.decode(inb))
    }

    /// Whether the sender of `inb` may send `msg` ([`policy::allowed`]); a refusal is counted
    /// `refused_role` and logged, and the caller drops the frame.
    pub fn admit(&self, inb: &Inbound, msg: &Msg) -> bool {
        let ok = policy::allowed(inb.id, msg);
        if !ok {
            each!(self, t => t.count_refused());
            tracing::warn!(
                from = %inb.from, role = %inb.id.role, uid = inb.id.uid,
                kind = ?std::mem::discriminant(msg),
                "refused a message from a peer whose role may not send it"
            );
        }
        ok
    }

    /// A snapshot of the counters.
    pub fn counters(&self) -> TransportCounters {
        each!(self, t => t.counters())
    }

    /// Connections open now (TCP: authenticated sockets; RDMA: queue pairs up).
    pub fn connections(&self) -> usize {
        each!(self, t => t.connections())
    }

    /// Replaces the network faults.
    pub fn set_faults(&self, f: NetFaults) {
        each!(self, t => t.set_faults(f));
    }

    /// The network faults now.
    pub fn faults(&self) -> NetFaults {
        each!(self, t => t.faults())
    }

    /// Stops every task and closes every connection.
    pub async fn shutdown(&self) {
        each!(self, t => t.shutdown().await);
    }
}
