//! Meta requests as data: the operations a client sends a meta server ([`MetaOp`]) and their
//! wire encoding.
//!
//! Invariant: each variant has one tag that never changes meaning; paths travel as UTF-8 and
//! a non-UTF-8 path fails to decode (`DecodeError::Invalid`) rather than being mangled.
//! Not here: running a request (`meta::request::execute`), how many inode ids one needs
//! (`MetaOp::ids_needed`, beside the path rules in `meta::request`).

use super::args::{LengthHint, LockAction, SetAttr, BATCH_STAT_MAX, CLOSE_UNWRITTEN_MAX};
use super::codec::{DecodeError, Decoder, Encoder, Wire};
use super::inode::SpecialKind;
use crate::ids::InodeId;

/// One namespace request (paths are absolute).
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum MetaOp {
    /// stat (`follow`) or lstat.
    Stat {
        /// The path.
        path: String,
        /// Follow a final symlink.
        follow: bool,
    },
    /// One page of a directory listing: names after `after`, at most `limit` and at most
    /// `limits::DIR_LIST_PAGE_MAX`.
    List {
        /// The directory.
        path: String,
        /// Exclusive start name.
        after: Vec<u8>,
        /// Page size.
        limit: u32,
    },
    /// create/open of a file (O_CREAT, with O_EXCL when `exclusive`).
    Create {
        /// The file.
        path: String,
        /// Mode bits.
        perm: u32,
        /// O_EXCL.
        exclusive: bool,
        /// Open it for write in the same transaction (3FS's create with a session): a write
        /// session under this id on what was made or found. A file this call made is opened
        /// whatever its mode (its creator's descriptor, as POSIX has it); one it found after
        /// the write check, as `Open` checks.
        session: Option<u64>,
    },
    /// mkdir, or mkdir -p when `recursive`.
    Mkdirs {
        /// The directory.
        path: String,
        /// Mode bits.
        perm: u32,
        /// Create missing parents; an existing directory is fine.
        recursive: bool,
    },
    /// symlink `path` → `target`.
    Symlink {
        /// The new link.
        path: String,
        /// What it points at.
        target: String,
    },
    /// mknod: a FIFO, device or socket at `path`.
    Mknod {
        /// The new name.
        path: String,
        /// Which kind of special file.
        kind: SpecialKind,
        /// Mode bits (the caller's umask applied).
        perm: u32,
        /// The device number of a device; 0 otherwise.
        rdev: u64,
    },
    /// link: `path` becomes another name of the file `existing`.
    Hardlink {
        /// An existing file.
        existing: String,
        /// The new name.
        path: String,
    },
    /// unlink or rmdir (`recursive`: a non-empty directory goes to GC whole).
    Remove {
        /// The path.
        path: String,
        /// Allow a non-empty directory.
        recursive: bool,
    },
    /// rename `from` → `to` (POSIX replace rules).
    Rename {
        /// Source.
        from: String,
        /// Destination.
        to: String,
    },
    /// open of an existing file; for write, a write session `session` (the client's id for it).
    Open {
        /// The path (symlinks followed).
        path: String,
        /// Open for write (stores a session).
        write: bool,
        /// The session id.
        session: u64,
    },
    /// setattr: chmod / chown / utimes of `path` (symlinks followed).
    SetAttr {
        /// The path.
        path: String,
        /// What to change.
        attr: SetAttr,
    },
    /// stat of several paths (symlinks followed), each answered on its own.
    BatchStat {
        /// The paths (at most `BATCH_STAT_MAX`).
        paths: Vec<String>,
    },
    /// Grow `inode`'s dynamic stripe to cover chunk index `chunk` (3FS setAttr extendStripe).
    ExtendStripe {
        /// The file.
        inode: InodeId,
        /// The chunk index about to be written.
        chunk: u64,
    },
    /// close of write session `session` on `inode`, with the writer's length hint.
    Close {
        /// The file.
        inode: InodeId,
        /// The session id given at open.
        session: u64,
        /// The end of the acknowledged writes and the truncate version seen at open; `None`
        /// when a write's outcome is unknown (meta then asks storage).
        length: Option<LengthHint>,
    },
    /// close of write sessions that wrote nothing (3FS's close without `updateLength`): each
    /// `(inode, session)` row of the asking client goes, every length stands. One transaction
    /// for all of them (at most `CLOSE_UNWRITTEN_MAX`), which reads nothing but the request's
    /// idempotency record, so it conflicts with no namespace change.
    CloseUnwritten {
        /// The files and the session ids given at open.
        sessions: Vec<(InodeId, u64)>,
    },
    /// statFs: the cluster's raw capacity and use, as last polled from storage (3FS caches
    /// it too).
    StatFs,
    /// lockDirectory: take or release the directory lock of `path` (`lock.rs`).
    LockDirectory {
        /// The directory (symlinks followed).
        path: String,
        /// What to do.
        action: LockAction,
    },
    /// sync: a length update of an open file; `truncated` after a client-driven truncate.
    Sync {
        /// The file.
        inode: InodeId,
        /// As for `Close`.
        length: Option<LengthHint>,
        /// The writer has just truncated the file (bumps the truncate version).
        truncated: bool,
    },
}

impl MetaOp {
    /// Whether the request changes the namespace (and so needs an idempotency record).
    pub fn mutates(&self) -> bool {
        !matches!(
            self,
            Self::Stat { .. }
                | Self::List { .. }
                | Self::BatchStat { .. }
                | Self::StatFs
                | Self::Open { write: false, .. }
        )
    }

    /// The inode a request is about, when it names one rather than a path (its owner server
    /// takes it first).
    pub fn inode(&self) -> Option<InodeId> {
        match self {
            Self::Close { inode, .. }
            | Self::Sync { inode, .. }
            | Self::ExtendStripe { inode, .. } => Some(*inode),
            _ => None,
        }
    }
}

fn put_str(enc: &mut Encoder, s: &str) {
    enc.bytes(s.as_bytes());
}

fn get_str(dec: &mut Decoder<'_>) -> Result<String, DecodeError> {
    String::from_utf8(dec.bytes()?).map_err(|_| DecodeError::Invalid)
}

impl Wire for MetaOp {
    fn encode(&self, enc: &mut Encoder) {
        match self {
            Self::Stat { path, follow } => {
                enc.u8(0);
                put_str(enc, path);
                follow.encode(enc);
            }
            Self::List { path, after, limit } => {
                enc.u8(1);
                put_str(enc, path);
                after.encode(enc);
                limit.encode(enc);
            }
            Self::Create {
                path,
                perm,
                exclusive,
                session,
            } => {
                enc.u8(2);
                put_str(enc, path);
                perm.encode(enc);
                exclusive.encode(enc);
                session.encode(enc);
            }
            Self::Mkdirs {
                path,
                perm,
                recursive,
            } => {
                enc.u8(3);
                put_str(enc, path);
                perm.encode(enc);
                recursive.encode(enc);
            }
            Self::Symlink { path, target } => {
                enc.u8(4);
                put_str(enc, path);
                put_str(enc, target);
            }
            Self::Mknod {
                path,
                kind,
                perm,
                rdev,
            } => {
                enc.u8(16);
                put_str(enc, path);
                kind.encode(enc);
                perm.encode(enc);
                rdev.encode(enc);
            }
            Self::Hardlink { existing, path } => {
                enc.u8(5);
                put_str(enc, existing);
                put_str(enc, path);
            }
            Self::Remove { path, recursive } => {
                enc.u8(6);
                put_str(enc, path);
                recursive.encode(enc);
            }
            Self::Rename { from, to } => {
                enc.u8(7);
                put_str(enc, from);
                put_str(enc, to);
            }
            Self::Open {
                path,
                write,
                session,
            } => {
                enc.u8(8);
                put_str(enc, path);
                write.encode(enc);
                session.encode(enc);
            }
            Self::Close {
                inode,
                session,
                length,
            } => {
                enc.u8(9);
                inode.encode(enc);
                session.encode(enc);
                length.encode(enc);
            }
            Self::ExtendStripe { inode, chunk } => {
                enc.u8(10);
                inode.encode(enc);
                chunk.encode(enc);
            }
            Self::SetAttr { path, attr } => {
                enc.u8(11);
                put_str(enc, path);
                attr.encode(enc);
            }
            Self::Sync {
                inode,
                length,
                truncated,
            } => {
                enc.u8(13);
                inode.encode(enc);
                length.encode(enc);
                truncated.encode(enc);
            }
            Self::StatFs => enc.u8(15),
            Self::LockDirectory { path, action } => {
                enc.u8(14);
                put_str(enc, path);
                action.encode(enc);
            }
            Self::CloseUnwritten { sessions } => {
                enc.u8(17);
                enc.len(sessions.len());
                for (inode, session) in sessions {
                    inode.encode(enc);
                    session.encode(enc);
                }
            }
            Self::BatchStat { paths } => {
                enc.u8(12);
                enc.len(paths.len());
                for p in paths {
                    put_str(enc, p);
                }
            }
        }
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        match dec.u8()? {
            t @ (0..=7 | 16) => decode_names(t, dec),
            t => decode_rest(t, dec),
        }
    }
}

/// The operations on names (stat, list, create, mkdir, symlink, link, remove, rename, mknod).
fn decode_names(tag: u8, dec: &mut Decoder<'_>) -> Result<MetaOp, DecodeError> {
    use MetaOp as M;
    Ok(match tag {
        0 => M::Stat {
            path: get_str(dec)?,
            follow: Wire::decode(dec)?,
        },
        1 => M::List {
            path: get_str(dec)?,
            after: Wire::decode(dec)?,
            limit: Wire::decode(dec)?,
        },
        2 => M::Create {
            path: get_str(dec)?,
            perm: Wire::decode(dec)?,
            exclusive: Wire::decode(dec)?,
            session: Wire::decode(dec)?,
        },
        3 => M::Mkdirs {
            path: get_str(dec)?,
            perm: Wire::decode(dec)?,
            recursive: Wire::decode(dec)?,
        },
        4 => M::Symlink {
            path: get_str(dec)?,
            target: get_str(dec)?,
        },
        5 => M::Hardlink {
            existing: get_str(dec)?,
            path: get_str(dec)?,
        },
        6 => M::Remove {
            path: get_str(dec)?,
            recursive: Wire::decode(dec)?,
        },
        7 => M::Rename {
            from: get_str(dec)?,
            to: get_str(dec)?,
        },
        16 => M::Mknod {
            path: get_str(dec)?,
            kind: Wire::decode(dec)?,
            perm: Wire::decode(dec)?,
            rdev: Wire::decode(dec)?,
        },
        t => return Err(DecodeError::UnknownTag(t)),
    })
}

/// The rest: sessions, attributes, locks, batches and the file system's statistics.
fn decode_rest(tag: u8, dec: &mut Decoder<'_>) -> Result<MetaOp, DecodeError> {
    use MetaOp as M;
    Ok(match tag {
        8 => M::Open {
            path: get_str(dec)?,
            write: Wire::decode(dec)?,
            session: Wire::decode(dec)?,
        },
        9 => M::Close {
            inode: Wire::decode(dec)?,
            session: Wire::decode(dec)?,
            length: Wire::decode(dec)?,
        },
        10 => M::ExtendStripe {
            inode: Wire::decode(dec)?,
            chunk: Wire::decode(dec)?,
        },
        11 => M::SetAttr {
            path: get_str(dec)?,
            attr: Wire::decode(dec)?,
        },
        15 => M::StatFs,
        14 => M::LockDirectory {
            path: get_str(dec)?,
            action: Wire::decode(dec)?,
        },
        13 => M::Sync {
            inode: Wire::decode(dec)?,
            length: Wire::decode(dec)?,
            truncated: Wire::decode(dec)?,
        },
        12 => {
            let n = dec.len(BATCH_STAT_MAX as u32, 4)?;
            let mut paths = Vec::with_capacity(n);
            for _ in 0..n {
                paths.push(get_str(dec)?);
            }
            M::BatchStat { paths }
        }
        17 => {
            let n = dec.len(CLOSE_UNWRITTEN_MAX as u32, 2)?;
            let mut sessions = Vec::with_capacity(n);
            for _ in 0..n {
                sessions.push((Wire::decode(dec)?, Wire::decode(dec)?));
            }
            M::CloseUnwritten { sessions }
        }
        t => return Err(DecodeError::UnknownTag(t)),
    })
}
