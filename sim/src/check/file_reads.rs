//! Reads of files against what was written to them (the file-level "no silent corruption" and
//! "no acknowledged write lost"): every byte a namespace writer reads back at file offset `o`
//! must be the byte some write to that file put at `o` (acknowledged or not, invoked before the
//! read answered), or zero; and zero only where that is possible: a hole, bytes a truncate may
//! have cut, or a write whose own payload has a zero there.
//!
//! Writes are self-describing (`payload(request id, len)`), so the log keeps (offset, request
//! id, length) per write. A byte from another file, another offset or another chunk index
//! (a wrong chain or chunk in the layout, a misplaced write, a corrupt replica) fails the run.
//!
//! Timing: every call and answer gets a stamp of one logical clock (the log's own, strictly
//! increasing in the order the world records them). A zero fails only if a write covering that
//! byte was acknowledged before the read began and no truncate step covering the byte could
//! have taken effect between that write and the read: one invoked before the read answered
//! and not acknowledged before the write was invoked (a truncate step whose outcome is unknown
//! may take effect at any later time). A truncate step to `len` of chunk `k` can only zero
//! bytes from `k · chunk size + len` to the chunk's end (the chunks past the new tail are cut
//! to 0, the tail chunk to the exact length; zero-extending a chunk zeroes nothing written).
//!
//! Not here: ordering among non-zero values (which of several overlapping writes a read should
//! see: file reads are not linearizable in 3FS either), lengths (`file_length.rs`). Not
//! excused yet, where a zero is no proof of a defect and this check would fail: a read served
//! by a replica cut off from mgmtd (3FS Appendix B #1/#4; the runner attributes those for the
//! chunk workload only), data loss a scenario expects, and a file GC purged under a writer
//! whose session meta pruned while the writer still ran.

use t3fs_scenario::workload::payload;

use crate::history::file_io::{FileIo, WriteRec};

/// Checks every read; `Err` names the first byte no write explains.
pub fn check(io: &FileIo) -> Result<String, String> {
    let (mut bytes, mut data, mut zeros_after_ack) = (0u64, 0u64, 0u64);
    for r in &io.reads {
        let inode = r.inode;
        let offset = r.offset;
        let writes = io.writes.get(&inode).map_or(&[][..], Vec::as_slice);
        let cuts = io.cuts.get(&inode).map_or(&[][..], Vec::as_slice);
        // The writes that may have reached this read (invoked before it answered) and
        // overlap it, with their payloads, built once per read.
        let end = offset + r.data.len() as u64;
        let overlapping: Vec<(&WriteRec, Vec<u8>)> = writes
            .iter()
            .filter(|w| w.invoked < r.answered)
            .filter(|w| w.offset < end && w.offset + u64::from(w.len) > offset)
            .map(|w| (w, payload(w.req, w.len)))
            .collect();
        for (k, b) in r.data.iter().enumerate() {
            let at = offset + k as u64;
            bytes += 1;
            let covering = overlapping
                .iter()
                .filter(|(w, _)| at >= w.offset && at < w.offset + u64::from(w.len));
            let byte_of = |(w, p): &&(&WriteRec, Vec<u8>)| p[(at - w.offset) as usize];
            if *b != 0 {
                data += 1;
                if !covering.clone().any(|x| byte_of(&x) == *b) {
                    return Err(format!(
                        "file {inode:?}: a read at {offset} returned {b:#04x} at byte {at}, which no write to the file put there"
                    ));
                }
                continue;
            }
            // A zero: fine if some write may have put a zero there itself.
            if covering.clone().any(|x| byte_of(&x) == 0) {
                continue;
            }
            // The latest-invoked write acknowledged before the read began: the one a
            // truncate is least likely to explain (whatever excuses it excuses earlier ones).
            let Some((w, _)) = covering
                .filter(|(w, _)| w.acked.is_some_and(|a| a < r.invoked))
                .max_by_key(|(w, _)| w.invoked)
            else {
                continue; // A hole, or only writes that may not have landed yet.
            };
            zeros_after_ack += 1;
            let cut = cuts.iter().any(|c| {
                c.from <= at
                    && at < c.to
                    && c.invoked < r.answered
                    && c.acked.is_none_or(|a| a > w.invoked)
            });
            if !cut {
                return Err(format!(
                    "file {inode:?}: a read at {offset} returned zero at byte {at}, but write {:#x} of [{}, {}) was acknowledged before the read began and no truncate could have cut it since: an acknowledged write is lost",
                    w.req,
                    w.offset,
                    w.offset + u64::from(w.len)
                ));
            }
        }
    }
    Ok(format!(
        "{} file reads ({bytes} bytes, {data} of them data, {zeros_after_ack} zeros after an acknowledged write explained by a truncate) explained by {} writes and {} truncate steps",
        io.reads.len(),
        io.writes.values().map(Vec::len).sum::<usize>(),
        io.cuts.values().map(Vec::len).sum::<usize>()
    ))
}

#[cfg(test)]
mod tests;
