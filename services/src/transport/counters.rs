//! The transport's counters: lock-free atomics bumped on the hot path, read as one
//! [`TransportCounters`] snapshot.
//!
//! Invariant: every frame or connection the transport refuses or loses is counted exactly once,
//! under the reason it was refused, so that a run's report can tell loss from misbehaviour.
//! A snapshot is not atomic across fields (each field is read on its own); it is meant for
//! reports and tests, not for arithmetic between fields under concurrent traffic.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($(#[$doc:meta])* $field:ident,)*) => {
        /// A snapshot of a transport's counters (monotonic since `Transport::start`).
        #[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
        pub struct TransportCounters {
            $($(#[$doc])* pub $field: u64,)*
        }

        /// The live counters behind a [`TransportCounters`] snapshot.
        #[derive(Debug, Default)]
        pub(crate) struct Counters {
            $(pub(crate) $field: AtomicU64,)*
        }

        impl Counters {
            /// Reads every counter.
            pub(crate) fn snapshot(&self) -> TransportCounters {
                TransportCounters {
                    $($field: self.$field.load(Ordering::Relaxed),)*
                }
            }
        }
    };
}

counters! {
    /// Frames read from peers (counted before they reach the inbound channel).
    frames_in,
    /// Payload bytes of `frames_in` (length prefixes excluded).
    bytes_in,
    /// Frames written to a socket (counted after the write, so possibly after the peer has
    /// already received them).
    frames_out,
    /// Payload bytes of `frames_out` (length prefixes excluded).
    bytes_out,
    /// Frames refused by `try_send` because the peer's queue was full.
    dropped_full,
    /// Frames taken from a queue whose write failed (the connection broke mid-batch): lost.
    dropped_write,
    /// Frames refused because no address and no connection was known for the peer.
    no_route,
    /// Inbound frames that the core codec could not decode (`Transport::decode`).
    malformed,
    /// Frames over the size limit: an inbound length prefix (the connection is closed) or an
    /// outbound frame refused by `try_send`/`send`.
    oversized,
    /// Connections that ended inside a frame (length prefix or payload cut short).
    truncated,
    /// Handshakes that failed: a peer without the token, a wrong protocol, a wrong or
    /// unexpected node id, a timeout, or our own proof refused by the peer.
    auth_rejected,
    /// Authenticated clients refused because another credential or incarnation holds their
    /// node id on a live connection (an id takeover, or two clients that drew one id).
    id_taken,
    /// Authenticated connections refused because the peers table was full.
    peers_full,
    /// Frames dropped because the sender's role may not send that message
    /// (`Transport::admit`).
    refused_role,
    /// Authenticated connections established (dialed or accepted).
    connects,
    /// Authenticated connections dialed to a peer this transport had been connected to before.
    reconnects,
    /// Dial attempts that failed before a connection was authenticated.
    connect_failures,
    /// Authenticated connections closed (peer gone, error, duplicate retired, shutdown).
    disconnects,
    /// Frames the fault layer dropped (a cut link, isolation, or the loss rate), in or out.
    fault_dropped,
    /// Outbound frames the fault layer sent twice.
    fault_duplicated,
    /// Outbound frames the fault layer delayed.
    fault_delayed,
    /// Frames received over RDMA (also counted in `frames_in`).
    rdma_frames_in,
    /// Frames sent over RDMA (also counted in `frames_out`).
    rdma_frames_out,
    /// Bytes this node pulled from peers' registered memory with RDMA READ.
    rdma_read_bytes,
    /// Bytes this node pushed into peers' registered memory with RDMA WRITE.
    rdma_write_bytes,
    /// RDMA connections that failed (a work request failed, or the peer broke the protocol).
    rdma_failures,
}

impl Counters {
    /// Adds one to a counter.
    pub(crate) fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
    /// Adds `n` to a counter.
    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
    /// Takes back `n` added to a counter (what was counted did not happen after all).
    pub(crate) fn sub(c: &AtomicU64, n: u64) {
        c.fetch_sub(n, Ordering::Relaxed);
    }
}
