//! The mount's inode numbers and the paths they stand for. The meta service takes paths; the
//! kernel names files by inode number. A FUSE inode number is the meta inode id plus one (the
//! root, meta inode 0, is FUSE's 1), so it is stable across mounts; the path of each number
//! the kernel has looked up is kept here, moved by renames and dropped by removals.
//!
//! Invariants: the root is always known; a rename moves the renamed path and every path under
//! it. A hard-linked file is known by the last name it was looked up under (any of its names
//! reaches the same inode). Not here: asking meta (fs.rs).

use std::collections::BTreeMap;
use std::ffi::OsStr;

use fuser::{Errno, INodeNo};
use t3fs_core::ids::InodeId;

/// The FUSE inode number of meta inode `id`.
pub fn ino_of(id: InodeId) -> INodeNo {
    INodeNo(id.0 + 1)
}

/// Paths by FUSE inode number.
#[derive(Debug)]
pub struct Names {
    paths: BTreeMap<u64, String>,
}

impl Default for Names {
    fn default() -> Self {
        Self {
            paths: [(1, "/".to_string())].into(),
        }
    }
}

impl Names {
    /// The path of `ino`, if the kernel looked it up.
    pub fn path(&self, ino: INodeNo) -> Result<String, Errno> {
        self.paths.get(&ino.0).cloned().ok_or(Errno::ENOENT)
    }

    /// The path of `name` in directory `parent`.
    pub fn child(&self, parent: INodeNo, name: &OsStr) -> Result<String, Errno> {
        let dir = self.path(parent)?;
        let name = name.to_str().ok_or(Errno::EINVAL)?;
        if name.is_empty() || name.contains('/') || name.contains('\0') {
            return Err(Errno::EINVAL);
        }
        Ok(if dir == "/" {
            format!("/{name}")
        } else {
            format!("{dir}/{name}")
        })
    }

    /// `ino` is at `path`.
    pub fn remember(&mut self, ino: INodeNo, path: String) {
        self.paths.insert(ino.0, path);
    }

    /// `from` was renamed to `to`: it and everything under it move.
    pub fn renamed(&mut self, from: &str, to: &str) {
        let under = format!("{from}/");
        for p in self.paths.values_mut() {
            if p == from {
                *p = to.to_string();
            } else if let Some(rest) = p.strip_prefix(&under) {
                *p = format!("{to}/{rest}");
            }
        }
    }

    /// `path` no longer names anything.
    pub fn removed(&mut self, path: &str) {
        self.paths.retain(|ino, p| *ino == 1 || p != path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_move_a_subtree_and_removals_forget_a_name() {
        let mut n = Names::default();
        let code = |r: Result<String, Errno>| r.map_err(|e| e.code());
        assert_eq!(
            code(n.child(INodeNo(1), OsStr::new("a"))),
            Ok("/a".to_string())
        );
        n.remember(INodeNo(5), "/a".into());
        n.remember(INodeNo(6), "/a/b".into());
        n.remember(INodeNo(7), "/ab".into());
        let c = code(n.child(INodeNo(6), OsStr::new("c")));
        assert_eq!(c, Ok("/a/b/c".to_string()));
        assert_eq!(
            code(n.child(INodeNo(6), OsStr::new("x/y"))),
            Err(libc::EINVAL)
        );
        assert_eq!(
            code(n.child(INodeNo(9), OsStr::new("c"))),
            Err(libc::ENOENT)
        );
        n.renamed("/a", "/z");
        assert_eq!(code(n.path(INodeNo(5))), Ok("/z".to_string()));
        assert_eq!(code(n.path(INodeNo(6))), Ok("/z/b".to_string()));
        let sibling = code(n.path(INodeNo(7)));
        assert_eq!(sibling, Ok("/ab".to_string()), "a sibling prefix stays");
        n.removed("/z/b");
        assert_eq!(code(n.path(INodeNo(6))), Err(libc::ENOENT));
        assert_eq!(ino_of(t3fs_core::meta::ROOT), INodeNo(1));
    }
}
