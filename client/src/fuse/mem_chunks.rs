//! The in-memory client's chunk store (mem_client.rs): one file's bytes kept by chunk, as
//! storage keeps them, so a sparse file costs only the chunks written and a truncate does
//! what 3FS's client-driven truncate makes storage do. Test-only.
//!
//! Invariants: a chunk holds at most a chunk's bytes, from the chunk's start; one emptied by a
//! truncate stays, empty (t3fs's truncate empties chunks past the tail, it does not remove
//! them), and counts for no length. Not here: chains and replicas, versions, checksums.

use std::collections::BTreeMap;

/// One file's chunks: chunk index → its bytes from the chunk's start (a chunk never holds
/// more than a chunk's bytes; one cut to nothing is empty, as storage keeps it).
#[derive(Default)]
pub(super) struct Chunks(BTreeMap<u64, Vec<u8>>);

impl Chunks {
    /// Writes `data` at `offset`, chunk by chunk (a hole before it in a chunk reads as zeros).
    pub(super) fn write(&mut self, chunk: u64, offset: u64, data: &[u8]) {
        let mut at = offset;
        for piece in split_at_chunks(chunk, offset, data) {
            let (k, from) = (at / chunk, (at % chunk) as usize);
            let c = self.0.entry(k).or_default();
            if c.len() < from + piece.len() {
                c.resize(from + piece.len(), 0);
            }
            c[from..from + piece.len()].copy_from_slice(piece);
            at += piece.len() as u64;
        }
    }

    /// `len` bytes at `offset`: what the chunks hold, zeros elsewhere (the chains' answer).
    pub(super) fn read(&self, chunk: u64, offset: u64, len: u64) -> Vec<u8> {
        let mut out = vec![0; len as usize];
        if len == 0 {
            return out;
        }
        for (&k, c) in self.0.range(offset / chunk..=(offset + len - 1) / chunk) {
            let start = k * chunk;
            let (from, to) = (
                offset.max(start),
                (offset + len).min(start + c.len() as u64),
            );
            if from < to {
                let src = &c[(from - start) as usize..(to - start) as usize];
                out[(from - offset) as usize..(to - offset) as usize].copy_from_slice(src);
            }
        }
        out
    }

    /// The end of the last chunk holding data.
    pub(super) fn len(&self, chunk: u64) -> u64 {
        let last = self.0.iter().rev().find(|(_, c)| !c.is_empty());
        last.map_or(0, |(k, c)| k * chunk + c.len() as u64)
    }

    /// Cuts the file to `len`: chunks past the tail emptied, the tail chunk cut or
    /// zero-extended to the exact length.
    pub(super) fn truncate(&mut self, chunk: u64, len: u64) {
        let tail = len.div_ceil(chunk);
        for (_, c) in self.0.range_mut(tail..) {
            c.clear();
        }
        if len > 0 {
            let k = (len - 1) / chunk;
            self.0
                .entry(k)
                .or_default()
                .resize((len - k * chunk) as usize, 0);
        }
    }
}

/// `data` written at `offset` in the pieces each chunk takes.
fn split_at_chunks(chunk: u64, offset: u64, data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let (mut at, mut rest) = (offset, data);
    while !rest.is_empty() {
        let room = (chunk - at % chunk).min(rest.len() as u64) as usize;
        let (piece, more) = rest.split_at(room);
        out.push(piece);
        at += room as u64;
        rest = more;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_hold_what_was_written_and_a_truncate_cuts_or_zero_extends_the_tail() {
        let mut c = Chunks::default();
        c.write(4, 2, b"abcdef"); // Chunks 0 (2..4), 1 (whole).
        c.write(4, 17, b"z"); // Chunk 4, a hole before it.
        assert_eq!(c.len(4), 18);
        assert_eq!(c.read(4, 0, 20), b"\0\0abcdef\0\0\0\0\0\0\0\0\0z\0\0");
        assert_eq!(c.read(4, 5, 2), b"de");
        c.truncate(4, 6);
        assert_eq!(c.len(4), 6, "the chunks past the tail hold nothing");
        assert_eq!(c.read(4, 0, 8), b"\0\0abcd\0\0");
        c.truncate(4, 11);
        assert_eq!(c.len(4), 11);
        assert_eq!(c.read(4, 4, 8), b"cd\0\0\0\0\0\0", "zero-extended");
        c.truncate(4, 0);
        assert_eq!(c.len(4), 0);
    }
}
