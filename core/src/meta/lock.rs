//! Directory locks (3FS §4.3 `lockDirectory`): a client may lock a directory so that only it
//! creates, removes or renames entries in it, for example to rebuild a directory's contents
//! without interference.
//!
//! The lock is the directory inode's `lock` field, so every mutation that reads the parent
//! inode (all of them do, to resolve the path) sees it, and a lock change conflicts with the
//! mutations that read the old value. Actions: `TryLock` (fails with `NoLock` if another client
//! holds it), `PreemptLock` (takes it from whoever holds it), `Unlock` (only the holder; a
//! free directory stays free), `Clear` (frees it whoever holds it: the administrator's way out
//! when a holder died, since a lock has no lease).
//! Checks happen after the target entry is found and before any other rule: an existing name
//! opened by create needs no lock; a create, mkdir, symlink, hard link, remove or rename that
//! would change a locked directory's entries fails with `NoLock` for everyone but the holder.
//! Not here: what the holder does with the lock.

use super::ops::Namespace;
use super::{Inode, InodeKind, MetaError};
use crate::ids::ClientId;
use crate::kv::KvEngine;
pub use crate::wire::LockAction;

impl<E: KvEngine + ?Sized> Namespace<'_, '_, E> {
    /// lockDirectory on `path` (symlinks followed) for `client`; answers the directory.
    pub fn lock_directory(
        &mut self,
        path: &str,
        action: LockAction,
        client: ClientId,
        now: u64,
    ) -> Result<Inode, MetaError> {
        let mut dir = self.resolve(path, true)?;
        if !dir.is_dir() {
            return Err(MetaError::NotDir);
        }
        super::perm::check(&dir, self.user(), super::perm::MAY_WRITE)?;
        let InodeKind::Directory { lock, .. } = &mut dir.kind else {
            return Err(MetaError::NotDir);
        };
        let new = match (action, *lock) {
            (LockAction::TryLock, Some(holder)) if holder != client => {
                return Err(MetaError::NoLock)
            }
            (LockAction::TryLock | LockAction::PreemptLock, _) => Some(client),
            (LockAction::Unlock, Some(holder)) if holder != client => {
                return Err(MetaError::NoLock)
            }
            (LockAction::Unlock | LockAction::Clear, _) => None,
        };
        if *lock != new {
            *lock = new;
            dir.ctime = now;
            self.put_inode(&dir);
        }
        Ok(dir)
    }
}
