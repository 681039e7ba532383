//! Wire messages of every t3fs service and their framing.
//!
//! [`Msg`] is the one message type machines exchange: storage and client ([`storage`]), mgmtd
//! heartbeats, routing and resync ([`mgmtd`]). Every message crosses [`codec`] in real runs and
//! in simulation alike, so codec bugs surface in simulation. Byte-level layout: `docs/wire.md`.

mod bulk;
pub mod kv;
pub mod meta;
pub mod mgmtd;
pub mod storage;

use std::collections::BTreeMap;

use crate::ids::RoutingVersion;
use crate::limits::{CHAIN_TARGETS_MAX, LIST_LEN_MAX};
use crate::routing::{ChainInfo, ChainTarget, PublicState, RoutingInfo};
use crate::wire::codec;
use crate::wire_struct;
use codec::{decode_frame, decode_list, encode_frame, encode_list, DecodeError, Decoder};
use codec::{Encoder, Wire};
pub use mgmtd::{
    ExtendSession, Heartbeat, HeartbeatReply, LocalTargetInfo, MgmtdStatus, SyncDoneReply, SyncReq,
    SyncStartReply, SyncStartReq,
};
pub use storage::{
    ChunkMetaDump, ChunkSum, DumpCursor, LastChunk, MessageTag, QueryLastChunkReply,
    QueryLastChunkReq, ReadReply, ReadReq, SpaceInfoReply, Status, TargetDump, TargetSpace,
    UpdateReply, UpdateReq, UpdateResult,
};

/// Every message of the protocol.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum Msg {
    /// Anyone → mgmtd: send me routing info newer than `known` (3FS `getRoutingInfo`).
    GetRouting {
        /// The caller's routing version (0 forces a reply).
        known: RoutingVersion,
    },
    /// Any serving replica → client.
    ReadReply(ReadReply),
    /// Client → any serving replica.
    Read(ReadReq),
    /// mgmtd → everyone: the current routing info.
    Routing(RoutingInfo),
    /// Predecessor → successor: a forwarded update with an explicit update version.
    Update(UpdateReq),
    /// Successor → predecessor, or head → client.
    UpdateReply(UpdateReply),
    /// Client → head: a client write (update version 0).
    Write(UpdateReq),
    /// Storage → primary mgmtd: local states of its targets.
    Heartbeat(Heartbeat),
    /// Primary mgmtd → storage.
    HeartbeatReply(HeartbeatReply),
    /// A non-primary mgmtd → caller of `GetRouting`: ask `primary` instead.
    NotPrimary {
        /// The primary, if known.
        primary: Option<crate::ids::NodeId>,
    },
    /// Client → primary mgmtd: keep the session alive.
    ExtendSession(ExtendSession),
    /// Predecessor → SYNCING successor: start a resync round, or ask for its next page.
    SyncStart(SyncStartReq),
    /// SYNCING successor → predecessor: a page of its chunk metadata.
    SyncStartReply(SyncStartReply),
    /// Predecessor → SYNCING successor: every chunk is copied; become UPTODATE.
    SyncDone(SyncReq),
    /// SYNCING successor → predecessor.
    SyncDoneReply(SyncDoneReply),
    /// Client → any meta server: a namespace request.
    MetaReq(meta::MetaReq),
    /// Meta server → client.
    MetaReply(meta::MetaReply),
    /// Meta server → primary mgmtd: which clients are alive?
    GetClientSessions,
    /// Primary mgmtd → meta server.
    ClientSessions(mgmtd::ClientSessions),
    /// Client (or meta) → chain head: the last committed chunk of a file on the chain.
    QueryLastChunk(QueryLastChunkReq),
    /// Chain head → asker.
    QueryLastChunkReply(QueryLastChunkReply),
    /// Meta → storage node: the space of your targets (3FS `spaceInfo`).
    SpaceInfo,
    /// Storage node → meta.
    SpaceInfoReply(SpaceInfoReply),
    /// Node → kv service: one KV step (real clusters; the simulator runs its KV in-process).
    KvReq(kv::KvReq),
    /// kv service → node.
    KvReply(kv::KvReply),
    /// mgmtd → anyone: server addresses (sent with routing when mgmtd knows them).
    NodeAddrs(kv::NodeAddrs),
    /// Tool → storage node: the committed chunk metadata of your targets (3FS
    /// `getAllChunkMetadata`, behind `admin_cli dump-chunkmeta`), a page at a time.
    DumpChunkMeta {
        /// Where the page starts: `None` for the first, else the last reply's `next`.
        cursor: Option<DumpCursor>,
    },
    /// Storage node → tool: one page.
    ChunkMetaDump(ChunkMetaDump),
}

const KIND_GET_ROUTING: u8 = 1;
const KIND_READ: u8 = 2;
const KIND_READ_REPLY: u8 = 3;
const KIND_ROUTING: u8 = 4;
const KIND_UPDATE: u8 = 5;
const KIND_UPDATE_REPLY: u8 = 6;
const KIND_WRITE: u8 = 7;
const KIND_HEARTBEAT: u8 = 8;
const KIND_HEARTBEAT_REPLY: u8 = 9;
const KIND_NOT_PRIMARY: u8 = 10;
const KIND_EXTEND_SESSION: u8 = 11;
const KIND_SYNC_START: u8 = 12;
const KIND_SYNC_START_REPLY: u8 = 13;
const KIND_SYNC_DONE: u8 = 14;
const KIND_SYNC_DONE_REPLY: u8 = 15;
const KIND_META_REQ: u8 = 16;
const KIND_META_REPLY: u8 = 17;
const KIND_GET_CLIENT_SESSIONS: u8 = 18;
const KIND_CLIENT_SESSIONS: u8 = 19;
const KIND_QUERY_LAST_CHUNK: u8 = 20;
const KIND_QUERY_LAST_CHUNK_REPLY: u8 = 21;
const KIND_SPACE_INFO: u8 = 22;
const KIND_SPACE_INFO_REPLY: u8 = 23;
const KIND_KV_REQ: u8 = 24;
const KIND_KV_REPLY: u8 = 25;
const KIND_NODE_ADDRS: u8 = 26;
const KIND_DUMP_CHUNK_META: u8 = 27;
const KIND_CHUNK_META_DUMP: u8 = 28;
const KIND_SYNC_START_AFTER: u8 = 29;
const KIND_SYNC_START_PAGE: u8 = 30;

/// Whether an encoded frame is a storage heartbeat to mgmtd, read from its header alone (a
/// transport's fault layer drops heartbeats without decoding whole frames).
pub fn is_heartbeat_frame(frame: &[u8]) -> bool {
    frame.starts_with(&codec::MAGIC) && frame.get(3) == Some(&KIND_HEARTBEAT)
}

impl Msg {
    /// The variant's name (`Write`, `UpdateReply`), for logs that must not format a payload.
    pub fn name(&self) -> &'static str {
        match self {
            Self::GetRouting { .. } => "GetRouting",
            Self::ReadReply(_) => "ReadReply",
            Self::Read(_) => "Read",
            Self::Routing(_) => "Routing",
            Self::Update(_) => "Update",
            Self::UpdateReply(_) => "UpdateReply",
            Self::Write(_) => "Write",
            Self::Heartbeat(_) => "Heartbeat",
            Self::HeartbeatReply(_) => "HeartbeatReply",
            Self::NotPrimary { .. } => "NotPrimary",
            Self::ExtendSession(_) => "ExtendSession",
            Self::SyncStart(_) => "SyncStart",
            Self::SyncStartReply(_) => "SyncStartReply",
            Self::SyncDone(_) => "SyncDone",
            Self::SyncDoneReply(_) => "SyncDoneReply",
            Self::MetaReq(_) => "MetaReq",
            Self::MetaReply(_) => "MetaReply",
            Self::GetClientSessions => "GetClientSessions",
            Self::ClientSessions(_) => "ClientSessions",
            Self::QueryLastChunk(_) => "QueryLastChunk",
            Self::QueryLastChunkReply(_) => "QueryLastChunkReply",
            Self::SpaceInfo => "SpaceInfo",
            Self::SpaceInfoReply(_) => "SpaceInfoReply",
            Self::KvReq(_) => "KvReq",
            Self::KvReply(_) => "KvReply",
            Self::NodeAddrs(_) => "NodeAddrs",
            Self::DumpChunkMeta { .. } => "DumpChunkMeta",
            Self::ChunkMetaDump(_) => "ChunkMetaDump",
        }
    }

    /// Encodes the message as one frame.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Self::GetRouting { known } => encode_frame(KIND_GET_ROUTING, |e| known.encode(e)),
            Self::Read(m) => encode_frame(KIND_READ, |e| m.encode(e)),
            Self::ReadReply(m) => encode_frame(KIND_READ_REPLY, |e| m.encode(e)),
            Self::Routing(m) => encode_frame(KIND_ROUTING, |e| m.encode(e)),
            Self::Update(m) => encode_frame(KIND_UPDATE, |e| m.encode(e)),
            Self::UpdateReply(m) => encode_frame(KIND_UPDATE_REPLY, |e| m.encode(e)),
            Self::Write(m) => encode_frame(KIND_WRITE, |e| m.encode(e)),
            Self::Heartbeat(m) => encode_frame(KIND_HEARTBEAT, |e| m.encode(e)),
            Self::HeartbeatReply(m) => encode_frame(KIND_HEARTBEAT_REPLY, |e| m.encode(e)),
            Self::NotPrimary { primary } => encode_frame(KIND_NOT_PRIMARY, |e| primary.encode(e)),
            Self::ExtendSession(m) => encode_frame(KIND_EXTEND_SESSION, |e| m.encode(e)),
            // A round's first page and a whole answer keep their unpaged encodings.
            Self::SyncStart(m) if m.after.is_none() => {
                encode_frame(KIND_SYNC_START, |e| m.req.encode(e))
            }
            Self::SyncStart(m) => encode_frame(KIND_SYNC_START_AFTER, |e| m.encode(e)),
            Self::SyncStartReply(m) if m.is_whole() => {
                encode_frame(KIND_SYNC_START_REPLY, |e| m.encode_whole(e))
            }
            Self::SyncStartReply(m) => encode_frame(KIND_SYNC_START_PAGE, |e| m.encode(e)),
            Self::SyncDone(m) => encode_frame(KIND_SYNC_DONE, |e| m.encode(e)),
            Self::SyncDoneReply(m) => encode_frame(KIND_SYNC_DONE_REPLY, |e| m.encode(e)),
            Self::MetaReq(m) => encode_frame(KIND_META_REQ, |e| m.encode(e)),
            Self::MetaReply(m) => encode_frame(KIND_META_REPLY, |e| m.encode(e)),
            Self::GetClientSessions => encode_frame(KIND_GET_CLIENT_SESSIONS, |_| {}),
            Self::ClientSessions(m) => encode_frame(KIND_CLIENT_SESSIONS, |e| m.encode(e)),
            Self::QueryLastChunk(m) => encode_frame(KIND_QUERY_LAST_CHUNK, |e| m.encode(e)),
            Self::QueryLastChunkReply(m) => {
                encode_frame(KIND_QUERY_LAST_CHUNK_REPLY, |e| m.encode(e))
            }
            Self::SpaceInfo => encode_frame(KIND_SPACE_INFO, |_| {}),
            Self::SpaceInfoReply(m) => encode_frame(KIND_SPACE_INFO_REPLY, |e| m.encode(e)),
            Self::KvReq(m) => encode_frame(KIND_KV_REQ, |e| m.encode(e)),
            Self::KvReply(m) => encode_frame(KIND_KV_REPLY, |e| m.encode(e)),
            Self::NodeAddrs(m) => encode_frame(KIND_NODE_ADDRS, |e| m.encode(e)),
            Self::DumpChunkMeta { cursor } => {
                encode_frame(KIND_DUMP_CHUNK_META, |e| cursor.encode(e))
            }
            Self::ChunkMetaDump(m) => encode_frame(KIND_CHUNK_META_DUMP, |e| m.encode(e)),
        }
    }

    /// Decodes one frame. Malformed, truncated or over-long input is an error, never a panic.
    pub fn decode(frame: &[u8]) -> Result<Self, DecodeError> {
        let (kind, dec) = decode_frame(frame)?;
        Self::decode_body(kind, dec)
    }

    fn decode_body(kind: u8, mut dec: Decoder<'_>) -> Result<Self, DecodeError> {
        let d = &mut dec;
        let msg = match kind {
            KIND_GET_ROUTING => Self::GetRouting {
                known: Wire::decode(d)?,
            },
            KIND_READ => Self::Read(Wire::decode(d)?),
            KIND_READ_REPLY => Self::ReadReply(Wire::decode(d)?),
            KIND_ROUTING => Self::Routing(Wire::decode(d)?),
            KIND_UPDATE => Self::Update(Wire::decode(d)?),
            KIND_UPDATE_REPLY => Self::UpdateReply(Wire::decode(d)?),
            KIND_WRITE => Self::Write(Wire::decode(d)?),
            KIND_HEARTBEAT => Self::Heartbeat(Wire::decode(d)?),
            KIND_HEARTBEAT_REPLY => Self::HeartbeatReply(Wire::decode(d)?),
            KIND_NOT_PRIMARY => Self::NotPrimary {
                primary: Wire::decode(d)?,
            },
            KIND_EXTEND_SESSION => Self::ExtendSession(Wire::decode(d)?),
            KIND_SYNC_START => Self::SyncStart(SyncStartReq {
                req: Wire::decode(d)?,
                after: None,
            }),
            KIND_SYNC_START_AFTER => match SyncStartReq::decode(d)? {
                m if m.after.is_some() => Self::SyncStart(m),
                _ => return Err(DecodeError::Invalid),
            },
            KIND_SYNC_START_REPLY => Self::SyncStartReply(SyncStartReply::decode_whole(d)?),
            KIND_SYNC_START_PAGE => Self::SyncStartReply(Wire::decode(d)?),
            KIND_SYNC_DONE => Self::SyncDone(Wire::decode(d)?),
            KIND_SYNC_DONE_REPLY => Self::SyncDoneReply(Wire::decode(d)?),
            KIND_META_REQ => Self::MetaReq(Wire::decode(d)?),
            KIND_META_REPLY => Self::MetaReply(Wire::decode(d)?),
            KIND_GET_CLIENT_SESSIONS => Self::GetClientSessions,
            KIND_CLIENT_SESSIONS => Self::ClientSessions(Wire::decode(d)?),
            KIND_QUERY_LAST_CHUNK => Self::QueryLastChunk(Wire::decode(d)?),
            KIND_QUERY_LAST_CHUNK_REPLY => Self::QueryLastChunkReply(Wire::decode(d)?),
            KIND_SPACE_INFO => Self::SpaceInfo,
            KIND_SPACE_INFO_REPLY => Self::SpaceInfoReply(Wire::decode(d)?),
            KIND_KV_REQ => Self::KvReq(Wire::decode(d)?),
            KIND_KV_REPLY => Self::KvReply(Wire::decode(d)?),
            KIND_NODE_ADDRS => Self::NodeAddrs(Wire::decode(d)?),
            KIND_DUMP_CHUNK_META => Self::DumpChunkMeta {
                cursor: Wire::decode(d)?,
            },
            KIND_CHUNK_META_DUMP => Self::ChunkMetaDump(Wire::decode(d)?),
            t => return Err(DecodeError::UnknownTag(t)),
        };
        match dec.remaining() {
            0 => Ok(msg),
            n => Err(DecodeError::TrailingBytes(n)),
        }
    }
}

impl Wire for PublicState {
    fn encode(&self, enc: &mut Encoder) {
        enc.u8(match self {
            Self::Serving => 0,
            Self::Syncing => 1,
            Self::Waiting => 2,
            Self::LastSrv => 3,
            Self::Offline => 4,
        });
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(match dec.u8()? {
            0 => Self::Serving,
            1 => Self::Syncing,
            2 => Self::Waiting,
            3 => Self::LastSrv,
            4 => Self::Offline,
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}

wire_struct!(ChainTarget { target, state });

impl Wire for ChainInfo {
    fn encode(&self, enc: &mut Encoder) {
        self.chain.encode(enc);
        self.version.encode(enc);
        encode_list(enc, &self.targets);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        let chain = Wire::decode(dec)?;
        let version = Wire::decode(dec)?;
        let targets: Vec<ChainTarget> = decode_list(dec)?;
        if targets.len() > CHAIN_TARGETS_MAX {
            return Err(DecodeError::TooLong(targets.len() as u32));
        }
        Ok(Self {
            chain,
            version,
            targets,
        })
    }
}

impl Wire for RoutingInfo {
    fn encode(&self, enc: &mut Encoder) {
        self.version.encode(enc);
        enc.len(self.chains.len());
        for chain in self.chains.values() {
            chain.encode(enc);
        }
        enc.len(self.targets.len());
        for (target, node) in &self.targets {
            target.encode(enc);
            node.encode(enc);
        }
        enc.len(self.chain_tables.len());
        for ((table, version), chains) in &self.chain_tables {
            table.encode(enc);
            version.encode(enc);
            encode_list(enc, chains);
        }
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        let version = Wire::decode(dec)?;
        let n = dec.len(LIST_LEN_MAX, 9)?;
        let mut chains = BTreeMap::new();
        for _ in 0..n {
            let chain: ChainInfo = Wire::decode(dec)?;
            // A duplicate key would silently shadow an entry: treat as malformed.
            if chains.insert(chain.chain, chain).is_some() {
                return Err(DecodeError::Invalid);
            }
        }
        let n = dec.len(LIST_LEN_MAX, 8)?;
        let mut targets = BTreeMap::new();
        for _ in 0..n {
            let target = Wire::decode(dec)?;
            if targets.insert(target, Wire::decode(dec)?).is_some() {
                return Err(DecodeError::Invalid);
            }
        }
        let n = dec.len(LIST_LEN_MAX, 12)?;
        let mut chain_tables = BTreeMap::new();
        for _ in 0..n {
            let key: (u32, u32) = (Wire::decode(dec)?, Wire::decode(dec)?);
            if chain_tables.insert(key, decode_list(dec)?).is_some() {
                return Err(DecodeError::Invalid);
            }
        }
        Ok(Self {
            version,
            chains,
            targets,
            chain_tables,
        })
    }
}

#[cfg(test)]
mod codec_test;
