//! File lengths after a run against the data and the length hints (3FS §4.4), both bounds.
//!
//! Upper bound: no named file's length may run past the data storage holds for it. A length
//! longer than the data means meta adopted a length that storage never had or no longer has: a
//! hint from before a truncate, or a truncate whose sync did not ask storage. Readers would see
//! zeros past the real end of the file. Storage length: over every target, the furthest
//! committed byte of the file (`index · chunk size + committed length` of its last chunk
//! holding data; truncates leave empty chunks behind), so a replica that is behind can only
//! make a length look shorter, never longer.
//!
//! Lower bound: a length shorter than the data is allowed in general (a write whose outcome its
//! writer never learned may land after the last length update; lengths are eventually
//! consistent, and a later sync or stat with storage's answer catches up). But a close or sync
//! whose length hint meta acknowledged promised its writer the length covers the writes the
//! hint reports. The final length must be at least an acknowledged hint's length when either
//!
//! - the file's truncate version is still the hint's: meta only ever shortens a length while
//!   bumping the truncate version (a truncate's sync, or a storage answer shorter than the
//!   stored length, `core/src/meta/length.rs`), and a hint of the current version is adopted,
//!   or kept when the length is already as long; so this holds by meta's rules alone; or
//! - no truncate step was ever issued to the file: storage never cut its data, so every storage
//!   answer meta adopted after the hint's writes were acknowledged covers them (an answer asked
//!   for before is applied only to the inode state it was asked for). This catches a stale
//!   storage answer shortening a file.
//!
//! A hint carrying an older truncate version of a file some truncate step touched proves
//! nothing: that truncate may have cut the writes the hint reported.
//! Not here: the namespace's structure (`ns_fsck.rs`), chunk contents (`file_reads.rs`). Not
//! excused yet, where the second rule would fail without a defect: a length query answered by a
//! head mgmtd had already moved out of its chain (3FS Appendix B #1/#4), or data loss a
//! scenario expects.

use std::collections::{BTreeMap, BTreeSet};

use t3fs_core::ids::InodeId;
use t3fs_core::meta::request::MetaOp;
use t3fs_core::meta::{Inode, InodeKind};

use crate::history::ns::{Abstract, NsHistory};

/// A length hint meta acknowledged.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct Hint {
    /// The hinted length (the end of the writer's acknowledged writes).
    pub length: u64,
    /// The truncate version the writer had seen.
    pub truncate_ver: u64,
    /// The client that sent it (for the report).
    pub client: u32,
    /// Simulated ns at its invocation (for the report).
    pub invoke_ns: u64,
}

/// What file lengths are checked against.
#[derive(Clone, Debug, Default)]
pub struct Extents {
    /// Per file, per chunk index, the longest committed length any target holds.
    pub chunks: BTreeMap<InodeId, BTreeMap<u32, u32>>,
    /// Per file, the length hints of acknowledged closes and syncs.
    pub hints: BTreeMap<InodeId, Vec<Hint>>,
    /// The files some truncate step (a chunk cut to a length, or removed) was issued to.
    pub cut: BTreeSet<InodeId>,
}

/// The length hints of the closes and syncs in `h` that meta answered with success (a sync
/// after a client-driven truncate asks storage and ignores its hint, so it is left out).
pub fn acknowledged_hints(h: &NsHistory) -> BTreeMap<InodeId, Vec<Hint>> {
    let mut hints: BTreeMap<InodeId, Vec<Hint>> = BTreeMap::new();
    for o in &h.ops {
        let (inode, hint) = match &o.op {
            MetaOp::Close {
                inode,
                length: Some(hint),
                ..
            }
            | MetaOp::Sync {
                inode,
                length: Some(hint),
                truncated: false,
            } => (*inode, *hint),
            _ => continue,
        };
        // Success (close answers done, sync the inode); errors and open operations promise
        // nothing.
        match &o.ret {
            Some((_, Abstract::Done | Abstract::Kind(_))) => {}
            _ => continue,
        }
        hints.entry(inode).or_default().push(Hint {
            length: hint.length,
            truncate_ver: hint.truncate_ver,
            client: o.client,
            invoke_ns: o.invoke_ns,
        });
    }
    hints
}

/// Checks the lengths of the named files in `inodes` (those under GC, `in_gc`, are skipped)
/// against `extents`.
pub fn check(
    inodes: &BTreeMap<InodeId, Inode>,
    in_gc: &BTreeSet<InodeId>,
    extents: &Extents,
) -> Result<String, String> {
    let (mut files, mut shorter, mut truncated, mut floors) = (0, 0, 0, 0);
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
            .chunks
            .get(id)
            .and_then(|e| e.iter().rev().find(|(_, len)| **len > 0))
            .map_or(0, |(k, len)| u64::from(*k) * chunk + u64::from(*len));
        if *length > data {
            return Err(format!(
                "file {id:?} has length {length} (truncate version {truncate_ver}) but storage holds {data} bytes of it: the length runs past the data"
            ));
        }
        let uncut = !extents.cut.contains(id);
        for h in extents.hints.get(id).map_or(&[][..], Vec::as_slice) {
            let binding = h.truncate_ver == *truncate_ver || uncut;
            floors += u32::from(binding);
            if binding && *length < h.length {
                let why = if h.truncate_ver == *truncate_ver {
                    "its truncate version is still the hint's"
                } else {
                    "no truncate ever cut its data"
                };
                return Err(format!(
                    "file {id:?} has length {length} (truncate version {truncate_ver}), shorter than the hint {} (truncate version {}) meta acknowledged to client {} at {:.6}s, and {why}: the length lost acknowledged writes",
                    h.length,
                    h.truncate_ver,
                    h.client,
                    h.invoke_ns as f64 / 1e9
                ));
            }
        }
        files += 1;
        shorter += u32::from(*length < data);
        truncated += u32::from(*truncate_ver > 0);
    }
    Ok(format!(
        "{files} file lengths within their data and at least the {floors} acknowledged hints that bind them ({truncated} truncated; {shorter} shorter than the data, from writes whose outcome was unknown)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use t3fs_core::meta::length::LengthHint;
    use t3fs_core::meta::perm::ROOT_USER;
    use t3fs_core::meta::placement::{ChainRange, Layout};
    use t3fs_core::meta::request::{MetaAnswer, MetaOp};
    use t3fs_core::meta::MetaError;

    const F: InodeId = InodeId(40);

    fn inode(length: u64, truncate_ver: u64, chunk_size: u32) -> Inode {
        let range = ChainRange {
            table: 1,
            table_version: 1,
            base: 1,
            stripe: 1,
            seed: 0,
        };
        Inode {
            id: F,
            kind: InodeKind::File {
                length,
                truncate_ver,
                layout: Some(Layout {
                    chunk_size,
                    range,
                    dyn_stripe: 1,
                }),
            },
            uid: 0,
            gid: 0,
            perm: 0o644,
            nlink: 1,
            ctime: 0,
            mtime: 0,
            atime: 0,
            atime_ns: 0,
            mtime_ns: 0,
        }
    }

    fn file(length: u64, truncate_ver: u64, chunk_size: u32) -> BTreeMap<InodeId, Inode> {
        BTreeMap::from([(F, inode(length, truncate_ver, chunk_size))])
    }

    /// Storage holding `lens` (chunk index, committed length) of `F`.
    fn data(lens: &[(u32, u32)]) -> Extents {
        Extents {
            chunks: BTreeMap::from([(F, lens.iter().copied().collect())]),
            ..Extents::default()
        }
    }

    fn hint(length: u64, truncate_ver: u64) -> Hint {
        Hint {
            length,
            truncate_ver,
            client: 3,
            invoke_ns: 1_500_000_000,
        }
    }

    #[test]
    fn the_length_may_not_run_past_the_data() {
        let none = BTreeSet::new();
        // Chunks of 100: chunk 2 holds 30 bytes, so the data ends at 230; chunk 3 was emptied.
        let e = data(&[(0, 100), (2, 30), (3, 0)]);
        assert!(check(&file(230, 1, 100), &none, &e).is_ok());
        let ok = check(&file(200, 1, 100), &none, &e).unwrap();
        assert!(ok.contains("1 shorter than the data"), "{ok}");
        let e2 = check(&file(231, 1, 100), &none, &e).unwrap_err();
        assert!(
            e2.contains("storage holds 230 bytes") && e2.contains("runs past"),
            "{e2}"
        );
        // A file under GC is not checked.
        assert!(check(&file(231, 1, 100), &BTreeSet::from([F]), &e).is_ok());
        // No data at all: only length 0.
        assert!(check(&file(1, 0, 100), &none, &Extents::default()).is_err());
    }

    #[test]
    fn an_acknowledged_hint_of_the_current_truncate_version_bounds_the_length_below() {
        let none = BTreeSet::new();
        let mut e = data(&[(0, 100), (1, 100)]);
        e.cut.insert(F); // Some truncate ran: only the truncate-version rule binds.
        e.hints.insert(F, vec![hint(150, 2)]);
        let ok = check(&file(150, 2, 100), &none, &e).unwrap();
        assert!(ok.contains("at least the 1 acknowledged hints"), "{ok}");
        let err = check(&file(120, 2, 100), &none, &e).unwrap_err();
        assert!(
            err.contains("shorter than the hint 150")
                && err.contains("client 3 at 1.500000s")
                && err.contains("truncate version is still the hint's"),
            "{err}"
        );
        // A truncate since (version 3) may have cut what the hint reported.
        let ok = check(&file(120, 3, 100), &none, &e).unwrap();
        assert!(ok.contains("at least the 0 acknowledged hints"), "{ok}");
    }

    #[test]
    fn without_any_truncate_step_every_acknowledged_hint_binds() {
        let none = BTreeSet::new();
        let mut e = data(&[(0, 100), (1, 100)]);
        // A hint from version 0; the file is at version 1 (a storage answer shortened it), but
        // storage never cut its data: the answer was stale.
        e.hints.insert(F, vec![hint(180, 0)]);
        let err = check(&file(100, 1, 100), &none, &e).unwrap_err();
        assert!(err.contains("no truncate ever cut its data"), "{err}");
        assert!(check(&file(180, 1, 100), &none, &e).is_ok());
        e.cut.insert(F);
        assert!(check(&file(100, 1, 100), &none, &e).is_ok());
    }

    #[test]
    fn only_successful_closes_and_plain_syncs_with_hints_count() {
        let mut h = NsHistory::default();
        let who = (1, ROOT_USER);
        let close = |length: Option<LengthHint>| MetaOp::Close {
            inode: F,
            session: 7,
            length,
        };
        let lh = |length| {
            Some(LengthHint {
                length,
                truncate_ver: 4,
            })
        };
        // The answers meta gives: a close's is done, a sync's the inode.
        let done = || Ok(MetaAnswer::Done);
        let ok = || Ok(MetaAnswer::Inode(inode(0, 4, 100)));
        // Acknowledged close with a hint: counts.
        let i = h.invoke(0, who, close(lh(64)), 10);
        h.ret(i, done());
        // Answered with an error: promises nothing.
        let i = h.invoke(1, who, close(lh(128)), 20);
        h.ret(i, Err(MetaError::NotFound));
        // Never answered: open.
        h.invoke(2, who, close(lh(256)), 30);
        // No hint: meta asks storage.
        let i = h.invoke(3, who, close(None), 40);
        h.ret(i, done());
        // A truncate's sync ignores its hint.
        let sync = |truncated| MetaOp::Sync {
            inode: F,
            length: lh(512),
            truncated,
        };
        let i = h.invoke(4, who, sync(true), 50);
        h.ret(i, ok());
        let i = h.invoke(5, who, sync(false), 60);
        h.ret(i, ok());
        let hints = acknowledged_hints(&h);
        let got: Vec<(u64, u32)> = hints[&F].iter().map(|x| (x.length, x.client)).collect();
        assert_eq!(got, vec![(64, 0), (512, 5)]);
        assert_eq!(hints[&F][0].truncate_ver, 4);
    }
}
