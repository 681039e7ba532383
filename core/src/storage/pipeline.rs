//! Pipelined forwarding (issue 41 item 6): a replica forwards an update to a SERVING successor
//! as soon as it has submitted its own local update, instead of after that update lands, so the
//! chain's store updates overlap and a 3-replica write costs about one store update plus the
//! hops rather than three in series. The commit order is unchanged: a replica commits only
//! after its successor acknowledged *and* its own local update landed, and the tail commits
//! only after its own.
//!
//! What changes, and why it is safe:
//! - A successor (even the tail) may commit a version before a replica ahead of it holds it as
//!   pending. The client is answered only by the head's commit, so nothing acknowledged depends
//!   on it; a read under `RejectDirty` treats the chunk as dirty while the update is ahead of
//!   the local store (`Running::ahead_of_local`), as it would a pending version.
//! - Nothing that needs the local pending version runs before it lands: a successor's answer is
//!   held (`early_answer`) and a re-forward (retry timer, routing change) is deferred
//!   (`reforward`) until then, so shipping a full chunk to a SYNCING successor, committing as a
//!   new tail, comparing checksums and unlocking all see the landed update. Only a successor
//!   already SERVING gets the update early; a SYNCING one needs the full chunk (`forward.rs`).
//! - A local update that fails after the update was forwarded: on EIO or corruption the target
//!   goes OFFLINE (`on_io_done`) and leaves the chain, as a displaced target does (`forward.rs`
//!   says why that is safe). A refusal that wrote nothing (no space, or the store's transient
//!   refusal) must not be given up while a successor may have committed the version, or the
//!   chunk's next update would reuse it for other bytes (and readers of the successor would
//!   have seen a write answered as failed). Only the successor's own refusal under the chain
//!   version last sent gives it up, as on the serial path (`NoSpace` upstream with
//!   `no_space.rs`'s record). If the successor committed it, or left the chain before saying
//!   (it may have committed), this replica retries its local update until the store takes it
//!   (`Phase::UpdateWaiting`) and then commits after the successor's commit, or forwards it
//!   afresh (committing as the tail if none is left), never giving it up, as a refused commit
//!   waits (`commit.rs`).
//!
//! Not here: the serial path (`write.rs`, `forward.rs`), which sync items, installs at a
//! SYNCING successor, the tail and the planted `CommitBeforeSuccessorAck` keep.

use crate::bugs::PlantedBug;
use crate::chunk::{ChunkError, ChunkOp, UpdateTag};
use crate::ids::{ChunkId, TargetId};
use crate::machine::Outbox;
use crate::msg::{Status, UpdateResult};
use crate::routing::PublicState;
use crate::storage::resync::SYNC_CHANNEL;
use crate::storage::running::Phase;
use crate::storage::{IoPurpose, StorageNode, StorageTimer};

impl StorageNode {
    /// Submits the local update of the update running on `chunk` (its version and kind).
    pub(super) fn submit_local_update(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        out: &mut Outbox<Self>,
    ) {
        let running = self.targets[&target]
            .locks
            .running(chunk)
            .expect("a local update of a running update");
        let req = &running.waiter.req;
        let tag = (req.tag.channel != SYNC_CHANNEL).then(|| UpdateTag::from(&req.tag));
        let op = ChunkOp::Update {
            chunk,
            version: running.version,
            kind: req.kind.clone(),
            tag,
        };
        self.submit(out, IoPurpose::Update { target, chunk }, op);
    }

    /// Right after the local update of `chunk` was submitted: sends the update on to a SERVING
    /// successor at once, when pipelining is on. Anything else (the tail, a SYNCING or unknown
    /// successor, a target that left SERVING) waits for the local update, as the serial path.
    pub(super) fn forward_early(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        out: &mut Outbox<Self>,
    ) {
        if !self.cfg.pipeline || self.bug(PlantedBug::CommitBeforeSuccessorAck) {
            return;
        }
        let Some(chain) = self.chain_info(target) else {
            return;
        };
        if self.left_serving(target, chunk, Some(chain)) {
            return;
        }
        let versioned = chain.versioned();
        let Some(succ) = chain.successor_of(target) else {
            return;
        };
        if succ.state != PublicState::Serving {
            return;
        }
        let Some(node) = self.routing.node_of(succ.target) else {
            return;
        };
        let t = self.targets.get_mut(&target).expect("hosted target");
        let running = t.locks.running_mut(chunk).expect("a running update");
        running.local_running = true;
        self.send_to_successor(target, chunk, versioned, (succ.target, node), false, out);
    }

    /// Whether `forward` must wait because the local update is still in the store (it then runs
    /// once the update lands).
    pub(super) fn defer_forward(&mut self, target: TargetId, chunk: ChunkId) -> bool {
        let running = self
            .targets
            .get_mut(&target)
            .and_then(|t| t.locks.running_mut(chunk));
        match running {
            Some(r) if r.local_running => {
                r.reforward = true;
                true
            }
            _ => false,
        }
    }

    /// The local update of a pipelined update finished (`update_done`): Ok, or the store's
    /// error. Returns false if the update on `chunk` is not pipelined (the serial path goes on).
    pub(super) fn pipelined_update_done(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        error: Option<ChunkError>,
        out: &mut Outbox<Self>,
    ) -> bool {
        let running = self.targets[&target].locks.running(chunk);
        let Some(phase) = running.map(|r| r.phase) else {
            return false;
        };
        match (phase, error) {
            (Phase::Updating, _) => return false,
            (Phase::UpdateWaiting, None) => self.local_retry_landed(target, chunk, out),
            (_, Some(ChunkError::Failed | ChunkError::Corrupt)) => {
                // The target went OFFLINE with its disk (`on_io_done`): out of the chain.
                self.fail_running(target, chunk, Status::DiskError, out)
            }
            (Phase::UpdateWaiting, Some(_)) => self.wait_for_store(target, chunk, out),
            (_, error) => {
                debug_assert!(
                    matches!(phase, Phase::Forwarding { .. }),
                    "a pipelined update's store answered in {phase:?}"
                );
                self.resume_forward(target, chunk, error.is_some(), out)
            }
        }
        true
    }

    /// The local update landed (or the store refused it: `refused`) after the update was
    /// forwarded: handles the successor's held answer, then a deferred re-forward.
    fn resume_forward(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        refused: bool,
        out: &mut Outbox<Self>,
    ) {
        let t = self.targets.get_mut(&target).expect("hosted target");
        let running = t.locks.running_mut(chunk).expect("a running update");
        running.local_running = false;
        running.local_refused = refused;
        let (version, tag) = (running.version, running.waiter.req.tag);
        let reforward = std::mem::take(&mut running.reforward);
        if let Some((sent, rep)) = running.early_answer.take() {
            self.on_successor_answer(target, chunk, sent, &rep, out);
        }
        // Still forwarding the same update (the answer did not end or commit it): the deferred
        // re-forward runs now, as it would have when it was asked for.
        let still = self.targets[&target].locks.running(chunk).is_some_and(|r| {
            r.version == version
                && r.waiter.req.tag == tag
                && matches!(r.phase, Phase::Forwarding { .. })
        });
        if reforward && still {
            self.forward(target, chunk, out);
        }
    }

    /// This store refused an update already forwarded, and the successor committed it
    /// (`result`) or left the chain without saying (`None`): waits (`UpdateWaiting`) and
    /// retries the local update on the forward-retry timer, never giving it up.
    pub(super) fn await_local_retry(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        result: Option<UpdateResult>,
        out: &mut Outbox<Self>,
    ) {
        let t = self.targets.get_mut(&target).expect("hosted target");
        let running = t.locks.running_mut(chunk).expect("a running update");
        running.advance(Phase::UpdateWaiting);
        running.successor_result = result;
        self.wait_for_store(target, chunk, out);
    }

    /// An update this store refused although a successor committed it or may have: counted
    /// with the refused commits (both wait for the store), retried after the backoff.
    fn wait_for_store(&mut self, target: TargetId, chunk: ChunkId, out: &mut Outbox<Self>) {
        self.counters.commits_refused += 1;
        let wait = self.cfg.forward_retry_wait.clone();
        out.set_timer(StorageTimer::ForwardRetry { target, chunk }, wait);
    }

    /// The forward-retry timer of an `UpdateWaiting` update: the local update again, unless the
    /// target left SERVING (then it is resynced from the chain, as a displaced target is).
    pub(super) fn retry_local_update(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        out: &mut Outbox<Self>,
    ) {
        let chain = self.chain_info(target);
        if self.left_serving(target, chunk, chain) {
            return self.fail_running(target, chunk, Status::TargetNotServing, out);
        }
        self.submit_local_update(target, chunk, out);
    }

    /// The retried local update landed: commits as the successor did (if the bytes agree), or,
    /// with no answer from one, goes on as any landed update does (`forward`: to the current
    /// successor, or committed as the tail).
    fn local_retry_landed(&mut self, target: TargetId, chunk: ChunkId, out: &mut Outbox<Self>) {
        let t = self.targets.get_mut(&target).expect("hosted target");
        let running = t.locks.running_mut(chunk).expect("a running update");
        running.local_refused = false;
        match running.successor_result.take() {
            Some(result) => self.commit_after_successor(target, chunk, result, out),
            None => self.forward(target, chunk, out),
        }
    }
}
