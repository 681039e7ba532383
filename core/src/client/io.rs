//! Chunk I/Os of the client: planning a call into chunk I/Os, choosing the target, sending,
//! matching replies, and retrying with the same exactly-once identity.

use crate::chunk::UpdateKind;
use crate::client::{Client, ClientCall, ClientTimer, Served};
use crate::ids::{
    ChainId, ChainVersion, ChannelId, ChunkId, ClientId, NodeId, RequestId, SeqNum, TargetId,
    VersionedChain,
};
use crate::machine::{ActionOf, Outbox, Unobserved};
use crate::msg::{
    MessageTag, Msg, QueryLastChunkReply, QueryLastChunkReq, ReadReply, ReadReq, Status,
    UpdateReply, UpdateReq,
};

/// What a chunk I/O does.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub enum IoKind {
    /// Reads a range into the call's buffer at `buf_offset`.
    Read {
        /// Offset within the chunk.
        offset: u32,
        /// Bytes.
        len: u32,
        /// Where the bytes go in the call's buffer.
        buf_offset: u64,
    },
    /// A `queryLastChunk` of the file over chunk indexes below `end`, sent to the head.
    QueryLast {
        /// Exclusive bound of the chunk indexes.
        end: u32,
        /// Count zero-length chunks too.
        empty: bool,
    },
    /// An update sent to the head.
    Update {
        /// The update.
        kind: UpdateKind,
        /// Chunk size of the layout.
        chunk_size: u32,
    },
}

/// One chunk I/O of a call.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct ChunkIo {
    /// Its id (also the read id on the wire).
    pub id: RequestId,
    /// The call it belongs to.
    pub call: RequestId,
    /// The chain.
    pub chain: ChainId,
    /// The chunk.
    pub chunk: ChunkId,
    /// What it does.
    pub kind: IoKind,
    /// Attempts after the first.
    pub retries: u32,
    /// The exactly-once channel and seqnum of an update, fixed at the first send and reused by
    /// every retry.
    pub channel: Option<(ChannelId, SeqNum)>,
    /// The target of the last attempt, while a reply is awaited (`None` while backing off).
    pub sent_to: Option<TargetId>,
    /// A replica answered that the chain is at least at this version: no attempt goes out
    /// under an older one (another replica still at the old version would have missed the
    /// change and may serve stale data; found by the swarm, seed 3272).
    pub min_chain: Option<crate::ids::ChainVersion>,
    /// Reads only: every attempt sent, as (node, target, chain version), so a reply is
    /// attributed to the replica that sent it and the version it was asked under, even when it
    /// answers an earlier attempt (checkers need this to tell a stale replica from a bug).
    /// Bookkeeping no decision reads: not part of the machine's identity.
    pub attempts: Unobserved<Vec<(NodeId, TargetId, ChainVersion)>>,
}

/// Splits a call into (chain, chunk, kind) I/Os; `None` for an invalid call.
pub(super) fn plan(call: ClientCall) -> Option<Vec<(ChainId, ChunkId, IoKind)>> {
    match call {
        ClientCall::Read {
            inode,
            layout,
            offset,
            len,
        } => {
            let spans = layout.split(inode, offset, len)?;
            Some(
                spans
                    .into_iter()
                    .map(|s| {
                        let kind = IoKind::Read {
                            offset: s.offset,
                            len: s.len,
                            buf_offset: s.buf_offset,
                        };
                        (s.chain, s.chunk, kind)
                    })
                    .collect(),
            )
        }
        ClientCall::Write {
            inode,
            layout,
            offset,
            data,
        } => {
            let spans = layout.split(inode, offset, data.len() as u64)?;
            let update = |s: &crate::layout::ChunkSpan, data: crate::payload::Payload| {
                let kind = UpdateKind::Write {
                    offset: s.offset,
                    data,
                };
                let chunk_size = layout.chunk_size;
                (s.chain, s.chunk, IoKind::Update { kind, chunk_size })
            };
            if let [s] = spans.as_slice() {
                // The whole write in one chunk: its payload moves instead of being copied.
                return Some(vec![update(s, data.into())]);
            }
            Some(
                spans
                    .iter()
                    .map(|s| {
                        let start = s.buf_offset as usize;
                        update(s, data[start..start + s.len as usize].into())
                    })
                    .collect(),
            )
        }
        ClientCall::UpdateChunk {
            chunk,
            chain,
            chunk_size,
            kind,
        } => {
            if matches!(kind, UpdateKind::Write { .. } | UpdateKind::Replace { .. }) {
                return None; // Writes go through `Write`, replaces are replica-internal.
            }
            Some(vec![(chain, chunk, IoKind::Update { kind, chunk_size })])
        }
        ClientCall::QueryLastChunk {
            inode,
            chains,
            end,
            empty,
        } => {
            let chains: std::collections::BTreeSet<ChainId> = chains.iter().copied().collect();
            let chunk = ChunkId { inode, index: 0 };
            let kind = |_| IoKind::QueryLast { end, empty };
            Some(chains.into_iter().map(|c| (c, chunk, kind(c))).collect())
        }
        // Not chunk I/O: served by `meta.rs` before planning.
        ClientCall::Meta(_) | ClientCall::MetaAs { .. } => None,
    }
}

impl Client {
    /// Picks the target for an I/O under the current routing: the head for updates, a serving
    /// replica for reads, rotating with the I/O id and the retry count so load spreads and a
    /// retry tries another replica.
    pub(super) fn pick_target(&self, io: &ChunkIo) -> Option<TargetId> {
        let chain = self.routing.chain(io.chain)?;
        match io.kind {
            IoKind::Update { .. } | IoKind::QueryLast { .. } => chain.head(),
            IoKind::Read { .. } => {
                let serving: Vec<TargetId> = chain.serving().collect();
                if serving.is_empty() {
                    return None;
                }
                let pick = (io.id.0 as usize + io.retries as usize) % serving.len();
                Some(serving[pick])
            }
        }
    }

    fn take_channel(&mut self) -> Option<(ChannelId, SeqNum)> {
        let ch = self.free_channels.pop_first()?;
        let seq = self.seqnums.entry(ch).or_default();
        seq.0 += 1;
        Some((ch, *seq))
    }

    /// Sends (or re-sends) chunk I/O `id` and arms its timeout.
    pub(super) fn send_io(&mut self, id: RequestId, out: &mut Outbox<Self>) {
        let Some(io) = self.ios.get(&id) else { return };
        if matches!(io.kind, IoKind::Update { .. }) && io.channel.is_none() {
            match self.take_channel() {
                Some(ch) => self.ios.get_mut(&id).expect("present").channel = Some(ch),
                None => {
                    // All channels busy: wait for one to free up.
                    if !self.waiting.contains(&id) {
                        self.waiting.push(id);
                    }
                    return;
                }
            }
        }
        let io = &self.ios[&id];
        let target = self.pick_target(io);
        let node = target.and_then(|t| self.routing.node_of(t));
        let chain = self
            .routing
            .chain(io.chain)
            .map(|c| c.versioned())
            .filter(|c| io.min_chain.is_none_or(|min| c.version >= min));
        if let (Some(node), Some(chain)) = (node, chain) {
            let msg = io_msg(self.cfg.client, io, chain);
            out.send(node, msg);
            let io = self.ios.get_mut(&id).expect("present");
            io.sent_to = target;
            if let (IoKind::Read { .. }, Some(t)) = (&io.kind, target) {
                // Bounded: the oldest attempts' replies are the least likely to still arrive.
                if io.attempts.len() == crate::limits::CLIENT_READ_ATTEMPTS_KEPT {
                    io.attempts.remove(0);
                }
                io.attempts.push((node, t, chain.version));
            }
            match self.cfg.io_timeout.clone() {
                Some(wait) => out.set_timer(ClientTimer::Retry(id), wait),
                None => out.push(ActionOf::CancelTimer(ClientTimer::Retry(id))),
            }
        } else {
            self.ios.get_mut(&id).expect("present").sent_to = None;
            // No serving target known: ask for routing and retry after a backoff.
            self.refresh_routing(out);
            out.set_timer(ClientTimer::Retry(id), self.cfg.retry_wait.clone());
        }
    }

    pub(super) fn refresh_routing(&self, out: &mut Outbox<Self>) {
        if let Some(mgmtd) = self.mgmtd {
            out.send(
                mgmtd,
                Msg::GetRouting {
                    known: self.routing.version,
                },
            );
        }
    }

    pub(super) fn on_retry(&mut self, id: RequestId, out: &mut Outbox<Self>) {
        let max = self.cfg.retries_max;
        let Some(io) = self.ios.get_mut(&id) else {
            return;
        };
        io.retries += 1;
        self.counters.retries += 1;
        if io.retries > max {
            return self.finish_io(id, Err(Status::ForwardFailed), out);
        }
        self.send_io(id, out);
    }

    fn retry_after_status(&mut self, id: RequestId, status: Status, out: &mut Outbox<Self>) {
        if let Status::StaleChainVersion { current } = status {
            let known = self
                .ios
                .get(&id)
                .and_then(|io| self.routing.chain(io.chain));
            if known.is_some_and(|c| c.version < current) {
                let io = self.ios.get_mut(&id).expect("present");
                io.min_chain = Some(io.min_chain.map_or(current, |m| m.max(current)));
            }
        }
        if matches!(
            status,
            Status::StaleChainVersion { .. }
                | Status::NotHead
                | Status::NoTarget
                | Status::TargetNotServing
        ) {
            self.refresh_routing(out);
        }
        if let Some(io) = self.ios.get_mut(&id) {
            io.sent_to = None;
        }
        out.set_timer(ClientTimer::Retry(id), self.cfg.retry_wait.clone());
    }

    pub(super) fn on_update_reply(&mut self, rep: UpdateReply, out: &mut Outbox<Self>) {
        let found = self.ios.values().find(|io| {
            io.channel == Some((rep.tag.channel, rep.tag.seqnum))
                && io.chunk == rep.chunk
                && rep.tag.client == self.cfg.client
        });
        let Some(id) = found.map(|io| io.id) else {
            return;
        };
        match (rep.status, rep.result) {
            (Status::Ok, Some(result)) => self.finish_io(id, Ok(Some(result)), out),
            (status, _) if status.is_retryable() => self.retry_after_status(id, status, out),
            (status, _) => self.finish_io(id, Err(status), out),
        }
    }

    pub(super) fn on_read_reply(&mut self, from: NodeId, rep: ReadReply, out: &mut Outbox<Self>) {
        let Some(io) = self.ios.get(&rep.read_id) else {
            return;
        };
        if io.chunk != rep.chunk || !matches!(io.kind, IoKind::Read { .. }) {
            return;
        }
        let id = io.id;
        match rep.status {
            Status::Ok if rep.data.checksum() != rep.checksum => {
                // Damaged in flight or on the replica: never hand corrupt bytes to the caller.
                self.retry_after_status(id, Status::ChecksumMismatch, out)
            }
            Status::Ok => {
                let IoKind::Read {
                    len, buf_offset, ..
                } = io.kind
                else {
                    unreachable!()
                };
                let call = io.call;
                let chunk = io.chunk;
                let served = io
                    .attempts
                    .iter()
                    .rev()
                    .find(|a| a.0 == from)
                    .map(|a| Served {
                        chunk,
                        chain: io.chain,
                        target: a.1,
                        chain_version: a.2,
                    });
                let state = self.calls.get_mut(&call).expect("I/O of a live call");
                state.fill(buf_offset as usize, rep.data, len as usize);
                state.versions.push((chunk, rep.version));
                state.served.extend(served);
                self.finish_io(id, Ok(None), out)
            }
            status if status.is_retryable() => self.retry_after_status(id, status, out),
            status => self.finish_io(id, Err(status), out),
        }
    }

    pub(super) fn on_query_reply(&mut self, rep: QueryLastChunkReply, out: &mut Outbox<Self>) {
        let Some(io) = self.ios.get(&rep.query_id) else {
            return;
        };
        if !matches!(io.kind, IoKind::QueryLast { .. }) || io.sent_to.is_none() {
            return;
        }
        let (id, call, chain) = (io.id, io.call, io.chain);
        match rep.status {
            Status::Ok => {
                let state = self.calls.get_mut(&call).expect("I/O of a live call");
                state.lasts.push((chain, rep.last));
                self.finish_io(id, Ok(None), out)
            }
            status if status.is_retryable() => self.retry_after_status(id, status, out),
            status => self.finish_io(id, Err(status), out),
        }
    }

    /// Ends chunk I/O `id`, releasing its channel, and finishes its call when it was the last.
    fn finish_io(
        &mut self,
        id: RequestId,
        result: Result<Option<crate::msg::UpdateResult>, Status>,
        out: &mut Outbox<Self>,
    ) {
        let io = self.ios.remove(&id).expect("finishing a known I/O");
        out.push(ActionOf::CancelTimer(ClientTimer::Retry(id)));
        let state = self.calls.get_mut(&io.call).expect("I/O of a live call");
        match result {
            Ok(Some(r)) => state.results.push((io.chunk, r)),
            Ok(None) => {}
            Err(status) => {
                self.counters.failed_ios += 1;
                state.failed.get_or_insert((io.chunk, status));
            }
        }
        state.ios_left -= 1;
        if state.ios_left == 0 {
            state.results.sort();
            state.versions.sort();
            state.lasts.sort();
            self.finish_call(io.call, out);
        }
        if let Some((ch, _)) = io.channel {
            self.free_channels.insert(ch);
            if !self.waiting.is_empty() {
                let next = self.waiting.remove(0);
                self.send_io(next, out);
            }
        }
    }
}

/// The message that carries chunk I/O `io` to its target under `chain`.
fn io_msg(client: ClientId, io: &ChunkIo, chain: VersionedChain) -> Msg {
    match &io.kind {
        IoKind::Read { offset, len, .. } => Msg::Read(ReadReq {
            read_id: io.id,
            chain,
            chunk: io.chunk,
            offset: *offset,
            len: *len,
            retry: io.retries,
        }),
        IoKind::QueryLast { end, empty } => Msg::QueryLastChunk(QueryLastChunkReq {
            query_id: io.id,
            chain,
            inode: io.chunk.inode,
            begin: 0,
            end: *end,
            empty: *empty,
            retry: io.retries,
        }),
        IoKind::Update { kind, chunk_size } => {
            let (channel, seqnum) = io.channel.expect("updates hold a channel");
            let checksum = match kind {
                UpdateKind::Write { data, .. } | UpdateKind::Replace { data } => data.checksum(),
                _ => 0,
            };
            Msg::Write(UpdateReq {
                tag: MessageTag {
                    client,
                    request: io.call,
                    channel,
                    seqnum,
                },
                chain,
                chunk: io.chunk,
                kind: kind.clone(),
                chunk_size: *chunk_size,
                update_version: Default::default(),
                checksum,
                retry: io.retries,
                is_syncing: false,
            })
        }
    }
}
