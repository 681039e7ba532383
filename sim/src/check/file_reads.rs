//! Reads of files against what was written to them (the file-level "no silent corruption"):
//! every byte a namespace writer reads back at file offset `o` must be zero (a hole, or bytes
//! a truncate cut) or the byte some write to that file put at `o`, acknowledged or not.
//!
//! Writes are self-describing (`payload(request id, 64)`), so the log keeps only (offset,
//! request id) per write. A byte from another file, another offset or another chunk index
//! (a wrong chain or chunk in the layout, a misplaced write, a corrupt replica) fails the run.
//! Not here: ordering (which of several overlapping writes a read should see: file reads are
//! not linearizable in 3FS either), lengths (`file_length.rs`).

use std::collections::BTreeMap;

use t3fs_core::ids::InodeId;
use t3fs_scenario::workload::payload;

/// The file data path's log.
#[derive(Clone, Debug, Default)]
pub struct FileIo {
    /// Per file, every write issued: (file offset, request id, length).
    pub writes: BTreeMap<InodeId, Vec<(u64, u64, u32)>>,
    /// Every read answered: file, offset, bytes.
    pub reads: Vec<(InodeId, u64, Vec<u8>)>,
}

impl FileIo {
    /// Checks every read; `Err` names the first byte no write explains.
    pub fn check(&self) -> Result<String, String> {
        let mut bytes = 0u64;
        let mut data = 0u64;
        for (inode, offset, read) in &self.reads {
            let writes = self.writes.get(inode).map_or(&[][..], Vec::as_slice);
            // The payloads of the writes overlapping this read, built once per read.
            let end = offset + read.len() as u64;
            let overlapping: Vec<(u64, Vec<u8>)> = writes
                .iter()
                .filter(|(o, _, n)| *o < end && o + u64::from(*n) > *offset)
                .map(|(o, req, n)| (*o, payload(*req, *n)))
                .collect();
            for (k, b) in read.iter().enumerate() {
                let at = offset + k as u64;
                bytes += 1;
                if *b == 0 {
                    continue;
                }
                data += 1;
                let explained = overlapping
                    .iter()
                    .any(|(o, p)| at >= *o && p.get((at - o) as usize) == Some(b));
                if !explained {
                    return Err(format!(
                        "file {inode:?}: a read at {offset} returned {b:#04x} at byte {at}, which no write to the file put there"
                    ));
                }
            }
        }
        Ok(format!(
            "{} file reads ({bytes} bytes, {data} of them data) explained by {} writes",
            self.reads.len(),
            self.writes.values().map(Vec::len).sum::<usize>()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_must_return_zeros_or_written_bytes_at_their_offsets() {
        let f = InodeId(9);
        let mut io = FileIo::default();
        io.writes.insert(f, vec![(100, 7, 64)]);
        let w = payload(7, 64);
        let mut read = vec![0u8; 200];
        read[100..164].copy_from_slice(&w);
        io.reads.push((f, 0, read.clone()));
        assert!(io.check().is_ok(), "zeros and the write's bytes");
        // The same bytes one offset later: misplaced.
        let mut shifted = vec![0u8; 200];
        shifted[101..165].copy_from_slice(&w);
        io.reads.push((f, 0, shifted));
        assert!(io.check().unwrap_err().contains("no write"));
        // Another file's read of the same bytes is not explained either.
        io.reads.pop();
        io.reads.push((InodeId(10), 0, read));
        assert!(io.check().is_err());
    }
}
