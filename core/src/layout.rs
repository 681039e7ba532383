//! File layout as far as the data path needs it: chunk size and the chains a file's chunks are
//! striped over, and the split of a byte range into chunk I/Os (3FS §4.2, §6.3).
//!
//! Chunk `k` of a file lives on `chains[k % chains.len()]`. The meta issue adds the chain-table
//! shuffle and dynamic stripes; this module deliberately has only the client-side arithmetic.

use crate::ids::{ChainId, ChunkId, InodeId};
use crate::limits::CHUNK_INDEX_END;

/// The largest size of a file of `chunk_size`-byte chunks: [`CHUNK_INDEX_END`] whole chunks,
/// `chunk_size * (2^32 - 1)` (2^52 - 2^20 bytes at 1 MiB chunks, 2^58 - 2^26 at 64 MiB); 0 for
/// a zero chunk size. A write that would end past it, or a truncate to more, is refused (the
/// FUSE mount answers EFBIG): its bytes would need a chunk index the layout does not have.
pub const fn file_size_max(chunk_size: u32) -> u64 {
    chunk_size as u64 * CHUNK_INDEX_END as u64
}

/// The chunk that ends a file of `len` bytes and its length in that chunk (1 to `chunk_size`):
/// what a truncate to `len` cuts. `None` for an empty file, a zero chunk size, or a length past
/// [`file_size_max`] (never a wrapped index).
pub fn tail_chunk(chunk_size: u32, len: u64) -> Option<(u32, u32)> {
    if chunk_size == 0 || len == 0 || len > file_size_max(chunk_size) {
        return None;
    }
    let cs = u64::from(chunk_size);
    let index = u32::try_from((len - 1) / cs).ok()?;
    let in_chunk = u32::try_from(len - u64::from(index) * cs).ok()?;
    Some((index, in_chunk))
}

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

    /// The largest size of a file of this layout ([`file_size_max`]).
    pub fn size_max(&self) -> u64 {
        file_size_max(self.chunk_size)
    }

    /// Splits `len` bytes at file offset `offset` into chunk spans, in file order.
    /// Returns `None` if the range ends past [`file_size_max`] (or past `u64::MAX`) or the
    /// layout is invalid (zero chunk size, no chains).
    pub fn split(&self, inode: InodeId, offset: u64, len: u64) -> Option<Vec<ChunkSpan>> {
        if self.chunk_size == 0 || self.chains.is_empty() {
            return None;
        }
        let cs = u64::from(self.chunk_size);
        let end = offset.checked_add(len)?;
        if end > self.size_max() {
            return None;
        }
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

    #[test]
    fn the_largest_file_stops_one_chunk_short_of_the_index_space() {
        let mib = 1u32 << 20;
        assert_eq!(file_size_max(mib), (1u64 << 52) - (1 << 20));
        assert_eq!(file_size_max(64 << 20), (1u64 << 58) - (1 << 26));
        assert_eq!(file_size_max(0), 0);
        // The tail chunk of a file is exact up to the maximum and refused past it: never a
        // wrapped index (2^52 + 5 at 1 MiB chunks once cut chunk 0 to 5 bytes).
        assert_eq!(tail_chunk(mib, 1), Some((0, 1)));
        assert_eq!(tail_chunk(mib, 1 << 20), Some((0, mib)));
        assert_eq!(tail_chunk(mib, (1 << 20) + 1), Some((1, 1)));
        let max = file_size_max(mib);
        assert_eq!(tail_chunk(mib, max), Some((u32::MAX - 1, mib)));
        assert_eq!(
            tail_chunk(mib, max - (1 << 20) + 5),
            Some((u32::MAX - 1, 5))
        );
        assert_eq!(tail_chunk(mib, max + 1), None);
        assert_eq!(tail_chunk(mib, (1 << 52) + 5), None);
        assert_eq!(tail_chunk(mib, u64::MAX), None);
        assert_eq!(tail_chunk(mib, 0), None);
        assert_eq!(tail_chunk(0, 5), None);
        // 64 MiB chunks reach further: 2^52 + 5 is chunk 2^26, 5 bytes in.
        assert_eq!(tail_chunk(64 << 20, (1 << 52) + 5), Some((1 << 26, 5)));
    }

    #[test]
    fn a_range_near_the_maximum_splits_and_one_past_it_is_refused() {
        let layout = FileLayout {
            chunk_size: 1 << 20,
            chains: vec![ChainId(1), ChainId(2), ChainId(3)],
        };
        let max = layout.size_max();
        let spans = layout.split(InodeId(9), max - 10, 10).unwrap();
        let got: Vec<_> = spans
            .iter()
            .map(|s| (s.chunk.index, s.chain.0, s.offset, s.len))
            .collect();
        // Chunk 2^32 - 2 is on chain (2^32 - 2) % 3 = 2, the third.
        assert_eq!(got, vec![(u32::MAX - 1, 3, (1 << 20) - 10, 10)]);
        assert!(layout.split(InodeId(9), max - 10, 11).is_none());
        assert!(layout.split(InodeId(9), max, 1).is_none());
        assert!(layout.split(InodeId(9), (1 << 52) + 5, 1).is_none());
        assert!(layout.split(InodeId(9), u64::MAX, 1).is_none());
        assert!(layout.split(InodeId(9), u64::MAX - 1, 2).is_none());
        // Ending exactly at the maximum is fine, empty or not.
        assert_eq!(layout.split(InodeId(9), max, 0).unwrap(), vec![]);
        assert_eq!(layout.split(InodeId(9), max - 1, 1).unwrap().len(), 1);
    }
}
