//! Meta requests as data: the operations a client sends a meta server ([`MetaOp`]), their
//! answers ([`MetaAnswer`]), their wire encodings, and [`execute`], which runs one request as
//! the body of one KV transaction with exactly-once semantics.
//!
//! Exactly-once: every mutating request writes an idempotency record (`IDEM` + client +
//! request id) holding its answer, in the same transaction as its effect. A retry, after a lost
//! reply or a `CommitUnknown`, reads the record first and returns the stored answer without
//! applying anything again, even if the namespace has moved on since (the file it created was
//! removed, the name it renamed was renamed again). A request that fails with a POSIX error
//! records that error too (and nothing else): otherwise a duplicate of it delivered late would
//! run again and could succeed after its client was told it failed (found by the swarm, seed
//! 200: a `remove` answered ENOENT later removed a symlink created after it). Read-only
//! requests write nothing.
//! Invariant: a request's outcome depends only on the KV rows it reads and on the `PathOp`, so
//! replaying it against the same rows gives the same answer and the same writes (the meta
//! server relies on this; see `server.rs`).
//!
//! Not here: expiry of idempotency records (`idem.rs`), retries (the caller's).

use super::keys::idem_key;
use super::{DirEntry, Inode, MetaError, Namespace, PathOp};
use crate::kv::{KvEngine, KvError};
use crate::limits::DIR_LIST_PAGE_MAX;
use crate::mgmtd::store::{decode, encode};
use crate::msg::codec::{decode_list_max, encode_list, DecodeError, Decoder, Encoder, Wire};

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
        attr: super::SetAttr,
    },
    /// stat of several paths (symlinks followed), each answered on its own.
    BatchStat {
        /// The paths (at most `BATCH_STAT_MAX`).
        paths: Vec<String>,
    },
    /// Grow `inode`'s dynamic stripe to cover chunk index `chunk` (3FS setAttr extendStripe).
    ExtendStripe {
        /// The file.
        inode: crate::ids::InodeId,
        /// The chunk index about to be written.
        chunk: u64,
    },
    /// close of write session `session` on `inode`, with the writer's length hint.
    Close {
        /// The file.
        inode: crate::ids::InodeId,
        /// The session id given at open.
        session: u64,
        /// The end of the acknowledged writes and the truncate version seen at open; `None`
        /// when a write's outcome is unknown (meta then asks storage).
        length: Option<super::length::LengthHint>,
    },
    /// statFs: the cluster's raw capacity and use, as last polled from storage (3FS caches
    /// it too).
    StatFs,
    /// lockDirectory: take or release the directory lock of `path` (`lock.rs`).
    LockDirectory {
        /// The directory (symlinks followed).
        path: String,
        /// What to do.
        action: super::lock::LockAction,
    },
    /// sync: a length update of an open file; `truncated` after a client-driven truncate.
    Sync {
        /// The file.
        inode: crate::ids::InodeId,
        /// As for `Close`.
        length: Option<super::length::LengthHint>,
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
    pub fn inode(&self) -> Option<crate::ids::InodeId> {
        match self {
            Self::Close { inode, .. }
            | Self::Sync { inode, .. }
            | Self::ExtendStripe { inode, .. } => Some(*inode),
            _ => None,
        }
    }

    /// The most inodes the request can make: the ids a server reserves for it.
    pub fn ids_needed(&self) -> u64 {
        match self {
            Self::Create { .. } | Self::Symlink { .. } => 1,
            Self::Mkdirs { path, .. } => super::split_path(path).map_or(0, |p| p.len() as u64),
            _ => 0,
        }
    }
}

/// A successful answer.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum MetaAnswer {
    /// The inode the request found or made.
    Inode(Inode),
    /// A listing page: names and entries in name order.
    Entries(Vec<(Vec<u8>, DirEntry)>),
    /// Done (remove, rename).
    Done,
    /// A batch stat: one result per path, in request order.
    Stats(Vec<Result<Inode, MetaError>>),
    /// statFs.
    StatFs(FsStat),
}

/// statFs's answer: raw bytes over every target (each replica counts).
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct FsStat {
    /// Capacity.
    pub capacity: u64,
    /// Committed chunk data.
    pub used: u64,
    /// Capacity not used.
    pub free: u64,
}
crate::wire_struct!(FsStat {
    capacity,
    used,
    free
});

/// The answer to one request.
pub type MetaResult = Result<MetaAnswer, MetaError>;

/// Runs `op` on `ns` with exactly-once semantics (module docs). The caller commits.
pub fn execute<E: KvEngine + ?Sized>(
    ns: &mut Namespace<'_, '_, E>,
    op: &MetaOp,
    p: PathOp,
) -> MetaResult {
    execute_with(ns, op, p, true)
}

/// [`execute`], or, when `!exactly_once` (the planted bug `meta-skip-idempotency`), the bare
/// operation without its record.
pub fn execute_with<E: KvEngine + ?Sized>(
    ns: &mut Namespace<'_, '_, E>,
    op: &MetaOp,
    p: PathOp,
    exactly_once: bool,
) -> MetaResult {
    if !op.mutates() || !exactly_once {
        return apply(ns, op, p);
    }
    let idem = idem_key(p.client, p.request);
    if let Some(stored) = ns.txn().get(&idem)? {
        return decode::<super::idem::IdemRecord>(&stored)
            .map_err(MetaError::from)?
            .result;
    }
    let result = apply(ns, op, p);
    match &result {
        // The KV's own failures and damaged rows are not outcomes: nothing is recorded.
        // Nor is a length update that needs storage's answer first (the server asks, then
        // runs the request again).
        Err(MetaError::Kv(_) | MetaError::Corrupt | MetaError::LengthUnknown) => return result,
        // A POSIX error keeps its reads (so a change to them aborts the record) but none of
        // the writes made before the error was found (mkdir -p's parents, say).
        Err(_) => ns.txn().discard_writes(),
        Ok(_) => {}
    }
    let record = super::idem::IdemRecord { at: p.now, result };
    ns.txn().set(&idem, &encode(&record));
    record.result
}

fn apply<E: KvEngine + ?Sized>(
    ns: &mut Namespace<'_, '_, E>,
    op: &MetaOp,
    p: PathOp,
) -> MetaResult {
    use MetaAnswer::{Done, Entries, Inode as I};
    Ok(match op {
        MetaOp::Stat { path, follow } => I(ns.stat(path, *follow)?),
        // A page at most `DIR_LIST_PAGE_MAX` long, whatever the limit asked: the caller asks
        // again after the last name.
        MetaOp::List { path, after, limit } => {
            let limit = (*limit).min(DIR_LIST_PAGE_MAX) as usize;
            Entries(ns.list(path, after, limit)?)
        }
        MetaOp::Create {
            path,
            perm,
            exclusive,
        } => I(ns.create(path, *perm, *exclusive, p)?),
        MetaOp::Mkdirs {
            path,
            perm,
            recursive,
        } => I(ns.mkdirs(path, *perm, *recursive, p)?),
        MetaOp::Symlink { path, target } => I(ns.symlink(path, target, p)?),
        MetaOp::Hardlink { existing, path } => I(ns.hardlink(existing, path, p)?),
        MetaOp::Remove { path, recursive } => {
            ns.remove(path, *recursive, p)?;
            Done
        }
        MetaOp::Rename { from, to } => {
            ns.rename(from, to, p)?;
            Done
        }
        MetaOp::Open {
            path,
            write,
            session,
        } => I(ns.open(path, *write, *session, p)?),
        MetaOp::Close {
            inode,
            session,
            length,
        } => {
            ns.close(*inode, *session, *length, p)?;
            Done
        }
        MetaOp::ExtendStripe { inode, chunk } => I(ns.extend_stripe(*inode, *chunk, p)?),
        MetaOp::Sync {
            inode,
            length,
            truncated,
        } => I(ns.sync(*inode, *length, *truncated, p.now)?),
        MetaOp::LockDirectory { path, action } => {
            I(ns.lock_directory(path, *action, p.client, p.now)?)
        }
        MetaOp::StatFs => MetaAnswer::StatFs(ns.space()),
        MetaOp::SetAttr { path, attr } => I(ns.setattr(path, *attr, p)?),
        MetaOp::BatchStat { paths } => MetaAnswer::Stats(ns.batch_stat(paths)?),
    })
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
            } => {
                enc.u8(2);
                put_str(enc, path);
                perm.encode(enc);
                exclusive.encode(enc);
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
        Ok(match dec.u8()? {
            0 => Self::Stat {
                path: get_str(dec)?,
                follow: Wire::decode(dec)?,
            },
            1 => Self::List {
                path: get_str(dec)?,
                after: Wire::decode(dec)?,
                limit: Wire::decode(dec)?,
            },
            2 => Self::Create {
                path: get_str(dec)?,
                perm: Wire::decode(dec)?,
                exclusive: Wire::decode(dec)?,
            },
            3 => Self::Mkdirs {
                path: get_str(dec)?,
                perm: Wire::decode(dec)?,
                recursive: Wire::decode(dec)?,
            },
            4 => Self::Symlink {
                path: get_str(dec)?,
                target: get_str(dec)?,
            },
            5 => Self::Hardlink {
                existing: get_str(dec)?,
                path: get_str(dec)?,
            },
            6 => Self::Remove {
                path: get_str(dec)?,
                recursive: Wire::decode(dec)?,
            },
            7 => Self::Rename {
                from: get_str(dec)?,
                to: get_str(dec)?,
            },
            8 => Self::Open {
                path: get_str(dec)?,
                write: Wire::decode(dec)?,
                session: Wire::decode(dec)?,
            },
            9 => Self::Close {
                inode: Wire::decode(dec)?,
                session: Wire::decode(dec)?,
                length: Wire::decode(dec)?,
            },
            10 => Self::ExtendStripe {
                inode: Wire::decode(dec)?,
                chunk: Wire::decode(dec)?,
            },
            11 => Self::SetAttr {
                path: get_str(dec)?,
                attr: Wire::decode(dec)?,
            },
            15 => Self::StatFs,
            14 => Self::LockDirectory {
                path: get_str(dec)?,
                action: Wire::decode(dec)?,
            },
            13 => Self::Sync {
                inode: Wire::decode(dec)?,
                length: Wire::decode(dec)?,
                truncated: Wire::decode(dec)?,
            },
            12 => {
                let n = dec.len(super::BATCH_STAT_MAX as u32, 4)?;
                let mut paths = Vec::with_capacity(n);
                for _ in 0..n {
                    paths.push(get_str(dec)?);
                }
                Self::BatchStat { paths }
            }
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}

/// A listing row on the wire.
#[derive(Clone, Debug, Eq, PartialEq)]
struct Row(Vec<u8>, DirEntry);

impl Wire for Row {
    fn encode(&self, enc: &mut Encoder) {
        self.0.encode(enc);
        self.1.encode(enc);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(Self(Wire::decode(dec)?, Wire::decode(dec)?))
    }
}

impl Wire for MetaAnswer {
    fn encode(&self, enc: &mut Encoder) {
        match self {
            Self::Inode(i) => {
                enc.u8(0);
                i.encode(enc);
            }
            Self::Entries(rows) => {
                enc.u8(1);
                let rows: Vec<Row> = rows
                    .iter()
                    .map(|(n, e)| Row(n.clone(), e.clone()))
                    .collect();
                encode_list(enc, &rows);
            }
            Self::Done => enc.u8(2),
            Self::StatFs(s) => {
                enc.u8(4);
                s.encode(enc);
            }
            Self::Stats(rs) => {
                enc.u8(3);
                enc.len(rs.len());
                for r in rs {
                    match r {
                        Ok(i) => {
                            enc.u8(0);
                            i.encode(enc);
                        }
                        Err(e) => {
                            enc.u8(1);
                            e.encode(enc);
                        }
                    }
                }
            }
        }
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(match dec.u8()? {
            0 => Self::Inode(Wire::decode(dec)?),
            // A page: the server answers at most `DIR_LIST_PAGE_MAX` names.
            1 => Self::Entries(
                decode_list_max::<Row>(dec, DIR_LIST_PAGE_MAX)?
                    .into_iter()
                    .map(|r| (r.0, r.1))
                    .collect(),
            ),
            2 => Self::Done,
            4 => Self::StatFs(Wire::decode(dec)?),
            3 => {
                let n = dec.len(super::BATCH_STAT_MAX as u32, 2)?;
                let mut rs = Vec::with_capacity(n);
                for _ in 0..n {
                    rs.push(match dec.u8()? {
                        0 => Ok(Wire::decode(dec)?),
                        1 => Err(Wire::decode(dec)?),
                        t => return Err(DecodeError::UnknownTag(t)),
                    });
                }
                Self::Stats(rs)
            }
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}

/// The `Invalid` messages, by wire code (an unknown code decodes as a generic message, so a
/// newer server's new message never makes an answer undecodable).
const INVALID: [&str; 5] = [
    "invalid argument",
    "paths are absolute",
    "the root has no parent",
    "`..` names no entry",
    "a directory cannot move into itself",
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

impl Wire for MetaResult {
    fn encode(&self, enc: &mut Encoder) {
        match self {
            Ok(a) => {
                enc.u8(0);
                a.encode(enc);
            }
            Err(e) => {
                enc.u8(1);
                e.encode(enc);
            }
        }
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        match dec.u8()? {
            0 => Ok(Ok(Wire::decode(dec)?)),
            1 => Ok(Err(Wire::decode(dec)?)),
            t => Err(DecodeError::UnknownTag(t)),
        }
    }
}
