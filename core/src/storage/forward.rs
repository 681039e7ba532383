//! The forward half of the update path (3FS §3.2, §3.5): a running update goes to the
//! successor under the current routing (or, at the tail, commits), its answer commits or gives
//! it up, and a timer retries it. The admission and local update are `write.rs`; the commit and
//! the ways an update ends are `commit.rs`.
//!
//! Invariant: an update is forwarded or committed only while its target is SERVING and was not
//! displaced since it was admitted (`left_serving`); a forwarded update is given up only where
//! no replica downstream can have committed it (divergence, an invalid request, `NoSpace` under
//! the chain version last sent), never on a timeout (the retry budget bounds how long the caller
//! waits, not the update).
//!
//! Not here: the version rule and the SYNCING successor's install (`write.rs`), resync rounds
//! (`resync.rs`).

use crate::bugs::PlantedBug;
use crate::chunk::ChunkOp;
use crate::ids::{ChainVersion, ChunkId, NodeId, TargetId, VersionedChain};
use crate::machine::{ActionOf, Outbox};
use crate::msg::{Msg, Status, UpdateReply, UpdateReq, UpdateResult};
use crate::routing::PublicState;
use crate::storage::running::Phase;
use crate::storage::write::reply;
use crate::storage::{IoPurpose, StorageNode, StorageTimer};

impl StorageNode {
    /// Sends the running update to the successor under the current routing, or commits it
    /// locally if this target is now the tail (§3.5 #1: a predecessor left without a successor
    /// commits as tail).
    pub(super) fn forward(&mut self, target: TargetId, chunk: ChunkId, out: &mut Outbox<Self>) {
        if self.defer_forward(target, chunk) {
            return; // Pipelined, its local update still in the store: resumed when it lands.
        }
        let chain = self.chain_info(target);
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
        let versioned = chain.versioned();
        let successor = chain.successor_of(target).map(|s| (s.target, s.state));
        let succ_node = successor.and_then(|(s, _)| self.routing.node_of(s));
        let commit_early = self.bug(PlantedBug::CommitBeforeSuccessorAck);
        let refused = self.targets[&target]
            .locks
            .running(chunk)
            .is_some_and(|r| r.local_refused);
        if refused && !matches!(successor, Some((_, PublicState::Serving))) {
            // Pipelined and refused by this store, and the successor it went to left (this
            // target is the tail now, or the next one is SYNCING): that successor may have
            // committed it, so the local update is retried and the update goes on from there.
            return self.await_local_retry(target, chunk, None, out);
        }
        match (successor, succ_node) {
            (None, _) => self.commit_as_tail(target, chunk, versioned.version, out),
            (Some((_, PublicState::Syncing)), Some(_)) if !commit_early => {
                self.ship_full_chunk(target, chunk, out)
            }
            (Some((succ, _)), Some(node)) => {
                let to = (succ, node);
                self.send_to_successor(target, chunk, versioned, to, commit_early, out)
            }
            // Routing names a successor without a node: wait for newer routing (a routing
            // change re-forwards; the timeout too, when configured).
            (Some((succ, _)), None) => {
                self.await_successor(target, chunk, succ, versioned.version, out)
            }
        }
    }

    /// Tail: commits the running update locally, recording the current chain version.
    fn commit_as_tail(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        chain_version: ChainVersion,
        out: &mut Outbox<Self>,
    ) {
        let tail_ack_early = self.bug(PlantedBug::TailAckBeforeCommit);
        let t = self.targets.get_mut(&target).expect("hosted target");
        let running = t
            .locks
            .running_mut(chunk)
            .expect("forward of a running update");
        running.advance(Phase::Committing { chain_version });
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
                commit_chain_version: chain_version,
                len: pending.len,
                checksum: pending.checksum,
            };
            let w = running.waiter.clone();
            reply(out, w.from, &w.req, Status::Ok, Some(result));
        }
        out.push(ActionOf::CancelTimer(StorageTimer::ForwardRetry {
            target,
            chunk,
        }));
        let op = ChunkOp::Commit {
            chunk,
            version,
            chain_version,
        };
        self.submit(out, IoPurpose::Commit { target, chunk }, op);
    }

    /// §3.5 #5: a SYNCING successor gets the whole chunk, pending version included, so the
    /// running update reads it first.
    fn ship_full_chunk(&mut self, target: TargetId, chunk: ChunkId, out: &mut Outbox<Self>) {
        let t = self.targets.get_mut(&target).expect("hosted target");
        let running = t
            .locks
            .running_mut(chunk)
            .expect("forward of a running update");
        running.advance(Phase::ReadingFull);
        let op = ChunkOp::Read {
            chunk,
            offset: 0,
            len: running.waiter.req.chunk_size,
            uncommitted: true,
            unverified: false,
        };
        out.push(ActionOf::CancelTimer(StorageTimer::ForwardRetry {
            target,
            chunk,
        }));
        self.submit(out, IoPurpose::FullRead { target, chunk }, op);
    }

    /// Sends the running update to successor target `to.0` on node `to.1` and waits for its
    /// answer (or, under the planted `CommitBeforeSuccessorAck`, commits at once).
    pub(super) fn send_to_successor(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        versioned: VersionedChain,
        to: (TargetId, NodeId),
        commit_early: bool,
        out: &mut Outbox<Self>,
    ) {
        let t = self.targets.get_mut(&target).expect("hosted target");
        let running = t
            .locks
            .running_mut(chunk)
            .expect("forward of a running update");
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
        out.send(to.1, Msg::Update(fwd));
        if commit_early {
            running.advance(Phase::Committing {
                chain_version: versioned.version,
            });
            let op = ChunkOp::Commit {
                chunk,
                version: running.version,
                chain_version: versioned.version,
            };
            self.submit(out, IoPurpose::Commit { target, chunk }, op);
        } else {
            self.await_successor(target, chunk, to.0, versioned.version, out);
        }
    }

    /// The running update waits for `successor`'s answer, or for routing to name its node, until
    /// the retry timer (when configured).
    fn await_successor(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        successor: TargetId,
        chain_version: ChainVersion,
        out: &mut Outbox<Self>,
    ) {
        let timeout = self.cfg.forward_timeout.clone();
        let t = self.targets.get_mut(&target).expect("hosted target");
        let running = t
            .locks
            .running_mut(chunk)
            .expect("forward of a running update");
        running.advance(Phase::Forwarding {
            successor,
            chain_version,
        });
        if let Some(timeout) = timeout {
            out.set_timer(StorageTimer::ForwardRetry { target, chunk }, timeout);
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
        if running.local_running {
            running.hold_answer(sent, &rep);
            return; // Pipelined: answered once the local update lands (`pipeline.rs`).
        }
        if running.sync_item {
            let ok = rep.status == Status::Ok
                && rep.result.is_some_and(|r| {
                    r.commit_version == running.version && r.checksum == running.pending_checksum
                });
            return self.end_sync_item(target, chunk, ok, out);
        }
        self.on_successor_answer(target, chunk, sent, &rep, out);
    }

    /// The successor answered the running update on `chunk` (its attempt under chain version
    /// `sent`): commit, give up, or retry.
    pub(super) fn on_successor_answer(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        sent: ChainVersion,
        rep: &UpdateReply,
        out: &mut Outbox<Self>,
    ) {
        match (rep.status, rep.result) {
            (Status::Ok, Some(result)) => self.commit_after_successor(target, chunk, result, out),
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

    /// The successor committed the running update: it commits here too, unless the successor's
    /// version or bytes differ (the replicas diverged).
    pub(super) fn commit_after_successor(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        result: UpdateResult,
        out: &mut Outbox<Self>,
    ) {
        let t = self.targets.get_mut(&target).expect("hosted target");
        let running = t
            .locks
            .running_mut(chunk)
            .expect("an answer to a running update");
        if running.local_refused {
            // Pipelined: the successor committed what this store refused.
            return self.await_local_retry(target, chunk, Some(result), out);
        }
        // The successor must have committed exactly this version with the same bytes;
        // anything else means the replicas diverged.
        if result.commit_version != running.version || result.checksum != running.pending_checksum {
            return self.fail_running(target, chunk, Status::ChecksumMismatch, out);
        }
        running.advance(Phase::Committing {
            chain_version: result.commit_chain_version,
        });
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
        if running.phase == Phase::UpdateWaiting {
            return self.retry_local_update(target, chunk, out);
        }
        if running.local_running {
            // Pipelined, the local update still in the store: the retry runs once it lands,
            // and does not count against the budget before then.
            running.reforward = true;
            return;
        }
        if let Phase::CommitWaiting { chain_version } = running.phase {
            running.advance(Phase::Committing { chain_version });
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
}
