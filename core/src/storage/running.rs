//! What holds a chunk's lock on a target: the update running on it (`Running`), where it is
//! (`Phase`), and who sent it (`Waiter`, also what the lock queue holds). Shared by the update
//! path (`write.rs`, `forward.rs`, `commit.rs`) and resync rounds (`resync.rs`), which run
//! their items through the same lock; a leaf, so that none of them reaches into another for
//! the types.
//!
//! Invariant: one `Running` per locked chunk. Its phases go `Updating` → `Forwarding` ⇄
//! `ReadingFull` (a retry re-resolves the successor, which may have become SYNCING) →
//! `Committing` ⇄ `CommitWaiting`, and never back from `Committing`; an install at a SYNCING
//! successor starts at `Committing`. A pipelined update (`pipeline.rs`) starts at `Forwarding`
//! with its local update still in the store (`local_running`), and may pass through
//! `UpdateWaiting` (its own store refused it after the forward, and its successor committed it
//! or may have) before `Committing`, or before `Forwarding` again when no successor answered.
//!
//! Not here: the lock queue (`chunk_lock.rs`) or what moves a phase.

use crate::ids::{ChainVersion, ChunkId, ChunkVersion, NodeId, TargetId};
use crate::msg::{Status, UpdateReply, UpdateReq, UpdateResult};

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
    /// A pipelined update whose local update this replica's store refused (no space, a
    /// transient refusal) after a successor committed it, or left the chain before saying
    /// whether it had: the local update is retried when the forward-retry timer fires, then
    /// committed after the successor's commit, or forwarded afresh (never given up, like
    /// `CommitWaiting`).
    UpdateWaiting,
}

impl Phase {
    /// Whether a running update may go from this phase to `next` (the module's order): never
    /// back to `Updating`, and never back from committing to forwarding or reading, because
    /// the successor has committed by then and a second forward could apply the update twice.
    pub fn may_become(self, next: Phase) -> bool {
        let committing =
            |p: Phase| matches!(p, Phase::Committing { .. } | Phase::CommitWaiting { .. });
        match (committing(self), next) {
            (_, Phase::Updating) => false,
            (true, n) => committing(n),
            (false, _) => true,
        }
    }
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
    /// Pipelined (`pipeline.rs`): forwarded while the local update is still in the store, so
    /// nothing may read the local pending version, commit or unlock until it lands.
    pub local_running: bool,
    /// Pipelined: the store refused the local update without a medium failure (no space, a
    /// transient refusal) after it was forwarded; the successor's answer decides whether the
    /// chain gives it up or this replica retries until its store takes it.
    pub local_refused: bool,
    /// Pipelined: the successor's answer that came while `local_running`, with the chain
    /// version of the attempt it answers; handled once the local update lands.
    pub early_answer: Option<(ChainVersion, UpdateReply)>,
    /// Pipelined: a re-forward (retry timer, routing change) asked for while `local_running`.
    pub reforward: bool,
    /// `UpdateWaiting`: the successor's commit, if it answered, checked against the local update
    /// once it lands.
    pub successor_result: Option<UpdateResult>,
}

impl Running {
    /// A fresh running update in `phase`: no retries yet, nothing answered.
    pub fn new(waiter: Waiter, version: ChunkVersion, phase: Phase) -> Self {
        Running {
            waiter,
            version,
            phase,
            retries: 0,
            pending_checksum: 0,
            acked: false,
            sync_item: false,
            displaced: false,
            local_running: false,
            local_refused: false,
            early_answer: None,
            reforward: false,
            successor_result: None,
        }
    }

    /// Moves to `next`. Debug builds check the phase order here, at the step that would break
    /// it, rather than at a later whole-state check.
    pub fn advance(&mut self, next: Phase) {
        debug_assert!(
            self.phase.may_become(next),
            "update of {} v{}: {:?} may not become {next:?}",
            self.chunk(),
            self.version.0,
            self.phase
        );
        self.phase = next;
    }

    /// Whether a replica after this one may hold (even have committed) this update while this
    /// replica has no pending version of it yet: a pipelined update before its local update
    /// landed. A read that must not miss a version a successor committed treats the chunk as
    /// dirty then (`read.rs`).
    pub fn ahead_of_local(&self) -> bool {
        self.local_running || self.local_refused || self.phase == Phase::UpdateWaiting
    }

    /// Holds a successor's answer (to the attempt sent under `sent`) that came before the
    /// local update landed. A held commit is never replaced by a later answer (a duplicate, or
    /// a reply to a re-send): the commit is what must not be lost.
    pub fn hold_answer(&mut self, sent: ChainVersion, rep: &UpdateReply) {
        let held_ok = matches!(&self.early_answer, Some((_, r)) if r.status == Status::Ok);
        if !held_ok {
            self.early_answer = Some((sent, rep.clone()));
        }
    }

    /// The chunk.
    pub fn chunk(&self) -> ChunkId {
        self.waiter.req.chunk
    }
}
