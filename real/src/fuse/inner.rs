//! The mount's state and the requests' shared steps: open handles (with the end of their
//! acknowledged writes, which the size this mount reports includes until meta has it), open
//! directory listings, the inode-number table, and the steps several requests take (look up a
//! path, open a file, list a directory, truncate).
//!
//! Invariants: every write handle of a file counts its length hint from the latest truncate
//! version this mount made, and knows the length that truncate left (reads end there, or at
//! the end of later writes); a truncate runs after every write this mount accepted before it
//! landed, and forgets the file's readahead. Not here: the requests (fs.rs).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fuser::{Errno, FileAttr, FileType, INodeNo};
use t3fs_core::meta::{Inode, InodeKind};
use tokio::runtime::Handle;

use super::attr::{attr_of, kind_of};
use super::errno::errno;
use super::names::{ino_of, Names};
use super::read_ahead::ReadAhead;
use super::write_behind::WriteBehind;
use crate::client::{Client, ClientError, File};

/// Names per page of a directory listing asked of meta.
const LIST_PAGE: u32 = 512;

/// One open file handle.
pub(super) struct Open {
    pub file: File,
    pub inode: Inode,
    pub wb: Arc<WriteBehind>,
    pub ra: Arc<ReadAhead>,
}

/// One open directory: its entries as `opendir` found them.
pub(super) type Listing = Vec<(String, INodeNo, FileType)>;

pub(super) struct Inner {
    pub client: Client,
    pub rt: Handle,
    pub ttl: Duration,
    /// Pieces in flight per write handle (0: synchronous writes), see write_behind.rs.
    pub write_window: usize,
    /// Readahead bytes per handle, see read_ahead.rs.
    pub readahead: u64,
    pub names: Mutex<Names>,
    pub files: Mutex<BTreeMap<u64, Open>>,
    pub dirs: Mutex<BTreeMap<u64, Arc<Listing>>>,
    pub next_fh: AtomicU64,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inner {
    /// Nothing open yet.
    pub fn new(client: Client, rt: Handle, o: &super::MountOptions) -> Self {
        Self {
            client,
            rt,
            ttl: o.attr_ttl,
            write_window: o.write_window,
            readahead: o.readahead,
            names: Mutex::default(),
            files: Mutex::default(),
            dirs: Mutex::default(),
            next_fh: AtomicU64::new(1),
        }
    }
    /// The size this mount reports for file `ino`: the largest of meta's length and the ends
    /// of this mount's open handles' writes.
    pub fn size_of(&self, i: &Inode) -> Option<u64> {
        let InodeKind::File { length, .. } = &i.kind else {
            return None;
        };
        let files = lock(&self.files);
        let open = files.values().filter(|o| o.inode.id == i.id);
        Some(open.map(|o| o.wb.accepted()).fold(*length, u64::max))
    }

    pub fn attr(&self, i: &Inode) -> FileAttr {
        attr_of(i, self.size_of(i))
    }

    /// lstat of `path`, remembered under its inode number.
    pub async fn look(&self, path: String) -> Result<FileAttr, Errno> {
        let i = self.client.lstat(&path).await.map_err(|e| errno(&e))?;
        lock(&self.names).remember(ino_of(i.id), path);
        Ok(self.attr(&i))
    }

    pub fn path(&self, ino: INodeNo) -> Result<String, Errno> {
        lock(&self.names).path(ino)
    }

    pub fn child(&self, parent: INodeNo, name: &OsStr) -> Result<String, Errno> {
        lock(&self.names).child(parent, name)
    }

    /// Handle `fh`'s file and write-behind.
    pub fn handle(&self, fh: u64) -> Option<(File, Arc<WriteBehind>)> {
        lock(&self.files)
            .get(&fh)
            .map(|o| (o.file.clone(), o.wb.clone()))
    }

    /// The write-behinds and readaheads of every handle of inode `id` (FUSE number minus one).
    fn handles_of(&self, id: u64) -> Vec<(Arc<WriteBehind>, Arc<ReadAhead>)> {
        let files = lock(&self.files);
        let of = files.values().filter(|o| o.inode.id.0 == id);
        of.map(|o| (o.wb.clone(), o.ra.clone())).collect()
    }

    /// Waits until no handle of inode `id` has a write buffered or in flight (a read or a
    /// truncate sees every write this mount accepted before it).
    pub async fn settle_writes(self: &Arc<Self>, id: u64) {
        for (wb, _) in self.handles_of(id) {
            wb.settle(self).await;
        }
    }

    /// Forgets the readahead of every handle of inode `id` (it changed through this mount).
    pub fn forget_reads(&self, id: u64) {
        for (_, ra) in self.handles_of(id) {
            ra.forget();
        }
    }

    pub fn fh(&self) -> u64 {
        self.next_fh.fetch_add(1, Ordering::Relaxed)
    }

    /// Opens `path` and keeps the handle; truncates first when asked.
    pub async fn open(&self, path: &str, write: bool, trunc: bool) -> Result<(u64, Inode), Errno> {
        let c = &self.client;
        let (mut file, inode) = c
            .open_with_inode(path, write)
            .await
            .map_err(|e| errno(&e))?;
        let mut inode = inode;
        if trunc && write && file.length > 0 {
            c.truncate(&mut file, &inode, 0)
                .await
                .map_err(|e| errno(&e))?;
            set_length(&mut inode, 0);
        }
        let fh = self.fh();
        let open = Open {
            wb: WriteBehind::new(file.clone(), self.write_window),
            ra: Arc::new(ReadAhead::new(file.clone(), self.readahead)),
            file,
            inode: inode.clone(),
        };
        lock(&self.files).insert(fh, open);
        Ok((fh, inode))
    }

    /// The whole listing of `path`, page by page.
    pub async fn listing(&self, path: &str) -> Result<Listing, ClientError> {
        let mut out = Vec::new();
        let mut after = Vec::new();
        loop {
            let page = self
                .client
                .list_after(path, after.clone(), LIST_PAGE)
                .await?;
            let full = page.len() == LIST_PAGE as usize;
            for (name, e) in page {
                after.clone_from(&name);
                let name = String::from_utf8_lossy(&name).into_owned();
                out.push((name, ino_of(e.inode), kind_of(e.kind)));
            }
            if !full {
                return Ok(out);
            }
        }
    }

    /// `truncate(2)` of `path` (FUSE inode `ino`) to `len`: through `fh`, or any handle of
    /// this mount holding the file open for write (the kernel truncates an `O_TRUNC` open with
    /// a setattr after the open, without its handle), else through a session of its own. Every
    /// write handle of the file then counts its length hint from the new truncate version.
    pub async fn truncate(
        self: &Arc<Self>,
        path: &str,
        ino: INodeNo,
        fh: Option<u64>,
        len: u64,
    ) -> Result<(), Errno> {
        let id = ino.0.wrapping_sub(1);
        self.settle_writes(id).await;
        let held = {
            let files = lock(&self.files);
            let writable = |o: &&Open| o.file.session != 0;
            let by_fh = fh.and_then(|h| files.get(&h)).filter(writable);
            let any = || files.values().filter(writable).find(|o| o.inode.id.0 == id);
            by_fh
                .or_else(any)
                .map(|o| (o.file.clone(), o.inode.clone()))
        };
        let c = &self.client;
        let Some((mut file, inode)) = held else {
            let (mut file, inode) = c.open_with_inode(path, true).await.map_err(|e| errno(&e))?;
            let r = c.truncate(&mut file, &inode, len).await;
            let closed = c.close_file(&file, 0).await;
            return r.and(closed).map_err(|e| errno(&e));
        };
        c.truncate(&mut file, &inode, len)
            .await
            .map_err(|e| errno(&e))?;
        for o in lock(&self.files).values_mut() {
            if o.inode.id != inode.id {
                continue;
            }
            set_length(&mut o.inode, len);
            o.file.length = len;
            if o.file.session != 0 {
                o.file.truncate_ver = file.truncate_ver;
                o.wb.truncated();
            }
            o.ra.forget();
        }
        Ok(())
    }
}

/// What a handle knows of its file's length, after this mount truncated it.
fn set_length(i: &mut Inode, len: u64) {
    if let InodeKind::File { length, .. } = &mut i.kind {
        *length = len;
    }
}
