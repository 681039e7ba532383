//! The storage client machine (3FS §6.3–6.4): routing cache, splitting byte-range I/O into chunk
//! I/Os, writes to the chain head, reads at a load-balanced serving replica, and retries.
//!
//! Invariants owned here:
//! - a write keeps its exactly-once channel and seqnum across every retry, so a replica that
//!   already applied it answers from its cache (3FS §3.5 #6);
//! - a channel carries at most one running write; seqnums on a channel only increase;
//! - every call is answered by exactly one `Return`; every chunk I/O is retried at most
//!   `retries_max` times and then fails the call.
//!
//! Namespace calls go to meta servers (`meta.rs`). Not here: file sessions, the FUSE and
//! native front ends,
//! write buffering and batching of reads into one RPC per target.

mod io;
mod meta;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::Arc;

use core::time::Duration;

use crate::chunk::UpdateKind;
use crate::ids::{
    ChainId, ChannelId, ChunkId, ChunkVersion, ClientId, InodeId, NodeId, RequestId, SeqNum,
};
use crate::layout::FileLayout;
use crate::limits;
use crate::machine::{EventOf, Machine, Outbox};
use crate::msg::{Msg, Status, UpdateResult};
use crate::routing::RoutingInfo;
use crate::time::Instant;
pub use io::{ChunkIo, IoKind};

/// Static configuration of a client.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct ClientConfig {
    /// This node.
    pub node: NodeId,
    /// The client's identity in exactly-once tags.
    pub client: ClientId,
    /// Where to ask for routing info on routing errors (`None`: wait for pushes).
    pub mgmtd: Option<NodeId>,
    /// Every mgmtd, as 3FS clients are configured with all of them. When not empty, each
    /// routing refresh asks for the whole routing info, which a primary always answers; a
    /// refresh left unanswered until the next one moves the client to the next mgmtd in this
    /// list (a paused or partitioned primary sends no `NotPrimary` hint to follow). Empty: the
    /// refresh asks only for newer routing, and the client follows hints alone.
    pub mgmtds: Vec<NodeId>,
    /// Retries of one chunk I/O before its call fails.
    pub retries_max: u32,
    /// Exactly-once channels (concurrent writes).
    pub channels: u32,
    /// How long to wait for a reply before retrying; `None` disables timeout-driven retries, so
    /// a chunk I/O is re-sent only after an error status or when routing moves its target (the
    /// model checker's setting: on a reliable network, a dead target always shows up as a
    /// routing change).
    pub io_timeout: Option<Range<Duration>>,
    /// Backoff after a retryable error status.
    pub retry_wait: Range<Duration>,
    /// Period of routing refresh and session extension with mgmtd (3FS: 10 s each); `None`
    /// disables both (routing then arrives only on errors or by push).
    pub refresh_interval: Option<Range<Duration>>,
    /// Meta servers, any of which serves any namespace request.
    pub meta: Vec<NodeId>,
    /// How long to wait for a meta answer before re-sending to the next server.
    pub meta_timeout: Range<Duration>,
    /// Sends of one namespace request before its call returns `Kv(CommitUnknown)`.
    pub meta_attempts_max: u32,
    /// The user namespace requests act for.
    pub user: crate::wire::User,
}

impl ClientConfig {
    /// Defaults from `limits.rs`.
    pub fn new(node: NodeId, client: ClientId) -> Self {
        Self {
            node,
            client,
            mgmtd: None,
            mgmtds: Vec::new(),
            retries_max: limits::CLIENT_RETRIES_MAX,
            channels: 64,
            io_timeout: Some(limits::CLIENT_IO_TIMEOUT..limits::CLIENT_IO_TIMEOUT * 2),
            retry_wait: limits::CLIENT_RETRY_WAIT_MIN..limits::CLIENT_RETRY_WAIT_MAX,
            refresh_interval: Some(limits::ROUTING_REFRESH..limits::ROUTING_REFRESH * 11 / 10),
            meta: Vec::new(),
            meta_timeout: limits::CLIENT_IO_TIMEOUT..limits::CLIENT_IO_TIMEOUT * 2,
            meta_attempts_max: 64,
            user: crate::wire::ROOT_USER,
        }
    }
}

/// A local API call.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum ClientCall {
    /// Reads `len` bytes at `offset` of a file; holes read as zeros.
    Read {
        /// The file.
        inode: InodeId,
        /// Its layout.
        layout: FileLayout,
        /// File offset.
        offset: u64,
        /// Byte count.
        len: u64,
    },
    /// Applies a non-write update (remove, truncate, extend) to one chunk.
    UpdateChunk {
        /// The chunk.
        chunk: ChunkId,
        /// Its chain.
        chain: ChainId,
        /// Chunk size of the file's layout.
        chunk_size: u32,
        /// The update.
        kind: UpdateKind,
    },
    /// Writes `data` at `offset` of a file.
    Write {
        /// The file.
        inode: InodeId,
        /// Its layout.
        layout: FileLayout,
        /// File offset.
        offset: u64,
        /// The bytes.
        data: Vec<u8>,
    },
    /// The last committed chunk of a file on each of `chains` (3FS `queryLastChunk`), among
    /// chunk indexes below `end`; asked of each chain's head.
    QueryLastChunk {
        /// The file.
        inode: InodeId,
        /// The chains (duplicates are asked once).
        chains: Vec<ChainId>,
        /// Exclusive bound of the chunk indexes considered.
        end: u32,
        /// Count zero-length chunks too.
        empty: bool,
    },
    /// A namespace request to the meta service.
    Meta(crate::wire::MetaOp),
    /// A namespace request made for `user` instead of the client's own (a FUSE mount acting
    /// for the calling process: permission checks and new inodes' owner are that user's).
    MetaAs {
        /// The user the request acts for.
        user: crate::wire::User,
        /// The request.
        op: crate::wire::MetaOp,
    },
}

/// The answer to a call.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum ClientRet {
    /// The call was rejected before any I/O (bad layout, too many calls).
    Rejected(Status),
    /// Some chunk I/O failed after its retries. Writes may or may not have been applied.
    Failed {
        /// The first chunk that failed.
        chunk: ChunkId,
        /// Its last status (`ForwardFailed` also stands for "no reply").
        status: Status,
    },
    /// A read finished: the bytes and the committed version of each chunk read
    /// (version 0 for holes).
    Read {
        /// The bytes: a single-chunk read's are the replica's reply buffer itself, not a copy.
        data: crate::payload::Payload,
        /// Versions per chunk.
        versions: Vec<(ChunkId, ChunkVersion)>,
        /// Which replica answered each chunk read, under which chain version.
        served: Vec<Served>,
    },
    /// A write or chunk update finished on every chunk.
    Updated {
        /// Per-chunk commit results.
        results: Vec<(ChunkId, UpdateResult)>,
    },
    /// A namespace request's answer (`Kv(CommitUnknown)`: unknown outcome after every retry),
    /// and the directories its commit changed (`msg/meta.rs`).
    Meta(crate::wire::MetaResult, crate::msg::meta::DirsChanged),
    /// The answer to `QueryLastChunk`: per chain asked, in chain order, its last committed
    /// chunk of the file (`None`: none).
    LastChunks(Vec<(ChainId, Option<crate::msg::LastChunk>)>),
}

/// Which replica served one chunk of a read, and the chain version the client asked under:
/// what a checker needs to attribute a stale read to a replica mgmtd had already moved out of
/// the chain (3FS Appendix B #1/#4) rather than to a protocol bug.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct Served {
    /// The chunk.
    pub chunk: ChunkId,
    /// Its chain.
    pub chain: ChainId,
    /// The target that answered.
    pub target: crate::ids::TargetId,
    /// The chain version the answered attempt was sent under.
    pub chain_version: crate::ids::ChainVersion,
}

/// Timers of the client machine.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum ClientTimer {
    /// Retry (or give up on) chunk I/O `id`.
    Retry(RequestId),
    /// Periodic routing refresh and session extension.
    Refresh,
    /// Re-send namespace call `id` to the next meta server.
    Meta(RequestId),
}

/// A call in progress.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
struct CallState {
    ios_left: usize,
    failed: Option<(ChunkId, Status)>,
    is_read: bool,
    is_query: bool,
    lasts: Vec<(ChainId, Option<crate::msg::LastChunk>)>,
    /// A read's bytes so far.
    buf: ReadBuf,
    buf_len: usize,
    versions: Vec<(ChunkId, ChunkVersion)>,
    /// Observability for checkers, read by no decision: not part of the machine's identity.
    served: crate::machine::Unobserved<Vec<Served>>,
    results: Vec<(ChunkId, UpdateResult)>,
}

/// A read's bytes so far: nothing until the first reply; that reply's buffer itself when it
/// covers the whole read (no zeroing, no copy, and no allocation: the common single-chunk read,
/// whose reply shares the replica's buffer); else an assembled buffer.
#[derive(Clone, Debug, Default, Eq, Hash, PartialEq)]
enum ReadBuf {
    #[default]
    Empty,
    Whole(crate::payload::Payload),
    Parts(Vec<u8>),
}

impl ReadBuf {
    /// The read's `len` bytes, holes as zeros.
    fn into_data(self, len: usize) -> crate::payload::Payload {
        match self {
            Self::Whole(w) => w,
            Self::Parts(mut b) => {
                b.resize(len, 0);
                b.into()
            }
            Self::Empty => vec![0; len].into(),
        }
    }
}

impl CallState {
    /// Puts the first `len` bytes of `data`, read at `start` of the read's range, into the
    /// buffer.
    fn fill(&mut self, start: usize, data: crate::payload::Payload, len: usize) {
        let len = len.min(data.len());
        if self.buf == ReadBuf::Empty && start == 0 && len == self.buf_len && data.len() == len {
            self.buf = ReadBuf::Whole(data);
            return;
        }
        let mut buf = match std::mem::take(&mut self.buf) {
            ReadBuf::Empty => Vec::new(),
            ReadBuf::Whole(w) => w.into_vec(),
            ReadBuf::Parts(b) => b,
        };
        if buf.len() < self.buf_len {
            buf.resize(self.buf_len, 0);
        }
        buf[start..start + len].copy_from_slice(&data[..len]);
        self.buf = ReadBuf::Parts(buf);
    }
}

/// Counters a driver can report.
#[derive(Clone, Debug, Default, Eq, Hash, PartialEq)]
pub struct ClientCounters {
    /// Chunk I/O retries.
    pub retries: u64,
    /// Chunk I/Os that failed after their retry budget.
    pub failed_ios: u64,
    /// Namespace requests re-sent.
    pub meta_retries: u64,
}

/// The client machine.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct Client {
    /// Shared, never mutated: copies of the machine share one allocation.
    cfg: Arc<ClientConfig>,
    /// Replaced wholesale on a newer version, so copies of the machine share it.
    routing: Arc<RoutingInfo>,
    calls: crate::vec_map::VecMap<RequestId, CallState>,
    ios: crate::vec_map::VecMap<RequestId, ChunkIo>,
    meta_calls: BTreeMap<RequestId, meta::MetaCall>,
    /// Chunk writes waiting for a free channel, in arrival order.
    waiting: Vec<RequestId>,
    free_channels: BTreeSet<ChannelId>,
    /// Last seqnum used per channel. Invariant: only increases.
    seqnums: BTreeMap<ChannelId, SeqNum>,
    next_io: u64,
    /// The mgmtd believed to be primary (follows `NotPrimary` hints).
    mgmtd: Option<NodeId>,
    /// A whole-routing refresh was sent and no routing has come since (see `cfg.mgmtds`).
    probe_unanswered: bool,
    counters: crate::machine::Unobserved<ClientCounters>,
}

impl Client {
    /// A client with the routing info known at start.
    pub fn new(cfg: ClientConfig, routing: RoutingInfo) -> Self {
        let free_channels = (1..=cfg.channels).map(ChannelId).collect();
        let cfg_mgmtd = cfg.mgmtd;
        Self {
            cfg: Arc::new(cfg),
            routing: Arc::new(routing),
            calls: crate::vec_map::VecMap::new(),
            ios: crate::vec_map::VecMap::new(),
            meta_calls: BTreeMap::new(),
            waiting: Vec::new(),
            free_channels,
            seqnums: BTreeMap::new(),
            next_io: 0,
            mgmtd: cfg_mgmtd,
            probe_unanswered: false,
            counters: Default::default(),
        }
    }

    /// The routing info the client acts on.
    pub fn routing(&self) -> &RoutingInfo {
        &self.routing
    }

    /// Counters.
    pub fn counters(&self) -> &ClientCounters {
        &self.counters
    }

    /// Chunk I/Os in flight.
    pub fn chunk_ios(&self) -> impl Iterator<Item = &ChunkIo> {
        self.ios.values()
    }

    fn on_call(&mut self, req: RequestId, call: ClientCall, out: &mut Outbox<Self>) {
        let busy = self.calls.len() + self.meta_calls.len() >= limits::CLIENT_CALLS_MAX;
        if busy || self.calls.contains_key(&req) || self.meta_calls.contains_key(&req) {
            return out.push(crate::machine::ActionOf::Return {
                req,
                ret: ClientRet::Rejected(Status::Busy),
            });
        }
        let call = match call {
            ClientCall::Meta(op) => {
                let user = self.cfg.user;
                return self.on_meta_call(req, op, user, out);
            }
            ClientCall::MetaAs { user, op } => return self.on_meta_call(req, op, user, out),
            call => call,
        };
        let (is_read, buf_len) = match &call {
            ClientCall::Read { len, .. } => (true, *len as usize),
            _ => (false, 0),
        };
        let is_query = matches!(call, ClientCall::QueryLastChunk { .. });
        let ios = match io::plan(call) {
            Some(ios) if self.ios.len() + ios.len() <= limits::CLIENT_CHUNK_IOS_MAX => ios,
            Some(_) => {
                return out.push(crate::machine::ActionOf::Return {
                    req,
                    ret: ClientRet::Rejected(Status::Busy),
                })
            }
            None => {
                let ret = ClientRet::Rejected(Status::InvalidRequest);
                return out.push(crate::machine::ActionOf::Return { req, ret });
            }
        };
        let state = CallState {
            ios_left: ios.len(),
            failed: None,
            is_read,
            is_query,
            lasts: Vec::new(),
            buf: ReadBuf::Empty,
            buf_len,
            versions: Vec::new(),
            served: Default::default(),
            results: Vec::new(),
        };
        self.calls.insert(req, state);
        if ios.is_empty() {
            return self.finish_call(req, out);
        }
        for (chain, chunk, kind) in ios {
            self.next_io += 1;
            let id = RequestId(self.next_io);
            let io = ChunkIo {
                id,
                call: req,
                chain,
                chunk,
                kind,
                retries: 0,
                channel: None,
                sent_to: None,
                min_chain: None,
                attempts: Default::default(),
            };
            self.ios.insert(id, io);
            self.send_io(id, out);
        }
    }

    fn finish_call(&mut self, req: RequestId, out: &mut Outbox<Self>) {
        let state = self.calls.remove(&req).expect("finishing a known call");
        let ret = match state.failed {
            Some((chunk, status)) => ClientRet::Failed { chunk, status },
            None if state.is_query => ClientRet::LastChunks(state.lasts),
            None if state.is_read => ClientRet::Read {
                data: state.buf.into_data(state.buf_len),
                versions: state.versions,
                served: state.served.0,
            },
            None => ClientRet::Updated {
                results: state.results,
            },
        };
        out.push(crate::machine::ActionOf::Return { req, ret });
    }

    /// The periodic refresh. With every mgmtd known, it asks for the whole routing (a primary
    /// always answers that), after moving on to the next mgmtd if the last such ask went
    /// unanswered for a whole refresh interval.
    fn probe_mgmtd(&mut self, out: &mut Outbox<Self>) {
        let all = &self.cfg.mgmtds;
        let Some(current) = self.mgmtd.filter(|_| !all.is_empty()) else {
            return self.refresh_routing(out);
        };
        if self.probe_unanswered {
            let at = all.iter().position(|m| *m == current).map_or(0, |i| i + 1);
            self.mgmtd = Some(all[at % all.len()]);
        }
        self.probe_unanswered = true;
        if let Some(m) = self.mgmtd {
            out.send(
                m,
                Msg::GetRouting {
                    known: crate::ids::RoutingVersion(0),
                },
            );
        }
    }

    fn on_routing(&mut self, routing: RoutingInfo, out: &mut Outbox<Self>) {
        if routing.version <= self.routing.version {
            return;
        }
        self.routing = Arc::new(routing);
        // An I/O whose target is no longer where the new routing sends it (a failed head, a
        // replica that stopped serving) is re-sent now rather than after its timeout.
        let moved: Vec<RequestId> = self
            .ios
            .values()
            .filter(|io| io.sent_to.is_some() && io.sent_to != self.pick_target(io))
            .map(|io| io.id)
            .collect();
        for id in moved {
            self.on_retry(id, out);
        }
    }
}

impl Machine for Client {
    type Msg = Msg;
    type Timer = ClientTimer;
    type Call = ClientCall;
    type Ret = ClientRet;

    fn start(&mut self, _now: Instant, out: &mut Outbox<Self>) {
        if let (Some(every), Some(_)) = (self.cfg.refresh_interval.clone(), self.mgmtd) {
            self.refresh_routing(out);
            out.set_timer(ClientTimer::Refresh, every);
        }
    }

    fn handle(
        &mut self,
        _now: Instant,
        event: EventOf<Msg, ClientTimer, ClientCall>,
        out: &mut Outbox<Self>,
    ) {
        match event {
            EventOf::Call { req, call } => self.on_call(req, call, out),
            EventOf::Recv { from, msg } => match msg {
                Msg::UpdateReply(rep) => self.on_update_reply(rep, out),
                Msg::ReadReply(rep) => self.on_read_reply(from, rep, out),
                Msg::QueryLastChunkReply(rep) => self.on_query_reply(rep, out),
                Msg::MetaReply(rep) => self.on_meta_reply(rep, out),
                Msg::Routing(routing) => {
                    self.probe_unanswered = false;
                    self.on_routing(routing, out)
                }
                // Follow the hint once per answer; with no hint, keep asking the same one.
                Msg::NotPrimary { primary } if primary.is_some() && primary != self.mgmtd => {
                    self.mgmtd = primary;
                    self.refresh_routing(out);
                }
                // Requests meant for servers: not ours.
                _ => {}
            },
            EventOf::Timer(ClientTimer::Retry(id)) => self.on_retry(id, out),
            EventOf::Timer(ClientTimer::Meta(id)) => self.send_meta(id, out),
            EventOf::Timer(ClientTimer::Refresh) => {
                self.probe_mgmtd(out);
                if let Some(mgmtd) = self.mgmtd {
                    out.send(
                        mgmtd,
                        Msg::ExtendSession(crate::msg::ExtendSession {
                            client: self.cfg.client,
                        }),
                    );
                }
                if let Some(every) = self.cfg.refresh_interval.clone() {
                    out.set_timer(ClientTimer::Refresh, every);
                }
            }
            // The client submits no I/O.
            EventOf::IoDone { .. } => {}
        }
    }

    fn check_invariants(&self) {
        // Without a set: it runs after every step, and the channels held at once are at most
        // `cfg.channels` while the invariant holds, so the pairwise check stays short.
        let busy = || {
            self.ios
                .values()
                .filter_map(|io| io.channel.map(|(c, _)| c))
        };
        for (i, c) in busy().enumerate() {
            assert!(
                !self.free_channels.contains(&c),
                "a channel is both free and in use"
            );
            assert!(
                busy().skip(i + 1).all(|d| d != c),
                "two writes share a channel"
            );
        }
        for io in self.ios.values() {
            assert!(
                self.calls.contains_key(&io.call),
                "chunk I/O without its call"
            );
            assert!(io.retries <= self.cfg.retries_max + 1);
        }
    }
}

#[cfg(test)]
mod tests;
