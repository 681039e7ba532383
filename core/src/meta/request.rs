//! Meta requests as data: the operations a client sends a meta server ([`MetaOp`]), their
//! answers ([`MetaAnswer`]), their wire encodings, and [`execute`], which runs one request as
//! the body of one KV transaction with exactly-once semantics.
//!
//! Exactly-once: every mutating request writes an idempotency record (`IDEM` + client +
//! request id) holding its answer, in the same transaction as its effect. A retry, after a lost
//! reply or a `CommitUnknown`, reads the record first and returns the stored answer without
//! applying anything again, even if the namespace has moved on since (the file it created was
//! removed, the name it renamed was renamed again). A request that fails with a POSIX error
//! records that error too (and nothing else): otherwise a duplicate of it delivered late would
//! run again and could succeed after its client was told it failed (found by the swarm, seed
//! 200: a `remove` answered ENOENT later removed a symlink created after it). Read-only
//! requests write nothing.
//! Invariant: a request's outcome depends only on the KV rows it reads and on the `PathOp`, so
//! replaying it against the same rows gives the same answer and the same writes (the meta
//! server relies on this; see `server.rs`).
//!
//! Not here: expiry of idempotency records (`idem.rs`), retries (the caller's).

use super::keys::idem_key;
use super::{MetaError, Namespace, PathOp};
use crate::kv::KvEngine;
use crate::limits::DIR_LIST_PAGE_MAX;
use crate::mgmtd::store::{decode, encode};
pub use crate::wire::{FsStat, MetaAnswer, MetaOp, MetaResult};

impl MetaOp {
    /// The most inodes the request can make: the ids a server reserves for it.
    pub fn ids_needed(&self) -> u64 {
        match self {
            Self::Create { .. } | Self::Symlink { .. } | Self::Mknod { .. } => 1,
            Self::Mkdirs { path, .. } => super::anchor::anchor_of(path)
                .and_then(|(_, rest)| super::split_path(rest))
                .map_or(0, |p| p.len() as u64),
            _ => 0,
        }
    }
}

/// Runs `op` on `ns` with exactly-once semantics (module docs). The caller commits.
pub fn execute<E: KvEngine + ?Sized>(
    ns: &mut Namespace<'_, '_, E>,
    op: &MetaOp,
    p: PathOp,
) -> MetaResult {
    execute_with(ns, op, p, true)
}

/// [`execute`], or, when `!exactly_once` (the planted bug `meta-skip-idempotency`), the bare
/// operation without its record.
pub fn execute_with<E: KvEngine + ?Sized>(
    ns: &mut Namespace<'_, '_, E>,
    op: &MetaOp,
    p: PathOp,
    exactly_once: bool,
) -> MetaResult {
    if !op.mutates() || !exactly_once {
        return apply(ns, op, p);
    }
    let idem = idem_key(p.client, p.request);
    if let Some(stored) = ns.txn().get(&idem)? {
        return decode::<super::idem::IdemRecord>(&stored)
            .map_err(MetaError::from)?
            .result;
    }
    let result = apply(ns, op, p);
    match &result {
        // The KV's own failures and damaged rows are not outcomes: nothing is recorded.
        // Nor is a length update that needs storage's answer first (the server asks, then
        // runs the request again).
        Err(MetaError::Kv(_) | MetaError::Corrupt | MetaError::LengthUnknown) => return result,
        // A POSIX error keeps its reads (so a change to them aborts the record) but none of
        // the writes made before the error was found (mkdir -p's parents, say).
        Err(_) => ns.txn().discard_writes(),
        Ok(_) => {}
    }
    let record = super::idem::IdemRecord { at: p.now, result };
    ns.txn().set(&idem, &encode(&record));
    record.result
}

fn apply<E: KvEngine + ?Sized>(
    ns: &mut Namespace<'_, '_, E>,
    op: &MetaOp,
    p: PathOp,
) -> MetaResult {
    use MetaAnswer::{Done, Entries, Inode as I};
    Ok(match op {
        MetaOp::Stat { path, follow } => I(ns.stat(path, *follow)?),
        // A page at most `DIR_LIST_PAGE_MAX` long, whatever the limit asked: the caller asks
        // again after the last name.
        MetaOp::List { path, after, limit } => {
            let limit = (*limit).min(DIR_LIST_PAGE_MAX) as usize;
            Entries(ns.list(path, after, limit)?)
        }
        MetaOp::Create {
            path,
            perm,
            exclusive,
            session,
        } => I(ns.create(path, *perm, *exclusive, *session, p)?),
        MetaOp::Mkdirs {
            path,
            perm,
            recursive,
        } => I(ns.mkdirs(path, *perm, *recursive, p)?),
        MetaOp::Symlink { path, target } => I(ns.symlink(path, target, p)?),
        MetaOp::Mknod {
            path,
            kind,
            perm,
            rdev,
        } => I(ns.mknod(path, *kind, *perm, *rdev, p)?),
        MetaOp::Hardlink { existing, path } => I(ns.hardlink(existing, path, p)?),
        MetaOp::Remove { path, recursive } => {
            ns.remove(path, *recursive, p)?;
            Done
        }
        MetaOp::Rename { from, to } => {
            ns.rename(from, to, p)?;
            Done
        }
        MetaOp::Open {
            path,
            write,
            session,
        } => I(ns.open(path, *write, *session, p)?),
        MetaOp::Close {
            inode,
            session,
            length,
        } => {
            ns.close(*inode, *session, *length, p)?;
            Done
        }
        MetaOp::CloseUnwritten { sessions } => {
            ns.close_unwritten(sessions, p)?;
            Done
        }
        MetaOp::ExtendStripe { inode, chunk } => I(ns.extend_stripe(*inode, *chunk, p)?),
        MetaOp::Sync {
            inode,
            length,
            truncated,
        } => I(ns.sync(*inode, *length, *truncated, p.now)?),
        MetaOp::LockDirectory { path, action } => {
            I(ns.lock_directory(path, *action, p.client, p.now)?)
        }
        MetaOp::StatFs => MetaAnswer::StatFs(ns.space()),
        MetaOp::SetAttr { path, attr } => I(ns.setattr(path, *attr, p)?),
        MetaOp::BatchStat { paths } => MetaAnswer::Stats(ns.batch_stat(paths)?),
    })
}
