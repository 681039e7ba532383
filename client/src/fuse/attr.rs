//! A meta inode as the kernel's file attributes. Meta stamps ctime, and the mtimes it sets
//! itself, in whole seconds; atime and mtime set by utimensat keep their nanoseconds. Sizes of
//! directories are reported as one block, of symlinks as their target's length.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, INodeNo};
use t3fs_core::meta::{EntryKind, Inode, InodeKind};
use t3fs_core::wire::SpecialKind;

use super::names::ino_of;

/// The block size reported (`st_blksize`): what `cp` and `dd` size their I/O by.
pub const BLKSIZE: u32 = 1 << 20;

/// The kernel's kind for an entry kind.
pub fn kind_of(k: EntryKind) -> FileType {
    match k {
        EntryKind::File => FileType::RegularFile,
        EntryKind::Directory => FileType::Directory,
        EntryKind::Symlink => FileType::Symlink,
        EntryKind::Special(s) => special_type(s),
    }
}

/// The kernel's kind for a special file.
pub fn special_type(s: SpecialKind) -> FileType {
    match s {
        SpecialKind::Fifo => FileType::NamedPipe,
        SpecialKind::CharDevice => FileType::CharDevice,
        SpecialKind::BlockDevice => FileType::BlockDevice,
        SpecialKind::Socket => FileType::Socket,
    }
}

/// The attributes of `i`; `size` replaces a file's length (writes of this mount not yet
/// reported to meta).
pub fn attr_of(i: &Inode, size: Option<u64>) -> FileAttr {
    let (kind, len) = match &i.kind {
        InodeKind::File { length, .. } => (FileType::RegularFile, size.unwrap_or(*length)),
        InodeKind::Directory { .. } => (FileType::Directory, 4096),
        InodeKind::Symlink { target } => (FileType::Symlink, target.len() as u64),
        InodeKind::Special { kind, .. } => (special_type(*kind), 0),
    };
    let rdev = match i.kind {
        // Stored as FUSE carried it to mknod (the kernel's 32-bit `new_encode_dev` form).
        InodeKind::Special { rdev, .. } => rdev as u32,
        _ => 0,
    };
    let at = |s: u64, ns: u32| UNIX_EPOCH + Duration::new(s, ns.min(999_999_999));
    FileAttr {
        ino: ino_of(i.id),
        size: len,
        blocks: len.div_ceil(512),
        atime: at(i.atime, i.atime_ns),
        mtime: at(i.mtime, i.mtime_ns),
        ctime: at(i.ctime, 0),
        crtime: SystemTime::UNIX_EPOCH,
        kind,
        perm: (i.perm & 0o7777) as u16,
        nlink: i.nlink,
        uid: i.uid,
        gid: i.gid,
        rdev,
        blksize: BLKSIZE,
        flags: 0,
    }
}

/// The attributes of an entry known only by its listing (inode number and kind): what a
/// readdirplus page gives for entries the caller may not stat, with no lifetime.
pub fn blind_attr(ino: INodeNo, kind: FileType) -> FileAttr {
    FileAttr {
        kind,
        perm: 0,
        size: 0,
        blocks: 0,
        ..dot_attr(ino)
    }
}

/// The attributes a readdirplus page gives its dots (`.` and `..` of directory `ino`): the
/// kernel reads only their inode number and kind.
pub fn dot_attr(ino: INodeNo) -> FileAttr {
    FileAttr {
        ino,
        size: 4096,
        blocks: 8,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: FileType::Directory,
        perm: 0o755,
        nlink: 1,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: BLKSIZE,
        flags: 0,
    }
}
