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
//! Not here: closes with a length (file_requests.rs's release), the transaction (meta's
//! `close_unwritten`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use t3fs_core::ids::InodeId;
use t3fs_core::wire::CLOSE_UNWRITTEN_MAX;

use super::inner::{lock, Inner};
use super::mount_client::MountClient;

/// How long a close waits for others to join it: long against a create's few hundred
/// microseconds (so a single-threaded loop of creates shares one commit among several files),
/// short against everything a lingering session row delays (GC of an unlinked file).
pub(super) const DELAY: Duration = Duration::from_millis(5);

/// The closes waiting to be sent.
#[derive(Default)]
pub(super) struct UnwrittenCloses {
    pending: Mutex<Vec<(InodeId, u64)>>,
}

impl<C: MountClient> Inner<C> {
    /// Queues the close of `session` on `inode`, whose handle accepted no write.
    pub(super) fn close_unwritten(self: &Arc<Self>, inode: InodeId, session: u64) {
        let (first, full) = {
            let mut p = lock(&self.unwritten.pending);
            p.push((inode, session));
            (p.len() == 1, p.len() >= CLOSE_UNWRITTEN_MAX)
        };
        let me = self.clone();
        if full {
            self.rt.spawn(async move { me.send_unwritten().await });
        } else if first {
            self.rt.spawn(async move {
                tokio::time::sleep(DELAY).await;
                me.send_unwritten().await;
            });
        }
    }

    /// Sends every queued close now (what the timer does; the unmount calls it too).
    pub(super) async fn send_unwritten(&self) {
        let sessions = std::mem::take(&mut *lock(&self.unwritten.pending));
        if sessions.is_empty() {
            return;
        }
        if let Err(e) = self.client.close_unwritten(&sessions).await {
            // Nothing to answer: the handles are gone. The rows wait for session pruning.
            tracing::warn!(sessions = sessions.len(), "closing unwritten sessions: {e}");
        }
    }

    /// The closes queued and not yet sent (for the tests).
    #[cfg(test)]
    pub(super) fn unwritten_queued(&self) -> usize {
        lock(&self.unwritten.pending).len()
    }
}
