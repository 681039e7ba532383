//! File length maintenance (3FS §4.4): writers' versioned length hints, the decision between
//! keeping, adopting and asking storage, and applying a storage answer.
//!
//! A writer tags its hint (the end of its acknowledged writes) with the `truncate_ver` it saw
//! at open. A hint of the current truncate version only ever grows the length. Anything else
//! (no hint, a hint from before a truncate, a sync after a client-driven truncate) needs the
//! precise length from storage: the meta server asks the head of every chain the file may use
//! for its last committed chunk (`queryLastChunk`) before the transaction, and the
//! transaction adopts the answer as the length, bumping `truncate_ver` when the file shrank or
//! was truncated.
//!
//! Invariants: a storage answer is applied only to the inode state it was asked for (same
//! length and truncate version as when the query started): if another update changed either in
//! between, the answer may predate a write that update reported, so it is asked again; the
//! transaction's read of the inode row makes a concurrent update conflict with the commit.
//! Within one transaction (a batch of updates, `batch.rs`) an applied answer stays valid for
//! the later updates: they see the state it produced.
//! Not here: the query itself (the server's embedded storage client, `purge.rs`), batching.

pub use super::length_ctx::{LengthCtx, QueriedLength};
use super::ops::Namespace;
use super::{Inode, InodeKind, MetaError};
use crate::ids::InodeId;
use crate::kv::KvEngine;
pub use crate::wire::LengthHint;

/// What an update of a file's length does.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum LengthDecision {
    /// The stored length stands.
    Keep,
    /// The hint is the new length.
    Adopt(u64),
    /// Only storage knows.
    Query,
}

/// §4.4's rule for a stored (length, truncate_ver) and an update with `hint`, `truncated` when
/// the writer has just truncated the file. `trust_stale` is the planted bug
/// `meta-stale-length-hint`: a hint from before a truncate is adopted as if current.
pub fn decide(
    stored: (u64, u64),
    hint: Option<LengthHint>,
    truncated: bool,
    trust_stale: bool,
) -> LengthDecision {
    match hint {
        _ if truncated => LengthDecision::Query,
        Some(h) if h.truncate_ver == stored.1 || trust_stale => match h.length > stored.0 {
            true => LengthDecision::Adopt(h.length),
            false => LengthDecision::Keep,
        },
        _ => LengthDecision::Query,
    }
}

type R<T> = Result<T, MetaError>;

impl<E: KvEngine + ?Sized> Namespace<'_, '_, E> {
    /// Applies a length update to file `i` (read in this transaction): true if `i` changed.
    /// `Err(LengthUnknown)` asks the caller for a storage query first.
    pub(super) fn update_length(
        &mut self,
        i: &mut Inode,
        hint: Option<LengthHint>,
        truncated: bool,
        now: u64,
    ) -> R<bool> {
        let InodeKind::File {
            length,
            truncate_ver,
            ..
        } = &mut i.kind
        else {
            return Err(MetaError::IsDir);
        };
        let stored = (*length, *truncate_ver);
        let ctx = self.length_ctx();
        match decide(stored, hint, truncated, ctx.trust_stale) {
            LengthDecision::Keep => return Ok(false),
            LengthDecision::Adopt(n) => *length = n,
            LengthDecision::Query => match ctx.queried {
                Some(q) if q.inode == i.id && q.seen == stored => {
                    if truncated || q.length < *length {
                        *truncate_ver += 1;
                    }
                    if q.length == *length && !truncated {
                        return Ok(false);
                    }
                    *length = q.length;
                    // Later updates of a batch in this transaction see this state: the same
                    // storage answer still holds for them.
                    ctx.queried = Some(QueriedLength {
                        seen: (*length, *truncate_ver),
                        ..q
                    });
                }
                _ => {
                    ctx.wants = Some(i.clone());
                    return Err(MetaError::LengthUnknown);
                }
            },
        }
        self.stamp_changed(i, now);
        Ok(true)
    }

    /// File `i`'s content changed (a truncate, or writes its writer reports): mtime and ctime
    /// move, as Linux moves them, except an unlinked file's ctime: GC times its delay from it
    /// (the unlink). Stores `i`.
    pub(super) fn stamp_changed(&mut self, i: &mut Inode, now: u64) {
        (i.mtime, i.mtime_ns) = (now, 0);
        if i.nlink > 0 {
            i.ctime = now;
        }
        self.put_inode(i);
    }

    /// A writer's length report (a close or sync with a hint: it wrote since its last report,
    /// the mount sends none otherwise): the length as [`Self::update_length`] decides it, and
    /// mtime and ctime moved even when the length stands (a write inside the file).
    pub(super) fn report_writes(
        &mut self,
        i: &mut Inode,
        hint: Option<LengthHint>,
        truncated: bool,
        now: u64,
    ) -> R<()> {
        let changed = self.update_length(i, hint, truncated, now)?;
        if !changed && hint.is_some() && !truncated {
            self.stamp_changed(i, now);
        }
        Ok(())
    }

    /// sync (3FS §1.4 #9): a length update without closing, `truncated` after a client-driven
    /// truncate (which always asks storage and bumps the truncate version).
    pub fn sync(
        &mut self,
        inode: InodeId,
        hint: Option<LengthHint>,
        truncated: bool,
        now: u64,
    ) -> R<Inode> {
        let mut i = self.inode(inode)?;
        self.report_writes(&mut i, hint, truncated, now)?;
        Ok(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(length: u64, truncate_ver: u64) -> Option<LengthHint> {
        Some(LengthHint {
            length,
            truncate_ver,
        })
    }

    #[test]
    fn hints_of_the_current_version_only_grow_the_length() {
        assert_eq!(
            decide((10, 2), hint(20, 2), false, false),
            LengthDecision::Adopt(20)
        );
        assert_eq!(
            decide((10, 2), hint(5, 2), false, false),
            LengthDecision::Keep
        );
    }

    #[test]
    fn stale_hints_truncates_and_missing_hints_ask_storage() {
        assert_eq!(
            decide((10, 2), hint(20, 1), false, false),
            LengthDecision::Query
        );
        assert_eq!(decide((10, 2), None, false, false), LengthDecision::Query);
        assert_eq!(
            decide((10, 2), hint(20, 2), true, false),
            LengthDecision::Query
        );
        // The planted bug adopts a hint from before the truncate.
        assert_eq!(
            decide((10, 2), hint(20, 1), false, true),
            LengthDecision::Adopt(20)
        );
    }
}
