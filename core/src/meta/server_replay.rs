//! One replay of a running entry's work against the rows its attempt has fetched (`replay.rs`):
//! the namespace set up as the entry needs it, the work run, and what it answered, wants and
//! would commit. The server (`server.rs`) replays an entry's own rows; the prefetch
//! (`prefetch.rs`) replays copies filled with guesses, to learn which rows come next.
//!
//! Invariant: a replay reads only `rows` and the entry, never the server's changing state, so
//! replaying the same rows gives the same result. Not here: fetching, committing, answering.

use super::replay::ReplayKv;
use super::request::{execute_with, MetaAnswer, MetaResult};
use super::server_cfg::{MetaConfig, IDEM_CLEAN_BATCH};
use super::server_work::{Key, Own, Running, Work};
use super::{Inode, Namespace, PathOp};
use crate::bugs::MetaBug;
use crate::kv::{CommitReq, KvError, Txn};

/// What one replay produced.
pub(super) struct ReplayOut {
    /// How it ended.
    pub(super) replayed: Replayed,
    /// The file whose length it needs storage to report (`length.rs`).
    pub(super) wants: Option<Inode>,
    /// Its writes as a commit request (an error when it read nothing, so has no version).
    pub(super) commit: Result<CommitReq, KvError>,
}

/// Replays `r`'s work (of running key `key`) once on `rows`, its own work's findings left in
/// `own`; `space` is what a statFs answers.
pub(super) fn replay_on(
    c: &Cursors<'_>,
    space: super::request::FsStat,
    key: Key,
    r: &Running,
    rows: &mut ReplayKv,
    own: &mut Option<Own>,
) -> ReplayOut {
    replay_rows(c, (space, key, false), r, rows, own)
}

/// [`replay_on`] over rows that are guesses (prefetch.rs): what it would read next is all
/// that counts; its writes are never committed or checked.
pub(super) fn replay_guess(c: &Cursors<'_>, key: Key, r: &Running, rows: &mut ReplayKv) {
    let mut own = r.own.clone();
    replay_rows(c, (Default::default(), key, true), r, rows, &mut own);
}

/// The replay itself; `guessing` turns off the write-time invariant checks.
fn replay_rows(
    c: &Cursors<'_>,
    (space, key, guessing): (super::request::FsStat, Key, bool),
    r: &Running,
    rows: &mut ReplayKv,
    own: &mut Option<Own>,
) -> ReplayOut {
    let p = PathOp {
        client: key.0,
        request: key.1,
        now: r.now,
    };
    let mut txn = Txn::new(rows);
    let exactly_once = c.cfg.bug != Some(MetaBug::SkipIdempotency);
    let mut ns = Namespace::with_ids(&mut txn, r.ids.clone());
    configure(&mut ns, c.cfg, (r.layout, r.queried, r.user), space);
    ns.set_guessing(guessing);
    let replayed = replay_work(&mut ns, &r.work, own, c, p, exactly_once);
    let wants = ns.length_ctx().wants.take();
    drop(ns);
    let mut commit = txn.to_commit_req();
    if c.cfg.bug == Some(MetaBug::SnapshotReads) {
        if let Ok(req) = &mut commit {
            req.read_conflicts.clear();
        }
    }
    ReplayOut {
        replayed,
        wants,
        commit,
    }
}

/// What the server's own work reads from the server beside its request: the configuration and
/// where each scan continues.
pub(super) struct Cursors<'a> {
    pub(super) cfg: &'a MetaConfig,
    pub(super) gc_after: &'a [u8],
    pub(super) prune_after: &'a [u8],
    pub(super) idem_after: &'a [u8],
    /// Whether GC purges files' chunks (the server has a storage client).
    pub(super) purging: bool,
}

/// How one replay of a request's work ended.
pub(super) enum Replayed {
    /// Its answer (or error), with what its writes are in the transaction.
    Answer(MetaResult),
    /// Batch member `k` failed with a POSIX error that discards the batch's writes so far.
    Split(usize),
}

/// Sets up a replay's namespace: the new file's layout, a length storage answered, the
/// planted bugs, the user the request acts for, and (for a statFs) the space.
pub(super) fn configure(
    ns: &mut Namespace<'_, '_, ReplayKv>,
    cfg: &MetaConfig,
    (layout, queried, user): (
        Option<super::placement::Layout>,
        Option<super::length::QueriedLength>,
        super::perm::User,
    ),
    space: super::request::FsStat,
) {
    let table_len = cfg.layout.as_ref().map_or(0, |p| p.chains.len() as u32);
    ns.set_new_layout(layout, table_len);
    ns.length_ctx().queried = queried;
    ns.length_ctx().trust_stale = cfg.bug == Some(MetaBug::StaleLengthHint);
    ns.set_ignore_locks(cfg.bug == Some(MetaBug::IgnoresDirLocks));
    ns.set_ignore_sticky(cfg.bug == Some(MetaBug::IgnoresStickyBit));
    ns.set_user(user);
    ns.set_space(space);
}

/// Replays `work` on `ns`; the server's own work leaves what it found in `own`.
fn replay_work(
    ns: &mut Namespace<'_, '_, ReplayKv>,
    work: &Work,
    own: &mut Option<Own>,
    c: &Cursors<'_>,
    p: PathOp,
    exactly_once: bool,
) -> Replayed {
    let done = |found: Own, own: &mut Option<Own>| {
        *own = Some(found);
        MetaAnswer::Done
    };
    Replayed::Answer(match work {
        Work::Request(op) => execute_with(ns, op, p, exactly_once),
        Work::Batch(members) => match super::batch::run_batch(ns, members, p.now, exactly_once) {
            Ok(results) => Ok(done(Own::Batch(results), own)),
            Err(super::batch::BatchStop::Failed(e)) => Err(e),
            Err(super::batch::BatchStop::Split(k)) => return Replayed::Split(k),
        },
        Work::Prune(live) => ns
            .prune_sessions(live, c.prune_after, 256, p.now, c.cfg.prune_min_age)
            .map(|(n, next, files)| done(Own::Pruned(n, next, files), own)),
        Work::Sync(inode) => ns
            .sync(*inode, None, false, p.now)
            .map(|_| MetaAnswer::Done),
        Work::IdemClean => ns
            .clean_idem(c.idem_after, IDEM_CLEAN_BATCH, p.now, c.cfg.idem_expire)
            .map(|(n, next)| done(Own::IdemCleaned(n, next), own)),
        Work::Free(entry, inode) => ns
            .gc_free(entry, *inode)
            .map(|freed| done(Own::Freed(freed), own)),
        Work::AllocIds => ns.allocate_block().map(|ids| done(Own::Ids(ids), own)),
        Work::Gc => {
            let policy = super::GcPolicy {
                batch: c.cfg.gc_batch,
                file_delay: c.cfg.gc_file_delay,
                respect_sessions: c.cfg.bug != Some(MetaBug::GcIgnoresSessions),
                purge_files: c.purging && c.cfg.bug != Some(MetaBug::GcSkipsChunks),
            };
            ns.gc_step(c.gc_after, p.now, policy)
                .map(|out| done(Own::Gc(out), own))
        }
    })
}
