//! The final namespace tree of a run, read from the KV's latest rows: what the namespace
//! serializability check compares its serial order against. Reads only; not here: judging
//! (ns_judge.rs, namespace.rs) or seeding the namespace (the world's ns_client.rs).

use t3fs_core::kv::mem::MemKv;
use t3fs_core::meta::{transact, InodeKind, MetaError};

/// Every path reachable from the root in `kv`'s latest namespace, with its kind (and a
/// symlink's target), in path order, as `ns_model::Tree::listing` gives it.
pub fn final_listing(kv: &mut MemKv) -> Result<Vec<(String, String)>, String> {
    fn walk(
        ns: &mut t3fs_core::meta::Namespace<'_, '_, MemKv>,
        dir: t3fs_core::ids::InodeId,
        prefix: &str,
        out: &mut Vec<(String, String)>,
        depth: usize,
    ) -> Result<(), MetaError> {
        for (name, e) in ns.list_dir(dir, b"", usize::MAX)? {
            let path = format!("{prefix}/{}", String::from_utf8_lossy(&name));
            let inode = ns.inode(e.inode)?;
            let what = match &inode.kind {
                InodeKind::Directory { .. } => "dir".to_string(),
                InodeKind::Symlink { target } => {
                    format!("symlink -> {}", String::from_utf8_lossy(target))
                }
                InodeKind::File { .. } => "file".to_string(),
                InodeKind::Special { kind, .. } => format!("{kind:?}"),
            };
            out.push((path.clone(), what));
            if inode.is_dir() && depth < t3fs_core::meta::DEPTH_MAX {
                walk(ns, e.inode, &path, out, depth + 1)?;
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    transact(kv, |ns| walk(ns, t3fs_core::meta::ROOT, "", &mut out, 0))
        .map_err(|e| format!("reading the final namespace: {e:?}"))?;
    Ok(out)
}
