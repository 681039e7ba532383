//! Resync of a SYNCING successor by its predecessor (3FS §3.6), both sides.
//!
//! Predecessor (the current tail of the serving prefix): when routing shows its successor
//! SYNCING, it sends `SyncStart`; the successor answers with the metadata of the chunks it
//! holds, a page of at most `CHUNK_META_PAGE_MAX` at a time in chunk order, and the predecessor
//! asks for the next page after the last chunk of each until none is left (a target may hold
//! any number of chunks; one reply for all of them would outgrow the codec's list limit);
//! [`decide`] then classifies each chunk (the full §3.6 decision table); removes go first,
//! then full-chunk writes, one chunk at a time under the chunk lock, each shipping the
//! predecessor's committed content as an `is_syncing` update that the successor applies with
//! `ChunkOp::Install`; then `SyncDone` makes the successor locally UPTODATE, which mgmtd turns
//! into SERVING at the end of the chain. Foreground writes keep flowing meanwhile as full-chunk
//! replaces (`write.rs`); the chunk lock serialises them with sync items.
//!
//! Invariants: a round runs at one chain version and is abandoned when routing moves (the new
//! routing starts a new round if the successor is still SYNCING); a round takes only the page
//! it asked for last (a duplicate or late page is dropped) and every page moves its cursor
//! forward; a sync item holds the chunk lock from its local read until the successor's answer.
//! Pages are snapshots taken at different times: the successor's chunks change meanwhile only
//! through this predecessor's forwarding, as they may between a single snapshot and the
//! decision, and the decision table allows for it. Not here: forcing a fatally
//! diverged successor offline (the round is abandoned and counted; 3FS calls `offlineTarget`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound;

use crate::bugs::PlantedBug;
use crate::chunk::{ChunkMeta, ChunkRead, UpdateKind};
use crate::ids::{
    ChannelId, ChunkId, ChunkVersion, ClientId, NodeId, RequestId, SeqNum, TargetId, VersionedChain,
};
use crate::limits::{CHUNK_META_PAGE_MAX, CHUNK_SIZE_MAX};
use crate::machine::{ActionOf, Outbox};
use crate::msg::{
    MessageTag, Msg, Status, SyncDoneReply, SyncReq, SyncStartReply, SyncStartReq, UpdateReq,
};
use crate::payload::Payload;
use crate::routing::{LocalState, PublicState};
use crate::storage::chunk_lock::Enqueue;
pub use crate::storage::resync_decide::{decide, decide_3fs, Decision};
use crate::storage::running::{Phase, Running, Waiter};
use crate::storage::{IoPurpose, StorageNode, StorageTimer};

/// The exactly-once channel of sync items: clients use channels from 1, so channel 0 marks a
/// resync item (never cached, never accepted from a client).
pub const SYNC_CHANNEL: ChannelId = ChannelId(0);

/// Progress of a round.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub enum ResyncPhase {
    /// `SyncStart` sent for the page after `after` (the first page when `None`).
    Starting {
        /// The cursor of the page asked for.
        after: Option<ChunkId>,
        /// The successor's chunks of the pages answered before it.
        metas: BTreeMap<ChunkId, ChunkMeta>,
    },
    /// Copying: items left, and the chunk being copied.
    Copying {
        /// Chunks still to do.
        items: VecDeque<(ChunkId, Decision)>,
        /// The chunk in flight.
        current: Option<ChunkId>,
    },
    /// `SyncDone` sent.
    Finishing,
    /// Acknowledged: nothing more to do at this chain version.
    Done,
    /// Failed; retried on the resync timer or a routing change.
    Failed,
}

/// One round, run by a predecessor target for its SYNCING successor.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct Resync {
    /// The chain at the round's chain version.
    pub chain: VersionedChain,
    /// The successor.
    pub successor: TargetId,
    /// The successor's node.
    pub node: NodeId,
    /// Progress.
    pub phase: ResyncPhase,
}

fn sync_tag() -> MessageTag {
    MessageTag {
        client: ClientId(0),
        request: RequestId(0),
        channel: SYNC_CHANNEL,
        seqnum: SeqNum(0),
    }
}

impl StorageNode {
    /// Starts a round for every hosted SERVING, UPTODATE target whose successor is SYNCING and
    /// that has none running (or a stale one) at the current chain version.
    pub(super) fn maybe_start_resyncs(&mut self, out: &mut Outbox<Self>) {
        let mut start = Vec::new();
        for (&tid, t) in &self.targets {
            let Some(chain) = self.chain_info(tid) else {
                continue;
            };
            let succ = chain
                .successor_of(tid)
                .filter(|s| s.state == PublicState::Syncing);
            // A returning LASTSRV first force-commits its pending versions (§3.5 #8); a round
            // snapshotting before those commits land would ship the older committed copies and
            // leave the successor one version behind (found by the swarm).
            let force_commits = self
                .ios
                .values()
                .any(|p| matches!(p, IoPurpose::ForceCommit { target, .. } if *target == tid));
            let eligible = chain.state_of(tid) == Some(PublicState::Serving)
                && t.local_state == LocalState::UpToDate
                && !force_commits;
            match (succ, eligible) {
                (Some(s), true) => {
                    let current = self
                        .resyncs
                        .get(&tid)
                        .is_some_and(|r| r.chain == chain.versioned() && r.successor == s.target);
                    if !current {
                        if let Some(node) = self.routing.node_of(s.target) {
                            start.push((tid, chain.versioned(), s.target, node));
                        }
                    }
                }
                _ => {
                    self.resyncs.remove(&tid);
                }
            }
        }
        for (tid, chain, successor, node) in start {
            self.resyncs.insert(
                tid,
                Resync {
                    chain,
                    successor,
                    node,
                    phase: ResyncPhase::Starting {
                        after: None,
                        metas: BTreeMap::new(),
                    },
                },
            );
            let req = SyncReq {
                chain,
                target: successor,
            };
            out.send(node, Msg::SyncStart(SyncStartReq { req, after: None }));
            self.arm_round_timeout(tid, out);
        }
    }

    /// A `SyncStart` or `SyncDone` whose reply is lost would leave the round waiting forever
    /// (the successor stays SYNCING): after the forward timeout the round restarts. Both
    /// requests are idempotent at the successor. Without a forward timeout (the model checker's
    /// reliable network) nothing is armed.
    fn arm_round_timeout(&self, target: TargetId, out: &mut Outbox<Self>) {
        if let Some(t) = &self.cfg.forward_timeout {
            out.set_timer(StorageTimer::Resync(target), t.clone());
        }
    }

    fn resync_of(&mut self, req: &SyncReq) -> Option<TargetId> {
        self.resyncs
            .iter()
            .find(|(_, r)| r.chain == req.chain && r.successor == req.target)
            .map(|(t, _)| *t)
    }

    fn fail_round(&mut self, target: TargetId, out: &mut Outbox<Self>) {
        if let Some(r) = self.resyncs.get_mut(&target) {
            r.phase = ResyncPhase::Failed;
            out.set_timer(
                StorageTimer::Resync(target),
                self.cfg.forward_retry_wait.clone(),
            );
        }
    }

    pub(super) fn on_resync_timer(&mut self, target: TargetId, out: &mut Outbox<Self>) {
        if self.resyncs.get(&target).is_some_and(|r| {
            matches!(
                r.phase,
                ResyncPhase::Failed | ResyncPhase::Starting { .. } | ResyncPhase::Finishing
            )
        }) {
            self.resyncs.remove(&target);
            self.maybe_start_resyncs(out);
        }
    }

    /// Successor side: answer with the metadata of a page of chunks after the request's
    /// cursor if this target is SYNCING + ONLINE.
    pub(super) fn on_sync_start(
        &mut self,
        from: NodeId,
        req: SyncStartReq,
        out: &mut Outbox<Self>,
    ) {
        let (status, metas, more) = match self.admit_sync(&req.req) {
            Ok(target) => {
                let from = req.after.map_or(Bound::Unbounded, Bound::Excluded);
                let mut chunks = self.targets[&target]
                    .chunks
                    .range((from, Bound::Unbounded))
                    .map(|(_, m)| m);
                let metas: Vec<ChunkMeta> =
                    chunks.by_ref().take(CHUNK_META_PAGE_MAX).cloned().collect();
                (Status::Ok, metas, chunks.next().is_some())
            }
            Err(status) => (status, Vec::new(), false),
        };
        let rep = SyncStartReply {
            req: req.req,
            after: req.after,
            status,
            metas,
            more,
        };
        out.send(from, Msg::SyncStartReply(rep));
    }

    /// The successor-side check of sync messages: exact chain version, the named target is
    /// hosted here, publicly SYNCING and locally ONLINE.
    fn admit_sync(&mut self, req: &SyncReq) -> Result<TargetId, Status> {
        let view = self.admit_chain(req.chain)?;
        let t = self.targets.get(&req.target).ok_or(Status::NoTarget)?;
        if view.target != req.target
            || view.state != PublicState::Syncing
            || t.local_state != LocalState::Online
        {
            return Err(Status::TargetNotServing);
        }
        Ok(req.target)
    }

    pub(super) fn on_sync_start_reply(&mut self, rep: SyncStartReply, out: &mut Outbox<Self>) {
        let Some(target) = self.resync_of(&rep.req) else {
            return;
        };
        let r = self.resyncs.get_mut(&target).expect("found above");
        let ResyncPhase::Starting { after, metas } = &mut r.phase else {
            return;
        };
        if *after != rep.after {
            return; // A page asked for before (a duplicate, or one from a restarted round).
        }
        if rep.status != Status::Ok {
            return self.fail_round(target, out);
        }
        let last = rep.metas.last().map(|m| m.chunk);
        // A page too long, or a next page that would not move forward, is the successor's bug.
        if rep.metas.len() > CHUNK_META_PAGE_MAX
            || (rep.more && last.is_none_or(|c| Some(c) <= *after))
        {
            return self.fail_round(target, out);
        }
        metas.extend(rep.metas.into_iter().map(|m| (m.chunk, m)));
        if rep.more {
            *after = last;
            let req = SyncStartReq {
                req: rep.req,
                after: last,
            };
            out.send(r.node, Msg::SyncStart(req));
            return self.arm_round_timeout(target, out);
        }
        let remote = std::mem::take(metas);
        let current = rep.req.chain.version;
        let strict = self.bug(PlantedBug::Resync3fsTable);
        let t = &self.targets[&target];
        let mut removes = Vec::new();
        let mut writes = Vec::new();
        let ids: BTreeSet<ChunkId> = t.chunks.keys().chain(remote.keys()).copied().collect();
        for chunk in ids {
            match decide(t.chunks.get(&chunk), remote.get(&chunk), current, strict) {
                Decision::Remove => removes.push((chunk, Decision::Remove)),
                Decision::Write => writes.push((chunk, Decision::Write)),
                Decision::Skip => {}
                Decision::Fatal => {
                    self.counters.resync_fatal += 1;
                    return self.fail_round(target, out);
                }
            }
        }
        let items = removes.into_iter().chain(writes).collect();
        self.resyncs.get_mut(&target).expect("found above").phase = ResyncPhase::Copying {
            items,
            current: None,
        };
        self.next_sync_item(target, out);
    }

    /// Whether the sync item `w` is the item its round on `target` is copying now.
    pub(super) fn sync_item_awaited(&self, target: TargetId, w: &Waiter) -> bool {
        self.resyncs.get(&target).is_some_and(|r| {
            r.chain == w.req.chain
                && matches!(r.phase, ResyncPhase::Copying { current: Some(c), .. } if c == w.req.chunk)
        })
    }

    /// Starts the next item of `target`'s round, or finishes it with `SyncDone`.
    pub(super) fn next_sync_item(&mut self, target: TargetId, out: &mut Outbox<Self>) {
        loop {
            let r = self.resyncs.get_mut(&target).expect("running round");
            let ResyncPhase::Copying { items, current } = &mut r.phase else {
                return;
            };
            let Some((chunk, decision)) = items.pop_front() else {
                r.phase = ResyncPhase::Finishing;
                let req = SyncReq {
                    chain: r.chain,
                    target: r.successor,
                };
                out.send(r.node, Msg::SyncDone(req));
                return self.arm_round_timeout(target, out);
            };
            *current = Some(chunk);
            let kind = if decision == Decision::Remove {
                UpdateKind::Remove
            } else {
                UpdateKind::Replace {
                    data: Vec::new().into(),
                }
            };
            let w = Waiter {
                from: self.cfg.node,
                req: UpdateReq {
                    tag: sync_tag(),
                    chain: r.chain,
                    chunk,
                    kind,
                    chunk_size: CHUNK_SIZE_MAX,
                    update_version: ChunkVersion(0),
                    checksum: 0,
                    retry: 0,
                    is_syncing: true,
                },
                from_client: false,
            };
            let t = self.targets.get_mut(&target).expect("hosted target");
            match t.locks.enqueue(chunk, w) {
                Enqueue::Queued => return,
                Enqueue::Free(w) => {
                    if self.start_sync_item(target, w, out) {
                        return;
                    }
                }
                Enqueue::Full(_) => return self.fail_round(target, out),
            }
        }
    }

    /// Takes the chunk lock for a sync item and reads the chunk's committed content (removes
    /// need no read). Returns false if the item finished at once (so the caller continues).
    pub(super) fn start_sync_item(
        &mut self,
        target: TargetId,
        w: Waiter,
        out: &mut Outbox<Self>,
    ) -> bool {
        let chunk = w.req.chunk;
        let remove = w.req.kind == UpdateKind::Remove;
        let t = self.targets.get_mut(&target).expect("hosted target");
        let committed = t
            .chunks
            .get(&chunk)
            .map_or(ChunkVersion(0), |m| m.committed);
        if remove && committed > ChunkVersion(0) {
            return self.sync_item_skipped(target); // It reappeared here: nothing to remove.
        }
        t.locks.lock(
            chunk,
            Running {
                sync_item: true,
                ..Running::new(w, committed, Phase::ReadingFull)
            },
        );
        if remove {
            self.send_full(target, chunk, None, out);
        } else {
            let op = crate::chunk::ChunkOp::Read {
                chunk,
                offset: 0,
                len: CHUNK_SIZE_MAX,
                uncommitted: false,
                unverified: false,
            };
            self.submit(out, IoPurpose::FullRead { target, chunk }, op);
        }
        true
    }

    fn sync_item_skipped(&mut self, target: TargetId) -> bool {
        if let Some(ResyncPhase::Copying { current, .. }) =
            self.resyncs.get_mut(&target).map(|r| &mut r.phase)
        {
            *current = None;
        }
        false
    }

    /// Whole-chunk read finished: ship it (`Replace`), or `Remove` for a hole, to the successor.
    pub(super) fn full_read_done(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        read: Result<Option<ChunkRead>, crate::chunk::ChunkError>,
        out: &mut Outbox<Self>,
    ) {
        let sync_item = self.targets[&target]
            .locks
            .running(chunk)
            .is_some_and(|r| r.sync_item);
        match read {
            Err(_) if sync_item => self.end_sync_item(target, chunk, false, out),
            Err(_) => self.fail_running(target, chunk, Status::DiskError, out),
            // A sync item whose chunk vanished since the decision: nothing to ship (3FS skips).
            Ok(None) if sync_item => self.end_sync_item(target, chunk, true, out),
            Ok(read) => self.send_full(target, chunk, read.map(|r| r.data), out),
        }
    }

    /// Sends the running update (or sync item) of `chunk` as a full-chunk replace to the
    /// current successor; `None` content ships a remove.
    pub(super) fn send_full(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        data: Option<Payload>,
        out: &mut Outbox<Self>,
    ) {
        let chain = self.chain_info(target);
        // An update (not a sync item) whose target left SERVING while its chunk was read goes
        // back through `forward`, which fails it: it must not ship its pending version.
        if self.left_serving(target, chunk, chain) {
            return self.forward(target, chunk, out);
        }
        let succ = chain.and_then(|c| c.successor_of(target));
        let node = succ.and_then(|s| self.routing.node_of(s.target));
        let versioned = chain.map(|c| c.versioned());
        let timeout = self.cfg.forward_timeout.clone();
        let t = self.targets.get_mut(&target).expect("hosted target");
        let running = t
            .locks
            .running_mut(chunk)
            .expect("full send of a running update");
        let (Some(succ), Some(node), Some(versioned)) = (succ, node, versioned) else {
            // The successor vanished meanwhile: the routing change re-drives the update.
            return if running.sync_item {
                self.end_sync_item(target, chunk, false, out)
            } else {
                self.forward(target, chunk, out)
            };
        };
        let checksum = data.as_ref().map_or(0, Payload::checksum);
        if running.sync_item {
            running.pending_checksum = checksum;
        }
        let kind = match data {
            Some(data) => UpdateKind::Replace { data },
            None => UpdateKind::Remove,
        };
        let req = &running.waiter.req;
        let fwd = UpdateReq {
            tag: req.tag,
            chain: versioned,
            chunk,
            kind,
            chunk_size: req.chunk_size,
            update_version: running.version,
            checksum,
            retry: running.retries,
            is_syncing: true,
        };
        running.advance(Phase::Forwarding {
            successor: succ.target,
            chain_version: versioned.version,
        });
        out.send(node, Msg::Update(fwd));
        if let Some(timeout) = timeout {
            out.set_timer(StorageTimer::ForwardRetry { target, chunk }, timeout);
        }
    }

    /// Ends the sync item holding `chunk`'s lock and moves the round on (or fails it).
    pub(super) fn end_sync_item(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        ok: bool,
        out: &mut Outbox<Self>,
    ) {
        let t = self.targets.get_mut(&target).expect("hosted target");
        let Some((_, waiters)) = t.locks.unlock(chunk) else {
            return;
        };
        out.push(ActionOf::CancelTimer(StorageTimer::ForwardRetry {
            target,
            chunk,
        }));
        if ok {
            self.counters.resync_items += 1;
        }
        self.start_waiters(target, chunk, waiters, out);
        let copying = matches!(
            self.resyncs.get(&target).map(|r| &r.phase),
            Some(ResyncPhase::Copying { current: Some(c), .. }) if *c == chunk
        );
        if !copying {
            return;
        }
        if ok {
            if let Some(ResyncPhase::Copying { current, .. }) =
                self.resyncs.get_mut(&target).map(|r| &mut r.phase)
            {
                *current = None;
            }
            self.next_sync_item(target, out);
        } else {
            self.fail_round(target, out);
        }
    }

    /// Successor side: every chunk is copied; become UPTODATE and tell mgmtd.
    pub(super) fn on_sync_done(&mut self, from: NodeId, req: SyncReq, out: &mut Outbox<Self>) {
        let status = match self.admit_sync(&req) {
            Ok(target) => {
                let t = self.targets.get_mut(&target).expect("admitted");
                t.local_state = LocalState::UpToDate;
                t.synced_at = Some(req.chain.version);
                t.fresh = false;
                self.send_heartbeat(out);
                Status::Ok
            }
            Err(status) => status,
        };
        out.send(from, Msg::SyncDoneReply(SyncDoneReply { req, status }));
    }

    pub(super) fn on_sync_done_reply(&mut self, rep: SyncDoneReply, out: &mut Outbox<Self>) {
        let Some(target) = self.resync_of(&rep.req) else {
            return;
        };
        if self.resyncs[&target].phase != ResyncPhase::Finishing {
            return;
        }
        if rep.status == Status::Ok {
            self.counters.resyncs_done += 1;
            self.resyncs.get_mut(&target).expect("found").phase = ResyncPhase::Done;
        } else {
            self.fail_round(target, out);
        }
    }
}
