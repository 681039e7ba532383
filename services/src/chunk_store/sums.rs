//! Per-block checksums of stored content: one CRC32C per [`BLOCK`] of a chunk version's content
//! (the last block: the content's tail, unpadded), kept in its metadata record.
//!
//! Why per block: a 4 KiB read of a 1 MiB chunk then loads and verifies the one block it covers,
//! not the whole chunk (which cost about 100 µs of CPU per read in copies and CRC32C), and a
//! write computes each block's CRC once, deriving the whole-chunk CRC that 3FS's protocol
//! carries ([`fold`]) with the GF(2) shift of `t3fs_core::crc32c` instead of a second pass.
//!
//! Invariant: what a store returns or builds on has passed [`verify`] against the sums recorded
//! with the content, so rot is still never served or laundered; rot in a block a read does not
//! cover is found by the first read or read-modify-write that covers it. Not here: the
//! simulator's in-memory store, which models whole-chunk verification.

use std::ops::Range;
use std::sync::Arc;

use t3fs_core::crc32c::{self, Shift};

use super::BLOCK;

/// CRC32C of each block of one version's content (empty for empty content).
pub type Sums = Arc<[u32]>;

const SHIFT: Shift = Shift::zeros(BLOCK);

/// The block sums of `content` (a store takes a write's from its payload, which computes them
/// once: `Payload::sums`).
#[cfg(test)]
pub fn of(content: &[u8]) -> Sums {
    t3fs_core::payload::Sums::of(content).blocks
}

/// The CRC32C of consecutive blocks whose sums are `sums`, the last one `tail` bytes long.
pub fn fold(sums: &[u32], tail: u64) -> u32 {
    let Some((&last, body)) = sums.split_last() else {
        return 0;
    };
    match body.iter().copied().reduce(|acc, s| SHIFT.combine(acc, s)) {
        None => last,
        Some(head) if tail == BLOCK => SHIFT.combine(head, last),
        Some(head) => crc32c::combine(head, last, tail),
    }
}

/// The bytes of a `len`-byte content a read of `[start, end)` loads: whole blocks, the last one
/// cut at the content's end (`start..start` when the read is empty).
pub fn span(start: u64, end: u64, len: u64) -> Range<u64> {
    let end = end.min(len);
    let start = start.min(end);
    if start == end {
        return start..start;
    }
    (start / BLOCK * BLOCK)..(end.div_ceil(BLOCK) * BLOCK).min(len)
}

/// Whether `bytes`, the content from `from` (a multiple of [`BLOCK`]) on, match `sums`.
pub fn verify(sums: &[u32], from: u64, bytes: &[u8]) -> bool {
    let first = (from / BLOCK) as usize;
    let blocks = bytes.len().div_ceil(BLOCK as usize);
    let Some(want) = sums.get(first..first + blocks) else {
        return false;
    };
    bytes
        .chunks(BLOCK as usize)
        .zip(want)
        .all(|(b, &s)| crc32c::checksum(b) == s)
}

/// The CRC32C of the content bytes `span` (as [`span`] made it) of a `len`-byte content, from
/// its sums.
pub fn of_span(sums: &[u32], span: &Range<u64>) -> u32 {
    if span.is_empty() {
        return 0;
    }
    let blocks = (span.start / BLOCK) as usize..span.end.div_ceil(BLOCK) as usize;
    let tail = span.end - (blocks.end as u64 - 1) * BLOCK;
    fold(&sums[blocks], tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_fold_to_the_crc_of_any_block_span() {
        let content: Vec<u8> = (0..3 * BLOCK as u32 + 100)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 9) as u8)
            .collect();
        let len = content.len() as u64;
        let sums = of(&content);
        assert_eq!(sums.len(), 4);
        assert_eq!(of_span(&sums, &(0..len)), crc32c::checksum(&content));
        for (start, end) in [(0, 1), (5000, 5001), (4096, 8192), (100, len), (8191, 9000)] {
            let s = span(start, end, len);
            assert_eq!(s.start % BLOCK, 0);
            assert!(
                s.start <= start && s.end >= end.min(len),
                "{s:?} covers the read"
            );
            let bytes = &content[s.start as usize..s.end as usize];
            assert_eq!(of_span(&sums, &s), crc32c::checksum(bytes), "{s:?}");
            assert!(verify(&sums, s.start, bytes));
        }
        assert_eq!(span(10, 20, 5), 5..5, "past the end: nothing");
        assert_eq!(of(&[]).len(), 0);
        assert_eq!(fold(&[], 0), 0);
    }

    #[test]
    fn a_flipped_bit_in_a_covered_block_fails_verification() {
        let mut content = vec![7u8; 2 * BLOCK as usize];
        let sums = of(&content);
        content[BLOCK as usize + 3] ^= 0x10;
        assert!(
            verify(&sums, 0, &content[..BLOCK as usize]),
            "block 0 intact"
        );
        assert!(!verify(&sums, BLOCK, &content[BLOCK as usize..]));
        assert!(!verify(&sums, 0, &content));
        assert!(!verify(&sums, 2 * BLOCK, &[0]), "past the sums");
    }
}
