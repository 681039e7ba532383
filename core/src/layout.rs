//! File layout as far as the data path needs it: chunk size and the chains a file's chunks are
//! striped over, and the split of a byte range into chunk I/Os (3FS §4.2, §6.3).
//!
//! Chunk `k` of a file lives on `chains[k % chains.len()]`. The meta issue adds the chain-table
//! shuffle and dynamic stripes; this module deliberately has only the client-side arithmetic.

use crate::ids::{ChainId, ChunkId, InodeId};

/// How a file's bytes map to chunks and chains.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct FileLayout {
    /// Bytes per chunk.
    pub chunk_size: u32,
    /// Chains the file's chunks are striped over, round-robin.
    pub chains: Vec<ChainId>,
}

/// One chunk's part of a byte-range I/O.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct ChunkSpan {
    /// The chunk.
    pub chunk: ChunkId,
    /// Its chain.
    pub chain: ChainId,
    /// Offset within the chunk.
    pub offset: u32,
    /// Bytes within the chunk.
    pub len: u32,
    /// Offset of this span within the caller's buffer.
    pub buf_offset: u64,
}

impl FileLayout {
    /// The chain holding chunk `index`. Panics on an empty chain list (a layout bug).
    pub fn chain_of(&self, index: u32) -> ChainId {
        assert!(!self.chains.is_empty(), "layout without chains");
        self.chains[index as usize % self.chains.len()]
    }

    /// Splits `len` bytes at file offset `offset` into chunk spans, in file order.
    /// Returns `None` if the range overflows the 2^32-chunk address space or the layout is
    /// invalid (zero chunk size, no chains).
    pub fn split(&self, inode: InodeId, offset: u64, len: u64) -> Option<Vec<ChunkSpan>> {
        if self.chunk_size == 0 || self.chains.is_empty() {
            return None;
        }
        let cs = u64::from(self.chunk_size);
        let end = offset.checked_add(len)?;
        let mut spans = Vec::new();
        let mut pos = offset;
        while pos < end {
            let index = u32::try_from(pos / cs).ok()?;
            let in_chunk = pos % cs;
            let n = (cs - in_chunk).min(end - pos);
            spans.push(ChunkSpan {
                chunk: ChunkId { inode, index },
                chain: self.chain_of(index),
                offset: in_chunk as u32,
                len: n as u32,
                buf_offset: pos - offset,
            });
            pos += n;
        }
        Some(spans)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_crosses_chunks_and_stripes() {
        let layout = FileLayout {
            chunk_size: 4,
            chains: vec![ChainId(1), ChainId(2)],
        };
        let spans = layout.split(InodeId(9), 3, 6).unwrap();
        let got: Vec<_> = spans
            .iter()
            .map(|s| (s.chunk.index, s.chain.0, s.offset, s.len, s.buf_offset))
            .collect();
        assert_eq!(got, vec![(0, 1, 3, 1, 0), (1, 2, 0, 4, 1), (2, 1, 0, 1, 5)]);
        assert_eq!(layout.split(InodeId(9), 0, 0).unwrap(), vec![]);
        assert!(FileLayout {
            chunk_size: 0,
            chains: vec![ChainId(1)]
        }
        .split(InodeId(1), 0, 1)
        .is_none());
    }
}
