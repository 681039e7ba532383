//! The namespace's structural check after a run (an fsck over the KV's rows): every entry
//! names an inode of its kind; every directory has exactly one name and its parent pointer and
//! own name match that entry; a file's link count equals the entries naming it; every inode is
//! reachable from the root or the GC root (nothing leaked); GC and session pruning finish once
//! writers closed or died (nothing left under the GC root, no write session outlives its
//! writer); no target stores a chunk of a file whose inode GC freed (GC removes the chunks
//! first); and no file's length runs past its data (`file_length.rs`).
//!
//! Invariant: reads only the final rows; says `Fail` with the first inconsistency found. Not
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
    let mut names: BTreeMap<InodeId, Vec<(InodeId, &[u8])>> = BTreeMap::new();
    let mut in_gc: BTreeSet<InodeId> = BTreeSet::new();
    for (parent, name, e) in &entries {
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
    for (id, i) in &inodes {
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
    for c in extents.keys() {
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
        extents.len()
    ))
}
