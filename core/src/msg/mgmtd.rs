//! Cluster-manager messages (3FS §1.2, §2.3, §3.6): heartbeats from storage nodes with their
//! targets' local states, the not-primary redirect, client sessions, and the resync handshake
//! between a predecessor and its SYNCING successor.
//!
//! Protocol outcomes are statuses inside replies ([`MgmtdStatus`]), never Rust errors.

use crate::chunk::{Applied, ChunkMeta, PendingMeta, UpdateTag};
use crate::ids::{
    ChainVersion, ChunkId, ClientId, NodeId, RoutingVersion, TargetId, VersionedChain,
};
use crate::limits::CHUNK_META_PAGE_MAX;
use crate::msg::Status;
use crate::routing::LocalState;
use crate::wire::codec::{
    decode_list, decode_list_max, encode_list, DecodeError, Decoder, Encoder, Wire,
};
use crate::wire_struct;

/// One target's report in a heartbeat (3FS `LocalTargetInfo`).
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct LocalTargetInfo {
    /// The target.
    pub target: TargetId,
    /// Its local state.
    pub state: LocalState,
    /// The chain version the node last saw for the target's chain (0 = unknown); mgmtd ignores
    /// reports older than its own chain version (`heartbeat_ignore_stale_targets`).
    pub chain_version: ChainVersion,
    /// The target came up on an empty store and has not been synced or served since: it may be
    /// a replaced disk, so mgmtd never picks it as LASTSRV while a target that held data can be.
    pub fresh: bool,
}
wire_struct!(LocalTargetInfo {
    target,
    state,
    chain_version,
    fresh
});

/// Storage → primary mgmtd, periodically and on every local-state change.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct Heartbeat {
    /// The sender.
    pub node: NodeId,
    /// Strictly increasing per sender; a restarted sender learns the last one from the reply.
    pub hb_version: u64,
    /// The sender's clock (nanoseconds); rejected outside mgmtd's validity window.
    pub timestamp: u64,
    /// Every hosted target.
    pub targets: Vec<LocalTargetInfo>,
}

impl Wire for Heartbeat {
    fn encode(&self, enc: &mut Encoder) {
        self.node.encode(enc);
        self.hb_version.encode(enc);
        self.timestamp.encode(enc);
        encode_list(enc, &self.targets);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            node: Wire::decode(dec)?,
            hb_version: Wire::decode(dec)?,
            timestamp: Wire::decode(dec)?,
            targets: decode_list(dec)?,
        })
    }
}

/// Outcome of a mgmtd request.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum MgmtdStatus {
    /// Accepted.
    Ok,
    /// This mgmtd is not the primary; `primary` is its best guess. Retry there.
    NotPrimary {
        /// The primary, if known.
        primary: Option<NodeId>,
    },
    /// `hb_version` not above `last`: the sender continues from `last + 1` and retries once.
    StaleHeartbeat {
        /// The last accepted version.
        last: u64,
    },
    /// The heartbeat's timestamp is outside the validity window (clock skew): fix the clock.
    BadTimestamp,
    /// The node is disabled by an admin: heartbeats are refused until it is enabled.
    Disabled,
    /// Malformed content (duplicate targets, node id 0 or mgmtd's own): do not retry.
    Invalid,
    /// The heartbeat was accepted (sent only with the storage-side lease on; 3FS answers
    /// accepted heartbeats with nothing). Echoes the heartbeat's own timestamp, so the node
    /// extends its lease from the moment it *sent* the report (`storage/lease.rs`), and carries
    /// the routing version, so a node that is behind refreshes at once.
    Accepted {
        /// The accepted heartbeat's version.
        hb_version: u64,
        /// The accepted heartbeat's timestamp (the sender's clock).
        timestamp: u64,
        /// The primary's routing version.
        routing: RoutingVersion,
    },
}

impl Wire for MgmtdStatus {
    fn encode(&self, enc: &mut Encoder) {
        match self {
            Self::Ok => enc.u8(0),
            Self::NotPrimary { primary } => {
                enc.u8(1);
                primary.encode(enc);
            }
            Self::StaleHeartbeat { last } => {
                enc.u8(2);
                last.encode(enc);
            }
            Self::BadTimestamp => enc.u8(3),
            Self::Disabled => enc.u8(4),
            Self::Invalid => enc.u8(5),
            Self::Accepted {
                hb_version,
                timestamp,
                routing,
            } => {
                enc.u8(6);
                hb_version.encode(enc);
                timestamp.encode(enc);
                routing.encode(enc);
            }
        }
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(match dec.u8()? {
            0 => Self::Ok,
            1 => Self::NotPrimary {
                primary: Wire::decode(dec)?,
            },
            2 => Self::StaleHeartbeat {
                last: Wire::decode(dec)?,
            },
            3 => Self::BadTimestamp,
            4 => Self::Disabled,
            5 => Self::Invalid,
            6 => Self::Accepted {
                hb_version: Wire::decode(dec)?,
                timestamp: Wire::decode(dec)?,
                routing: Wire::decode(dec)?,
            },
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}

/// Primary → storage: the heartbeat's outcome.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct HeartbeatReply {
    /// Outcome.
    pub status: MgmtdStatus,
}
wire_struct!(HeartbeatReply { status });

/// Client → primary: keep my session alive (3FS `extendClientSession`).
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct ExtendSession {
    /// The client.
    pub client: ClientId,
}
wire_struct!(ExtendSession { client });

/// A resync round, as its messages name it: `SyncDone` (predecessor → SYNCING successor) and
/// the echo in the replies; a `SyncStart` page ([`SyncStartReq`]) carries it with a cursor.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct SyncReq {
    /// The chain at the predecessor's chain version.
    pub chain: VersionedChain,
    /// The successor target being synced.
    pub target: TargetId,
}
wire_struct!(SyncReq { chain, target });

/// Predecessor → SYNCING successor: one page of the successor's chunk metadata (3FS
/// `syncStart`): its first chunks, or those after the predecessor's cursor `after`.
///
/// The first page's request is encoded as the bare [`SyncReq`] (kind `SyncStart`, as before
/// replies were paged), a later page's as the request and its cursor (kind `SyncStartAfter`).
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct SyncStartReq {
    /// The round: the chain at the predecessor's chain version and the successor.
    pub req: SyncReq,
    /// The last chunk of the page before; `None` asks for the first page.
    pub after: Option<ChunkId>,
}
wire_struct!(SyncStartReq { req, after });

/// Successor → predecessor: one page of its chunk metadata, or why it refuses.
///
/// A whole answer (the first page with nothing after it) is encoded as before replies were
/// paged (kind `SyncStartReply`: request, status, metas), any other page with its cursor and
/// `more` too (kind `SyncStartPage`); so rounds over at most [`CHUNK_META_PAGE_MAX`] chunks
/// send the same bytes as before.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct SyncStartReply {
    /// Echo of the request.
    pub req: SyncReq,
    /// Echo of the request's cursor: the predecessor takes only the page it asked for last.
    pub after: Option<ChunkId>,
    /// `Ok`, `StaleChainVersion`, or `TargetNotServing` (not SYNCING + ONLINE).
    pub status: Status,
    /// Metadata of the successor's chunks (committed and pending) after `after`, in chunk
    /// order, at most [`CHUNK_META_PAGE_MAX`].
    pub metas: Vec<ChunkMeta>,
    /// More chunks follow the last of `metas`: the predecessor asks again after it.
    pub more: bool,
}

impl SyncStartReply {
    /// Whether this is a whole answer, encoded without cursor and `more`.
    pub fn is_whole(&self) -> bool {
        self.after.is_none() && !self.more
    }

    /// The encoding of a whole answer (kind `SyncStartReply`).
    pub(super) fn encode_whole(&self, enc: &mut Encoder) {
        debug_assert!(self.is_whole());
        self.req.encode(enc);
        self.status.encode(enc);
        encode_list(enc, &self.metas);
    }

    /// Decodes a whole answer (kind `SyncStartReply`).
    pub(super) fn decode_whole(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            req: Wire::decode(dec)?,
            after: None,
            status: Wire::decode(dec)?,
            metas: decode_page(dec)?,
            more: false,
        })
    }
}

/// A page of chunk metadata: at most [`CHUNK_META_PAGE_MAX`] entries, checked before
/// anything is allocated.
fn decode_page(dec: &mut Decoder<'_>) -> Result<Vec<ChunkMeta>, DecodeError> {
    decode_list_max(dec, CHUNK_META_PAGE_MAX as u32)
}

/// The encoding of a page other than a whole answer (kind `SyncStartPage`); decoding one
/// that is a whole answer is invalid (each reply has one encoding).
impl Wire for SyncStartReply {
    fn encode(&self, enc: &mut Encoder) {
        self.req.encode(enc);
        self.after.encode(enc);
        self.status.encode(enc);
        encode_list(enc, &self.metas);
        self.more.encode(enc);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        let rep = Self {
            req: Wire::decode(dec)?,
            after: Wire::decode(dec)?,
            status: Wire::decode(dec)?,
            metas: decode_page(dec)?,
            more: Wire::decode(dec)?,
        };
        if rep.is_whole() {
            return Err(DecodeError::Invalid);
        }
        Ok(rep)
    }
}

/// Successor → predecessor: outcome of `SyncDone`.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct SyncDoneReply {
    /// Echo of the request.
    pub req: SyncReq,
    /// `Ok` once the successor is locally UPTODATE.
    pub status: Status,
}
wire_struct!(SyncDoneReply { req, status });

impl Wire for LocalState {
    fn encode(&self, enc: &mut Encoder) {
        enc.u8(match self {
            Self::UpToDate => 0,
            Self::Online => 1,
            Self::Offline => 2,
        });
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(match dec.u8()? {
            0 => Self::UpToDate,
            1 => Self::Online,
            2 => Self::Offline,
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}

wire_struct!(PendingMeta {
    version,
    len,
    checksum,
    removes,
    tag
});
wire_struct!(UpdateTag {
    client,
    channel,
    seqnum
});
wire_struct!(Applied {
    tag,
    version,
    chain_version,
    len,
    checksum
});
impl Wire for Vec<Applied> {
    fn encode(&self, enc: &mut Encoder) {
        encode_list(enc, self);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        decode_list(dec)
    }
}
wire_struct!(ChunkMeta {
    chunk,
    committed,
    chain_version,
    len,
    checksum,
    pending,
    applied
});

/// Primary mgmtd → meta server: the clients whose sessions are alive (3FS meta prunes file
/// sessions of clients missing here).
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct ClientSessions {
    /// Live clients, in id order.
    pub clients: Vec<crate::ids::ClientId>,
    /// The primary has held its tenure for a whole session timeout, so a client missing here
    /// really stopped extending (a newer primary knows only clients that extended since).
    pub complete: bool,
}

impl Wire for ClientSessions {
    fn encode(&self, enc: &mut Encoder) {
        super::codec::encode_list(enc, &self.clients);
        self.complete.encode(enc);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            clients: super::codec::decode_list(dec)?,
            complete: Wire::decode(dec)?,
        })
    }
}
