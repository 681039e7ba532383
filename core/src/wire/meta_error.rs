//! Why a namespace operation failed ([`MetaError`]) and its wire encoding.
//!
//! Invariant: `Invalid`'s message travels as a code into a fixed table, so an answer never
//! carries free text; an unknown code decodes as the generic message, so a newer server's new
//! message never makes an answer undecodable. Not here: errno mapping (the FUSE mount's).

use super::codec::{DecodeError, Decoder, Encoder, Wire};
use crate::kv::KvError;

/// Why a namespace operation failed: POSIX-style statuses, plus the KV's own failures (which a
/// caller retries on conflict and answers carefully on `CommitUnknown`).
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum MetaError {
    /// ENOENT.
    NotFound,
    /// EEXIST.
    Exists,
    /// ENOTDIR: a path component, or a rename target, is not a directory.
    NotDir,
    /// EISDIR.
    IsDir,
    /// ENOTEMPTY.
    NotEmpty,
    /// EINVAL: the message says what (root removal, a move into itself, a bad name).
    Invalid(&'static str),
    /// ELOOP: too many symlinks, or nesting deeper than [`DEPTH_MAX`].
    Loop,
    /// ENAMETOOLONG.
    NameTooLong,
    /// EMLINK.
    TooManyLinks,
    /// EPERM: the operation is not allowed on this inode (e.g. hard-linking a directory).
    NotPermitted,
    /// The KV failed.
    Kv(KvError),
    /// A row failed to decode: the store is damaged (never silently skipped).
    Corrupt,
    /// The directory is locked by another client (3FS `kNoLock`, `lock.rs`).
    NoLock,
    /// EACCES: the mode bits deny the caller (`perm.rs`).
    Access,
    /// A length update needs storage's answer first (`length.rs`). Internal to the meta
    /// server: never recorded, never answered.
    LengthUnknown,
}

impl From<KvError> for MetaError {
    fn from(e: KvError) -> Self {
        Self::Kv(e)
    }
}

impl From<DecodeError> for MetaError {
    fn from(_: DecodeError) -> Self {
        Self::Corrupt
    }
}

/// The `Invalid` message for data I/O on a FIFO, device or socket: the kernel of whoever opens
/// one supplies its data, never the file system's chunks.
pub const NO_DATA: &str = "a FIFO, device or socket has no data in the file system";

/// The `Invalid` messages, by wire code (an unknown code decodes as a generic message, so a
/// newer server's new message never makes an answer undecodable).
const INVALID: [&str; 6] = [
    "invalid argument",
    "paths are absolute",
    "the root has no parent",
    "`..` names no entry",
    "a directory cannot move into itself",
    NO_DATA,
];

fn kv_code(e: KvError) -> u8 {
    match e {
        KvError::Conflict => 0,
        KvError::CommitUnknown => 1,
        KvError::TooOld => 2,
        KvError::Unavailable => 3,
        KvError::NoSpace => 4,
    }
}

impl Wire for MetaError {
    fn encode(&self, enc: &mut Encoder) {
        let (tag, arg) = match self {
            Self::NotFound => (0, None),
            Self::Exists => (1, None),
            Self::NotDir => (2, None),
            Self::IsDir => (3, None),
            Self::NotEmpty => (4, None),
            Self::Invalid(m) => (
                5,
                Some(INVALID.iter().position(|x| x == m).unwrap_or(0) as u8),
            ),
            Self::Loop => (6, None),
            Self::NameTooLong => (7, None),
            Self::TooManyLinks => (8, None),
            Self::NotPermitted => (9, None),
            Self::Kv(e) => (10, Some(kv_code(*e))),
            Self::Corrupt => (11, None),
            Self::LengthUnknown => (12, None),
            Self::NoLock => (13, None),
            Self::Access => (14, None),
        };
        enc.u8(tag);
        if let Some(a) = arg {
            enc.u8(a);
        }
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(match dec.u8()? {
            0 => Self::NotFound,
            1 => Self::Exists,
            2 => Self::NotDir,
            3 => Self::IsDir,
            4 => Self::NotEmpty,
            5 => Self::Invalid(
                INVALID
                    .get(dec.u8()? as usize)
                    .copied()
                    .unwrap_or(INVALID[0]),
            ),
            6 => Self::Loop,
            7 => Self::NameTooLong,
            8 => Self::TooManyLinks,
            9 => Self::NotPermitted,
            10 => Self::Kv(match dec.u8()? {
                0 => KvError::Conflict,
                1 => KvError::CommitUnknown,
                2 => KvError::TooOld,
                3 => KvError::Unavailable,
                4 => KvError::NoSpace,
                t => return Err(DecodeError::UnknownTag(t)),
            }),
            11 => Self::Corrupt,
            12 => Self::LengthUnknown,
            13 => Self::NoLock,
            14 => Self::Access,
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}
