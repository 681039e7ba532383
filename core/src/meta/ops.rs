//! The namespace operations of §4.3 as bodies of one KV transaction: path resolution (with
//! symlinks), stat, list, create (open semantics, O_EXCL), mkdirs (recursive), symlink,
//! hardlink, remove (recursive to GC) and rename (POSIX replace rules and the loop check).
//!
//! Invariant: an operation either returns an error having written nothing that matters (the
//! caller drops the transaction) or leaves the namespace consistent (module invariants in
//! `mod.rs`). Every row an operation's decision depends on is read with a conflict range, so
//! concurrent operations serialize (SSI, as 3FS adds the parent and entries to the conflict set).
//! Not here: retries, batching, permissions beyond existence and type checks.

use super::anchor::{anchor_of, anchor_part};
use super::keys::{self, dirent_key, dirent_range, inode_key, ID_BLOCK, INODE_ALLOC};
use super::perm::{self, User, MAY_EXEC, MAY_READ, MAY_WRITE};
use super::{
    DirEntry, Inode, InodeKind, MetaError, DEPTH_MAX, GC_ROOT, NAME_MAX, NLINK_MAX, ROOT,
    SYMLINKS_MAX,
};
use crate::ids::{ClientId, InodeId, RequestId};
use crate::kv::{KvEngine, Txn};
use crate::mgmtd::store::{decode, encode};
use crate::wire::SpecialKind;

/// Who asks and when: the identity idempotency is keyed on, and the caller's clock.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct PathOp {
    /// The client.
    pub client: ClientId,
    /// Its request id (the same on every retry of one operation).
    pub request: RequestId,
    /// Seconds, for ctime/mtime.
    pub now: u64,
}

/// Runs `f` on the namespace in one fresh transaction of `kv` and commits it: one attempt (a
/// conflict is the caller's to retry; `CommitUnknown` is answered by retrying with the same
/// request id).
pub fn transact<E: KvEngine + ?Sized, T>(
    kv: &mut E,
    f: impl FnOnce(&mut Namespace<'_, '_, E>) -> R<T>,
) -> R<T> {
    let mut t = Txn::new(kv);
    let out = f(&mut Namespace::new(&mut t))?;
    t.commit()?;
    Ok(out)
}

/// The namespace inside one transaction.
pub struct Namespace<'t, 'e, E: KvEngine + ?Sized> {
    txn: &'t mut Txn<'e, E>,
    /// Inode ids reserved for this transaction from the caller's block; `None`: take a block
    /// of the counter per new inode (tools and tests).
    ids: Option<core::ops::Range<u64>>,
    /// The layout a file created by this transaction gets (chosen by the caller's allocator).
    new_layout: Option<super::placement::Layout>,
    /// Chains in the table `new_layout` comes from (bounds a directory's stripe).
    table_len: u32,
    /// Storage answers for length updates (`length.rs`).
    length: super::length_ctx::LengthCtx,
    /// The planted bug `meta-ignores-dir-locks`.
    ignore_locks: bool,
    /// The planted bug `meta-ignores-sticky-bit`.
    ignore_sticky: bool,
    /// The rows are guesses from different moments (prefetch.rs's speculation): the writes
    /// will never commit, so the invariant checks at writes are off.
    guessing: bool,
    /// Who asks (`perm.rs`); root unless the caller says otherwise.
    user: User,
    /// The space statFs reports (the server's cache of storage's answers).
    space: crate::wire::FsStat,
}

type R<T> = Result<T, MetaError>;

/// One page of a range: its rows, and the key the next page continues after.
type Page = (Vec<(Vec<u8>, Vec<u8>)>, Vec<u8>);

/// The absolute path of the first `n` of `parts` (mkdir -p walks these).
pub fn prefix_path(parts: &[&[u8]], n: usize) -> String {
    let names: Vec<_> = parts[..n]
        .iter()
        .map(|p| String::from_utf8_lossy(p))
        .collect();
    format!("/{}", names.join("/"))
}

/// The components of absolute `path` (empty and `.` components dropped), with the name-length
/// and depth limits checked: the one path syntax of meta and of checkers' reference models.
pub fn split_path(path: &str) -> R<Vec<&[u8]>> {
    if !path.starts_with('/') {
        return Err(MetaError::Invalid("paths are absolute"));
    }
    let parts: Vec<&[u8]> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .map(str::as_bytes)
        .collect();
    if parts.iter().any(|p| p.len() > NAME_MAX) {
        return Err(MetaError::NameTooLong);
    }
    if parts.len() > DEPTH_MAX {
        return Err(MetaError::Loop);
    }
    Ok(parts)
}

impl<'t, 'e, E: KvEngine + ?Sized> Namespace<'t, 'e, E> {
    /// The namespace seen through `txn`.
    pub fn new(txn: &'t mut Txn<'e, E>) -> Self {
        Self {
            txn,
            ids: None,
            new_layout: None,
            table_len: 0,
            length: Default::default(),
            ignore_locks: false,
            ignore_sticky: false,
            guessing: false,
            user: perm::ROOT_USER,
            space: Default::default(),
        }
    }

    /// The namespace seen through `txn`, making new inodes with the ids of `ids` (a range the
    /// caller reserved from a block it allocated with [`Namespace::allocate_block`]).
    pub fn with_ids(txn: &'t mut Txn<'e, E>, ids: core::ops::Range<u64>) -> Self {
        Self {
            ids: Some(ids),
            ..Self::new(txn)
        }
    }

    /// Gives files this transaction creates `layout`.
    pub fn set_new_layout(&mut self, layout: Option<super::placement::Layout>, table_len: u32) {
        self.new_layout = layout;
        self.table_len = table_len;
    }

    /// Acts for `user` from now on: its permissions are checked, and it owns what it creates.
    pub fn set_user(&mut self, user: User) {
        self.user = user;
    }

    /// Up to `batch` rows of `range` after key `after` (empty: from the start), and the key a
    /// next page continues after (empty: the range is done, start over). Background scans
    /// (session pruning, idempotency cleaning) page with it.
    pub(super) fn page(
        &mut self,
        mut range: crate::kv::KeyRange,
        after: &[u8],
        batch: usize,
    ) -> R<Page> {
        if !after.is_empty() {
            range.begin = after.to_vec();
            range.begin.push(0); // The smallest key after `after`.
        }
        let rows = self.txn.range(&range, batch)?;
        let next = match rows.len() < batch {
            true => Vec::new(),
            false => rows.last().map(|(k, _)| k.clone()).unwrap_or_default(),
        };
        Ok((rows, next))
    }

    /// Sets what statFs answers.
    pub fn set_space(&mut self, space: crate::wire::FsStat) {
        self.space = space;
    }

    /// What statFs answers.
    pub fn space(&self) -> crate::wire::FsStat {
        self.space
    }

    /// The user this transaction acts for.
    pub fn user(&self) -> User {
        self.user
    }

    /// Plants `meta-ignores-dir-locks`: mutations no longer check directory locks.
    pub fn set_ignore_locks(&mut self, ignore: bool) {
        self.ignore_locks = ignore;
    }

    /// Plants `meta-ignores-sticky-bit`: anyone with write permission removes and renames
    /// in sticky directories.
    pub fn set_ignore_sticky(&mut self, ignore: bool) {
        self.ignore_sticky = ignore;
    }

    /// Runs on guessed rows (prefetch.rs): writes are not checked against the invariants.
    pub fn set_guessing(&mut self, guessing: bool) {
        self.guessing = guessing;
    }

    /// The sticky-bit rule for removing or replacing `entry` of `dir` (`perm.rs`).
    pub(super) fn check_sticky(&self, dir: &Inode, entry: &Inode) -> R<()> {
        match self.ignore_sticky {
            true => Ok(()),
            false => perm::check_sticky(dir, entry, self.user),
        }
    }

    /// `NoLock` if `dir` is locked by a client other than `client` (3FS `lockDirectory`; the
    /// lock itself is taken and released in `lock.rs`, which extends this transaction, so the
    /// rule lives here rather than there).
    pub(super) fn check_lock(&self, dir: &Inode, client: ClientId) -> R<()> {
        match &dir.kind {
            InodeKind::Directory {
                lock: Some(holder), ..
            } if *holder != client && !self.ignore_locks => Err(MetaError::NoLock),
            _ => Ok(()),
        }
    }

    /// The length context: give it a storage answer before running a length update, read
    /// `wants` after one failed with `LengthUnknown`.
    pub fn length_ctx(&mut self) -> &mut super::length_ctx::LengthCtx {
        &mut self.length
    }

    /// Takes the next block of [`ID_BLOCK`] inode ids from the counter (one small transaction
    /// per block, so concurrent creates do not all conflict on the counter row).
    pub fn allocate_block(&mut self) -> R<core::ops::Range<u64>> {
        // Block 0 holds the reserved ids (root, GC root, virtual files).
        let block = match self.txn.get(INODE_ALLOC)? {
            Some(b) => decode::<u64>(&b)?,
            None => 1,
        };
        self.txn.set(INODE_ALLOC, &encode(&(block + 1)));
        Ok(block * ID_BLOCK..(block + 1) * ID_BLOCK)
    }

    /// The transaction underneath (for request-level records, see `request.rs`).
    pub fn txn(&mut self) -> &mut Txn<'e, E> {
        self.txn
    }

    /// Creates the root and the GC root if absent (3FS `init-cluster`).
    pub fn init(&mut self, now: u64) -> R<()> {
        for (id, name) in [(ROOT, &b""[..]), (GC_ROOT, b"gc")] {
            if self.txn.get(&inode_key(id))?.is_none() {
                let dir = InodeKind::Directory {
                    parent: ROOT,
                    name: name.to_vec(),
                    lock: None,
                    layout: None,
                };
                self.put_inode(&new_inode(id, dir, 0o755, now));
            }
        }
        Ok(())
    }

    /// Reads inode `id`.
    pub fn inode(&mut self, id: InodeId) -> R<Inode> {
        match self.txn.get(&inode_key(id))? {
            Some(b) => Ok(decode(&b)?),
            None => Err(MetaError::NotFound),
        }
    }

    pub(super) fn put_inode(&mut self, i: &Inode) {
        if !self.guessing {
            Self::check_inode(i);
        }
        self.txn.set(&inode_key(i.id), &encode(i));
    }

    /// The module's invariants, checked where a row is written (debug builds), so the
    /// simulator stops at the operation that broke one rather than at the next fsck.
    fn check_inode(i: &Inode) {
        debug_assert!(i.nlink <= NLINK_MAX, "{:?} has {} links", i.id, i.nlink);
        // A directory has 2 links and one per subdirectory; 0 once removed.
        debug_assert!(
            !i.is_dir() || i.nlink != 1,
            "directory {:?} nlink {}",
            i.id,
            i.nlink
        );
        debug_assert!(i.perm <= 0o7777, "{:?} mode {:o}", i.id, i.perm);
    }

    pub(super) fn entry(&mut self, parent: InodeId, name: &[u8]) -> R<Option<DirEntry>> {
        match self.txn.get(&dirent_key(parent, name))? {
            Some(b) => Ok(Some(decode(&b)?)),
            None => Ok(None),
        }
    }

    pub(super) fn put_entry(&mut self, parent: InodeId, name: &[u8], e: &DirEntry) {
        debug_assert!(
            self.guessing || (e.inode != parent),
            "{parent:?} names itself"
        );
        debug_assert!(
            !name.is_empty() && name.len() <= NAME_MAX && !name.contains(&b'/'),
            "entry name {name:?} in {parent:?}"
        );
        self.txn.set(&dirent_key(parent, name), &encode(e));
    }

    /// Resolves `path` to its inode; a final symlink is followed when `follow`.
    pub fn resolve(&mut self, path: &str, follow: bool) -> R<Inode> {
        let mut links = 0;
        let (start, rest) = anchor_of(path)?;
        self.walk(start, &split_path(rest)?, follow, &mut links)
    }

    fn walk(
        &mut self,
        start: InodeId,
        parts: &[&[u8]],
        follow: bool,
        links: &mut usize,
    ) -> R<Inode> {
        let mut cur = self.inode(start)?;
        // A walk starts at the root, a directory it walked through, or an anchor (anchor.rs);
        // only an anchor can be removed (its row waits for GC): removed, it names nothing.
        if cur.nlink == 0 {
            return Err(MetaError::NotFound);
        }
        for (k, name) in parts.iter().enumerate() {
            let last = k + 1 == parts.len();
            let InodeKind::Directory { parent, .. } = cur.kind else {
                return Err(MetaError::NotDir);
            };
            perm::check(&cur, self.user, MAY_EXEC)?;
            if *name == b".." {
                cur = self.inode(parent)?;
                continue;
            }
            let e = self.entry(cur.id, name)?.ok_or(MetaError::NotFound)?;
            let next = self.inode(e.inode)?;
            cur = match &next.kind {
                InodeKind::Symlink { target } if !last || follow => {
                    *links += 1;
                    if *links > SYMLINKS_MAX {
                        return Err(MetaError::Loop);
                    }
                    let target = String::from_utf8_lossy(target).into_owned();
                    let from = if target.starts_with('/') {
                        ROOT
                    } else {
                        cur.id
                    };
                    let rel = format!("/{target}");
                    self.walk(from, &split_path(&rel)?, true, links)?
                }
                _ => next,
            };
        }
        Ok(cur)
    }

    /// The parent directory of `path` and the last name (which must be a real name).
    pub(super) fn parent_of<'p>(&mut self, path: &'p str) -> R<(Inode, &'p [u8])> {
        let (start, rest) = anchor_of(path)?;
        let parts = split_path(rest)?;
        let Some((last, dirs)) = parts.split_last() else {
            return Err(MetaError::Invalid("the root has no parent"));
        };
        if *last == b".." {
            return Err(MetaError::Invalid("`..` names no entry"));
        }
        let mut links = 0;
        let parent = self.walk(start, dirs, true, &mut links)?;
        if !parent.is_dir() {
            return Err(MetaError::NotDir);
        }
        Ok((parent, last))
    }

    /// stat (lstat when `follow` is false).
    pub fn stat(&mut self, path: &str, follow: bool) -> R<Inode> {
        self.resolve(path, follow)
    }

    /// Up to `limit` entries of directory `path` after name `after`, in name order.
    pub fn list(&mut self, path: &str, after: &[u8], limit: usize) -> R<Vec<(Vec<u8>, DirEntry)>> {
        let dir = self.resolve(path, true)?;
        if !dir.is_dir() {
            return Err(MetaError::NotDir);
        }
        perm::check(&dir, self.user, MAY_READ)?;
        self.list_dir(dir.id, after, limit)
    }

    /// [`Namespace::list`] by inode (the GC root has no path).
    pub fn list_dir(
        &mut self,
        dir: InodeId,
        after: &[u8],
        limit: usize,
    ) -> R<Vec<(Vec<u8>, DirEntry)>> {
        let rows = self.txn.range(&dirent_range(dir, after), limit)?;
        rows.into_iter()
            .map(|(k, v)| Ok((keys::name_of(dir, &k).to_vec(), decode(&v)?)))
            .collect()
    }

    fn alloc_id(&mut self) -> R<InodeId> {
        match &mut self.ids {
            Some(ids) => match ids.next() {
                Some(id) => Ok(InodeId(id)),
                // The caller reserves as many ids as the request can make (`request.rs`).
                None => Err(MetaError::Invalid("invalid argument")),
            },
            None => Ok(InodeId(self.allocate_block()?.start)),
        }
    }

    /// Creates an inode of `kind` named by `path`; an existing name is returned with `false`.
    /// (Retries are answered from the request's idempotency record, `request.rs`: an entry's
    /// request id alone cannot tell whose retry this is, nor survive a later rename.)
    fn make(&mut self, path: &str, kind: InodeKind, perm: u32, op: PathOp) -> R<(Inode, bool)> {
        let (mut parent, name) = self.parent_of(path)?;
        perm::check(&parent, self.user, MAY_EXEC)?;
        if let Some(e) = self.entry(parent.id, name)? {
            return Ok((self.inode(e.inode)?, false));
        }
        perm::check(&parent, self.user, MAY_WRITE | MAY_EXEC)?;
        self.check_lock(&parent, op.client)?;
        // A new directory's ".." is a link of its parent's (Linux: EMLINK at the limit).
        let is_dir = matches!(kind, InodeKind::Directory { .. });
        if is_dir && parent.nlink >= NLINK_MAX {
            return Err(MetaError::TooManyLinks);
        }
        let id = self.alloc_id()?;
        let kind = match kind {
            // A new directory inherits its parent's default layout.
            InodeKind::Directory { .. } => InodeKind::Directory {
                parent: parent.id,
                name: name.to_vec(),
                lock: None,
                layout: dir_layout(&parent),
            },
            // A new file takes its parent's default layout over the allocated chains.
            InodeKind::File {
                length,
                truncate_ver,
                layout: Some(allocated),
            } => InodeKind::File {
                length,
                truncate_ver,
                layout: Some(match dir_layout(&parent) {
                    Some(d) => d.apply(allocated, self.table_len),
                    None => allocated,
                }),
            },
            k => k,
        };
        let mut inode = new_inode(id, kind, perm, op.now);
        (inode.uid, inode.gid) = (self.user.uid, self.user.gid);
        perm::inherit_setgid(&parent, &mut inode, self.user);
        self.put_inode(&inode);
        let entry = DirEntry {
            inode: id,
            kind: inode.entry_kind(),
            request: op.request,
        };
        self.put_entry(parent.id, name, &entry);
        parent.stamp_mtime(op.now);
        parent.nlink += u32::from(is_dir);
        self.put_inode(&parent);
        Ok((inode, true))
    }

    /// create/open of a file: an existing file is opened; with `exclusive` any existing name is
    /// EEXIST; without it an existing directory is EISDIR.
    pub fn create(
        &mut self,
        path: &str,
        perm: u32,
        exclusive: bool,
        session: Option<u64>,
        op: PathOp,
    ) -> R<Inode> {
        let file = InodeKind::File {
            length: 0,
            truncate_ver: 0,
            layout: self.new_layout,
        };
        let (inode, ours) = self.make(path, file, perm, op)?;
        // O_CREAT|O_EXCL fails on any existing name, a directory included (POSIX).
        if exclusive && !ours {
            return Err(MetaError::Exists);
        }
        let Some(session) = session else {
            return match inode.kind {
                InodeKind::Directory { .. } => Err(MetaError::IsDir),
                _ => Ok(inode),
            };
        };
        // An existing name is opened as open opens it (through a final symlink, a dangling one
        // ENOENT: creating its target is not supported); what this call made is its
        // creator's to write, whatever its mode.
        if !ours {
            return self.open(path, true, session, op);
        }
        self.start_session(&inode, session, op)?;
        Ok(inode)
    }

    /// mkdir, or mkdir -p when `recursive` (existing directories on the way are fine).
    pub fn mkdirs(&mut self, path: &str, perm: u32, recursive: bool, op: PathOp) -> R<Inode> {
        let (anchor, rest) = (anchor_part(path), anchor_of(path)?.1);
        let parts = split_path(rest)?;
        let upto = if recursive { 1 } else { parts.len() };
        let mut made = None;
        for n in upto..=parts.len() {
            let sub = format!("{anchor}{}", prefix_path(&parts, n));
            let dir = InodeKind::Directory {
                parent: ROOT,
                name: Vec::new(),
                lock: None,
                layout: None,
            };
            let (inode, ours) = self.make(&sub, dir, perm, op)?;
            let last = n == parts.len();
            match (inode.is_dir(), ours) {
                (false, _) if last => return Err(MetaError::Exists),
                (false, _) => return Err(MetaError::NotDir),
                (true, false) if last && !recursive => return Err(MetaError::Exists),
                _ => made = Some(inode),
            }
        }
        made.ok_or(MetaError::Exists) // `mkdirs /`: the root exists.
    }

    /// symlink `path` → `target`.
    pub fn symlink(&mut self, path: &str, target: &str, op: PathOp) -> R<Inode> {
        let kind = InodeKind::Symlink {
            target: target.as_bytes().to_vec(),
        };
        match self.make(path, kind, 0o777, op)? {
            (inode, true) => Ok(inode),
            _ => Err(MetaError::Exists),
        }
    }

    /// mknod of a FIFO, device or socket. Devices need root (Linux: `CAP_MKNOD`); FIFOs and
    /// sockets need only write access to the directory, like any new name.
    pub fn mknod(
        &mut self,
        path: &str,
        kind: SpecialKind,
        perm: u32,
        rdev: u64,
        op: PathOp,
    ) -> R<Inode> {
        if kind.is_device() && !self.user.is_root() {
            // Linux judges the name and the directory's permissions first, the privilege last.
            let (parent, name) = self.parent_of(path)?;
            perm::check(&parent, self.user, MAY_EXEC)?;
            if self.entry(parent.id, name)?.is_some() {
                return Err(MetaError::Exists);
            }
            perm::check(&parent, self.user, MAY_WRITE | MAY_EXEC)?;
            return Err(MetaError::NotPermitted);
        }
        let rdev = if kind.is_device() { rdev } else { 0 };
        match self.make(path, InodeKind::Special { kind, rdev }, perm, op)? {
            (inode, true) => Ok(inode),
            _ => Err(MetaError::Exists),
        }
    }

    /// hardlink: `new_path` names `existing`, anything but a directory (Linux: EPERM).
    pub fn hardlink(&mut self, existing: &str, new_path: &str, op: PathOp) -> R<Inode> {
        let mut target = self.resolve(existing, false)?;
        let (parent, name) = self.parent_of(new_path)?;
        perm::check(&parent, self.user, MAY_EXEC)?;
        // The kernel's order: an existing new name is EEXIST before the source's type is judged.
        if self.entry(parent.id, name)?.is_some() {
            return Err(MetaError::Exists);
        }
        perm::check(&parent, self.user, MAY_WRITE | MAY_EXEC)?;
        self.check_lock(&parent, op.client)?;
        if target.is_dir() {
            return Err(MetaError::NotPermitted);
        }
        if target.nlink >= NLINK_MAX {
            return Err(MetaError::TooManyLinks);
        }
        target.nlink += 1;
        target.ctime = op.now;
        self.put_inode(&target);
        let entry = DirEntry {
            inode: target.id,
            kind: target.entry_kind(),
            request: op.request,
        };
        self.put_entry(parent.id, name, &entry);
        // The new name's directory changed: its mtime and ctime move, as Linux moves them.
        let mut parent = parent;
        parent.stamp_mtime(op.now);
        self.put_inode(&parent);
        Ok(target)
    }

    /// Drops one name of `inode`; at nlink 0 (or for a directory) the inode moves under the GC
    /// root, whose workers free its chunks later (§4.5).
    pub(super) fn unlink_inode(&mut self, mut inode: Inode, now: u64) {
        inode.nlink = inode.nlink.saturating_sub(1);
        inode.ctime = now;
        if inode.nlink == 0 || inode.is_dir() {
            let name = format!(
                "{}-{:016x}",
                if inode.is_dir() { 'd' } else { 'f' },
                inode.id.0
            );
            let entry = DirEntry {
                inode: inode.id,
                kind: inode.entry_kind(),
                request: RequestId(0),
            };
            self.put_entry(GC_ROOT, name.as_bytes(), &entry);
            inode.nlink = 0;
        }
        self.put_inode(&inode);
    }

    pub(super) fn is_empty_dir(&mut self, id: InodeId) -> R<bool> {
        Ok(self.txn.range(&dirent_range(id, b""), 1)?.is_empty())
    }

    /// remove (unlink / rmdir; a non-empty directory needs `recursive`, and then goes to GC
    /// whole). Not idempotent by itself: `request::execute` answers retries from its record.
    pub fn remove(&mut self, path: &str, recursive: bool, op: PathOp) -> R<()> {
        let (mut parent, name) = self.parent_of(path)?;
        perm::check(&parent, self.user, MAY_EXEC)?;
        let e = self.entry(parent.id, name)?.ok_or(MetaError::NotFound)?;
        perm::check(&parent, self.user, MAY_WRITE | MAY_EXEC)?;
        self.check_lock(&parent, op.client)?;
        let inode = self.inode(e.inode)?;
        self.check_sticky(&parent, &inode)?;
        if inode.is_dir() && !recursive && !self.is_empty_dir(inode.id)? {
            return Err(MetaError::NotEmpty);
        }
        self.txn.clear(&dirent_key(parent.id, name));
        let was_dir = inode.is_dir();
        self.unlink_inode(inode, op.now);
        parent.stamp_mtime(op.now);
        parent.nlink = parent.nlink.saturating_sub(u32::from(was_dir));
        self.put_inode(&parent);
        Ok(())
    }
}

/// A directory's default layout (`None` for other inodes).
fn dir_layout(dir: &Inode) -> Option<super::placement::DirLayout> {
    match &dir.kind {
        InodeKind::Directory { layout, .. } => *layout,
        _ => None,
    }
}

fn new_inode(id: InodeId, kind: InodeKind, perm: u32, now: u64) -> Inode {
    // A directory: its entry and its own "."; each subdirectory's ".." adds one.
    let nlink = if matches!(kind, InodeKind::Directory { .. }) {
        2
    } else {
        1
    };
    Inode {
        id,
        kind,
        uid: 0,
        gid: 0,
        perm: perm & 0o7777,
        nlink,
        ctime: now,
        mtime: now,
        atime: now,
        atime_ns: 0,
        mtime_ns: 0,
    }
}
