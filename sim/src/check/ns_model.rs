//! The reference model of the file system tree that the namespace checker replays histories
//! on: a plain in-memory tree with POSIX semantics, written independently of `core::meta`
//! except for the path syntax (`split_path`)
//! (which it is compared against in `tests/meta_model.rs`, and which the differential test
//! compares against a real directory).
//!
//! Answers are abstract (`history::ns::Abstract`, the form the history records them in): what
//! kind of inode a request found or made, the names and kinds of a listing, or a POSIX error.
//! Inode numbers, times and link counts are not compared (a real run allocates ids in commit
//! order, which a serial order need not follow).
//! Invariant: the model never panics on any request; errors follow the same precedence as the
//! kernel's (checked by the differential test through `core::meta`). Not here: the search.

mod ops;

use std::collections::BTreeMap;

use t3fs_core::meta::perm::{User, MAY_EXEC, MAY_WRITE, ROOT_USER, STICKY};
use t3fs_core::meta::request::MetaOp;
use t3fs_core::meta::{split_path, EntryKind, MetaError, DEPTH_MAX, SYMLINKS_MAX};
use t3fs_core::wire::SpecialKind;
use t3fs_scenario::ns_files::INITIAL_DIR_PERM;

use crate::history::ns::Abstract;

const ROOT: u32 = 0;

/// One inode of the model.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
enum Node {
    Dir {
        entries: BTreeMap<Vec<u8>, u32>,
        parent: u32,
        /// The client holding the directory lock.
        lock: Option<u64>,
    },
    File {
        nlink: u32,
    },
    Symlink {
        target: String,
        nlink: u32,
    },
    /// A FIFO, device or socket: a name and attributes, nothing else.
    Special {
        kind: SpecialKind,
        nlink: u32,
    },
}

impl Node {
    /// The link count of anything but a directory (which cannot be hard-linked).
    fn nlink_mut(&mut self) -> Option<&mut u32> {
        match self {
            Node::Dir { .. } => None,
            Node::File { nlink } | Node::Symlink { nlink, .. } | Node::Special { nlink, .. } => {
                Some(nlink)
            }
        }
    }
}

/// The tree.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct Tree {
    nodes: BTreeMap<u32, Node>,
    /// Owner uid, gid and mode bits of every node.
    attrs: BTreeMap<u32, (u32, u32, u32)>,
    next: u32,
}

type R<T> = Result<T, MetaError>;

impl Default for Tree {
    fn default() -> Self {
        let mut nodes = BTreeMap::new();
        nodes.insert(
            ROOT,
            Node::Dir {
                entries: BTreeMap::new(),
                parent: ROOT,
                lock: None,
            },
        );
        let attrs = BTreeMap::from([(ROOT, (0, 0, 0o755))]);
        Self {
            nodes,
            attrs,
            next: 1,
        }
    }
}

impl Tree {
    /// A tree holding the directories `paths` (created in order).
    pub fn with_dirs(paths: &[String]) -> Self {
        let mut t = Self::default();
        for p in paths {
            let op = MetaOp::Mkdirs {
                path: p.clone(),
                perm: INITIAL_DIR_PERM,
                recursive: false,
            };
            t.apply(&op, 0, ROOT_USER);
        }
        t
    }

    fn kind(&self, id: u32) -> EntryKind {
        match self.nodes.get(&id) {
            Some(Node::Dir { .. }) => EntryKind::Directory,
            Some(Node::Symlink { .. }) => EntryKind::Symlink,
            Some(Node::Special { kind, .. }) => EntryKind::Special(*kind),
            _ => EntryKind::File,
        }
    }

    /// `Access` unless `u` may `want` on node `id`.
    fn may(&self, id: u32, u: User, want: u32) -> R<()> {
        let (uid, gid, perm) = self.attrs.get(&id).copied().unwrap_or((0, 0, 0));
        match u.may(uid, gid, perm, want) {
            true => Ok(()),
            false => Err(MetaError::Access),
        }
    }

    /// The directory `path` names (symlinks followed), if `u` may `want` on it.
    fn dir_for(&self, path: &str, u: User, want: u32) -> R<u32> {
        let id = self.resolve(path, true, u)?;
        if !self.is_dir(id) {
            return Err(MetaError::NotDir);
        }
        self.may(id, u, want)?;
        Ok(id)
    }

    /// The sticky rule for removing or replacing entry `id` of directory `dir`.
    fn sticky(&self, dir: u32, id: u32, u: User) -> R<()> {
        let (duid, _, dperm) = self.attrs.get(&dir).copied().unwrap_or((0, 0, 0));
        let (euid, _, _) = self.attrs.get(&id).copied().unwrap_or((0, 0, 0));
        match dperm & STICKY != 0 && !u.is_root() && u.uid != duid && u.uid != euid {
            true => Err(MetaError::NotPermitted),
            false => Ok(()),
        }
    }

    fn walk(
        &self,
        start: u32,
        parts: &[&[u8]],
        follow: bool,
        links: &mut usize,
        u: User,
    ) -> R<u32> {
        let mut cur = start;
        for (k, name) in parts.iter().enumerate() {
            let last = k + 1 == parts.len();
            let Some(Node::Dir {
                entries, parent, ..
            }) = self.nodes.get(&cur)
            else {
                return Err(MetaError::NotDir);
            };
            self.may(cur, u, MAY_EXEC)?;
            if *name == b".." {
                cur = *parent;
                continue;
            }
            let next = *entries.get(*name).ok_or(MetaError::NotFound)?;
            cur = match self.nodes.get(&next) {
                Some(Node::Symlink { target, .. }) if !last || follow => {
                    *links += 1;
                    if *links > SYMLINKS_MAX {
                        return Err(MetaError::Loop);
                    }
                    let from = if target.starts_with('/') { ROOT } else { cur };
                    let rel = format!("/{target}");
                    self.walk(from, &split_path(&rel)?, true, links, u)?
                }
                _ => next,
            };
        }
        Ok(cur)
    }

    fn resolve(&self, path: &str, follow: bool, u: User) -> R<u32> {
        self.walk(ROOT, &split_path(path)?, follow, &mut 0, u)
    }

    fn parent_of<'p>(&self, path: &'p str, u: User) -> R<(u32, &'p [u8])> {
        let parts = split_path(path)?;
        let Some((last, dirs)) = parts.split_last() else {
            return Err(MetaError::Invalid("the root has no parent"));
        };
        if *last == b".." {
            return Err(MetaError::Invalid("`..` names no entry"));
        }
        let parent = self.walk(ROOT, dirs, true, &mut 0, u)?;
        match self.nodes.get(&parent) {
            Some(Node::Dir { .. }) => Ok((parent, last)),
            _ => Err(MetaError::NotDir),
        }
    }

    fn entry(&self, dir: u32, name: &[u8]) -> Option<u32> {
        match self.nodes.get(&dir) {
            Some(Node::Dir { entries, .. }) => entries.get(name).copied(),
            _ => None,
        }
    }

    fn entries_mut(&mut self, dir: u32) -> &mut BTreeMap<Vec<u8>, u32> {
        match self.nodes.get_mut(&dir) {
            Some(Node::Dir { entries, .. }) => entries,
            _ => unreachable!("parent_of returns directories only"),
        }
    }

    /// `NoLock` if directory `dir` is locked by a client other than `who`.
    fn check_lock(&self, dir: u32, who: u64) -> R<()> {
        match self.nodes.get(&dir) {
            Some(Node::Dir {
                lock: Some(holder), ..
            }) if *holder != who => Err(MetaError::NoLock),
            _ => Ok(()),
        }
    }

    /// The existing inode named by `path` (`false`), or a new one of `node` (`true`) made by
    /// client `who`.
    fn make(&mut self, path: &str, node: Node, perm: u32, who: u64, u: User) -> R<(u32, bool)> {
        let (parent, name) = self.parent_of(path, u)?;
        self.may(parent, u, MAY_EXEC)?;
        if let Some(e) = self.entry(parent, name) {
            return Ok((e, false));
        }
        self.may(parent, u, MAY_WRITE | MAY_EXEC)?;
        // Devices are root's (Linux), judged after the name and the directory's permissions.
        let device = matches!(
            node,
            Node::Special {
                kind: SpecialKind::CharDevice | SpecialKind::BlockDevice,
                ..
            }
        );
        if device && !u.is_root() {
            return Err(MetaError::NotPermitted);
        }
        self.check_lock(parent, who)?;
        let id = self.next;
        self.next += 1;
        let node = match node {
            Node::Dir { entries, .. } => Node::Dir {
                entries,
                parent,
                lock: None,
            },
            n => n,
        };
        let is_dir = matches!(node, Node::Dir { .. });
        self.nodes.insert(id, node);
        let attrs = self.new_attrs(parent, is_dir, perm, u);
        self.attrs.insert(id, attrs);
        self.entries_mut(parent).insert(name.to_vec(), id);
        Ok((id, true))
    }

    fn is_ancestor(&self, id: u32, dir: u32) -> R<bool> {
        let mut at = dir;
        for _ in 0..=DEPTH_MAX {
            if at == id {
                return Ok(true);
            }
            let Some(Node::Dir { parent, .. }) = self.nodes.get(&at) else {
                return Ok(false);
            };
            if at == ROOT {
                return Ok(false);
            }
            at = *parent;
        }
        Err(MetaError::Loop)
    }

    fn is_empty_dir(&self, id: u32) -> bool {
        matches!(self.nodes.get(&id), Some(Node::Dir { entries, .. }) if entries.is_empty())
    }

    /// Drops one name of `id` (its inode goes to "GC": out of the model once unnamed).
    fn unlink(&mut self, id: u32) {
        match self.nodes.get_mut(&id).and_then(Node::nlink_mut) {
            Some(nlink) if *nlink > 1 => *nlink -= 1,
            _ => {
                self.nodes.remove(&id);
                self.attrs.remove(&id);
            }
        }
    }

    fn is_dir(&self, id: u32) -> bool {
        matches!(self.nodes.get(&id), Some(Node::Dir { .. }))
    }

    /// Applies `op` asked by client `who` (its `ClientId`, which directory locks name) for
    /// user `u` (whose permissions are checked); the abstract answer.
    pub fn apply(&mut self, op: &MetaOp, who: u64, u: User) -> Abstract {
        match self.run(op, who, u) {
            Ok(a) => a,
            Err(e) => Abstract::Error(e),
        }
    }

    fn run(&mut self, op: &MetaOp, who: u64, u: User) -> R<Abstract> {
        match op {
            MetaOp::Stat { path, follow } => {
                Ok(Abstract::Kind(self.kind(self.resolve(path, *follow, u)?)))
            }
            MetaOp::List { path, after, limit } => self.list(path, after, *limit, u),
            MetaOp::Create {
                path,
                exclusive,
                perm,
                session,
            } => self.create(path, (*exclusive, session.is_some()), *perm, who, u),
            MetaOp::Mkdirs {
                path,
                recursive,
                perm,
            } => self.mkdirs(path, *recursive, *perm, who, u),
            MetaOp::Symlink { path, target } => {
                let node = Node::Symlink {
                    target: target.clone(),
                    nlink: 1,
                };
                match self.make(path, node, 0o777, who, u)? {
                    (_, true) => Ok(Abstract::Kind(EntryKind::Symlink)),
                    _ => Err(MetaError::Exists),
                }
            }
            MetaOp::Mknod {
                path, kind, perm, ..
            } => self.mknod(path, *kind, *perm, who, u),
            MetaOp::Hardlink { existing, path } => self.hardlink(existing, path, who, u),
            MetaOp::Remove { path, recursive } => self.remove(path, *recursive, who, u),
            MetaOp::Open { path, write, .. } => self.open(path, *write, u),
            // Sessions are invisible in the tree: they only hold back GC (checked by fsck).
            MetaOp::Close { .. } | MetaOp::CloseUnwritten { .. } => Ok(Abstract::Done),
            // Ownership and mode are modelled (they decide later permission checks); times
            // are not compared.
            MetaOp::SetAttr { path, attr } => self.set_attr(path, attr, u),
            MetaOp::BatchStat { paths } => Ok(Abstract::Many(
                paths
                    .iter()
                    .map(|p| match self.resolve(p, true, u) {
                        Ok(id) => Abstract::Kind(self.kind(id)),
                        Err(e) => Abstract::Error(e),
                    })
                    .collect(),
            )),
            MetaOp::LockDirectory { path, action } => self.lock_directory(path, action, who, u),
            MetaOp::StatFs => Ok(Abstract::Space),
            // By inode, for the data path: the writer's session keeps the file alive, so its
            // inode answers.
            MetaOp::ExtendStripe { .. } | MetaOp::Sync { .. } => {
                Ok(Abstract::Kind(EntryKind::File))
            }
            MetaOp::Rename { from, to } => self.rename(from, to, who, u),
        }
    }

    /// Every reachable path with its kind (and a symlink's target), in path order: what a
    /// final walk of the real namespace is compared with.
    pub fn listing(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        self.list_into(ROOT, String::new(), &mut out, 0);
        out
    }

    fn list_into(&self, dir: u32, prefix: String, out: &mut Vec<(String, String)>, depth: usize) {
        let Some(Node::Dir { entries, .. }) = self.nodes.get(&dir) else {
            return;
        };
        for (name, id) in entries {
            let path = format!("{prefix}/{}", String::from_utf8_lossy(name));
            let what = match self.nodes.get(id) {
                Some(Node::Dir { .. }) => "dir".to_string(),
                Some(Node::Symlink { target, .. }) => format!("symlink -> {target}"),
                Some(Node::Special { kind, .. }) => format!("{kind:?}"),
                _ => "file".to_string(),
            };
            out.push((path.clone(), what));
            if depth < DEPTH_MAX {
                self.list_into(*id, path, out, depth + 1);
            }
        }
    }
}
