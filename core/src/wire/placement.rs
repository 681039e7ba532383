//! Where a file's chunks go, as stored in its inode: the chain range ([`ChainRange`]), the
//! file's layout ([`Layout`]) and a directory's default ([`DirLayout`]).
//!
//! Not here: resolving a range to chains, the shuffle, or applying a directory's default
//! (`meta::placement`, which owns those rules and pins the shuffle).

/// Where a file's chunks go (the meta machine will store it in the file's inode).
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct ChainRange {
    /// Chain table id.
    pub table: u32,
    /// The table version pinned at create.
    pub table_version: u32,
    /// First chain index (1-based, as 3FS's table indexes are).
    pub base: u32,
    /// Chains the file stripes over.
    pub stripe: u32,
    /// Shuffle seed.
    pub seed: u64,
}

crate::wire_struct!(ChainRange {
    table,
    table_version,
    base,
    stripe,
    seed
});

/// A file's layout (3FS `Layout` with a `ChainRange`, plus the dynamic stripe of §4.2).
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct Layout {
    /// Bytes per chunk.
    pub chunk_size: u32,
    /// The chains, as a shuffled range of the chain table.
    pub range: ChainRange,
    /// How many of the stripe's chains the file may use so far (grown by `extend_stripe`,
    /// doubling; at most `range.stripe`). Length queries and GC only visit these.
    pub dyn_stripe: u32,
}

crate::wire_struct!(Layout {
    chunk_size,
    range,
    dyn_stripe
});

/// A directory's default layout (3FS: directories carry one; new files and directories
/// inherit it, `setAttr` sets it): chunk size and stripe. The chains still come from the
/// server's chain table and round-robin allocator.
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct DirLayout {
    /// Bytes per chunk: a power of two from 4 KiB to 64 MiB (3FS's chunk-size classes).
    pub chunk_size: u32,
    /// Chains per file (clamped to the chain table at create).
    pub stripe: u32,
}

crate::wire_struct!(DirLayout { chunk_size, stripe });
