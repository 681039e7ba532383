//! The real chunk stores: [`FileChunkStore`] (pread/pwrite/fdatasync) and, behind the `uring`
//! feature, `UringChunkStore` (io_uring, O_DIRECT). Both implement
//! `t3fs_core::chunk::ChunkStore`, pass `t3fs_core::testing::chunk_store_suite`, share one
//! on-disk format and the same metadata layer, and run on a thread of their own through
//! [`StoreThread`].
//!
//! # On-disk layout (one directory per target)
//!
//! - `data`: one file of 4 KiB blocks. Each version of a chunk's content lives in one extent
//!   (a run of blocks, zero-padded); extents are never written while any durable metadata
//!   references them (copy-on-write, as 3FS's chunk engine writes into a new block).
//! - `meta`: an append-only log of checksummed records (format in `meta.rs`), each the whole
//!   new metadata of one chunk (committed version, chain version, length, CRC32C and extent;
//!   the pending version with its length, CRC32C, extent and client tag; a CRC32C per 4 KiB
//!   block of each content (`sums.rs`); the `applied`
//!   exactly-once records) or its removal. Boot replays it (last record per chunk wins) and
//!   rebuilds the free-extent map from the extents referenced; it is compacted by writing
//!   `meta.tmp`, fdatasync, rename over `meta`, directory fsync. Records are written only into
//!   zeros the file was grown by ahead of them, so appending them never needs new space.
//!
//! # Why a commit is atomic and durable when reported
//!
//! An `Update` (or `Install`) writes the new content into a fresh extent and fdatasyncs `data`;
//! only then is a record naming that extent appended to `meta` and fdatasync'd; only then is
//! the operation reported. A `Commit` writes no data: its record moves the pending extent to
//! committed. So the record is the single atomic switch (a frame is whole and passes its CRC,
//! or it is a torn tail of unreported work that boot cuts), and every extent a durable record
//! names was durable before it. An extent left unreferenced becomes reusable only after the
//! record unreferencing it is durable (`catalog.rs`), so a crash never brings back metadata
//! pointing at overwritten bytes. Reads load only the blocks they cover, read-modify-writes the
//! whole content; both check what they load against the block CRC32Cs kept in the record and
//! answer `Corrupt` on a mismatch (rot, a lying disk), never returning or re-checksumming
//! damaged bytes. A write replacing the whole content reads nothing.
//!
//! # Where this differs from 3FS's chunk engine, and why
//!
//! 3FS keeps metadata in RocksDB (one atomic write batch per commit, a "writing list" of
//! pending metas), sizes blocks in 11 power-of-two classes with bitmap allocators and groups,
//! and appends in place as a fast path. Here an append-only log with per-record CRC32C plays
//! RocksDB's part (no dependency; the batch is one record), extents are 4 KiB-granular
//! first-fit, and every update is copy-on-write of the whole chunk (simpler; costs write
//! amplification for small writes to large chunks). Operations queued together share one
//! data fdatasync and one metadata fdatasync (group commit).
//!
//! # Tests
//!
//! Both stores run `chunk_store_suite` (the file store also reopened before every operation),
//! a SIGKILL test (`crash_tests.rs`: a child process killed mid-stream, every acknowledged
//! commit and every listed pending version read back byte for byte) and the thread wrapper's
//! drain test. The power-loss test (`power_loss.rs`, on the lazy file system of
//! `durable/lazy_fs.rs`, with torn and dropped unsynced writes) runs the file store only: the
//! io_uring store's data I/O bypasses the [`DurableFs`](crate::durable::fs::DurableFs) seam, and
//! it shares the metadata layer and the data-then-record ordering that the test exercises.
//!
//! # A full file system
//!
//! Never poisons a store (`space.rs`): an operation claims room in the metadata log for its
//! record before writing anything, an operation bringing new content must leave a reserve of
//! log room for commits and removes, and what does not fit answers `NoSpace` with nothing
//! written; reads, lists, commits and removes keep working. While space is short, the blocks of
//! freed extents are punched out of the data file once the record freeing them is durable, so
//! removing chunks makes room for this target's writes and its neighbours' (the kv role's, the
//! log's). A compaction that does not fit is skipped. The tests: `space_tests.rs` (a file system
//! that refuses to allocate, in process) and `tests/real_disk_full.rs` at the workspace root (a
//! size-limited tmpfs).
//!
//! Disk faults for fault-injection runs (EIO, ENOSPC, added latency) wrap a store from the
//! outside ([`FaultyStore`], `faults.rs`); the stores themselves know nothing of them.
//!
//! Not here: preallocation of the data file, TRIM, a quota per target, a metadata cache smaller
//! than the catalog (all metadata lives in memory, as 3FS's cache does for its working set).

mod catalog;
pub mod faults;
mod file;
mod meta;
pub mod rot;
mod space;
mod sums;
mod thread;
#[cfg(feature = "uring")]
#[allow(unsafe_code)]
mod uring;

#[cfg(test)]
mod block_tests;
#[cfg(test)]
mod crash_tests;
#[cfg(test)]
mod power_loss;
#[cfg(test)]
mod space_tests;

use std::io;
use std::path::Path;

use t3fs_core::chunk::ChunkMeta;

pub use self::faults::{DiskFaultLayer, DiskFaults, FaultyStore};
pub use self::file::{FileChunkStore, Options};
pub use self::rot::Rot;
pub use self::thread::{Completion, StoreHandle, StoreThread};
#[cfg(feature = "uring")]
pub use self::uring::{UringChunkStore, DEPTH};

/// The block size: extents start and end on multiples of it (and O_DIRECT needs it).
pub const BLOCK: u64 = 4096;
// The block sums a payload computes once are the ones a store keeps.
const _: () = assert!(BLOCK as usize == t3fs_core::payload::SUM_BLOCK);
/// The data file's name in the store directory.
pub const DATA: &str = "data";

/// A run of blocks of the data file holding one version of a chunk's content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Byte offset (a multiple of [`BLOCK`]).
    pub offset: u64,
    /// Byte length (a multiple of [`BLOCK`]).
    pub len: u64,
}

/// One chunk's metadata with the extents of its committed and pending content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rec {
    /// As `ChunkOp::List` reports it.
    pub meta: ChunkMeta,
    /// The committed content's extent (`None` when empty or never committed).
    pub data: Option<Extent>,
    /// The pending content's extent (`None` when empty, a remove, or no pending version).
    pub pending_data: Option<Extent>,
    /// CRC32C of each block of the committed content (`sums.rs`).
    pub sums: sums::Sums,
    /// CRC32C of each block of the pending content.
    pub pending_sums: sums::Sums,
}

impl Rec {
    /// A chunk with no version yet.
    pub fn empty(chunk: t3fs_core::ids::ChunkId) -> Self {
        Self {
            meta: ChunkMeta {
                chunk,
                ..ChunkMeta::default()
            },
            data: None,
            pending_data: None,
            sums: sums::Sums::default(),
            pending_sums: sums::Sums::default(),
        }
    }
}

/// A file whose contents are not what a store wrote.
fn damaged(path: &Path, why: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {why}", path.display()),
    )
}
