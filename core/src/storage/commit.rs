//! How a running update ends (3FS §3.2): its local commit lands and the chunk lock passes to
//! the next waiter, the store has no room for the commit (it waits, or the chain gives the
//! update up, per the rules in `write.rs`'s module docs), or it fails upstream.
//!
//! Invariant: every end unlocks the chunk, finishes the exactly-once channel and answers the
//! caller exactly once (not again if it was answered early); a commit the successor has made
//! is never given up.
//!
//! Not here: admission and the local update (`write.rs`), forwarding (`forward.rs`).

use crate::chunk::{ChunkError, ChunkMeta};
use crate::ids::{ChunkId, ChunkVersion, TargetId};
use crate::machine::{ActionOf, Outbox};
use crate::msg::{Status, UpdateResult};
use crate::storage::resync::SYNC_CHANNEL;
use crate::storage::running::Phase;
use crate::storage::write::reply;
use crate::storage::{StorageNode, StorageTimer};

impl StorageNode {
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
        debug_assert!(
            self.cfg.bug.is_some() || meta.versions_hold(),
            "chunk {chunk}: pending is not committed + 1 in {meta:?}"
        );
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
            running.advance(Phase::CommitWaiting { chain_version });
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
    pub(super) fn refuse_no_space(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        out: &mut Outbox<Self>,
    ) {
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
}
