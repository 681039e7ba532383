//! The requests on files and their handles: open and create (a meta session kept by handle),
//! read (through the handle's readahead), write (through its write-behind), flush and fsync
//! (the writes land, then meta learns the length), release (the session closes with the
//! length hint; one that accepted no write queues its close, sent from here with the others
//! queued, unwritten_closes.rs). Each is a method of the mount's state answering
//! `Result<_, Errno>`, so the unit tests run it over the in-memory client; fs.rs only hands it
//! the kernel's arguments and replies.
//!
//! A request that names a handle takes what it holds ([`Inner::handle`], [`Inner::reading`])
//! when the kernel's request arrives, before its task runs, as the mount always has: a release
//! that comes after it cannot take the handle from under it.
//!
//! Invariants: a read sees every write this mount accepted before it and stops at the end of
//! the file as this mount sees it; a write forgets the file's readahead before it is accepted;
//! flush and fsync return after every write of the handle landed (or with the first failure)
//! and meta has their end; release closes a write session once its writes landed, with the
//! end of those that did. Not here: the write-behind and readahead themselves
//! (write_behind.rs, read_ahead.rs), truncate (inner.rs).

use std::ffi::OsStr;
use std::sync::Arc;

use fuser::{Errno, FileAttr, INodeNo};
use t3fs_core::ids::InodeId;
use t3fs_core::meta::Inode;

use super::errno::errno;
use super::inner::{lock, Inner};
use super::mount_client::MountClient;
use super::names::id_of;
use super::read_ahead::ReadAhead;
use super::unwritten_closes::{Flush, DELAY};
use super::write_behind::{fitting, WriteBehind};
use crate::client::File;

/// What a read holds of its handle: the file, its inode at open, its readahead.
pub(super) type Reading = Option<(File, Inode, Arc<ReadAhead>)>;

/// What a write, flush, fsync or release holds of its handle: the file and its write-behind.
pub(super) type Writing = Option<(File, Arc<WriteBehind>)>;

impl<C: MountClient> Inner<C> {
    /// open of inode `ino` (a write session when `write`, cut to 0 first when `trunc`): the
    /// handle.
    pub async fn open_ino(&self, ino: INodeNo, write: bool, trunc: bool) -> Result<u64, Errno> {
        let (fh, _) = self
            .open(&self.path(ino)?, id_of(ino), write, trunc)
            .await?;
        Ok(fh)
    }

    /// create of `name` in `parent` with mode `perm` (O_EXCL when `exclusive`), opened for
    /// write: the handle and the entry (one lookup counted).
    pub async fn create(
        &self,
        parent: INodeNo,
        name: &OsStr,
        perm: u32,
        exclusive: bool,
        trunc: bool,
    ) -> Result<(u64, FileAttr), Errno> {
        let path = self.child_path(parent, name)?;
        self.fresh.adding(parent.0, name);
        // Made (or found) and opened in one transaction: nothing can come between, and a
        // file made with a mode that forbids writing is still its creator's to write.
        let (file, inode) = self
            .client
            .create_open(&path, perm, exclusive)
            .await
            .map_err(|e| errno(&e))?;
        let (fh, inode) = self.opened(file, inode, trunc).await?;
        Ok((fh, self.entered(&inode, parent, name)))
    }

    /// What handle `fh` holds for a read.
    pub fn reading(&self, fh: u64) -> Reading {
        lock(&self.files)
            .get(&fh)
            .map(|o| (o.file.clone(), o.inode.clone(), o.ra.clone()))
    }

    /// read of `size` bytes at `offset` through the handle `held` (EBADF if none).
    pub async fn read(
        self: &Arc<Self>,
        held: Reading,
        offset: u64,
        size: u32,
    ) -> Result<Vec<u8>, Errno> {
        let (file, inode, ra) = held.ok_or(Errno::EBADF)?;
        // A read sees every write this mount accepted before it, and stops at the end of the
        // file as this mount sees it (holes inside read as zeros, as the chains answer them).
        self.settle_writes(inode.id.0).await;
        let end = self.size_of(&inode).unwrap_or(file.length);
        let len = u64::from(size).min(end.saturating_sub(offset));
        if len == 0 {
            return Ok(Vec::new());
        }
        ra.read(self, offset, len, end).await
    }

    /// write of `data` at `offset` through the handle `held` (EBADF if none): the bytes
    /// accepted. `writeback`: the kernel's writeback cache sent it.
    pub async fn write(
        self: &Arc<Self>,
        held: Writing,
        offset: u64,
        mut data: Vec<u8>,
        writeback: bool,
    ) -> Result<usize, Errno> {
        let (file, wb) = held.ok_or(Errno::EBADF)?;
        // Past the layout's largest file: short, or EFBIG with nothing written.
        let n = fitting(offset, data.len(), file.layout.size_max())?;
        let short = n < data.len();
        data.truncate(n);
        self.forget_reads(file.inode.0);
        wb.write(self, offset, data).await?;
        // The kernel's writeback (the writeback cache) drops the rest of a short write
        // silently: it gets EFBIG, which fsync and close report, once the bytes that fit are
        // written.
        if short && writeback {
            return Err(Errno::EFBIG);
        }
        Ok(n)
    }

    /// flush (what close(2) waits for; the kernel does not wait for release) of the handle
    /// `held`: its writes land on their chains, then meta learns the length, so that the next
    /// open anywhere sees them. Nothing to do for a read-only or unknown handle.
    pub async fn flush(self: &Arc<Self>, held: Writing) -> Result<(), Errno> {
        let Some((f, wb)) = held.filter(|(f, _)| f.session != 0) else {
            return Ok(());
        };
        // Writes after this mark (another descriptor's) are left to their own flush or the
        // release.
        let upto = wb.writes();
        let end = wb.drain(self).await?;
        // Nothing new since the last report: meta already has the length and the times.
        if end == 0 || wb.all_reported() {
            return Ok(());
        }
        self.client
            .sync_length(&f, end)
            .await
            .map_err(|e| errno(&e))?;
        wb.reported(upto);
        Ok(())
    }

    /// fsync of the handle `held`: as flush, but EBADF for an unknown handle.
    pub async fn fsync(self: &Arc<Self>, held: Writing) -> Result<(), Errno> {
        match held {
            Some(h) => self.flush(Some(h)).await,
            None => Err(Errno::EBADF),
        }
    }

    /// release of handle `fh` (holding `held`): a write session closes once the handle's
    /// writes landed, with the end of those that did as its hint; the handle goes either way.
    /// Until meta has that hint, the handle's writes stay in the size this mount reports
    /// (`size_of`).
    pub async fn release(self: &Arc<Self>, fh: u64, held: Writing) -> Result<(), Errno> {
        let r = match held {
            // Nothing to report (no write, or flush reported them all): the close goes later,
            // with others (unwritten_closes.rs).
            Some((f, wb)) if f.session != 0 && wb.all_reported() => {
                self.close_unwritten(f.inode, f.session);
                Ok(())
            }
            Some((f, wb)) if f.session != 0 => {
                // A failure was reported at flush; the hint covers what landed.
                let _ = wb.drain(self).await;
                self.client
                    .close_file(&f, wb.acked())
                    .await
                    .map_err(|e| errno(&e))
            }
            _ => Ok(()),
        };
        lock(&self.files).remove(&fh);
        r
    }
}

impl<C: MountClient> Inner<C> {
    /// Queues the close of `session` on `inode`, whose handle accepted no write, and arms its
    /// send (unwritten_closes.rs).
    pub(super) fn close_unwritten(self: &Arc<Self>, inode: InodeId, session: u64) {
        let me = self.clone();
        match self.unwritten.push(inode, session) {
            Flush::Now => drop(self.rt.spawn(async move { me.send_unwritten().await })),
            Flush::Later => drop(self.rt.spawn(async move {
                tokio::time::sleep(DELAY).await;
                me.send_unwritten().await;
            })),
            Flush::Along => {}
        }
    }

    /// Sends every queued close now (what the timer does; the unmount calls it too).
    pub(super) async fn send_unwritten(&self) {
        let sessions = self.unwritten.take();
        if sessions.is_empty() {
            return;
        }
        if let Err(e) = self.client.close_unwritten(&sessions).await {
            // Nothing to answer: the handles are gone. The rows wait for session pruning.
            tracing::warn!(sessions = sessions.len(), "closing unwritten sessions: {e}");
        }
    }
}
