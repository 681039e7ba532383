//! `queryLastChunk` at a chain head (3FS §4.4): the last committed chunk of a file within a
//! range of chunk indexes, answered from the target's in-memory chunk metadata without I/O.
//!
//! Only the head answers (`NotHead` otherwise): it commits an update before acknowledging it,
//! so its committed metadata covers every acknowledged write, while a successor may still hold
//! a removed chunk or miss a committed one. Pending versions are ignored: an update in flight
//! has not been acknowledged, and a writer that sees it fail tells meta through its close.
//! Zero-length chunks (what a truncate leaves past the new tail) count only when asked for.
//!
//! `spaceInfo` answers from the same metadata: the committed bytes per target; and so does the
//! dump of every committed chunk's version, length and checksum per target (3FS
//! `getAllChunkMetadata`), which tools compare across a chain's replicas while it runs; the
//! dump goes a page at a time, the tool following each page's cursor.
//! Not here: precise lengths over several chains (the asker takes the maximum), removing
//! chunks by range (callers remove each chunk the answer reaches).

use std::ops::Bound;

use crate::ids::{ChunkId, NodeId, TargetId};
use crate::limits::CHUNK_META_PAGE_MAX;
use crate::machine::Outbox;
use crate::msg::{
    ChunkMetaDump, ChunkSum, DumpCursor, LastChunk, Msg, QueryLastChunkReply, QueryLastChunkReq,
    SpaceInfoReply, Status, TargetDump, TargetSpace,
};
use crate::routing::PublicState;
use crate::storage::StorageNode;

impl StorageNode {
    /// `spaceInfo` (3FS): each target's capacity and the committed bytes on it, from the
    /// cached metadata.
    pub(super) fn on_space_info(&mut self, from: NodeId, out: &mut Outbox<Self>) {
        let targets = self
            .targets
            .values()
            .map(|t| TargetSpace {
                target: t.id,
                capacity: self.cfg.capacity,
                used: t.chunks.values().map(|m| u64::from(m.len)).sum(),
            })
            .collect();
        let node = self.cfg.node;
        out.send(from, Msg::SpaceInfoReply(SpaceInfoReply { node, targets }));
    }

    /// A page of the committed chunks of every target, from the cached metadata (no I/O):
    /// what a replica holds as its chain's members must agree on it. A page holds at most
    /// `CHUNK_META_PAGE_MAX` chunks, from `cursor` on, and names where the next one starts.
    pub(super) fn on_dump_chunk_meta(
        &mut self,
        from: NodeId,
        cursor: Option<DumpCursor>,
        out: &mut Outbox<Self>,
    ) {
        let first = cursor.map_or(TargetId(0), |c| c.target);
        let mut budget = CHUNK_META_PAGE_MAX;
        let mut targets = Vec::new();
        let mut next = None;
        for t in self.targets.range(first..).map(|(_, t)| t) {
            if budget == 0 {
                next = Some(DumpCursor {
                    target: t.id,
                    after: None,
                });
                break;
            }
            let after = cursor
                .filter(|c| c.target == t.id)
                .and_then(|c| c.after)
                .map_or(Bound::Unbounded, Bound::Excluded);
            let mut committed = t
                .chunks
                .range((after, Bound::Unbounded))
                .map(|(_, m)| m)
                .filter(|m| m.committed.0 > 0);
            let chunks: Vec<ChunkSum> = committed
                .by_ref()
                .take(budget)
                .map(|m| ChunkSum {
                    chunk: m.chunk,
                    version: m.committed,
                    len: m.len,
                    checksum: m.checksum,
                })
                .collect();
            budget -= chunks.len();
            let last = chunks.last().map(|c| c.chunk);
            targets.push(TargetDump {
                target: t.id,
                chunks,
            });
            if budget == 0 && committed.next().is_some() {
                next = Some(DumpCursor {
                    target: t.id,
                    after: last,
                });
                break;
            }
        }
        let node = self.cfg.node;
        let dump = ChunkMetaDump {
            node,
            targets,
            next,
        };
        out.send(from, Msg::ChunkMetaDump(dump));
    }

    pub(super) fn on_query_last_chunk(
        &mut self,
        from: NodeId,
        req: QueryLastChunkReq,
        out: &mut Outbox<Self>,
    ) {
        let answer = |status, last| {
            Msg::QueryLastChunkReply(QueryLastChunkReply {
                query_id: req.query_id,
                status,
                last,
            })
        };
        let view = match self.admit_chain(req.chain) {
            Ok(view) => view,
            Err(status) => return out.send(from, answer(status, None)),
        };
        if view.state != PublicState::Serving || !self.local_ready(view.target, view.state) {
            return out.send(from, answer(Status::TargetNotServing, None));
        }
        if !view.is_head {
            return out.send(from, answer(Status::NotHead, None));
        }
        if req.begin >= req.end {
            return out.send(from, answer(Status::Ok, None));
        }
        let range = ChunkId {
            inode: req.inode,
            index: req.begin,
        }..ChunkId {
            inode: req.inode,
            index: req.end,
        };
        let last = self.targets[&view.target]
            .chunks
            .range(range)
            .rev()
            .find(|(_, m)| m.committed.0 > 0 && (req.empty || m.len > 0))
            .map(|(c, m)| LastChunk {
                index: c.index,
                len: m.len,
            });
        out.send(from, answer(Status::Ok, last));
    }
}
