//! The update path of a target (3FS §3.2, §3.5): admission, per-chunk lock, local update to the
//! pending version, forwarding to the successor with retries that re-resolve the successor under
//! the current routing (`forward.rs`), commit tail to head and replies upstream (`commit.rs`).
//! This file holds the shared types (`Waiter`, `Phase`, `Running`), admission and the local
//! update.
//!
//! Version rule (new chunk engine): the head assigns `committed + 1`; a successor given an
//! explicit version `u` treats `u <= committed` as already committed (success, no-op), applies
//! `u == committed + 1` (replacing any pending version of the same number: the head decides the
//! content, so a leftover pending version from a failed attempt is overwritten, never trusted),
//! and rejects `u > committed + 1` as a missing update.
//!
//! A SYNCING successor gets full-chunk replaces instead of the update itself (§3.5 #5): the
//! predecessor reads its whole chunk including the pending version and ships it `is_syncing`;
//! the successor installs it as committed at the given version (3FS: "updateVer taken as given,
//! content replaced, then committed"). Resync items (`resync.rs`) share this lock and path.
//!
//! A full disk (issue 37): a replica whose store answers `NoSpace` to an update (its `Update`,
//! or the `Install` of a SYNCING successor) wrote nothing of it. It answers `Status::NoSpace`,
//! and every replica before it gives the update up on that answer and passes it on, up to the
//! client, which does not retry: as after any other given-up forward, the pending version left
//! on the replicas before the refusing one stays until the chunk's next update overwrites it
//! (same version number, since no replica committed this one). That needs the update never to
//! commit anywhere later, which `no_space.rs` ensures by refusing late copies of it. Two cases
//! keep the old transient answer, `DiskError`, because the version may be committed already: a
//! SYNCING successor that already holds the version refusing to install it again, and a local
//! commit refused (a store keeps room for commits, so only past its reserve): the commit is
//! retried after a backoff, never given up, since the successor has committed the version. The
//! target stays SERVING throughout (`on_io_done` takes it offline only on EIO or corruption).

use std::collections::VecDeque;

use crate::bugs::PlantedBug;
use crate::chunk::{ChunkError, ChunkMeta, ChunkOp, UpdateKind};
use crate::ids::{ChunkId, ChunkVersion, NodeId, TargetId, VersionedChain};
use crate::limits::CHUNK_SIZE_MAX;
use crate::machine::Outbox;
use crate::msg::{Msg, Status, UpdateReply, UpdateReq, UpdateResult};
use crate::routing::PublicState;
use crate::storage::chunk_lock::Enqueue;
use crate::storage::exactly_once::Admission;
use crate::storage::resync::SYNC_CHANNEL;
use crate::storage::running::{Phase, Running, Waiter};
use crate::storage::{IoPurpose, StorageNode};

fn result_of(meta: &ChunkMeta) -> UpdateResult {
    UpdateResult {
        commit_version: meta.committed,
        commit_chain_version: meta.chain_version,
        len: meta.len,
        checksum: meta.checksum,
    }
}

pub(super) fn reply(
    out: &mut Outbox<StorageNode>,
    to: NodeId,
    req: &UpdateReq,
    status: Status,
    result: Option<UpdateResult>,
) {
    out.send(
        to,
        Msg::UpdateReply(UpdateReply::answering(req, status, result)),
    );
}

/// Structural validity of an update, independent of state.
fn validate(req: &UpdateReq, from_client: bool) -> bool {
    if req.chunk_size == 0 || req.chunk_size > CHUNK_SIZE_MAX {
        return false;
    }
    if from_client && (req.is_syncing || req.tag.channel == SYNC_CHANNEL) {
        return false;
    }
    match &req.kind {
        UpdateKind::Write { offset, data } => {
            u64::from(*offset) + data.len() as u64 <= u64::from(req.chunk_size)
        }
        UpdateKind::Truncate { len } | UpdateKind::Extend { len } => *len <= req.chunk_size,
        UpdateKind::Remove => true,
        // Full-chunk replaces come only from a predecessor (resync, syncing successor).
        UpdateKind::Replace { data } => {
            !from_client && data.len() as u64 <= u64::from(req.chunk_size)
        }
    }
}

fn payload_checksum(kind: &UpdateKind) -> u32 {
    match kind {
        UpdateKind::Write { data, .. } | UpdateKind::Replace { data } => data.checksum(),
        _ => 0,
    }
}

impl StorageNode {
    /// A client write (`from_client`) or a forwarded update arrives.
    pub(super) fn on_update_req(
        &mut self,
        from: NodeId,
        req: UpdateReq,
        from_client: bool,
        out: &mut Outbox<Self>,
    ) {
        let target = match self.update_target(from, &req, from_client, out) {
            Ok(target) => target,
            Err(status) => return reply(out, from, &req, status, None),
        };
        if !self.admit_tag(target, from, &req, from_client, out) {
            return;
        }
        let now = *self.now;
        let t = self
            .targets
            .get_mut(&target)
            .expect("local_view returns hosted targets");
        let chunk = req.chunk;
        match t.locks.enqueue(
            chunk,
            Waiter {
                from,
                req,
                from_client,
            },
        ) {
            Enqueue::Queued => {}
            Enqueue::Free(w) => {
                self.start_update(target, w, out);
            }
            Enqueue::Full(w) => {
                t.channels.finish(&w.req.tag, None, now);
                reply(out, w.from, &w.req, Status::Busy, None);
            }
        }
    }

    /// The target an arriving update is for, or the status that refuses it: the request, its
    /// chain version, the target's state, the storage lease, the head (for a client write) or
    /// the chain predecessor (for a forwarded one), and the payload's checksum.
    fn update_target(
        &mut self,
        from: NodeId,
        req: &UpdateReq,
        from_client: bool,
        out: &mut Outbox<Self>,
    ) -> Result<TargetId, Status> {
        if !validate(req, from_client) {
            return Err(Status::InvalidRequest);
        }
        let view = self.admit_chain(req.chain)?;
        let target = view.target;
        if !self.local_ready(target, view.state) {
            return Err(Status::TargetNotServing);
        }
        if !self.leased(out) {
            return Err(Status::NoLease);
        }
        if from_client {
            if !view.is_head {
                return Err(Status::NotHead);
            }
        } else if !self.from_predecessor(from, req.chain, target) {
            // Only the chain predecessor at this chain version forwards to this target: anyone
            // else (a confused or forging peer) would write versions the chain never ordered.
            self.counters.updates_from_stranger += 1;
            return Err(Status::InvalidRequest);
        } else if req.is_syncing && view.state != PublicState::Syncing {
            // Full-chunk replaces are only for a SYNCING target; anything else is a stale sender.
            return Err(Status::TargetNotServing);
        } else if !view.state.in_write_path() {
            return Err(Status::TargetNotServing);
        }
        if payload_checksum(&req.kind) != req.checksum {
            return Err(Status::ChecksumMismatch);
        }
        Ok(target)
    }

    /// The exactly-once filter: whether the update runs; if not, it was answered (from the
    /// record of an earlier run, or refused).
    fn admit_tag(
        &mut self,
        target: TargetId,
        from: NodeId,
        req: &UpdateReq,
        from_client: bool,
        out: &mut Outbox<Self>,
    ) -> bool {
        let (now, horizon) = (*self.now, self.cfg.retry_horizon);
        // Resync items are idempotent full-chunk installs: never cached.
        let skip_filter =
            self.bug(PlantedBug::ReplayAppliedTwice) || req.tag.channel == SYNC_CHANNEL;
        if skip_filter {
            return true;
        }
        let t = self
            .targets
            .get_mut(&target)
            .expect("local_view returns hosted targets");
        let status = match t.channels.admit(&req.tag, now, horizon) {
            Admission::Execute => return true,
            Admission::Cached(result) => {
                self.counters.cached_replies += 1;
                reply(out, from, req, Status::Ok, Some(result));
                return false;
            }
            Admission::Locked => Status::ChannelLocked,
            Admission::Full => {
                self.counters.channels_full += 1;
                Status::Busy
            }
            // A forwarded update carries its explicit version, and the version checks make
            // its replay safe; the channel may have moved on because the client gave up and
            // reused it while this update was still being re-forwarded (a predecessor retries
            // until the chain answers). Answering DuplicateUpdate there would make the
            // predecessor abandon a version this replica may already have committed (the
            // swarm found replicas diverging that way), so only client writes are refused.
            Admission::Duplicate if !from_client => return true,
            Admission::Duplicate => Status::DuplicateUpdate,
        };
        reply(out, from, req, status, None);
        false
    }

    /// Takes the chunk lock for `w` and starts its local update. Returns false if `w` was
    /// answered without taking the lock (so the caller may start the next waiter).
    fn start_update(&mut self, target: TargetId, w: Waiter, out: &mut Outbox<Self>) -> bool {
        if w.from == self.cfg.node && w.req.tag.channel == SYNC_CHANNEL {
            return self.start_own_sync_item(target, w, out);
        }
        let Some(current) = self.recheck_under_lock(target, &w, out) else {
            return false;
        };
        if w.req.is_syncing {
            return self.start_install(target, w, current, out);
        }
        let Some(version) = self.version_to_write(target, &w, current, out) else {
            return false;
        };
        let t = self.targets.get_mut(&target).expect("hosted target");
        let chunk = w.req.chunk;
        t.locks
            .lock(chunk, Running::new(w, version, Phase::Updating));
        self.submit_local_update(target, chunk, out);
        self.forward_early(target, chunk, out);
        true
    }

    /// This node's own resync item reached the front of the chunk's queue. Its round may have
    /// ended or been replaced while it waited (a chain change, a timeout): then it is dropped,
    /// since the round it belonged to no longer expects it (the mgmtd model found the node
    /// panicking here).
    fn start_own_sync_item(&mut self, target: TargetId, w: Waiter, out: &mut Outbox<Self>) -> bool {
        if !self.sync_item_awaited(target, &w) {
            return false;
        }
        if self.start_sync_item(target, w, out) {
            return true;
        }
        self.next_sync_item(target, out);
        false
    }

    /// Checks `w` again now that it holds the chunk's turn: routing may have moved while it was
    /// queued, and a copy of an update this replica refused for want of space must stay
    /// refused. Returns the chunk as committed here, or `None` once `w` is answered.
    fn recheck_under_lock(
        &mut self,
        target: TargetId,
        w: &Waiter,
        out: &mut Outbox<Self>,
    ) -> Option<UpdateResult> {
        let now = *self.now;
        let skip_version = self.bug(PlantedBug::SkipChainVersionCheck);
        let horizon = self.cfg.retry_horizon;
        let current = self.local_view(w.req.chain.chain).map(|v| v.version);
        let t = self.targets.get_mut(&target).expect("hosted target");
        // Re-check the chain version under the lock: routing may have moved while queued.
        if current != Some(w.req.chain.version) && !skip_version {
            t.channels.finish(&w.req.tag, None, now);
            let status = match current {
                Some(current) => Status::StaleChainVersion { current },
                None => Status::NoTarget,
            };
            reply(out, w.from, &w.req, status, None);
            return None;
        }
        // The chunk as committed here, by value: only these four fields decide (and its whole
        // meta, with its exactly-once records, is not worth a copy per update).
        let current = t
            .chunks
            .get(&w.req.chunk)
            .map_or_else(|| result_of(&ChunkMeta::default()), result_of);
        let (chunk, version, tag) = (w.req.chunk, w.req.update_version, &w.req.tag);
        if !w.from_client && t.refusals.holds(chunk, version, tag, now, horizon) {
            // A copy of an update this replica answered `NoSpace`: the chain gave it up, so it
            // must not run now that space may have been freed (no_space.rs).
            self.counters.no_space += 1;
            t.channels.finish(&w.req.tag, None, now);
            reply(out, w.from, &w.req, Status::NoSpace, None);
            return None;
        }
        Some(current)
    }

    /// SYNCING successor: installs the predecessor's full chunk at its version, committed.
    /// Returns false if `w` was answered without taking the lock.
    fn start_install(
        &mut self,
        target: TargetId,
        w: Waiter,
        current: UpdateResult,
        out: &mut Outbox<Self>,
    ) -> bool {
        let now = *self.now;
        let t = self.targets.get_mut(&target).expect("hosted target");
        let (chunk, version) = (w.req.chunk, w.req.update_version);
        // Within one chain version the predecessor ships a chunk's versions in increasing
        // order, so a full chunk older than what this replica committed at the same chain
        // version is a late duplicate (a retry or a spiked frame): installing it would roll
        // the chunk back below an acknowledged write (found by the swarm, seed 2859). It is
        // answered with the chunk as it is; a predecessor still waiting for exactly that
        // version sees the mismatch and treats it as the divergence it would be. Removes
        // (version 0) and installs from an older chain version keep the §3.6 semantics: the
        // predecessor is authoritative.
        let stale = w.req.kind != UpdateKind::Remove
            && version < current.commit_version
            && current.commit_chain_version == w.req.chain.version;
        if stale {
            self.counters.stale_installs += 1;
            let result = current;
            t.channels.finish(&w.req.tag, None, now);
            reply(out, w.from, &w.req, Status::Ok, Some(result));
            return false;
        }
        let data = match &w.req.kind {
            UpdateKind::Replace { data } => Some(data.clone()),
            _ => None,
        };
        let chain_version = w.req.chain.version;
        let op = ChunkOp::Install {
            chunk,
            version,
            chain_version,
            data,
        };
        let phase = Phase::Committing { chain_version };
        t.locks.lock(chunk, Running::new(w, version, phase));
        self.submit(out, IoPurpose::Commit { target, chunk }, op);
        true
    }

    /// The pending version `w` writes: `committed + 1` at the head; at a successor the version
    /// it carries, unless that is committed here already (answered Ok) or skips one (answered
    /// `MissingUpdate`), in which case `None` once `w` is answered.
    fn version_to_write(
        &mut self,
        target: TargetId,
        w: &Waiter,
        current: UpdateResult,
        out: &mut Outbox<Self>,
    ) -> Option<ChunkVersion> {
        if w.from_client {
            return Some(current.commit_version.next());
        }
        let now = *self.now;
        let t = self.targets.get_mut(&target).expect("hosted target");
        let u = w.req.update_version;
        if u <= current.commit_version {
            // Already committed here (a replay through another path, §3.5 #4): success. The
            // result describes the chunk, not this update, so it is not cached: a later update
            // with the same tag at another version must be judged afresh, never answered with
            // a version it did not write.
            let result = current;
            t.channels.finish(&w.req.tag, None, now);
            reply(out, w.from, &w.req, Status::Ok, Some(result));
            return None;
        }
        if u > current.commit_version.next() {
            t.channels.finish(&w.req.tag, None, now);
            reply(out, w.from, &w.req, Status::MissingUpdate, None);
            return None;
        }
        Some(u)
    }

    pub(super) fn update_done(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        result: Result<ChunkMeta, ChunkError>,
        out: &mut Outbox<Self>,
    ) {
        let meta = match result {
            Err(e) if self.pipelined_update_done(target, chunk, Some(e), out) => return,
            // Nothing of the update was written here: the chain gives it up (module docs).
            Err(ChunkError::NoSpace) => return self.refuse_no_space(target, chunk, out),
            Err(_) => return self.fail_running(target, chunk, Status::DiskError, out),
            Ok(meta) => meta,
        };
        let t = self.targets.get_mut(&target).expect("hosted target");
        let running = t
            .locks
            .running_mut(chunk)
            .expect("update I/O implies a running update");
        let pending = meta
            .pending
            .clone()
            .expect("Updated meta carries the pending version");
        assert_eq!(
            pending.version, running.version,
            "store wrote another version"
        );
        running.pending_checksum = pending.checksum;
        debug_assert!(
            self.cfg.bug.is_some() || meta.versions_hold(),
            "chunk {chunk}: pending is not committed + 1 in {meta:?}"
        );
        t.chunks.insert(chunk, meta);
        if !self.pipelined_update_done(target, chunk, None, out) {
            self.forward(target, chunk, out);
        }
    }

    /// Whether `from` hosts the target whose successor in `chain`'s write path is `target`
    /// (`admit_chain` has checked that the sender routes by this node's chain version; a planted
    /// bug that skips that check skips this one too, since the chains then differ).
    fn from_predecessor(&self, from: NodeId, chain: VersionedChain, target: TargetId) -> bool {
        let Some(info) = self.routing.chain(chain.chain) else {
            return false;
        };
        if info.version != chain.version {
            return true;
        }
        info.targets.iter().any(|t| {
            t.state.in_write_path()
                && info.successor_of(t.target).map(|s| s.target) == Some(target)
                && self.routing.node_of(t.target) == Some(from)
        })
    }

    pub(super) fn start_waiters(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        mut waiters: VecDeque<crate::storage::Waiter>,
        out: &mut Outbox<Self>,
    ) {
        while let Some(w) = waiters.pop_front() {
            if self.start_update(target, w, out) {
                let t = self.targets.get_mut(&target).expect("hosted target");
                t.locks.requeue_front(chunk, waiters);
                return;
            }
        }
    }
}
