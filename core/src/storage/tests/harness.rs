//! The handler tests' harness: a node hosting one target of chain c1 = [t1 n1, t2 n2, t3 n3]
//! over a reference store, and the requests, I/O and answers the tests build and expect.

use super::super::*;
pub(super) use crate::chunk::{ChunkError, UpdateKind};
pub(super) use crate::crc32c;
pub(super) use crate::ids::{
    ChainVersion, ChannelId, ChunkVersion, ClientId, RequestId, RoutingVersion, SeqNum,
    VersionedChain,
};
pub(super) use crate::machine::{Action, ActionOf};
pub(super) use crate::msg::{MessageTag, ReadReply, Status, UpdateReply, UpdateReq, UpdateResult};
pub(super) use crate::routing::PublicState;
pub(super) use crate::testing::MemChunkStore;

pub(super) const CLIENT: NodeId = NodeId(9);
pub(super) const C1: ChainId = ChainId(1);

pub(super) fn chunk() -> ChunkId {
    ChunkId::new(1, 0)
}

pub(super) fn routing(
    version: u64,
    chain_version: u32,
    targets: &[(u32, PublicState)],
) -> RoutingInfo {
    crate::testing::one_chain_routing(version, chain_version, targets)
}

pub(super) fn all_serving() -> RoutingInfo {
    use PublicState::Serving;
    routing(1, 1, &[(1, Serving), (2, Serving), (3, Serving)])
}

pub(super) struct Harness {
    pub(super) node: StorageNode,
    pub(super) store: MemChunkStore,
}

impl Harness {
    /// A node on the serial update path (3FS §3.2: forward after the local update), which
    /// these tests walk step by step; `pipelined` is the default configuration's.
    pub(super) fn new(n: u32, mode: ReadMode, retries: u32) -> Self {
        Self::build(n, mode, retries, false)
    }

    /// A node that forwards an update while its local update runs (`pipeline.rs`).
    pub(super) fn pipelined(n: u32, mode: ReadMode, retries: u32) -> Self {
        Self::build(n, mode, retries, true)
    }

    pub(super) fn build(n: u32, mode: ReadMode, retries: u32, pipeline: bool) -> Self {
        let mut cfg = StorageConfig::new(NodeId(n.into()), vec![(TargetId(n), mode)]);
        cfg.pipeline = pipeline;
        cfg.forward_retries_max = retries;
        if retries == 0 {
            cfg.forward_timeout = None;
        }
        Self {
            node: StorageNode::new(cfg, BTreeMap::new(), all_serving()),
            store: MemChunkStore::new(),
        }
    }

    pub(super) fn handle(
        &mut self,
        event: EventOf<Msg, StorageTimer, NoCall>,
    ) -> Vec<Action<StorageNode>> {
        let mut out = Outbox::new();
        self.node.handle(Instant::ZERO, event, &mut out);
        self.node.check_invariants();
        out.drain()
    }

    pub(super) fn recv(&mut self, from: NodeId, msg: Msg) -> Vec<Action<StorageNode>> {
        self.handle(EventOf::Recv { from, msg })
    }

    /// Sends `req` (a client write if its update version is 0, else a forwarded update) and
    /// asserts it is answered with `status` alone: no lock taken, no I/O.
    pub(super) fn assert_answered(&mut self, from: NodeId, req: &UpdateReq, status: Status) {
        let msg = if req.update_version == ChunkVersion(0) {
            Msg::Write(req.clone())
        } else {
            Msg::Update(req.clone())
        };
        assert_eq!(self.recv(from, msg), vec![reply(from, req, status, None)]);
    }

    /// Completes the I/O action `a` against the store.
    pub(super) fn complete(&mut self, a: &Action<StorageNode>) -> Vec<Action<StorageNode>> {
        let ActionOf::Io {
            id,
            op: IoOp::Chunk { op, .. },
        } = a
        else {
            panic!("not an I/O: {a:?}")
        };
        let result = self.store.apply(op);
        self.handle(EventOf::IoDone {
            id: *id,
            result: IoResult::Chunk(result),
        })
    }
}

/// Completes I/O action `a` with the store failure `e`.
pub(super) fn fail(
    h: &mut Harness,
    a: &Action<StorageNode>,
    e: ChunkError,
) -> Vec<Action<StorageNode>> {
    let ActionOf::Io { id, .. } = a else {
        panic!("not an I/O: {a:?}")
    };
    h.handle(EventOf::IoDone {
        id: *id,
        result: IoResult::Chunk(Err(e)),
    })
}

pub(super) fn send(to: NodeId, req: &UpdateReq) -> Action<StorageNode> {
    ActionOf::Send {
        to,
        msg: Msg::Update(req.clone()),
    }
}

pub(super) fn forward_timer(h: &Harness, target: u32) -> Action<StorageNode> {
    ActionOf::SetTimer {
        timer: retry_timer(target),
        after: h.node.cfg.forward_timeout.clone().expect("configured"),
    }
}

pub(super) fn tag(seq: u64) -> MessageTag {
    MessageTag {
        client: ClientId(7),
        request: RequestId(seq),
        channel: ChannelId(1),
        seqnum: SeqNum(seq),
    }
}

pub(super) fn write(seq: u64, chain_version: u32, data: &[u8]) -> UpdateReq {
    UpdateReq {
        tag: tag(seq),
        chain: VersionedChain {
            chain: C1,
            version: ChainVersion(chain_version),
        },
        chunk: chunk(),
        kind: UpdateKind::Write {
            offset: 0,
            data: data.to_vec().into(),
        },
        chunk_size: 16,
        update_version: ChunkVersion(0),
        checksum: crc32c::checksum(data),
        retry: 0,
        is_syncing: false,
    }
}

pub(super) fn forwarded(seq: u64, chain_version: u32, u: u32, data: &[u8]) -> UpdateReq {
    UpdateReq {
        update_version: ChunkVersion(u),
        ..write(seq, chain_version, data)
    }
}

pub(super) fn update_io(
    id: u64,
    target: u32,
    v: u32,
    data: &[u8],
    t: MessageTag,
) -> Action<StorageNode> {
    ActionOf::Io {
        id: IoId(id),
        op: IoOp::Chunk {
            target: TargetId(target),
            op: ChunkOp::Update {
                chunk: chunk(),
                version: ChunkVersion(v),
                kind: UpdateKind::Write {
                    offset: 0,
                    data: data.to_vec().into(),
                },
                // The client request travels with the pending version (durable records).
                tag: Some(crate::chunk::UpdateTag::from(&t)),
            },
        },
    }
}

pub(super) fn commit_io(id: u64, target: u32, v: u32, cv: u32) -> Action<StorageNode> {
    ActionOf::Io {
        id: IoId(id),
        op: IoOp::Chunk {
            target: TargetId(target),
            op: ChunkOp::Commit {
                chunk: chunk(),
                version: ChunkVersion(v),
                chain_version: ChainVersion(cv),
            },
        },
    }
}

pub(super) fn reply(
    to: NodeId,
    req: &UpdateReq,
    status: Status,
    result: Option<UpdateResult>,
) -> Action<StorageNode> {
    let msg = Msg::UpdateReply(UpdateReply::answering(req, status, result));
    ActionOf::Send { to, msg }
}

pub(super) fn result(v: u32, cv: u32, data: &[u8]) -> UpdateResult {
    UpdateResult {
        commit_version: ChunkVersion(v),
        commit_chain_version: ChainVersion(cv),
        len: data.len() as u32,
        checksum: crc32c::checksum(data),
    }
}

pub(super) fn retry_timer(target: u32) -> StorageTimer {
    StorageTimer::ForwardRetry {
        target: TargetId(target),
        chunk: chunk(),
    }
}
