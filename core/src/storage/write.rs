//! The update path of a target (3FS §3.2, §3.5): admission, per-chunk lock, local update to the
//! pending version, forwarding to the successor with retries that re-resolve the successor under
//! the current routing, commit tail to head, and replies upstream.
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
use crate::chunk::{ChunkError, ChunkMeta, ChunkOp, UpdateKind, UpdateTag};
use crate::ids::{ChainVersion, ChunkId, ChunkVersion, NodeId, TargetId, VersionedChain};
use crate::limits::CHUNK_SIZE_MAX;
use crate::machine::{ActionOf, Outbox};
use crate::msg::{Msg, Status, UpdateReply, UpdateReq, UpdateResult};
use crate::routing::PublicState;
use crate::storage::chunk_lock::Enqueue;
use crate::storage::exactly_once::Admission;
use crate::storage::resync::SYNC_CHANNEL;
use crate::storage::{IoPurpose, StorageNode, StorageTimer};

/// An update waiting for (or holding) a chunk lock: who sent it and what it is.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct Waiter {
    /// Where the reply goes (client for writes at the head, predecessor otherwise).
    pub from: NodeId,
    /// The request as received.
    pub req: UpdateReq,
    /// Whether this is a client write (at the head).
    pub from_client: bool,
}

/// Where a running update is.
#[derive(Clone, Copy, Debug, Eq, Hash, PartialEq)]
pub enum Phase {
    /// Local update of the pending version in progress.
    Updating,
    /// Reading the whole chunk to ship it as a full-chunk replace (SYNCING successor, resync).
    ReadingFull,
    /// Sent to `successor`; waiting for its reply or the retry timer.
    Forwarding {
        /// The successor the last attempt went to.
        successor: TargetId,
        /// The chain version the last attempt carried.
        chain_version: ChainVersion,
    },
    /// Local commit (or, for a SYNCING successor, install) in progress, recording
    /// `chain_version`.
    Committing {
        /// The chain version the commit records.
        chain_version: ChainVersion,
    },
    /// The store refused the local commit for want of space: retried when the forward-retry
    /// timer fires (the successor has committed this version, so it is never given up).
    CommitWaiting {
        /// The chain version the commit records.
        chain_version: ChainVersion,
    },
}

/// The update holding a chunk's lock on a target.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct Running {
    /// The request and its sender.
    pub waiter: Waiter,
    /// The pending version this update writes. Invariant: `committed + 1` at lock time.
    pub version: ChunkVersion,
    /// Progress.
    pub phase: Phase,
    /// Forwarding attempts after the first.
    pub retries: u32,
    /// CRC32C of the local pending content, compared with the successor's.
    pub pending_checksum: u32,
    /// Already answered upstream (only under `TailAckBeforeCommit`).
    pub acked: bool,
    /// A resync item (`resync.rs`), not an update: no local update or commit, no reply.
    pub sync_item: bool,
    /// The target left UPTODATE while this update ran (mgmtd took it out of SERVING, maybe
    /// already back): it must not forward or commit as tail (`forward`).
    pub displaced: bool,
}

impl Running {
    /// The chunk.
    pub fn chunk(&self) -> ChunkId {
        self.waiter.req.chunk
    }
}

fn result_of(meta: &ChunkMeta) -> UpdateResult {
    UpdateResult {
        commit_version: meta.committed,
        commit_chain_version: meta.chain_version,
        len: meta.len,
        checksum: meta.checksum,
    }
}

fn reply(
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
        let (now, horizon) = (*self.now, self.cfg.retry_horizon);
        if !validate(&req, from_client) {
            return reply(out, from, &req, Status::InvalidRequest, None);
        }
        let view = match self.admit_chain(req.chain) {
            Ok(view) => view,
            Err(status) => return reply(out, from, &req, status, None),
        };
        let target = view.target;
        if !self.local_ready(target, view.state) {
            return reply(out, from, &req, Status::TargetNotServing, None);
        }
        if !self.leased(out) {
            return reply(out, from, &req, Status::NoLease, None);
        }
        if from_client {
            if !view.is_head {
                return reply(out, from, &req, Status::NotHead, None);
            }
        } else if !self.from_predecessor(from, req.chain, target) {
            // Only the chain predecessor at this chain version forwards to this target: anyone
            // else (a confused or forging peer) would write versions the chain never ordered.
            self.counters.updates_from_stranger += 1;
            return reply(out, from, &req, Status::InvalidRequest, None);
        } else if req.is_syncing && view.state != PublicState::Syncing {
            // Full-chunk replaces are only for a SYNCING target; anything else is a stale sender.
            return reply(out, from, &req, Status::TargetNotServing, None);
        } else if !view.state.in_write_path() {
            return reply(out, from, &req, Status::TargetNotServing, None);
        }
        if payload_checksum(&req.kind) != req.checksum {
            return reply(out, from, &req, Status::ChecksumMismatch, None);
        }
        // Resync items are idempotent full-chunk installs: never cached.
        let skip_filter =
            self.bug(PlantedBug::ReplayAppliedTwice) || req.tag.channel == SYNC_CHANNEL;
        let t = self
            .targets
            .get_mut(&target)
            .expect("local_view returns hosted targets");
        if !skip_filter {
            match t.channels.admit(&req.tag, now, horizon) {
                Admission::Execute => {}
                Admission::Cached(result) => {
                    self.counters.cached_replies += 1;
                    return reply(out, from, &req, Status::Ok, Some(result));
                }
                Admission::Locked => return reply(out, from, &req, Status::ChannelLocked, None),
                Admission::Full => {
                    self.counters.channels_full += 1;
                    return reply(out, from, &req, Status::Busy, None);
                }
                // A forwarded update carries its explicit version, and the version checks make
                // its replay safe; the channel may have moved on because the client gave up and
                // reused it while this update was still being re-forwarded (a predecessor retries
                // until the chain answers). Answering DuplicateUpdate there would make the
                // predecessor abandon a version this replica may already have committed (the
                // swarm found replicas diverging that way), so only client writes are refused.
                Admission::Duplicate if !from_client => {}
                Admission::Duplicate => {
                    return reply(out, from, &req, Status::DuplicateUpdate, None)
                }
            }
        }
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

    /// Takes the chunk lock for `w` and starts its local update. Returns false if `w` was
    /// answered without taking the lock (so the caller may start the next waiter).
    fn start_update(&mut self, target: TargetId, w: Waiter, out: &mut Outbox<Self>) -> bool {
        let now = *self.now;
        if w.from == self.cfg.node && w.req.tag.channel == SYNC_CHANNEL {
            // This node's own resync item reached the front of the chunk's queue. Its round may
            // have ended or been replaced while it waited (a chain change, a timeout): then it
            // is dropped, since the round it belonged to no longer expects it (the mgmtd model
            // found the node panicking here).
            if !self.sync_item_awaited(target, &w) {
                return false;
            }
            if self.start_sync_item(target, w, out) {
                return true;
            }
            self.next_sync_item(target, out);
            return false;
        }
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
            return false;
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
            return false;
        }
        if w.req.is_syncing {
            // SYNCING successor: install the predecessor's full chunk at its version, committed.
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
            t.locks.lock(
                chunk,
                Running {
                    waiter: w,
                    version,
                    phase: Phase::Committing { chain_version },
                    retries: 0,
                    pending_checksum: 0,
                    acked: false,
                    sync_item: false,
                    displaced: false,
                },
            );
            self.submit(out, IoPurpose::Commit { target, chunk }, op);
            return true;
        }
        let version = if w.from_client {
            current.commit_version.next()
        } else {
            let u = w.req.update_version;
            if u <= current.commit_version {
                // Already committed here (a replay through another path, §3.5 #4): success. The
                // result describes the chunk, not this update, so it is not cached: a later update
                // with the same tag at another version must be judged afresh, never answered with
                // a version it did not write.
                let result = current;
                t.channels.finish(&w.req.tag, None, now);
                reply(out, w.from, &w.req, Status::Ok, Some(result));
                return false;
            }
            if u > current.commit_version.next() {
                t.channels.finish(&w.req.tag, None, now);
                reply(out, w.from, &w.req, Status::MissingUpdate, None);
                return false;
            }
            u
        };
        let chunk = w.req.chunk;
        let kind = w.req.kind.clone();
        let tag = (w.req.tag.channel != SYNC_CHANNEL).then(|| UpdateTag::from(&w.req.tag));
        t.locks.lock(
            chunk,
            Running {
                waiter: w,
                version,
                phase: Phase::Updating,
                retries: 0,
                pending_checksum: 0,
                acked: false,
                sync_item: false,
                displaced: false,
            },
        );
        self.submit(
            out,
            IoPurpose::Update { target, chunk },
            ChunkOp::Update {
                chunk,
                version,
                kind,
                tag,
            },
        );
        true
    }

    pub(super) fn update_done(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        result: Result<ChunkMeta, ChunkError>,
        out: &mut Outbox<Self>,
    ) {
        match result {
            // Nothing of the update was written here: the chain gives it up (module docs).
            Err(ChunkError::NoSpace) => self.refuse_no_space(target, chunk, out),
            Err(_) => self.fail_running(target, chunk, Status::DiskError, out),
            Ok(meta) => {
                let t = self.targets.get_mut(&target).expect("hosted target");
                let running = t
                    .locks
                    .running_mut(chunk)
                    .expect("update I/O implies a running update");
                assert_eq!(running.phase, Phase::Updating);
                let pending = meta
                    .pending
                    .clone()
                    .expect("Updated meta carries the pending version");
                assert_eq!(
                    pending.version, running.version,
                    "store wrote another version"
                );
                running.pending_checksum = pending.checksum;
                t.chunks.insert(chunk, meta);
                self.forward(target, chunk, out);
            }
        }
    }

    /// Sends the running update to the successor under the current routing, or commits it
    /// locally if this target is now the tail (§3.5 #1: a predecessor left without a successor
    /// commits as tail).
    pub(super) fn forward(&mut self, target: TargetId, chunk: ChunkId, out: &mut Outbox<Self>) {
        let chain = self
            .chain_of
            .get(&target)
            .and_then(|c| self.routing.chain(*c));
        let Some(chain) = chain else {
            return self.fail_running(target, chunk, Status::NoTarget, out);
        };
        if self.left_serving(target, chunk, Some(chain)) {
            // This target left SERVING since the update was admitted (taken OFFLINE, maybe back
            // as SYNCING or SERVING already: a suspected head whose disk answered late, found
            // by the mgmtd model). It must not commit as the tail of a chain whose SERVING
            // replicas never saw the update, nor forward it (a SYNCING replica takes only its
            // predecessor's full chunks). What is left is safe: the client retries with the
            // same tag at the new head, whose exactly-once record answers if a successor had
            // committed the update; the pending version left here is shipped over by the
            // resync this target goes through (it ships any chunk pending on either side), or,
            // if the resync's snapshot came before it landed, replaced by the chunk's next
            // update, and until then it is never read as committed. A target back from
            // LASTSRV is not displaced: §3.5 #8 commits what it holds (target_state.rs).
            return self.fail_running(target, chunk, Status::TargetNotServing, out);
        }
        let (versioned, successor) = (chain.versioned(), chain.successor_of(target));
        let succ_node = successor.and_then(|s| self.routing.node_of(s.target));
        let commit_early = self.bug(PlantedBug::CommitBeforeSuccessorAck);
        let tail_ack_early = self.bug(PlantedBug::TailAckBeforeCommit);
        let timeout = self.cfg.forward_timeout.clone();
        let t = self.targets.get_mut(&target).expect("hosted target");
        let running = t
            .locks
            .running_mut(chunk)
            .expect("forward of a running update");
        let timer = StorageTimer::ForwardRetry { target, chunk };
        match (successor, succ_node) {
            (None, _) => {
                // Tail: commit locally, recording the current chain version.
                running.phase = Phase::Committing {
                    chain_version: versioned.version,
                };
                let version = running.version;
                if tail_ack_early {
                    running.acked = true;
                    let pending = t
                        .chunks
                        .get(&chunk)
                        .and_then(|m| m.pending.clone())
                        .unwrap_or_default();
                    let result = UpdateResult {
                        commit_version: version,
                        commit_chain_version: versioned.version,
                        len: pending.len,
                        checksum: pending.checksum,
                    };
                    let w = running.waiter.clone();
                    reply(out, w.from, &w.req, Status::Ok, Some(result));
                }
                out.push(ActionOf::CancelTimer(timer));
                let op = ChunkOp::Commit {
                    chunk,
                    version,
                    chain_version: versioned.version,
                };
                self.submit(out, IoPurpose::Commit { target, chunk }, op);
            }
            (Some(succ), Some(_)) if succ.state == PublicState::Syncing && !commit_early => {
                // §3.5 #5: ship the whole chunk, pending version included.
                running.phase = Phase::ReadingFull;
                let op = ChunkOp::Read {
                    chunk,
                    offset: 0,
                    len: running.waiter.req.chunk_size,
                    uncommitted: true,
                    unverified: false,
                };
                out.push(ActionOf::CancelTimer(timer));
                self.submit(out, IoPurpose::FullRead { target, chunk }, op);
            }
            (Some(succ), Some(node)) => {
                let req = &running.waiter.req;
                let fwd = UpdateReq {
                    tag: req.tag,
                    chain: versioned,
                    chunk,
                    kind: req.kind.clone(),
                    chunk_size: req.chunk_size,
                    update_version: running.version,
                    checksum: req.checksum,
                    retry: running.retries,
                    is_syncing: false,
                };
                out.send(node, Msg::Update(fwd));
                if commit_early {
                    running.phase = Phase::Committing {
                        chain_version: versioned.version,
                    };
                    let op = ChunkOp::Commit {
                        chunk,
                        version: running.version,
                        chain_version: versioned.version,
                    };
                    self.submit(out, IoPurpose::Commit { target, chunk }, op);
                } else {
                    running.phase = Phase::Forwarding {
                        successor: succ.target,
                        chain_version: versioned.version,
                    };
                    if let Some(timeout) = timeout {
                        out.set_timer(timer, timeout);
                    }
                }
            }
            (Some(succ), None) => {
                // Routing names a successor without a node: wait for newer routing (a routing
                // change re-forwards; the timeout too, when configured).
                running.phase = Phase::Forwarding {
                    successor: succ.target,
                    chain_version: versioned.version,
                };
                if let Some(timeout) = timeout {
                    out.set_timer(timer, timeout);
                }
            }
        }
    }

    /// Whether the update running on `chunk` of `target` may no longer forward or commit: its
    /// target left SERVING since it was admitted (displaced), or is not SERVING in `chain`.
    /// Sync items are the round's business, never this rule's.
    pub(super) fn left_serving(
        &self,
        target: TargetId,
        chunk: ChunkId,
        chain: Option<&crate::routing::ChainInfo>,
    ) -> bool {
        let running = self.targets[&target].locks.running(chunk);
        !running.is_some_and(|r| r.sync_item)
            && (running.is_some_and(|r| r.displaced)
                || chain.and_then(|c| c.state_of(target)) != Some(PublicState::Serving))
    }

    pub(super) fn on_update_reply(
        &mut self,
        _from: NodeId,
        rep: UpdateReply,
        out: &mut Outbox<Self>,
    ) {
        let Some(target) = self.local_view(rep.chain.chain).map(|v| v.target) else {
            return;
        };
        let t = self.targets.get_mut(&target).expect("hosted target");
        let Some(running) = t.locks.running_mut(rep.chunk) else {
            return;
        };
        let Phase::Forwarding {
            chain_version: sent,
            ..
        } = running.phase
        else {
            return; // Not waiting for a successor: a late reply to an earlier attempt.
        };
        if running.version != rep.update_version || running.waiter.req.tag != rep.tag {
            return; // A reply meant for another update: ignore.
        }
        let chunk = rep.chunk;
        if running.sync_item {
            let ok = rep.status == Status::Ok
                && rep.result.is_some_and(|r| {
                    r.commit_version == running.version && r.checksum == running.pending_checksum
                });
            return self.end_sync_item(target, chunk, ok, out);
        }
        match (rep.status, rep.result) {
            (Status::Ok, Some(result)) => {
                // The successor must have committed exactly this version with the same bytes;
                // anything else means the replicas diverged.
                if result.commit_version != running.version
                    || result.checksum != running.pending_checksum
                {
                    return self.fail_running(target, chunk, Status::ChecksumMismatch, out);
                }
                running.phase = Phase::Committing {
                    chain_version: result.commit_chain_version,
                };
                let version = running.version;
                out.push(ActionOf::CancelTimer(StorageTimer::ForwardRetry {
                    target,
                    chunk,
                }));
                let op = ChunkOp::Commit {
                    chunk,
                    version,
                    chain_version: result.commit_chain_version,
                };
                self.submit(out, IoPurpose::Commit { target, chunk }, op);
            }
            (Status::Ok, None) | (Status::InvalidRequest, _) | (Status::DuplicateUpdate, _) => {
                self.fail_running(target, chunk, Status::ForwardFailed, out)
            }
            // Divergent replicas: the update cannot complete on this chain.
            (Status::ChecksumMismatch, _) => {
                self.fail_running(target, chunk, Status::ChecksumMismatch, out)
            }
            // A replica from the successor on had no room for the update: none of them wrote or
            // committed it, and they refuse every later copy of it (no_space.rs), so it is given
            // up here too and the refusal passes upstream to the client. Only an answer to the
            // attempt under the chain version last sent counts: an older attempt went to
            // another successor, which says nothing of the current one.
            (Status::NoSpace, _) if rep.chain.version == sent => {
                self.refuse_no_space(target, chunk, out)
            }
            (Status::NoSpace, _) => {}
            // ForwardFailed / DiskError from the successor are transient here: downstream may
            // already have committed this version (a middle whose own successor committed, then
            // gave up or failed its disk), so abandoning it would let the next update reuse the
            // version for other bytes. Keep retrying until the reply or a chain change.
            // The successor has newer routing: this node's routing change will re-forward.
            (Status::StaleChainVersion { current }, _) if current > sent => {}
            // Everything else is transient (the successor is behind, busy, or still running the
            // same update arriving from another predecessor): back off, then re-resolve and
            // re-send.
            _ => out.set_timer(
                StorageTimer::ForwardRetry { target, chunk },
                self.cfg.forward_retry_wait.clone(),
            ),
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

    pub(super) fn on_forward_retry(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        out: &mut Outbox<Self>,
    ) {
        let max = self.cfg.forward_retries_max;
        let abandon = self.bug(PlantedBug::AbandonForwardOnTimeout);
        let Some(t) = self.targets.get_mut(&target) else {
            return;
        };
        let Some(running) = t.locks.running_mut(chunk) else {
            return;
        };
        if let Phase::CommitWaiting { chain_version } = running.phase {
            running.phase = Phase::Committing { chain_version };
            let op = ChunkOp::Commit {
                chunk,
                version: running.version,
                chain_version,
            };
            return self.submit(out, IoPurpose::Commit { target, chunk }, op);
        }
        if !matches!(running.phase, Phase::Forwarding { .. }) {
            return;
        }
        if running.sync_item {
            return self.end_sync_item(target, chunk, false, out);
        }
        running.retries = (running.retries + 1).min(max + 1);
        self.counters.forward_retries += 1;
        if running.retries > max && abandon {
            return self.fail_running(target, chunk, Status::ForwardFailed, out);
        }
        if running.retries > max && !running.acked {
            // The budget bounds how long the caller waits, not the update: part of the chain may
            // have committed this version already, and abandoning it would let the next update
            // of the chunk reuse the version for different bytes (replicas diverge; the swarm
            // found this). The caller gets ForwardFailed and retries with the same tag, which the
            // exactly-once filter answers once the update finishes; the update keeps going
            // until the successor answers or a chain change moves this target out of the path.
            running.acked = true;
            let w = running.waiter.clone();
            reply(out, w.from, &w.req, Status::ForwardFailed, None);
        }
        self.forward(target, chunk, out);
    }

    pub(super) fn commit_done(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        result: Result<ChunkMeta, ChunkError>,
        out: &mut Outbox<Self>,
    ) {
        let now = *self.now;
        let meta = match result {
            Err(ChunkError::NoSpace) => return self.commit_refused(target, chunk, out),
            Err(_) => return self.fail_running(target, chunk, Status::DiskError, out),
            Ok(meta) => meta,
        };
        self.counters.commits += 1;
        let t = self.targets.get_mut(&target).expect("hosted target");
        let (running, waiters) = t
            .locks
            .unlock(chunk)
            .expect("commit I/O implies a running update");
        let result = UpdateResult {
            commit_version: running.version,
            commit_chain_version: meta.chain_version,
            len: meta.len,
            checksum: meta.checksum,
        };
        if meta.committed == ChunkVersion(0) {
            t.chunks.remove(&chunk); // A committed remove deletes the chunk.
        } else {
            t.chunks.insert(chunk, meta);
        }
        t.channels
            .finish(&running.waiter.req.tag, Some(result), now);
        if !running.acked {
            let w = &running.waiter;
            reply(out, w.from, &w.req, Status::Ok, Some(result));
        }
        self.start_waiters(target, chunk, waiters, out);
    }

    /// The store had no room for the running update's commit (`Commit` or, on a SYNCING
    /// successor, `Install`). See the module docs.
    fn commit_refused(&mut self, target: TargetId, chunk: ChunkId, out: &mut Outbox<Self>) {
        let wait = self.cfg.forward_retry_wait.clone();
        let t = self.targets.get_mut(&target).expect("hosted target");
        let Some(running) = t.locks.running_mut(chunk) else {
            return;
        };
        let Phase::Committing { chain_version } = running.phase else {
            return self.fail_running(target, chunk, Status::DiskError, out);
        };
        if !running.waiter.req.is_syncing {
            // The successor committed this version (or this is the tail, which answers no one
            // before its commit): the commit must happen, so it waits for space.
            self.counters.commits_refused += 1;
            running.phase = Phase::CommitWaiting { chain_version };
            return out.set_timer(StorageTimer::ForwardRetry { target, chunk }, wait);
        }
        let held = t
            .chunks
            .get(&chunk)
            .is_some_and(|m| m.committed >= running.version && running.version.0 > 0);
        if held || running.waiter.req.tag.channel == SYNC_CHANNEL {
            // Already installed here by an earlier copy (the predecessor must not give up a
            // version this replica holds: the old transient answer), or a resync item, whose
            // round fails and is retried either way.
            let status = if held {
                Status::DiskError
            } else {
                Status::NoSpace
            };
            return self.fail_running(target, chunk, status, out);
        }
        self.refuse_no_space(target, chunk, out);
    }

    /// Ends the running update on `chunk` with `NoSpace` upstream, remembering a forwarded one
    /// so that a late copy of it is refused too (`no_space.rs`).
    fn refuse_no_space(&mut self, target: TargetId, chunk: ChunkId, out: &mut Outbox<Self>) {
        let (now, horizon) = (*self.now, self.cfg.retry_horizon);
        self.counters.no_space += 1;
        let t = self.targets.get_mut(&target).expect("hosted target");
        if let Some(running) = t.locks.running(chunk) {
            let w = &running.waiter;
            if !w.from_client && !running.sync_item && w.req.tag.channel != SYNC_CHANNEL {
                let (version, tag) = (running.version, w.req.tag);
                t.refusals.record(chunk, version, &tag, now, horizon);
            }
        }
        self.fail_running(target, chunk, Status::NoSpace, out);
    }

    /// Ends the running update on `chunk` with an error upstream (unless the caller was already
    /// answered). The pending version stays on the store; the next update of the chunk
    /// overwrites it. That is safe where no replica downstream can have committed the update
    /// (divergence detected, the request itself was invalid, or a replica refused it for want
    /// of space and refuses its copies, `no_space.rs`), and where this target left SERVING
    /// (`forward`): a successor may have committed it then, but this target is out of the
    /// chain until a resync, which makes it hold what the chain holds, and the client's retry
    /// with the same tag is answered from the new head's exactly-once record.
    pub(super) fn fail_running(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        status: Status,
        out: &mut Outbox<Self>,
    ) {
        let now = *self.now;
        let t = self.targets.get_mut(&target).expect("hosted target");
        let Some((running, waiters)) = t.locks.unlock(chunk) else {
            return;
        };
        t.channels.finish(&running.waiter.req.tag, None, now);
        out.push(ActionOf::CancelTimer(StorageTimer::ForwardRetry {
            target,
            chunk,
        }));
        if !running.acked {
            let w = &running.waiter;
            reply(out, w.from, &w.req, status, None);
        }
        self.start_waiters(target, chunk, waiters, out);
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
