//! Closes of write sessions that wrote nothing, sent together (3FS's close without
//! `updateLength`; issue 41's "close a session that wrote nothing without a commit of its own").
//!
//! `open(O_CREAT)` then `close` with no write in between, as `touch`, mdtest and many tools do,
//! made two commits per file: the create with its session, then the session's close. A session
//! that wrote nothing has no length to report, so its close changes nothing a user can see: it
//! only removes the session row that keeps GC from freeing the file while it is written. Release
//! queues such a close here instead of sending it, and the queue goes to meta as one
//! `CloseUnwritten` request (one transaction that reads nothing, so it conflicts with nothing)
//! [`DELAY`] after the first close queued since the last send, or at once when
//! `CLOSE_UNWRITTEN_MAX` have gathered, and on unmount.
//!
//! Durability is unchanged: every change a caller was answered for is already committed. A close
//! lost here (the mount dies, or meta keeps refusing) leaves only the session row, which is what
//! a writer that died leaves: meta prunes the sessions of clients mgmtd no longer lists
//! (meta/session.rs), and until then GC leaves the unlinked file's data alone.
//!
//! Invariants: a queued close is sent within [`DELAY`] of being queued (plus the request's
//! time); no close is sent twice; only sessions whose handle accepted no write come here.
//! Not here: the timer and the request (file_requests.rs, beside release), closes with a
//! length (release), the transaction (meta's `close_unwritten`).

use std::sync::Mutex;
use std::time::Duration;

use t3fs_core::ids::InodeId;
use t3fs_core::wire::CLOSE_UNWRITTEN_MAX;

use super::backend::lock;

/// How long a close waits for others to join it: long against a create's few hundred
/// microseconds (so a single-threaded loop of creates shares one commit among several files),
/// short against everything a lingering session row delays (GC of an unlinked file).
pub(super) const DELAY: Duration = Duration::from_millis(5);

/// When the queue goes, after a close joined it.
#[derive(Debug, Eq, PartialEq)]
pub(super) enum Flush {
    /// After [`DELAY`]: the close was the first since the last send.
    Later,
    /// Now: [`CLOSE_UNWRITTEN_MAX`] have gathered.
    Now,
    /// With the closes before it, when their timer ends.
    Along,
}

/// The closes waiting to be sent.
#[derive(Default)]
pub(super) struct UnwrittenCloses {
    pending: Mutex<Vec<(InodeId, u64)>>,
}

impl UnwrittenCloses {
    /// Queues the close of `session` on `inode`, whose handle accepted no write.
    pub fn push(&self, inode: InodeId, session: u64) -> Flush {
        let mut p = lock(&self.pending);
        p.push((inode, session));
        match p.len() {
            n if n >= CLOSE_UNWRITTEN_MAX => Flush::Now,
            1 => Flush::Later,
            _ => Flush::Along,
        }
    }

    /// Every queued close, taken to be sent.
    pub fn take(&self) -> Vec<(InodeId, u64)> {
        std::mem::take(&mut *lock(&self.pending))
    }

    /// The closes queued and not yet sent (for the tests).
    #[cfg(test)]
    pub fn queued(&self) -> usize {
        lock(&self.pending).len()
    }
}
