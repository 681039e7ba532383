//! The mount's inode table: for each FUSE inode number the kernel holds, the directory and name
//! it was last looked up under (its path is that of the directory plus the name) and the
//! kernel's lookup count. A FUSE inode number is the meta inode id plus one (the root, meta
//! inode 0, is FUSE's 1), so it is stable across mounts. A request about an inode reaches meta
//! by the name kept here, anchored at its directory's inode (inner.rs), and checks that the name
//! still holds that inode: another client may have replaced it since. The table also says which
//! inode a name this mount renamed or removed took away (so open handles learn their link
//! counts) and keeps the kernel's lookup counts.
//!
//! Lookup counts follow the kernel's: every reply that hands the kernel an entry (lookup,
//! create, mkdir, symlink, link, each readdirplus entry but the dots) counts one, before it is
//! sent, and `forget` takes the kernel's count back; at zero the inode's row goes.
//!
//! Bound: one row for each inode the kernel holds (its inode cache, which memory reclaim
//! shrinks, each eviction sending a forget), plus the root. Rows are made only by counted
//! replies, so nothing else grows the table; open handles and listings are tables of their own
//! (inner.rs), each bounded by the kernel's open files and directories (release and releasedir
//! drop them).
//!
//! Invariants: the root is always known and never forgotten; one (directory, name) names at
//! most one inode here: an inode found at a name takes it from the one that had it, which
//! keeps its row (and count) but has no path until it is looked up again (its requests answer
//! ESTALE, which makes the kernel look its path up again). A rename made through this mount
//! moves one row, and so everything under it. A hard-linked file is known by the last name it
//! was looked up under. Not here: asking meta (inner.rs, fs.rs).

use std::collections::BTreeMap;
use std::ffi::OsStr;

use fuser::{Errno, INodeNo};
use t3fs_core::ids::InodeId;
#[cfg(test)]
use t3fs_core::meta::DEPTH_MAX;

/// The FUSE inode number of meta inode `id`.
pub fn ino_of(id: InodeId) -> INodeNo {
    INodeNo(id.0 + 1)
}

/// The meta inode id of FUSE inode number `ino`.
pub fn id_of(ino: INodeNo) -> InodeId {
    InodeId(ino.0.wrapping_sub(1))
}

/// The root's FUSE inode number.
pub const ROOT_INO: u64 = 1;

/// Where an inode was looked up: its directory's number and its name there.
type At = (u64, String);

/// One inode the kernel holds.
#[derive(Debug)]
struct Row {
    /// Its directory and name, if it still has one here.
    at: Option<At>,
    /// The kernel's lookup count.
    lookups: u64,
}

/// The inode table.
#[derive(Debug)]
pub struct Names {
    rows: BTreeMap<u64, Row>,
    /// (directory, name) → inode number: the reverse of every row's `at`.
    by_name: BTreeMap<At, u64>,
}

impl Default for Names {
    fn default() -> Self {
        let root = Row {
            at: None,
            lookups: 1,
        };
        Self {
            rows: [(ROOT_INO, root)].into(),
            by_name: BTreeMap::new(),
        }
    }
}

/// The path of `name` in the directory at `dir`.
pub fn join(dir: &str, name: &OsStr) -> Result<String, Errno> {
    let name = component(name)?;
    Ok(if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    })
}

/// A name as one path component, or EINVAL.
fn component(name: &OsStr) -> Result<&str, Errno> {
    let name = name.to_str().ok_or(Errno::EINVAL)?;
    if name.is_empty() || name.contains('/') || name.contains('\0') {
        return Err(Errno::EINVAL);
    }
    Ok(name)
}

impl Names {
    /// The path `ino` was last looked up at: ESTALE if the kernel never handed it out, its
    /// row has no name any more, or a directory above it is not known. (Tests read the table
    /// through it; requests use anchored paths.)
    #[cfg(test)]
    pub fn path(&self, ino: INodeNo) -> Result<String, Errno> {
        let mut parts = Vec::new();
        let mut at = ino.0;
        while at != ROOT_INO {
            // The depth a path may have, and a loop (never made, but never followed either).
            if parts.len() > DEPTH_MAX {
                return Err(Errno::ESTALE);
            }
            let row = self.rows.get(&at).ok_or(Errno::ESTALE)?;
            let (dir, name) = row.at.as_ref().ok_or(Errno::ESTALE)?;
            parts.push(name.as_str());
            at = *dir;
        }
        if parts.is_empty() {
            return Ok("/".into());
        }
        let mut p = String::new();
        for name in parts.iter().rev() {
            p.push('/');
            p.push_str(name);
        }
        Ok(p)
    }

    /// The directory and name `ino` was last looked up under, if it still has that name here.
    pub fn at(&self, ino: INodeNo) -> Option<(INodeNo, &str)> {
        let (dir, name) = self.rows.get(&ino.0)?.at.as_ref()?;
        Some((INodeNo(*dir), name.as_str()))
    }

    /// The path of `name` in directory `parent`.
    #[cfg(test)]
    pub fn child(&self, parent: INodeNo, name: &OsStr) -> Result<String, Errno> {
        component(name)?;
        join(&self.path(parent)?, name)
    }

    /// The kernel got `ino` as `name` in `parent` (one lookup more): it is there now.
    pub fn looked_up(&mut self, ino: INodeNo, parent: INodeNo, name: &OsStr) {
        let row = self.rows.entry(ino.0).or_insert(Row {
            at: None,
            lookups: 0,
        });
        row.lookups += 1;
        if ino.0 == ROOT_INO {
            return;
        }
        let Ok(name) = component(name) else {
            return;
        };
        self.place(ino.0, Some((parent.0, name.to_string())));
    }

    /// Row `ino` is at `at` (or nowhere); whoever was at `at` has no name any more.
    fn place(&mut self, ino: u64, at: Option<At>) {
        let Some(row) = self.rows.get_mut(&ino) else {
            return;
        };
        if row.at == at {
            return;
        }
        if let Some(old) = std::mem::replace(&mut row.at, at.clone()) {
            self.unname(&old, ino);
        }
        if let Some(at) = at {
            if let Some(other) = self.by_name.insert(at, ino).filter(|&o| o != ino) {
                if let Some(r) = self.rows.get_mut(&other) {
                    r.at = None;
                }
            }
        }
    }

    /// `at` no longer names `ino` (if it did).
    fn unname(&mut self, at: &At, ino: u64) {
        if self.by_name.get(at) == Some(&ino) {
            self.by_name.remove(at);
        }
    }

    /// The kernel forgot `n` lookups of `ino`; at none left its row goes (never the root's).
    pub fn forget(&mut self, ino: INodeNo, n: u64) {
        if ino.0 == ROOT_INO {
            return;
        }
        let Some(row) = self.rows.get_mut(&ino.0) else {
            return;
        };
        row.lookups = row.lookups.saturating_sub(n);
        if row.lookups == 0 {
            if let Some(at) = self.rows.remove(&ino.0).and_then(|r| r.at) {
                self.unname(&at, ino.0);
            }
        }
    }

    /// `name` in `parent` was renamed (through this mount) to `newname` in `newparent`: what
    /// was there moves (and everything under it with it), what it replaced has no name. The
    /// replaced inode, if this table knew it there.
    pub fn renamed(
        &mut self,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
    ) -> Option<INodeNo> {
        let (Ok(name), Ok(newname)) = (component(name), component(newname)) else {
            return None;
        };
        let to = (newparent.0, newname.to_string());
        let replaced = self.by_name.get(&to).copied();
        let moved = self.by_name.remove(&(parent.0, name.to_string()));
        if let Some(ino) = moved {
            if let Some(r) = self.rows.get_mut(&ino) {
                r.at = None;
            }
            self.place(ino, Some(to));
        } else if let Some(replaced) = self.by_name.remove(&to) {
            if let Some(r) = self.rows.get_mut(&replaced) {
                r.at = None;
            }
        }
        replaced.filter(|&r| Some(r) != moved).map(INodeNo)
    }

    /// `name` in `parent` was removed (through this mount): what it named has no name here.
    /// That inode, if this table knew it there.
    pub fn removed(&mut self, parent: INodeNo, name: &OsStr) -> Option<INodeNo> {
        let name = component(name).ok()?;
        let ino = self.by_name.remove(&(parent.0, name.to_string()))?;
        if let Some(r) = self.rows.get_mut(&ino) {
            r.at = None;
        }
        Some(INodeNo(ino))
    }

    /// Rows (the root's included).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// The kernel's lookup count of `ino` (0: not held).
    #[cfg(test)]
    pub fn lookups(&self, ino: INodeNo) -> u64 {
        self.rows.get(&ino.0).map_or(0, |r| r.lookups)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: Result<String, Errno>) -> Result<String, i32> {
        r.map_err(|e| e.code())
    }

    fn n(s: &str) -> &OsStr {
        OsStr::new(s)
    }

    #[test]
    fn paths_follow_the_directories_and_renames_move_a_subtree() {
        let mut t = Names::default();
        assert_eq!(code(t.child(INodeNo(1), n("a"))), Ok("/a".to_string()));
        t.looked_up(INodeNo(5), INodeNo(1), n("a"));
        t.looked_up(INodeNo(6), INodeNo(5), n("b"));
        t.looked_up(INodeNo(7), INodeNo(1), n("ab"));
        assert_eq!(code(t.child(INodeNo(6), n("c"))), Ok("/a/b/c".to_string()));
        assert_eq!(code(t.child(INodeNo(6), n("x/y"))), Err(libc::EINVAL));
        assert_eq!(code(t.child(INodeNo(9), n("c"))), Err(libc::ESTALE));
        t.renamed(INodeNo(1), n("a"), INodeNo(1), n("z"));
        assert_eq!(code(t.path(INodeNo(5))), Ok("/z".to_string()));
        assert_eq!(code(t.path(INodeNo(6))), Ok("/z/b".to_string()));
        assert_eq!(code(t.path(INodeNo(7))), Ok("/ab".to_string()));
        // Into another directory, over an existing name: the replaced inode has no path.
        t.renamed(INodeNo(5), n("b"), INodeNo(1), n("ab"));
        assert_eq!(code(t.path(INodeNo(6))), Ok("/ab".to_string()));
        assert_eq!(code(t.path(INodeNo(7))), Err(libc::ESTALE));
        t.removed(INodeNo(1), n("ab"));
        assert_eq!(code(t.path(INodeNo(6))), Err(libc::ESTALE));
        assert_eq!(code(t.path(INodeNo(1))), Ok("/".to_string()));
        assert_eq!(ino_of(t3fs_core::meta::ROOT), INodeNo(1));
        assert_eq!(id_of(INodeNo(1)), t3fs_core::meta::ROOT);
    }

    #[test]
    fn an_inode_found_at_a_name_takes_it_from_the_one_that_had_it() {
        let mut t = Names::default();
        t.looked_up(INodeNo(5), INodeNo(1), n("f"));
        // Another client renamed f to g and made a new f: this mount finds 8 at f.
        t.looked_up(INodeNo(8), INodeNo(1), n("f"));
        assert_eq!(code(t.path(INodeNo(8))), Ok("/f".to_string()));
        assert_eq!(code(t.path(INodeNo(5))), Err(libc::ESTALE), "5 is not at f");
        // Looked up at g, 5 has a path again (and its count grew).
        t.looked_up(INodeNo(5), INodeNo(1), n("g"));
        assert_eq!(code(t.path(INodeNo(5))), Ok("/g".to_string()));
        assert_eq!(t.lookups(INodeNo(5)), 2);
        // A hard link: the last name counts, the earlier one is free.
        t.looked_up(INodeNo(5), INodeNo(1), n("h"));
        assert_eq!(code(t.path(INodeNo(5))), Ok("/h".to_string()));
        t.removed(INodeNo(1), n("g"));
        assert_eq!(code(t.path(INodeNo(5))), Ok("/h".to_string()));
    }

    #[test]
    fn forgets_drop_rows_and_many_lookups_keep_the_table_at_what_the_kernel_holds() {
        let mut t = Names::default();
        for round in 0..3u64 {
            for k in 0..10_000u64 {
                let name = format!("f{k}");
                t.looked_up(INodeNo(100 + k), INodeNo(1), n(&name));
                if k % 2 == 0 {
                    t.looked_up(INodeNo(100 + k), INodeNo(1), n(&name));
                }
            }
            assert_eq!(t.len(), 10_001, "round {round}");
            // The kernel forgets what it got, in one go or in parts.
            for k in 0..10_000u64 {
                if k % 2 == 0 {
                    t.forget(INodeNo(100 + k), 1);
                    assert_eq!(t.lookups(INodeNo(100 + k)), 1);
                    t.forget(INodeNo(100 + k), 1);
                } else {
                    t.forget(INodeNo(100 + k), 1);
                }
            }
            assert_eq!(t.len(), 1, "only the root is left");
            assert!(t.by_name.is_empty());
        }
        // The root is never forgotten; unknown numbers are ignored.
        t.forget(INodeNo(1), 5);
        t.forget(INodeNo(77), 1);
        assert_eq!(code(t.path(INodeNo(1))), Ok("/".to_string()));
        // A directory forgotten before what is under it: the child has no path (ESTALE, and
        // the kernel looks it up again), and a dropped row frees its name.
        t.looked_up(INodeNo(5), INodeNo(1), n("d"));
        t.looked_up(INodeNo(6), INodeNo(5), n("x"));
        t.forget(INodeNo(5), 1);
        assert_eq!(code(t.path(INodeNo(6))), Err(libc::ESTALE));
        t.looked_up(INodeNo(9), INodeNo(1), n("d"));
        assert_eq!(code(t.path(INodeNo(9))), Ok("/d".to_string()));
        t.forget(INodeNo(6), 1);
        t.forget(INodeNo(9), 1);
        assert_eq!(t.len(), 1);
        assert!(t.by_name.is_empty());
    }
}
