//! The mount's state and the requests' shared steps: open handles (with the end of their
//! acknowledged writes, which the size this mount reports includes until meta has it), open
//! directory listings, the inode table, and the steps several requests take (find an inode,
//! look up a name, open a file, truncate).
//!
//! Inodes by id: the kernel names inodes, and another client may rename or replace anything at
//! any time. Meta's paths may start at an inode (`//ino:<id>`, meta's anchor.rs, 3FS's
//! `PathAt`). A request naming an entry of a directory sends the name anchored at the
//! directory's inode: meta walks from exactly the directory the kernel named, wherever it is
//! now. A request about an inode sends the name the kernel looked it up under, anchored at
//! that name's directory (names.rs), and checks that meta finds the inode it was asked about
//! there (`verified`): if another client replaced the name, the answer is ESTALE and the kernel
//! looks the caller's path up again (`LOOKUP_REVAL`) and retries once, so the caller gets the
//! file its path names now. Before anchors, every path started at the root and each request
//! was preceded by a second one checking that the directory's remembered path still led to
//! it. Search permission on the ancestors is the kernel's to check (`default_permissions`), as
//! for any file system. What meta opens, truncates or answers is checked against the ids in
//! its answer, so no request reads, writes, truncates or reports another file than the one the
//! kernel asked about. An open handle holds its inode's id and layout: its reads, writes,
//! syncs, closes and truncates go to that inode whatever its names are now; the attributes of
//! an inode that has no checked path but is open here are the handle's (its size the largest
//! of what meta said at open and this mount's writes).
//!
//! Invariants: every write handle of a file counts its length hint from the latest truncate
//! version this mount made, and knows the length that truncate left (reads end there, or at
//! the end of later writes); a truncate runs after every write this mount accepted before it
//! landed, and forgets the file's readahead.
//!
//! Generic over the client (`C`, mount_client.rs) so that this state and every request's logic
//! run in the unit tests over an in-memory client. Not here: the requests (ns_requests.rs,
//! file_requests.rs, dir_handles.rs, dir_plus.rs; fs.rs replies), the client's verbs.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fuser::{Errno, FileAttr, FileType, INodeNo};
use t3fs_core::ids::InodeId;
use t3fs_core::meta::anchor::anchored;
use t3fs_core::meta::{Inode, InodeKind, MetaError, SetAttr};
use tokio::runtime::Handle;

use super::attr::attr_of;
use super::backend::{Backend, Call};
use super::dir_attrs::DirAttrs;
use super::errno::errno;
use super::mount_client::MountClient;
use super::names::{id_of, ino_of, join, Names};
use super::read_ahead::ReadAhead;
use super::write_behind::WriteBehind;
use crate::client::{ClientError, File};

/// One open file handle.
pub(super) struct Open {
    pub file: File,
    pub inode: Inode,
    pub wb: Arc<WriteBehind>,
    pub ra: Arc<ReadAhead>,
}

/// One open directory: its entries as `opendir` found them.
pub(super) type Listing = Vec<(String, INodeNo, FileType)>;

/// The mount's state over client `C` (the native client in production, mount_client.rs).
pub(super) struct Inner<C> {
    pub client: C,
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
    /// Directories as the commits of this mount's requests left them (dir_attrs.rs).
    pub dir_attrs: Arc<DirAttrs>,
    /// Closes of sessions that wrote nothing, waiting to go together (unwritten_closes.rs).
    pub unwritten: super::unwritten_closes::UnwrittenCloses,
    /// Directories this mount just made, whose absent names need no lookup (fresh_dirs.rs).
    pub fresh: super::fresh_dirs::FreshDirs,
}

pub(super) use super::backend::lock;

impl<C: MountClient> Backend for Inner<C> {
    fn runtime(&self) -> &Handle {
        &self.rt
    }

    fn write<'a>(&'a self, file: &'a File, offset: u64, data: Vec<u8>) -> Call<'a, ()> {
        Box::pin(self.client.write(file, offset, data))
    }

    fn read<'a>(&'a self, file: &'a File, offset: u64, len: u64) -> Call<'a, Vec<u8>> {
        Box::pin(self.client.read(file, offset, len))
    }

    fn landed(&self, file: &File) {
        self.forget_reads(file.inode.0);
    }
}

/// The errno of a failure to find what a remembered path named: that it is gone from there
/// (not found, or a directory on the way is no longer one) is ESTALE, the rest as usual.
pub(super) fn stale(e: &ClientError) -> Errno {
    match e {
        ClientError::Meta(MetaError::NotFound | MetaError::NotDir) => Errno::ESTALE,
        e => errno(e),
    }
}

impl<C: MountClient> Inner<C> {
    /// Nothing open yet.
    pub fn new(client: C, rt: Handle, o: &super::MountOptions) -> Self {
        let dir_attrs = Arc::new(DirAttrs::new(o.attr_ttl));
        let learn = dir_attrs.clone();
        client.watch_dirs(Box::new(move |changed| learn.learn(changed)));
        Self {
            dir_attrs,
            client,
            rt,
            ttl: o.attr_ttl,
            write_window: o.write_window,
            readahead: o.readahead,
            names: Mutex::default(),
            files: Mutex::default(),
            dirs: Mutex::default(),
            next_fh: AtomicU64::new(1),
            unwritten: Default::default(),
            fresh: super::fresh_dirs::FreshDirs::new(o.attr_ttl),
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

    /// The path a request about inode `ino` goes by: the name the kernel looked it up under,
    /// anchored at that directory's inode, so the request meets what the name holds now and
    /// the ids tell whether that is still `ino` (else ESTALE, and the kernel looks the name up
    /// again: an open after another client replaced a file opens the new one); the inode
    /// itself when no name of it is known here (the root is `/`).
    pub fn path(&self, ino: INodeNo) -> Result<String, Errno> {
        match lock(&self.names).at(ino) {
            Some((dir, name)) => Ok(anchored(id_of(dir), name)),
            None => Ok(anchored(id_of(ino), "")),
        }
    }

    /// Inode `ino` as meta has it, and the path it is reached by; ESTALE when meta has it no
    /// more.
    pub async fn verified(&self, ino: INodeNo) -> Result<(String, Inode), Errno> {
        let path = self.path(ino)?;
        let i = self.client.lstat(&path).await.map_err(|e| stale(&e))?;
        if ino_of(i.id) != ino {
            return Err(Errno::ESTALE);
        }
        self.links_seen(&i);
        Ok((path, i))
    }

    /// Meta answered `i`: the handles holding it open take its link count (what they answer
    /// once no name of it is known here).
    pub fn links_seen(&self, i: &Inode) {
        for o in lock(&self.files)
            .values_mut()
            .filter(|o| o.inode.id == i.id)
        {
            o.inode.nlink = i.nlink;
        }
    }

    /// The path of directory `ino` when a request names an entry in it: anchored at the
    /// directory itself, wherever it is now.
    pub fn dir_path(&self, ino: INodeNo) -> Result<String, Errno> {
        Ok(anchored(id_of(ino), ""))
    }

    /// The path of `name` in directory `parent`.
    pub fn child_path(&self, parent: INodeNo, name: &OsStr) -> Result<String, Errno> {
        join(&self.dir_path(parent)?, name)
    }

    /// The inode an open handle of this mount holds as `id`, if one does.
    fn held(&self, id: InodeId) -> Option<Inode> {
        let files = lock(&self.files);
        let mut of = files.values().filter(|o| o.inode.id == id);
        of.next().map(|o| o.inode.clone())
    }

    /// getattr of `ino`: a directory this mount's requests just changed as their newest commit
    /// left it (dir_attrs.rs, within the attribute TTL); else at its checked path, else
    /// (renamed or removed by another client, or removed while open) as an open handle of this
    /// mount holds it, else ESTALE.
    pub async fn stat(&self, ino: INodeNo) -> Result<FileAttr, Errno> {
        if let Some(d) = self.dir_attrs.fresh(id_of(ino)) {
            return Ok(self.attr(&d));
        }
        match self.verified(ino).await {
            Ok((_, i)) => Ok(self.attr(&i)),
            Err(e) if e.code() == libc::ESTALE => {
                let held = self.held(id_of(ino)).ok_or(e)?;
                Ok(self.attr(&held))
            }
            Err(e) => Err(e),
        }
    }

    /// The kernel gets `i` as `name` in `parent`: one lookup of it counted (before the reply
    /// goes, so its forget never comes first), and its attributes.
    pub fn entered(&self, i: &Inode, parent: INodeNo, name: &OsStr) -> FileAttr {
        lock(&self.names).looked_up(ino_of(i.id), parent, name);
        self.links_seen(i);
        self.attr(i)
    }

    /// lookup of `name` in directory `parent`.
    pub async fn lookup(&self, parent: INodeNo, name: &OsStr) -> Result<FileAttr, Errno> {
        let path = self.child_path(parent, name)?;
        use super::fresh_dirs::Known;
        let absent = match self.fresh.known(parent.0, name) {
            Known::Absent => true,
            Known::Renew => self.renew_fresh(parent, name).await,
            Known::Ask => false,
        };
        if absent {
            return Err(Errno::ENOENT);
        }
        let i = self.client.lstat(&path).await.map_err(|e| errno(&e))?;
        Ok(self.entered(&i, parent, name))
    }

    /// Lists directory `dir`, whose knowledge ended, and knows it again from now
    /// (fresh_dirs.rs): whether `name` is absent from it.
    async fn renew_fresh(&self, dir: INodeNo, name: &OsStr) -> bool {
        use super::fresh_dirs::RENEW_MAX;
        let sent = std::time::Instant::now();
        let page = match self.dir_path(dir) {
            Ok(path) => self
                .client
                .list_after(&path, Vec::new(), RENEW_MAX)
                .await
                .ok(),
            Err(_) => None,
        };
        let names = page
            .filter(|p| p.len() < RENEW_MAX as usize)
            .map(|p| p.into_iter().map(|(name, _)| name).collect());
        self.fresh.renewed(dir.0, sent, names, name)
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

    /// Opens `path`, which must be inode `want` (else ESTALE, its session closed), and keeps
    /// the handle; truncates first when asked.
    pub async fn open(
        &self,
        path: &str,
        want: InodeId,
        write: bool,
        trunc: bool,
    ) -> Result<(u64, Inode), Errno> {
        let c = &self.client;
        let (file, inode) = c
            .open_with_inode(path, write)
            .await
            .map_err(|e| stale(&e))?;
        if inode.id != want {
            if write {
                let _ = self.end_unwritten(&file).await;
            }
            return Err(Errno::ESTALE);
        }
        match write {
            true if trunc && file.length == 0 => {
                // Nothing to cut, but O_TRUNC of a file that exists moves mtime and ctime.
                let touch = SetAttr {
                    touch: true,
                    ..SetAttr::default()
                };
                match c.set_attr(path, touch).await {
                    Ok(after) if after.id == want => self.opened(file, after, false).await,
                    r => {
                        let _ = self.end_unwritten(&file).await;
                        Err(r.map_or_else(|e| stale(&e), |_| Errno::ESTALE))
                    }
                }
            }
            true => self.opened(file, inode, trunc).await,
            false => Ok(self.keep(file, inode)),
        }
    }

    /// A write session `file` on `inode` just opened: cut to 0 first when `trunc`, then kept
    /// as a handle.
    pub async fn opened(
        &self,
        mut file: File,
        mut inode: Inode,
        trunc: bool,
    ) -> Result<(u64, Inode), Errno> {
        if trunc && file.length > 0 {
            let cut = self.client.truncate(&mut file, &inode, 0).await;
            if let Err(e) = cut {
                // The session is ours to end: a failed open holds nothing.
                let _ = self.end_unwritten(&file).await;
                return Err(errno(&e));
            }
            set_length(&mut inode, 0);
        }
        Ok(self.keep(file, inode))
    }

    /// Ends write session `file`, which wrote nothing, at once: no length report, no stamp.
    async fn end_unwritten(&self, file: &File) -> Result<(), ClientError> {
        self.client
            .close_unwritten(&[(file.inode, file.session)])
            .await
    }

    /// Keeps `file` (opened as `inode`) as a new handle: its number and the inode.
    fn keep(&self, file: File, inode: Inode) -> (u64, Inode) {
        let fh = self.fh();
        let open = Open {
            wb: WriteBehind::new(file.clone(), self.write_window),
            ra: Arc::new(ReadAhead::new(file.clone(), self.readahead)),
            file,
            inode: inode.clone(),
        };
        lock(&self.files).insert(fh, open);
        (fh, inode)
    }

    /// `truncate(2)` of FUSE inode `ino` to `len`: through `fh`, or any handle of this mount
    /// holding the file open for write (the kernel truncates an `O_TRUNC` open with a setattr
    /// after the open, without its handle), else through a session of its own on the inode
    /// meta finds at its path (ESTALE if another). Every write handle of the file then counts
    /// its length hint from the new truncate version.
    pub async fn truncate(
        self: &Arc<Self>,
        ino: INodeNo,
        fh: Option<u64>,
        len: u64,
    ) -> Result<(), Errno> {
        let id = id_of(ino);
        self.settle_writes(id.0).await;
        let held = {
            let files = lock(&self.files);
            let writable = |o: &&Open| o.file.session != 0 && o.inode.id == id;
            let by_fh = fh.and_then(|h| files.get(&h)).filter(writable);
            let any = || files.values().find(writable);
            by_fh
                .or_else(any)
                .map(|o| (o.file.clone(), o.inode.clone()))
        };
        let c = &self.client;
        let Some((mut file, inode)) = held else {
            let path = self.path(ino)?;
            let (mut file, inode) = c
                .open_with_inode(&path, true)
                .await
                .map_err(|e| stale(&e))?;
            let r = if inode.id == id {
                c.truncate(&mut file, &inode, len)
                    .await
                    .map_err(|e| errno(&e))
            } else {
                Err(Errno::ESTALE)
            };
            // The session wrote nothing (the truncate told meta the length): no report, no stamp.
            let closed = self.end_unwritten(&file).await.map_err(|e| errno(&e));
            return r.and(closed);
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
