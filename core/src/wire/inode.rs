//! Inodes and directory entries as they are stored and answered: [`Inode`], [`InodeKind`],
//! [`SpecialKind`], [`DirEntry`], [`EntryKind`], and their wire encoding (which is also their KV row encoding).
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
    /// A FIFO, a character or block device, or a UNIX socket: a name and its attributes only.
    /// Meta keeps no data for it; the kernel of whoever opens it supplies the pipe, the driver
    /// (`rdev`) or the bound socket.
    Special {
        /// Which kind.
        kind: SpecialKind,
        /// The device number of a device, as the kernel's FUSE requests carry it (its 32-bit
        /// `new_encode_dev` form); 0 otherwise.
        rdev: u64,
    },
}

/// The kinds of [`InodeKind::Special`] inodes (mknod's file types other than a regular file).
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum SpecialKind {
    /// A named pipe (`S_IFIFO`).
    Fifo,
    /// A character device (`S_IFCHR`).
    CharDevice,
    /// A block device (`S_IFBLK`).
    BlockDevice,
    /// A UNIX domain socket (`S_IFSOCK`).
    Socket,
}

impl SpecialKind {
    /// Every kind, in tag order.
    pub const ALL: [Self; 4] = [
        Self::Fifo,
        Self::CharDevice,
        Self::BlockDevice,
        Self::Socket,
    ];

    /// The kind of a mode's file-type bits (`S_IFMT`), if it is one of these.
    pub fn from_mode(mode: u32) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.mode_bits() == mode & 0o170000)
    }

    /// The file-type bits (`S_IFMT`) of this kind.
    pub fn mode_bits(self) -> u32 {
        match self {
            Self::Fifo => 0o010000,
            Self::CharDevice => 0o020000,
            Self::BlockDevice => 0o060000,
            Self::Socket => 0o140000,
        }
    }

    /// Whether it names a device (its `rdev` matters, and making one needs privilege).
    pub fn is_device(self) -> bool {
        matches!(self, Self::CharDevice | Self::BlockDevice)
    }
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
    /// Access time, seconds: set at creation and by utimensat (the mount is `noatime`: reads
    /// never move it, which spares every read a meta transaction).
    pub atime: u64,
    /// The nanoseconds of `atime`, as utimensat gave them (the server stamps whole seconds).
    pub atime_ns: u32,
    /// The nanoseconds of `mtime`, likewise; 0 whenever the server stamps `mtime`.
    pub mtime_ns: u32,
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
    /// A special file of this kind.
    Special(SpecialKind),
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
            Self::Special { kind, rdev } => {
                3u8.encode(enc);
                kind.encode(enc);
                rdev.encode(enc);
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
            3 => Self::Special {
                kind: Wire::decode(dec)?,
                rdev: Wire::decode(dec)?,
            },
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}

impl Wire for SpecialKind {
    fn encode(&self, enc: &mut Encoder) {
        (*self as u8).encode(enc);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        let t = u8::decode(dec)?;
        Self::ALL
            .get(usize::from(t))
            .copied()
            .ok_or(DecodeError::UnknownTag(t))
    }
}

impl Wire for EntryKind {
    // A special entry's tag is 3 + its kind's, so the tags of the first three never moved.
    fn encode(&self, enc: &mut Encoder) {
        let tag = match self {
            Self::File => 0u8,
            Self::Directory => 1,
            Self::Symlink => 2,
            Self::Special(k) => 3 + *k as u8,
        };
        tag.encode(enc);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(match u8::decode(dec)? {
            0 => Self::File,
            1 => Self::Directory,
            2 => Self::Symlink,
            t @ 3..=6 => Self::Special(SpecialKind::ALL[usize::from(t - 3)]),
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
    mtime,
    atime,
    atime_ns,
    mtime_ns
});
wire_struct!(DirEntry {
    inode,
    kind,
    request
});

impl Inode {
    /// The server's stamp of a change of content or entries: mtime (whole seconds) and ctime.
    pub fn stamp_mtime(&mut self, now: u64) {
        (self.mtime, self.mtime_ns, self.ctime) = (now, 0, now);
    }

    /// The entry kind naming this inode.
    pub fn entry_kind(&self) -> EntryKind {
        match self.kind {
            InodeKind::File { .. } => EntryKind::File,
            InodeKind::Directory { .. } => EntryKind::Directory,
            InodeKind::Symlink { .. } => EntryKind::Symlink,
            InodeKind::Special { kind, .. } => EntryKind::Special(kind),
        }
    }

    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        matches!(self.kind, InodeKind::Directory { .. })
    }
}
