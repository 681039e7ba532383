//! Storage service messages (3FS §1.3): client writes to the head, forwarded updates between
//! replicas, reads at any serving replica, and their replies with typed [`Status`]es.
//!
//! Protocol outcomes (stale chain version, not head, channel locked, …) are statuses inside
//! replies, never Rust errors: the peer reacts to them (see each variant).

use crate::chunk::UpdateKind;
use crate::ids::{
    ChainVersion, ChannelId, ChunkId, ChunkVersion, ClientId, InodeId, RequestId, SeqNum,
    VersionedChain,
};
use crate::limits::CHUNK_META_PAGE_MAX;
use crate::payload::Payload;
use crate::wire::codec::{decode_list_max, DecodeError, Decoder, Encoder, Wire};
use crate::wire_struct;

/// The exactly-once identity of a client update (3FS `MessageTag`), carried down the chain so
/// that every replica can recognise a replay.
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct MessageTag {
    /// The client.
    pub client: ClientId,
    /// The client's request (for tracing).
    pub request: RequestId,
    /// Exactly-once channel.
    pub channel: ChannelId,
    /// Sequence number within the channel; a retry reuses it.
    pub seqnum: SeqNum,
}
wire_struct!(MessageTag {
    client,
    request,
    channel,
    seqnum
});

// Here rather than beside `UpdateTag` (chunk.rs): the chunk records are a layer below the
// messages, so chunk.rs names no message type.
impl From<&MessageTag> for crate::chunk::UpdateTag {
    fn from(t: &MessageTag) -> Self {
        Self {
            client: t.client,
            channel: t.channel,
            seqnum: t.seqnum,
        }
    }
}

/// An update (3FS `UpdateIO`): from a client to the head (`Msg::Write`) or from a predecessor to
/// its successor (`Msg::Update`).
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct UpdateReq {
    /// Exactly-once identity.
    pub tag: MessageTag,
    /// The chain and the chain version the sender routes by; must match the receiver's exactly.
    pub chain: VersionedChain,
    /// The chunk.
    pub chunk: ChunkId,
    /// What to do.
    pub kind: UpdateKind,
    /// The chunk size of the file's layout; writes beyond it are rejected.
    pub chunk_size: u32,
    /// 0 from the client; the head assigns `committed + 1` and successors receive it explicitly.
    pub update_version: ChunkVersion,
    /// CRC32C of the payload (write data or replacement content; 0 for other kinds).
    pub checksum: u32,
    /// Retry count of the sender (0 for the first attempt).
    pub retry: u32,
    /// Part of a resync or a write to a syncing successor (full-chunk replace).
    pub is_syncing: bool,
}
wire_struct!(UpdateReq {
    tag,
    chain,
    chunk,
    kind,
    chunk_size,
    update_version,
    checksum,
    retry,
    is_syncing
});

/// The outcome of a committed update (3FS `IOResult`).
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct UpdateResult {
    /// The version the update committed as.
    pub commit_version: ChunkVersion,
    /// Chain version recorded with the commit.
    pub commit_chain_version: ChainVersion,
    /// Chunk length after the update.
    pub len: u32,
    /// CRC32C of the whole chunk after the update; compared along the chain.
    pub checksum: u32,
}
wire_struct!(UpdateResult {
    commit_version,
    commit_chain_version,
    len,
    checksum
});

/// Reply to an [`UpdateReq`], sent to whoever sent the request.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct UpdateReply {
    /// The request's tag.
    pub tag: MessageTag,
    /// The request's chain and chain version.
    pub chain: VersionedChain,
    /// The chunk.
    pub chunk: ChunkId,
    /// The request's `update_version` (0 for client writes).
    pub update_version: ChunkVersion,
    /// Outcome.
    pub status: Status,
    /// Present when `status` is `Ok`.
    pub result: Option<UpdateResult>,
}
impl UpdateReply {
    /// The reply to `req` with `status` (and a result on success), echoing what the requester
    /// matches replies by: tag, chain, chunk and update version.
    pub fn answering(req: &UpdateReq, status: Status, result: Option<UpdateResult>) -> Self {
        Self {
            tag: req.tag,
            chain: req.chain,
            chunk: req.chunk,
            update_version: req.update_version,
            status,
            result,
        }
    }
}

wire_struct!(UpdateReply {
    tag,
    chain,
    chunk,
    update_version,
    status,
    result
});

/// A read of a byte range of one chunk at any serving replica (3FS `ReadIO`).
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct ReadReq {
    /// Client-chosen id echoed in the reply.
    pub read_id: RequestId,
    /// The chain and the chain version the client routes by.
    pub chain: VersionedChain,
    /// The chunk.
    pub chunk: ChunkId,
    /// Byte offset.
    pub offset: u32,
    /// Byte count.
    pub len: u32,
    /// Retry count.
    pub retry: u32,
}
wire_struct!(ReadReq {
    read_id,
    chain,
    chunk,
    offset,
    len,
    retry
});

/// Reply to a [`ReadReq`].
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct ReadReply {
    /// The request's id.
    pub read_id: RequestId,
    /// The chunk.
    pub chunk: ChunkId,
    /// Outcome. `Ok` with `version == 0` means the chunk does not exist (a hole).
    pub status: Status,
    /// The bytes (trimmed at the chunk's length).
    pub data: Payload,
    /// The committed version the bytes belong to.
    pub version: ChunkVersion,
    /// CRC32C of `data`.
    pub checksum: u32,
}
wire_struct!(ReadReply {
    read_id,
    chunk,
    status,
    data,
    version,
    checksum
});

/// Which committed chunk of a file is the last on one chain (3FS `queryLastChunk`), asked of
/// the chain's head: the head commits an update before acknowledging it, so its committed
/// metadata covers every acknowledged write. Meta computes precise file lengths from the answers
/// (§4.4); truncate and GC find the chunks to remove with it.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct QueryLastChunkReq {
    /// Client-chosen id echoed in the reply.
    pub query_id: RequestId,
    /// The chain and the chain version the client routes by.
    pub chain: VersionedChain,
    /// The file.
    pub inode: InodeId,
    /// Chunk indexes `begin..end` are considered.
    pub begin: u32,
    /// Exclusive end of the index range.
    pub end: u32,
    /// Count zero-length chunks too (GC removes every chunk; lengths count data only).
    pub empty: bool,
    /// Retry count.
    pub retry: u32,
}
wire_struct!(QueryLastChunkReq {
    query_id,
    chain,
    inode,
    begin,
    end,
    empty,
    retry
});

/// The last committed chunk a query found.
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct LastChunk {
    /// Its index in the file.
    pub index: u32,
    /// Its committed length.
    pub len: u32,
}
wire_struct!(LastChunk { index, len });

/// Reply to a [`QueryLastChunkReq`].
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct QueryLastChunkReply {
    /// The request's id.
    pub query_id: RequestId,
    /// Outcome.
    pub status: Status,
    /// With `Ok`: the last committed chunk in the range, `None` when the chain holds none.
    pub last: Option<LastChunk>,
}
wire_struct!(QueryLastChunkReply {
    query_id,
    status,
    last
});

/// One target's space (3FS `spaceInfo`), for meta's statfs.
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct TargetSpace {
    /// The target.
    pub target: crate::ids::TargetId,
    /// Its configured capacity in bytes.
    pub capacity: u64,
    /// Bytes of committed chunk data on it.
    pub used: u64,
}
wire_struct!(TargetSpace {
    target,
    capacity,
    used
});

/// Storage node → meta: the space of each of its targets.
#[derive(Clone, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct SpaceInfoReply {
    /// The answering node.
    pub node: crate::ids::NodeId,
    /// Its targets.
    pub targets: Vec<TargetSpace>,
}

impl Wire for SpaceInfoReply {
    fn encode(&self, enc: &mut Encoder) {
        self.node.encode(enc);
        crate::wire::codec::encode_list(enc, &self.targets);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            node: Wire::decode(dec)?,
            targets: crate::wire::codec::decode_list(dec)?,
        })
    }
}

/// One committed chunk as a dump shows it (3FS `getAllChunkMetadata`).
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct ChunkSum {
    /// The chunk.
    pub chunk: crate::ids::ChunkId,
    /// Its committed version.
    pub version: crate::ids::ChunkVersion,
    /// Committed length in bytes.
    pub len: u32,
    /// CRC32C of the committed content.
    pub checksum: u32,
}
wire_struct!(ChunkSum {
    chunk,
    version,
    len,
    checksum
});

/// One target's committed chunks, in chunk order (in a dump page: those of the page).
#[derive(Clone, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct TargetDump {
    /// The target.
    pub target: crate::ids::TargetId,
    /// Its committed chunks (version > 0).
    pub chunks: Vec<ChunkSum>,
}

impl Wire for TargetDump {
    fn encode(&self, enc: &mut Encoder) {
        self.target.encode(enc);
        crate::wire::codec::encode_list(enc, &self.chunks);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        let target = Wire::decode(dec)?;
        let chunks = decode_list_max(dec, CHUNK_META_PAGE_MAX as u32)?;
        Ok(Self { target, chunks })
    }
}

/// Where a chunk metadata dump goes on: `target`'s committed chunks after `after` (from its
/// first when `None`), then the node's targets after it.
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct DumpCursor {
    /// The target the next page starts in.
    pub target: crate::ids::TargetId,
    /// The last chunk of that target already dumped.
    pub after: Option<crate::ids::ChunkId>,
}
wire_struct!(DumpCursor { target, after });

/// Storage node → asker: one page of the committed chunk metadata of its targets, at most
/// [`CHUNK_META_PAGE_MAX`] chunks in all. A target whose chunks a page cuts short comes again,
/// with the rest, in the next page.
#[derive(Clone, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct ChunkMetaDump {
    /// The answering node.
    pub node: crate::ids::NodeId,
    /// Its targets in this page, in target order.
    pub targets: Vec<TargetDump>,
    /// `None`: the dump is complete. Otherwise ask again with this cursor.
    pub next: Option<DumpCursor>,
}

impl Wire for ChunkMetaDump {
    fn encode(&self, enc: &mut Encoder) {
        self.node.encode(enc);
        crate::wire::codec::encode_list(enc, &self.targets);
        self.next.encode(enc);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        let node = Wire::decode(dec)?;
        let targets: Vec<TargetDump> = crate::wire::codec::decode_list(dec)?;
        let chunks: usize = targets.iter().map(|t| t.chunks.len()).sum();
        if chunks > CHUNK_META_PAGE_MAX {
            return Err(DecodeError::TooLong(chunks as u32));
        }
        Ok(Self {
            node,
            targets,
            next: Wire::decode(dec)?,
        })
    }
}

/// Outcome of a storage request. Variants other than `Ok` say what the requester should do.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum Status {
    /// Success.
    Ok,
    /// The chunk's updates are busy (lock queue full): retry after a short wait.
    Busy,
    /// The chunk's recorded chain version is newer than the request's (3FS
    /// `kChainVersionMismatch`): refresh routing, retry.
    ChainVersionMismatch,
    /// Another update with this channel and seqnum is still running (3FS `kChannelIsLocked`):
    /// retry later; the retry will get the cached result.
    ChannelLocked,
    /// The payload's CRC32C did not match, or a successor's chunk checksum differed: retry from
    /// the client (the bytes were damaged in flight).
    ChecksumMismatch,
    /// The local chunk store failed (EIO, corruption, or a commit or install refused for want
    /// of space where the version may already be committed elsewhere): retry; a failed medium
    /// takes the target offline.
    DiskError,
    /// An older seqnum on a channel that has moved on (3FS `kDuplicateUpdate`): the client
    /// already has the answer; drop.
    DuplicateUpdate,
    /// Forwarding to the successor failed after the retry budget: retry from the client.
    ForwardFailed,
    /// A malformed request (write beyond the chunk size, wrong kind): do not retry.
    InvalidRequest,
    /// An update version skips ahead of `committed + 1` (3FS `kChunkMissingUpdate`): the
    /// predecessor must resync or retry after routing changes.
    MissingUpdate,
    /// A client write reached a target that is not the head (3FS `kRoutingError`): refresh
    /// routing, retry.
    NotHead,
    /// The chunk has a pending version and this target answers reads only when clean (legacy
    /// engine's `kChunkNotCommit`): fast retry.
    NotCommitted,
    /// This node hosts no target of the chain: refresh routing, retry elsewhere.
    NoTarget,
    /// Request and receiver disagree on the chain version (3FS `kRoutingVersionMismatch`);
    /// carries the receiver's: the side with the older one refreshes routing, then retry.
    StaleChainVersion {
        /// The receiver's chain version.
        current: ChainVersion,
    },
    /// The target is not serving (offline, waiting, or syncing for reads): retry elsewhere.
    TargetNotServing,
    /// The node's storage-side lease from the primary mgmtd has lapsed (`storage/lease.rs`):
    /// mgmtd may already have moved its targets out of their chains. Refresh routing, retry
    /// elsewhere.
    NoLease,
    /// A replica's chunk store had no room for the update (ENOSPC): nothing of it is committed
    /// anywhere, and the chain gave it up (`storage/write.rs`). The target stays SERVING for
    /// reads. Do not retry: it cannot succeed until space is freed; the caller fails with
    /// ENOSPC.
    NoSpace,
}

impl Status {
    /// Whether retrying the same request later may succeed.
    pub fn is_retryable(self) -> bool {
        !matches!(
            self,
            Self::Ok | Self::InvalidRequest | Self::DuplicateUpdate | Self::NoSpace
        )
    }
}

impl Wire for Status {
    fn encode(&self, enc: &mut Encoder) {
        let tag = match self {
            Self::Ok => 0,
            Self::Busy => 1,
            Self::ChainVersionMismatch => 2,
            Self::ChannelLocked => 3,
            Self::ChecksumMismatch => 4,
            Self::DiskError => 5,
            Self::DuplicateUpdate => 6,
            Self::ForwardFailed => 7,
            Self::InvalidRequest => 8,
            Self::MissingUpdate => 9,
            Self::NotHead => 10,
            Self::NotCommitted => 11,
            Self::NoTarget => 12,
            Self::StaleChainVersion { .. } => 13,
            Self::TargetNotServing => 14,
            Self::NoLease => 15,
            Self::NoSpace => 16,
        };
        enc.u8(tag);
        if let Self::StaleChainVersion { current } = self {
            current.encode(enc);
        }
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(match dec.u8()? {
            0 => Self::Ok,
            1 => Self::Busy,
            2 => Self::ChainVersionMismatch,
            3 => Self::ChannelLocked,
            4 => Self::ChecksumMismatch,
            5 => Self::DiskError,
            6 => Self::DuplicateUpdate,
            7 => Self::ForwardFailed,
            8 => Self::InvalidRequest,
            9 => Self::MissingUpdate,
            10 => Self::NotHead,
            11 => Self::NotCommitted,
            12 => Self::NoTarget,
            13 => Self::StaleChainVersion {
                current: Wire::decode(dec)?,
            },
            14 => Self::TargetNotServing,
            15 => Self::NoLease,
            16 => Self::NoSpace,
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}

impl Wire for UpdateKind {
    fn encode(&self, enc: &mut Encoder) {
        match self {
            Self::Write { offset, data } => {
                enc.u8(0);
                enc.u32(*offset);
                enc.bytes(data);
            }
            Self::Remove => enc.u8(1),
            Self::Truncate { len } => {
                enc.u8(2);
                enc.u32(*len);
            }
            Self::Extend { len } => {
                enc.u8(3);
                enc.u32(*len);
            }
            Self::Replace { data } => {
                enc.u8(4);
                enc.bytes(data);
            }
        }
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(match dec.u8()? {
            0 => Self::Write {
                offset: dec.u32()?,
                data: Wire::decode(dec)?,
            },
            1 => Self::Remove,
            2 => Self::Truncate { len: dec.u32()? },
            3 => Self::Extend { len: dec.u32()? },
            4 => Self::Replace {
                data: Wire::decode(dec)?,
            },
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}
