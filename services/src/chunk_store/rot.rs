//! Bit rot at rest, for `corrupt_chunk` on real processes: [`Rot::rot`] flips one bit of one
//! committed chunk's stored bytes in the data file, behind the store's back (the metadata and
//! its block CRC32Cs keep describing the old bytes), as a decaying medium or a lying disk
//! would. The store's own read check must then answer `Corrupt` (the storage machine takes the
//! target OFFLINE and the chain reads elsewhere), and no rotted byte may reach a client.
//!
//! Invariants: only committed content with bytes on disk is chosen (a hole has nothing to rot;
//! a pending version is still the writer's); the choice is a function of `pick` and the
//! catalog; the flipped byte goes through the same file as the store's own I/O (O_DIRECT
//! included: one aligned block is read, changed and written back), so the store's next read
//! sees it. Not here: when a rot happens (the disk fault layer, `faults.rs`) or replacing the
//! damaged disk (the scenario runner).

use std::io;
#[cfg(feature = "uring")]
use std::os::unix::fs::FileExt;

use t3fs_core::chunk::ChunkStore;
use t3fs_core::ids::ChunkId;

use super::catalog::Catalog;
#[cfg(feature = "uring")]
use super::BLOCK;

/// A chunk store whose stored bytes can be damaged.
pub trait Rot: ChunkStore + Send {
    /// Flips one bit of one committed chunk chosen by `pick`; the chunk, or `None` when the
    /// store holds no committed bytes.
    fn rot(&mut self, pick: u64) -> io::Result<Option<ChunkId>>;
}

/// Where a rot chosen by `pick` lands: the chunk, the data file offset of the byte, and which
/// bit of it.
pub(super) fn site(cat: &Catalog, pick: u64) -> Option<(ChunkId, u64, u8)> {
    let stored: Vec<(ChunkId, u64, u64)> = cat
        .chunks()
        .iter()
        .filter(|(_, r)| r.meta.committed.0 > 0 && r.meta.len > 0)
        .filter_map(|(c, r)| Some((*c, r.data?.offset, u64::from(r.meta.len))))
        .collect();
    if stored.is_empty() {
        return None;
    }
    let (chunk, start, len) = stored[(pick % stored.len() as u64) as usize];
    let mixed = pick.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    Some((chunk, start + (mixed >> 8) % len, (mixed & 7) as u8))
}

/// Flips bit `bit` of the byte at `offset` of `file` with whole-block I/O (`buf` is one block,
/// aligned as O_DIRECT needs it).
#[cfg(feature = "uring")]
pub(super) fn flip_in_block(
    file: &impl FileExt,
    buf: &mut [u8],
    offset: u64,
    bit: u8,
) -> io::Result<()> {
    let block = offset / BLOCK * BLOCK;
    file.read_exact_at(buf, block)?;
    buf[(offset - block) as usize] ^= 1 << bit;
    file.write_all_at(buf, block)
}

#[cfg(test)]
impl Rot for t3fs_core::testing::MemChunkStore {
    /// The in-memory store keeps no bytes apart from their metadata: nothing to rot.
    fn rot(&mut self, _pick: u64) -> io::Result<Option<ChunkId>> {
        Ok(None)
    }
}
