//! Inodes and directory entries as they are stored and answered: [`Inode`], [`InodeKind`],
//! [`DirEntry`], [`EntryKind`], and their wire encoding (which is also their KV row encoding).
//!
//! Invariant: an entry's kind is the kind of the inode it names ([`Inode::entry_kind`]), so a
//! listing needs no inode reads. Not here: the namespace rules over them (`meta`).

use super::codec::{DecodeError, Decoder, Encoder, Wire};
use super::placement::{DirLayout, Layout};
use crate::ids::{ClientId, InodeId, RequestId};
use crate::wire_struct;

/// What an inode is.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum InodeKind {
    /// A regular file.
    File {
        /// Length in bytes (grown by writers' length hints, §4.4).
        length: u64,
        /// Bumped by every truncate.
        truncate_ver: u64,
        /// Where its chunks live (§4.2); `None` when the server had no chain table.
        layout: Option<Layout>,
    },
    /// A directory.
    Directory {
        /// Its parent (the root is its own parent).
        parent: InodeId,
        /// Its own name in the parent (for the loop check and realpath).
        name: Vec<u8>,
        /// The client holding the directory lock, if any (3FS `lockDirectory`, `lock.rs`).
        lock: Option<ClientId>,
        /// The default layout of what is created in it (`None`: the server's policy).
        layout: Option<DirLayout>,
    },
    /// A symbolic link.
    Symlink {
        /// The target path.
        target: Vec<u8>,
    },
}

/// One inode row (3FS `InodeData`, reduced).
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct Inode {
    /// Its id.
    pub id: InodeId,
    /// File, directory or symlink.
    pub kind: InodeKind,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Mode bits (0o7777).
    pub perm: u32,
    /// Entries naming it.
    pub nlink: u32,
    /// Change time, seconds (the caller's clock).
    pub ctime: u64,
    /// Modification time, seconds.
    pub mtime: u64,
}

/// The kind of an entry, cached in it so `list` needs no inode reads.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum EntryKind {
    /// A file.
    File,
    /// A directory.
    Directory,
    /// A symlink.
    Symlink,
}

/// One directory entry (3FS `DirEntryData`, reduced).
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct DirEntry {
    /// The inode it names.
    pub inode: InodeId,
    /// Its kind.
    pub kind: EntryKind,
    /// The request that created it: a retry of that request finds it and is answered as done.
    pub request: RequestId,
}

impl Wire for InodeKind {
    fn encode(&self, enc: &mut Encoder) {
        match self {
            Self::File {
                length,
                truncate_ver,
                layout,
            } => {
                0u8.encode(enc);
                length.encode(enc);
                truncate_ver.encode(enc);
                layout.encode(enc);
            }
            Self::Directory {
                parent,
                name,
                lock,
                layout,
            } => {
                1u8.encode(enc);
                parent.encode(enc);
                name.encode(enc);
                lock.encode(enc);
                layout.encode(enc);
            }
            Self::Symlink { target } => {
                2u8.encode(enc);
                target.encode(enc);
            }
        }
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(match u8::decode(dec)? {
            0 => Self::File {
                length: Wire::decode(dec)?,
                truncate_ver: Wire::decode(dec)?,
                layout: Wire::decode(dec)?,
            },
            1 => Self::Directory {
                parent: Wire::decode(dec)?,
                name: Wire::decode(dec)?,
                lock: Wire::decode(dec)?,
                layout: Wire::decode(dec)?,
            },
            2 => Self::Symlink {
                target: Wire::decode(dec)?,
            },
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}

impl Wire for EntryKind {
    fn encode(&self, enc: &mut Encoder) {
        (*self as u8).encode(enc);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(match u8::decode(dec)? {
            0 => Self::File,
            1 => Self::Directory,
            2 => Self::Symlink,
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}

wire_struct!(Inode {
    id,
    kind,
    uid,
    gid,
    perm,
    nlink,
    ctime,
    mtime
});
wire_struct!(DirEntry {
    inode,
    kind,
    request
});

impl Inode {
    /// The entry kind naming this inode.
    pub fn entry_kind(&self) -> EntryKind {
        match self.kind {
            InodeKind::File { .. } => EntryKind::File,
            InodeKind::Directory { .. } => EntryKind::Directory,
            InodeKind::Symlink { .. } => EntryKind::Symlink,
        }
    }

    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        matches!(self.kind, InodeKind::Directory { .. })
    }
}
