//! What both chunk stores do when the file system fills up: refuse what does not fit before
//! writing anything, keep serving everything else, and give space back as chunks go.
//!
//! - An operation claims room in the metadata log for its record before it writes anything
//!   ([`Space::admit`], `meta.rs`): one bringing new content must leave the log's reserve
//!   ([`RESERVE`]) in place, a commit or a remove may use it. When the log cannot grow for the
//!   claim, the operation answers `NoSpace` and nothing of it was written; the store is not
//!   poisoned, reads, lists, commits and removes go on.
//! - A data write that meets ENOSPC gives its extent back and answers `NoSpace` (nothing
//!   durable references that extent), as before.
//! - Space comes back: the catalog reuses freed extents, and while space is short ("tight": an
//!   ENOSPC was met, or the file system has less than [`LOW_WATER`] free) the blocks of every
//!   freed extent are punched out of the data file (fallocate PUNCH_HOLE) as soon as the
//!   record freeing it is durable, so the metadata log, other targets and the kv role on the
//!   same file system can use them. On becoming tight every free extent (and the data file past
//!   its allocated end) is punched at once. Not while space is plentiful: a write reusing a
//!   punched extent allocates again, which makes its fdatasync commit the file system's journal.
//!
//! Invariants: only extents nothing durable references are punched (`catalog.rs`); a punch that
//! fails is logged and ignored (the extent is free either way). What still poisons: a failed
//! fdatasync (the kernel may have dropped the pages), and any other I/O error. ENOSPC cannot
//! reach an fdatasync on a file system that allocates at write time (ext4, xfs, tmpfs): the log
//! writes its records into zeros written ahead and the data writes meet ENOSPC themselves.
//!
//! Not here: a reserve for compaction (a compaction that does not fit is skipped, `meta.rs`),
//! and a quota per target (targets on one file system share it first come, first served).

use std::io;

use super::catalog::Catalog;
use super::meta::{Claim, MetaLog, RESERVE};
use super::Extent;
use crate::durable::fs::DurableFile;

/// Free space on the data file's file system below which freed extents are punched at once.
pub const LOW_WATER: u64 = 256 << 20;

/// The space state of one store.
#[derive(Debug, Default)]
pub struct Space {
    tight: bool,
    punch_failed: bool,
}

impl Space {
    /// Claims room in `log` for a record of at most `bound` bytes; `content`: the operation
    /// brings new content and must leave the reserve. `Ok(None)`: no room even after every free
    /// extent was given back to the file system; the caller answers `NoSpace`.
    pub fn admit(
        &mut self,
        log: &mut MetaLog,
        data: &dyn DurableFile,
        cat: &Catalog,
        bound: u64,
        content: bool,
    ) -> io::Result<Option<Claim>> {
        let keep = if content { RESERVE } else { 0 };
        if let Some(c) = log.claim(bound, keep, self.tight)? {
            return Ok(Some(c));
        }
        if self.ran_out(data, cat) {
            return log.claim(bound, keep, true);
        }
        Ok(None)
    }

    /// A data write into `ext` met ENOSPC (`ext` given back to the catalog already): what it
    /// wrote before is punched out, and space is tight.
    pub fn write_failed(&mut self, data: &dyn DurableFile, cat: &Catalog, ext: Option<Extent>) {
        if let Some(e) = ext {
            self.punch(data, e);
        }
        self.ran_out(data, cat);
    }

    /// The file system answered ENOSPC: space is tight from now on. Returns whether this made it
    /// so (every free extent was punched: trying again may now fit).
    pub fn ran_out(&mut self, data: &dyn DurableFile, cat: &Catalog) -> bool {
        if self.tight {
            return false;
        }
        tracing::warn!(
            "chunk store: the file system is full; refusing new content with NoSpace, \
             giving the blocks of freed chunks back"
        );
        self.tight = true;
        self.sweep(data, cat);
        true
    }

    /// Punches every free extent of the data file and everything past its allocated end.
    fn sweep(&mut self, data: &dyn DurableFile, cat: &Catalog) {
        let (free, end) = cat.free_extents();
        for e in free {
            self.punch(data, e);
        }
        if let Ok(size) = data.size() {
            if size > end {
                self.punch(
                    data,
                    Extent {
                        offset: end,
                        len: size - end,
                    },
                );
            }
        }
    }

    /// `freed` just became reusable ([`Catalog::durable`]): punched when space is tight.
    pub fn released(&mut self, data: &dyn DurableFile, cat: &Catalog, freed: &[Extent]) {
        if freed.is_empty() {
            return;
        }
        let free = data.free_space().ok().flatten();
        if !self.tight {
            if free.is_some_and(|f| f < LOW_WATER) {
                self.tight = true;
                self.sweep(data, cat);
            }
            return;
        }
        for &e in freed {
            self.punch(data, e);
        }
        if free.is_some_and(|f| f >= 2 * LOW_WATER) {
            self.tight = false;
        }
    }

    fn punch(&mut self, data: &dyn DurableFile, e: Extent) {
        if let Err(err) = data.punch_hole(e.offset, e.len) {
            if !std::mem::replace(&mut self.punch_failed, true) {
                tracing::warn!("chunk store: punching freed blocks out of the data file: {err}");
            }
        }
    }
}
