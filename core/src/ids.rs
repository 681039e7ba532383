//! Newtype identifiers and versions, with the compact `Display` forms used in status lines
//! (`n2`, `t12`, `c7`, `c7@v3`, `i5#2`).
//!
//! Invariant: ids are plain values with no behaviour; ordering is numeric so that `BTreeMap`
//! iteration is stable across processes. Versions start at 1 for "exists"; version 0 of a chunk
//! means "never written" (3FS's convention for an absent chunk).

use core::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident($inner:ty), $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

id_type!(
    /// A process in the cluster (mgmtd, storage, meta or client). Servers are numbered from 0 by
    /// the plan; a client draws 63 random bits, so two clients share an id with a chance of
    /// about n²/2⁶⁴. On the wire an id below `u32::MAX` takes 4 bytes (`wire::codec`).
    NodeId(u64), "n");
id_type!(
    /// A storage target: one replica slot on one disk of one storage node.
    TargetId(u32), "t");
id_type!(
    /// A replication chain of targets.
    ChainId(u32), "c");
id_type!(
    /// A chain's version; bumped by mgmtd on every change of the chain's targets or states.
    ChainVersion(u32), "v");
id_type!(
    /// Version of one chunk on one target (committed or pending). 0 means "no such chunk".
    ChunkVersion(u32), "u");
id_type!(
    /// Version of the whole routing info published by mgmtd.
    RoutingVersion(u64), "r");
id_type!(
    /// A client process (3FS: `ClientId`, a uuid; here a number).
    ClientId(u64), "cl");
id_type!(
    /// An exactly-once channel of a client (3FS `channel.id`).
    ChannelId(u32), "ch");
id_type!(
    /// Sequence number within a channel (3FS `channel.seqnum`).
    SeqNum(u64), "s");
id_type!(
    /// A request: local API calls and client RPCs.
    RequestId(u64), "q");
id_type!(
    /// One asynchronous I/O of a machine, answered by exactly one `IoDone`.
    IoId(u64), "io");
id_type!(
    /// A file's inode.
    InodeId(u64), "i");

impl ChunkVersion {
    /// The version that follows this one (pending = committed + 1).
    pub fn next(self) -> Self {
        Self(self.0 + 1)
    }
}

/// A chunk's identity: the file's inode plus the chunk index within the file (3FS §3.1).
///
/// Ordering is (inode, index), so all chunks of an inode form one contiguous key range.
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct ChunkId {
    /// The inode the chunk belongs to.
    pub inode: InodeId,
    /// Chunk index within the file.
    pub index: u32,
}

impl ChunkId {
    /// Builds a chunk id.
    pub const fn new(inode: u64, index: u32) -> Self {
        Self {
            inode: InodeId(inode),
            index,
        }
    }
}

impl fmt::Display for ChunkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.inode, self.index)
    }
}

/// A chain at a given chain version (3FS `VersionedChainId`), e.g. `c7@v3`.
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct VersionedChain {
    /// The chain.
    pub chain: ChainId,
    /// The chain version the sender believes is current.
    pub version: ChainVersion,
}

impl fmt::Display for VersionedChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.chain, self.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_compact() {
        assert_eq!(NodeId(2).to_string(), "n2");
        assert_eq!(TargetId(12).to_string(), "t12");
        let vc = VersionedChain {
            chain: ChainId(7),
            version: ChainVersion(3),
        };
        assert_eq!(vc.to_string(), "c7@v3");
        assert_eq!(ChunkId::new(5, 2).to_string(), "i5#2");
        assert_eq!(ChunkVersion(4).next(), ChunkVersion(5));
    }
}
