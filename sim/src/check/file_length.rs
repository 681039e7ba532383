//! File lengths against the data after a run (3FS §4.4): no named file's length may run past
//! the data storage holds for it. A length longer than the data means meta adopted a length
//! that storage never had or no longer has: a hint from before a truncate, or a truncate whose
//! sync did not ask storage. Readers would see zeros past the real end of the file.
//!
//! A length shorter than the data is allowed and counted: a write whose outcome its writer
//! never learned may land after the last length update (3FS has the same window; lengths are
//! eventually consistent, and a later sync or stat with storage's answer catches up).
//! Storage length: over every target, the furthest committed byte of the file
//! (`index · chunk size + committed length` of its last chunk holding data; truncates leave
//! empty chunks behind), so a replica that is behind can only make a length look shorter,
//! never longer.
//! Not here: the namespace's structure (`ns_fsck.rs`), chunk contents.

use std::collections::{BTreeMap, BTreeSet};

use t3fs_core::ids::InodeId;
use t3fs_core::meta::{Inode, InodeKind};

/// Per file, per chunk index, the longest committed length any target holds.
pub type Extents = BTreeMap<InodeId, BTreeMap<u32, u32>>;

/// Checks the lengths of the named files in `inodes` (those under GC, `in_gc`, are skipped)
/// against `extents`.
pub fn check(
    inodes: &BTreeMap<InodeId, Inode>,
    in_gc: &BTreeSet<InodeId>,
    extents: &Extents,
) -> Result<String, String> {
    let (mut files, mut shorter, mut truncated) = (0, 0, 0);
    for (id, i) in inodes {
        let InodeKind::File {
            length,
            truncate_ver,
            layout,
        } = &i.kind
        else {
            continue;
        };
        if in_gc.contains(id) {
            continue;
        }
        let chunk = u64::from(layout.map_or(0, |l| l.chunk_size));
        let data = extents
            .get(id)
            .and_then(|e| e.iter().rev().find(|(_, len)| **len > 0))
            .map_or(0, |(k, len)| u64::from(*k) * chunk + u64::from(*len));
        if *length > data {
            return Err(format!(
                "file {id:?} has length {length} (truncate version {truncate_ver}) but storage holds {data} bytes of it: the length runs past the data"
            ));
        }
        files += 1;
        shorter += u32::from(*length < data);
        truncated += u32::from(*truncate_ver > 0);
    }
    Ok(format!(
        "{files} file lengths within their data ({truncated} truncated; {shorter} shorter than the data, from writes whose outcome was unknown)"
    ))
}
