//! Batching of file-length updates per inode (3FS §4.4, §4.6): close and sync of one file
//! that reach a meta server while an update of that file runs there wait, and then all run in
//! one transaction, in arrival order, instead of one each.
//!
//! Clients send an inode's requests to its owner first (rendezvous hash, `client/meta.rs`), so
//! one server normally sees all of them: concurrent writers closing one file cost one
//! transaction and at most one storage length query rather than conflicting with each other.
//! A server that gets one as a fallback batches it the same way; the KV's serializable commits
//! keep servers correct against each other (3FS instead re-validates ownership in the
//! transaction).
//! Invariants: at most one batch per inode runs on a server; every member keeps its own
//! request id, idempotency record and answer, so a retry of a member (queued, running or
//! answered) is answered exactly once; a batch that fails answers every member with the error.
//! Not here: the length rules (`length.rs`), running transactions (`server.rs`), the server's
//! batch bookkeeping (`server_batch.rs`, which owns the queues and answers members).

use super::ops::{Namespace, PathOp};
use super::perm::User;
use super::request::{execute_with, MetaOp, MetaResult};
use super::MetaError;
use crate::ids::{ClientId, InodeId, NodeId, RequestId};
use crate::kv::KvEngine;

/// One length update in a batch.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct Member {
    /// Its client and request id (the server's running-entry key, `server_work::Key`).
    pub key: (ClientId, RequestId),
    /// The close or sync.
    pub op: MetaOp,
    /// Where its answer goes.
    pub reply_to: Option<NodeId>,
    /// The user it acts for.
    pub user: User,
}

/// Why a batch's replay stopped before its commit.
#[derive(Debug)]
pub enum BatchStop {
    /// An attempt-level failure (KV, damaged row, a storage query needed): the batch retries.
    Failed(MetaError),
    /// Member `k` (not the first) failed with a POSIX error, which discards the writes of the
    /// members before it (`request.rs`): it must leave the batch.
    Split(usize),
}

/// Runs every member of a batch in one transaction, each with its own identity and user;
/// their answers in order.
pub fn run_batch<E: KvEngine + ?Sized>(
    ns: &mut Namespace<'_, '_, E>,
    members: &[Member],
    now: u64,
    exactly_once: bool,
) -> Result<Vec<MetaResult>, BatchStop> {
    let mut results = Vec::with_capacity(members.len());
    for (k, m) in members.iter().enumerate() {
        ns.set_user(m.user);
        let p = PathOp {
            client: m.key.0,
            request: m.key.1,
            now,
        };
        match execute_with(ns, &m.op, p, exactly_once) {
            Err(e @ (MetaError::Kv(_) | MetaError::Corrupt | MetaError::LengthUnknown)) => {
                return Err(BatchStop::Failed(e))
            }
            Err(_) if k > 0 => return Err(BatchStop::Split(k)),
            res => results.push(res),
        }
    }
    Ok(results)
}

/// The file a request updates the length of, if it is a close or a sync.
pub fn length_update(op: &MetaOp) -> Option<InodeId> {
    match op {
        MetaOp::Close { inode, .. } | MetaOp::Sync { inode, .. } => Some(*inode),
        _ => None,
    }
}
