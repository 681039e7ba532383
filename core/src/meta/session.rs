//! Write sessions and file length hints (3FS §4.3 open/close/sync, §4.4): an open for write
//! stores a `FileSession` row under the file, which keeps GC from freeing the file's data while
//! the writer may still write (§4.5); close removes it and adopts the writer's length hint.
//!
//! Invariants: a session row names an existing file inode (GC frees an inode only once it has
//! no session rows). Length rules are `length.rs`'s.
//!
//! Pruning (3FS `SessionManager`): sessions of clients that mgmtd no longer lists as alive,
//! older than a minimum age, are deleted, so a writer that died does not hold its files back
//! from GC forever.
//! Not here: length rules (`length.rs`), truncate (client-driven), batching (`batch.rs`).

use super::keys::{all_sessions, session_key};
use super::ops::Namespace;
use super::{Inode, InodeKind, MetaError, PathOp};
use crate::ids::{ClientId, InodeId};
use crate::kv::KvEngine;
use crate::mgmtd::store::decode;
use crate::mgmtd::store::encode;
use crate::wire::NO_DATA;
use crate::wire_struct;

/// A write session (3FS `FileSession`).
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct FileSession {
    /// The writer.
    pub client: ClientId,
    /// The writer's session id (its open request's id).
    pub session: u64,
    /// When it was opened (the meta server's clock, seconds).
    pub opened: u64,
}
wire_struct!(FileSession {
    client,
    session,
    opened
});

type R<T> = Result<T, MetaError>;

/// A special file passes the permission checks as Linux makes them, then is refused: its data
/// is never chunks, so no session may hold it (a close could not end one).
fn refuse_special(inode: &Inode) -> R<()> {
    match inode.kind {
        InodeKind::Special { .. } => Err(MetaError::Invalid(NO_DATA)),
        _ => Ok(()),
    }
}

impl<E: KvEngine + ?Sized> Namespace<'_, '_, E> {
    /// open of an existing path (following symlinks); for write, a session row `session` of
    /// the asking client. A directory cannot be opened for write (EISDIR).
    pub fn open(&mut self, path: &str, write: bool, session: u64, op: PathOp) -> R<Inode> {
        let inode = self.resolve(path, true)?;
        if write && inode.is_dir() {
            return Err(MetaError::IsDir);
        }
        let want = match write {
            true => super::perm::MAY_WRITE,
            false => super::perm::MAY_READ,
        };
        super::perm::check(&inode, self.user(), want)?;
        match write {
            true => self.start_session(&inode, session, op)?,
            false => refuse_special(&inode)?,
        }
        Ok(inode)
    }

    /// Stores write session `session` of this client on `inode` (its permission checked by
    /// the caller); refuses a special file.
    pub(super) fn start_session(&mut self, inode: &Inode, session: u64, op: PathOp) -> R<()> {
        refuse_special(inode)?;
        let s = FileSession {
            client: op.client,
            session,
            opened: op.now,
        };
        self.txn()
            .set(&session_key(inode.id, op.client, session), &encode(&s));
        Ok(())
    }

    /// extendStripe (3FS setAttr): before writing chunk index `chunk`, a writer makes sure the
    /// file's dynamic stripe covers it; answers the (possibly grown) inode.
    pub fn extend_stripe(&mut self, inode: InodeId, chunk: u64, op: PathOp) -> R<Inode> {
        let mut i = self.inode(inode)?;
        match &mut i.kind {
            InodeKind::File {
                layout: Some(l), ..
            } => {
                if l.extend_stripe(chunk) {
                    i.ctime = op.now;
                    self.put_inode(&i);
                }
                Ok(i)
            }
            InodeKind::File { layout: None, .. } => Err(MetaError::Invalid("invalid argument")),
            _ => Err(MetaError::IsDir),
        }
    }

    /// Deletes up to `batch` sessions after key `after` (empty: from the first) whose client is
    /// not in `live` (sorted) and which are at least `min_age` seconds old; returns how many,
    /// the key to continue after (empty: start over), and the files they held.
    pub fn prune_sessions(
        &mut self,
        live: &[ClientId],
        after: &[u8],
        batch: usize,
        now: u64,
        min_age: u64,
    ) -> R<(u32, Vec<u8>, Vec<InodeId>)> {
        let (rows, next) = self.page(all_sessions(), after, batch)?;
        let mut pruned = 0;
        let mut files = Vec::new();
        for (k, v) in rows {
            let s: FileSession = decode(&v)?;
            if live.binary_search(&s.client).is_err() && now >= s.opened.saturating_add(min_age) {
                self.txn().clear(&k);
                pruned += 1;
                files.extend(super::keys::parse_session_key(&k));
            }
        }
        files.dedup();
        Ok((pruned, next, files))
    }

    /// close of the asking client's session `session` on `inode`, updating the length from
    /// the writer's hint or from storage (`length.rs`).
    pub fn close(
        &mut self,
        inode: InodeId,
        session: u64,
        length: Option<super::length::LengthHint>,
        op: PathOp,
    ) -> R<Inode> {
        self.txn().clear(&session_key(inode, op.client, session));
        let mut i = self.inode(inode)?;
        self.report_writes(&mut i, length, false, op.now)?;
        Ok(i)
    }

    /// close of the asking client's write sessions that wrote nothing (3FS's close without
    /// `updateLength`): their rows go, nothing else is read or written. No length can change:
    /// the writer accepted no write through these sessions, so the stored length already
    /// covers everything they could report. At most `CLOSE_UNWRITTEN_MAX` (bad input is
    /// refused whole, nothing closed).
    pub fn close_unwritten(&mut self, sessions: &[(InodeId, u64)], op: PathOp) -> R<()> {
        if sessions.len() > crate::wire::CLOSE_UNWRITTEN_MAX {
            return Err(MetaError::Invalid("too many sessions in one close"));
        }
        for (inode, session) in sessions {
            self.txn().clear(&session_key(*inode, op.client, *session));
        }
        Ok(())
    }
}
