//! The namespace's structural check after a run (an fsck over the KV's rows): every entry
//! names an inode of its kind; every directory has exactly one name and its parent pointer and
//! own name match that entry; a file's link count equals the entries naming it; every inode is
//! reachable from the root or the GC root (nothing leaked); GC and session pruning finish once
//! writers closed or died (nothing left under the GC root, no write session outlives its
//! writer); no target stores a chunk of a file whose inode GC freed (GC removes the chunks
//! first); and every file's length lies between its acknowledged length hints and its data
//! (`file_length.rs`).
//!
//! Invariant: reads only the final rows (and the facts `Extents` carries); says `Fail` with
//! the first inconsistency found. Not
//! here: whether the tree is the right one (the serializability checker says that).

use std::collections::{BTreeMap, BTreeSet};

use t3fs_core::ids::InodeId;
use t3fs_core::kv::mem::MemKv;
use t3fs_core::meta::{
    parse_dirent_key, parse_inode_key, parse_session_key, DirEntry, Inode, InodeKind, GC_ROOT, ROOT,
};
use t3fs_core::mgmtd::store::decode;

use super::file_length::Extents;
use super::Verdict;

/// Checks the namespace rows of `kv` and the file chunks stored on the targets (besides the
/// chunk workload's inode); `gc_done`: no GC entry and no write session is left.
pub fn fsck(kv: &MemKv, gc_done: bool, extents: &Extents) -> Verdict {
    match check(kv, gc_done, extents) {
        Ok(s) => Verdict::Pass(s),
        Err(e) => Verdict::Fail(e),
    }
}

fn check(kv: &MemKv, gc_done: bool, extents: &Extents) -> Result<String, String> {
    let Rows {
        inodes,
        entries,
        sessions,
    } = rows(kv)?;
    let (names, in_gc) = entry_names(&inodes, &entries)?;
    check_names(&inodes, &names, &in_gc)?;
    check_dir_links(&inodes, &names, &in_gc)?;
    for c in extents.chunks.keys() {
        if !inodes
            .get(c)
            .is_some_and(|i| matches!(i.kind, InodeKind::File { .. }))
        {
            return Err(format!(
                "a target still stores chunks of {c:?}, which is no file"
            ));
        }
    }
    if !gc_done {
        return Err(format!(
            "GC and session pruning did not finish: {} inodes under GC, write sessions on {} files",
            in_gc.len(),
            sessions.len()
        ));
    }
    for s in &sessions {
        if !inodes.contains_key(s) {
            return Err(format!("a write session holds {s:?}, which GC freed"));
        }
    }
    let lengths = super::file_length::check(&inodes, &in_gc, extents)?;
    Ok(format!(
        "{} inodes, {} entries, {} under GC (held by write sessions), {} with sessions, chunks of {} files on storage; {lengths}",
        inodes.len(),
        entries.len(),
        in_gc.len(),
        sessions.len(),
        extents.chunks.len()
    ))
}

/// The namespace rows of a KV: inodes, directory entries (parent, name, entry) and the inodes
/// with write sessions.
struct Rows {
    inodes: BTreeMap<InodeId, Inode>,
    entries: Vec<(InodeId, Vec<u8>, DirEntry)>,
    sessions: BTreeSet<InodeId>,
}

/// Reads and decodes the namespace rows of `kv`.
fn rows(kv: &MemKv) -> Result<Rows, String> {
    let mut inodes: BTreeMap<InodeId, Inode> = BTreeMap::new();
    let mut entries: Vec<(InodeId, Vec<u8>, DirEntry)> = Vec::new();
    let mut sessions: BTreeSet<InodeId> = BTreeSet::new();
    for (k, v) in kv.latest() {
        if let Some(id) = parse_inode_key(&k) {
            let i: Inode = decode(&v).map_err(|e| format!("inode {id:?}: {e:?}"))?;
            inodes.insert(id, i);
        } else if let Some((parent, name)) = parse_dirent_key(&k) {
            let e: DirEntry = decode(&v).map_err(|e| format!("entry in {parent:?}: {e:?}"))?;
            entries.push((parent, name.to_vec(), e));
        } else if let Some(id) = parse_session_key(&k) {
            sessions.insert(id);
        }
    }
    Ok(Rows {
        inodes,
        entries,
        sessions,
    })
}

/// The names of each inode outside the GC root, as (parent, name).
type Names<'a> = BTreeMap<InodeId, Vec<(InodeId, &'a [u8])>>;

/// Checks each entry against its inode and parent; returns the names and what is under GC.
fn entry_names<'a>(
    inodes: &BTreeMap<InodeId, Inode>,
    entries: &'a [(InodeId, Vec<u8>, DirEntry)],
) -> Result<(Names<'a>, BTreeSet<InodeId>), String> {
    let mut names: Names<'a> = BTreeMap::new();
    let mut in_gc: BTreeSet<InodeId> = BTreeSet::new();
    for (parent, name, e) in entries {
        let show = String::from_utf8_lossy(name);
        let i = inodes.get(&e.inode).ok_or_else(|| {
            format!(
                "entry {show:?} of {parent:?} names missing inode {:?}",
                e.inode
            )
        })?;
        if i.entry_kind() != e.kind {
            return Err(format!(
                "entry {show:?} of {parent:?} says {:?}, inode is {:?}",
                e.kind,
                i.entry_kind()
            ));
        }
        if !inodes.get(parent).is_some_and(Inode::is_dir) {
            return Err(format!(
                "entry {show:?} lives in {parent:?}, which is no directory"
            ));
        }
        if *parent == GC_ROOT {
            in_gc.insert(e.inode);
        } else {
            names.entry(e.inode).or_default().push((*parent, name));
        }
    }
    Ok((names, in_gc))
}

/// Checks every inode but the roots against its names: parent pointer, link count, leaks.
fn check_names(
    inodes: &BTreeMap<InodeId, Inode>,
    names: &Names<'_>,
    in_gc: &BTreeSet<InodeId>,
) -> Result<(), String> {
    for (id, i) in inodes {
        if *id == ROOT || *id == GC_ROOT {
            continue;
        }
        let n = names.get(id).map_or(0, Vec::len);
        let gc = in_gc.contains(id);
        match &i.kind {
            InodeKind::Directory { parent, name, .. }
                if !gc && (n != 1 || names[id][0] != (*parent, name.as_slice())) =>
            {
                return Err(format!(
                    "directory {id:?} has {n} names, or its parent pointer is stale"
                ));
            }
            InodeKind::Directory { .. } => {}
            _ if gc && (i.nlink != 0 || n != 0) => {
                return Err(format!(
                    "{id:?} is under GC with nlink {} and {n} names",
                    i.nlink
                ));
            }
            _ if !gc && i.nlink as usize != n => {
                return Err(format!("{id:?} has nlink {} but {n} names", i.nlink));
            }
            _ => {}
        }
        if n == 0 && !gc {
            return Err(format!("{id:?} is named nowhere: leaked"));
        }
    }
    Ok(())
}

/// Checks every named directory's link count: 2 and one for each subdirectory (its "..").
fn check_dir_links(
    inodes: &BTreeMap<InodeId, Inode>,
    names: &Names<'_>,
    in_gc: &BTreeSet<InodeId>,
) -> Result<(), String> {
    let mut subdirs: BTreeMap<InodeId, u32> = BTreeMap::new();
    for (id, at) in names {
        if inodes.get(id).is_some_and(Inode::is_dir) {
            for (parent, _) in at {
                *subdirs.entry(*parent).or_default() += 1;
            }
        }
    }
    for (id, i) in inodes {
        if !i.is_dir() || *id == GC_ROOT || in_gc.contains(id) {
            continue;
        }
        let want = 2 + subdirs.get(id).copied().unwrap_or(0);
        if i.nlink != want {
            return Err(format!(
                "directory {id:?} has nlink {} but {} subdirectories",
                i.nlink,
                want - 2
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use t3fs_core::ids::{ClientId, RequestId};
    use t3fs_core::kv::Txn;
    use t3fs_core::meta::{dirent_key, inode_key, transact, PathOp};
    use t3fs_core::mgmtd::store::encode;

    fn op(n: u64) -> PathOp {
        PathOp {
            client: ClientId(1),
            request: RequestId(n),
            now: n,
        }
    }

    /// /d, /d/f with a second name /d/g, /d/s -> f, and a removed /d/x under the GC root.
    fn tree() -> (MemKv, Inode) {
        let mut kv = MemKv::new(1_000_000);
        transact(&mut kv, |ns| ns.init(0)).unwrap();
        transact(&mut kv, |ns| ns.mkdirs("/d", 0o755, false, op(1))).unwrap();
        let f = transact(&mut kv, |ns| ns.create("/d/f", 0o644, true, None, op(2))).unwrap();
        transact(&mut kv, |ns| ns.hardlink("/d/f", "/d/g", op(3))).unwrap();
        transact(&mut kv, |ns| ns.symlink("/d/s", "f", op(4))).unwrap();
        transact(&mut kv, |ns| ns.create("/d/x", 0o644, true, None, op(5))).unwrap();
        transact(&mut kv, |ns| ns.remove("/d/x", false, op(6))).unwrap();
        let f = transact(&mut kv, |ns| ns.inode(f.id)).unwrap();
        (kv, f)
    }

    fn put(kv: &mut MemKv, i: &Inode) {
        let mut t = Txn::new(kv);
        t.set(&inode_key(i.id), &encode(i));
        t.commit().unwrap();
    }

    #[test]
    fn a_consistent_namespace_passes() {
        let (kv, _) = tree();
        let v = fsck(&kv, true, &Extents::default());
        assert!(matches!(v, Verdict::Pass(_)), "{v:?}");
        assert!(
            v.detail().contains("1 under GC") && v.detail().contains("1 file lengths"),
            "{v:?}"
        );
    }

    #[test]
    fn gc_left_unfinished_fails() {
        let (kv, _) = tree();
        let v = fsck(&kv, false, &Extents::default());
        assert!(
            v.detail()
                .starts_with("GC and session pruning did not finish: 1 inodes under GC"),
            "{v:?}"
        );
    }

    #[test]
    fn link_counts_and_names_must_agree() {
        let (mut kv, mut f) = tree();
        f.nlink = 3;
        put(&mut kv, &f);
        let v = fsck(&kv, true, &Extents::default());
        assert!(v.detail().ends_with("has nlink 3 but 2 names"), "{v:?}");
        // Both names gone, the inode kept with nlink 0 outside the GC root: leaked.
        let (mut kv, mut f) = tree();
        let d = transact(&mut kv, |ns| ns.stat("/d", false)).unwrap().id;
        f.nlink = 0;
        put(&mut kv, &f);
        let mut t = Txn::new(&mut kv);
        t.clear(&dirent_key(d, b"f"));
        t.clear(&dirent_key(d, b"g"));
        t.commit().unwrap();
        let v = fsck(&kv, true, &Extents::default());
        assert!(v.detail().ends_with("is named nowhere: leaked"), "{v:?}");
        // A directory counts 2 and one per subdirectory.
        let (mut kv, _) = tree();
        let mut d = transact(&mut kv, |ns| ns.stat("/d", false)).unwrap();
        assert_eq!(d.nlink, 2);
        d.nlink = 3;
        put(&mut kv, &d);
        let v = fsck(&kv, true, &Extents::default());
        assert!(
            v.detail().ends_with("has nlink 3 but 0 subdirectories"),
            "{v:?}"
        );
    }

    #[test]
    fn an_entry_naming_a_missing_inode_fails() {
        let (mut kv, f) = tree();
        let mut t = Txn::new(&mut kv);
        t.clear(&inode_key(f.id));
        t.commit().unwrap();
        let v = fsck(&kv, true, &Extents::default());
        assert!(v.detail().contains("names missing inode"), "{v:?}");
    }

    #[test]
    fn chunks_of_no_file_and_lengths_past_the_data_fail() {
        let (kv, f) = tree();
        let mut e = Extents::default();
        e.chunks.insert(InodeId(999), BTreeMap::from([(0, 10)]));
        let v = fsck(&kv, true, &e);
        assert!(v.detail().contains("which is no file"), "{v:?}");
        // The file claims 10 bytes storage does not hold (the file-length rules, wired in).
        let (mut kv, mut f2) = (kv, f);
        if let InodeKind::File { length, .. } = &mut f2.kind {
            *length = 10;
        }
        put(&mut kv, &f2);
        let v = fsck(&kv, true, &Extents::default());
        assert!(v.detail().contains("runs past the data"), "{v:?}");
    }
}
