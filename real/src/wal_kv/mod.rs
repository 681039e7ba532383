//! The embedded persistent KV engine for a single-host deployment: the in-memory MVCC engine of
//! t3fs-core (which already decides reads, versions and conflicts) made durable by a redo log
//! and a snapshot in one directory.
//!
//! Why not an embedded database crate: the KV contract needs MVCC read versions and
//! serializable conflict checks, which `MemKv` implements and the conformance suite checks;
//! persistence only has to make committed writes survive a crash. A redo log of committed
//! mutations plus a periodic snapshot does that with no dependency, where a database crate
//! would add a large build and a second concurrency model to reason about.
//!
//! Two forms share one core: [`WalKv`] (`&mut self`, one fdatasync per commit) and
//! [`SharedWalKv`] (a handle cloned across threads, group commit: see `group.rs`).
//!
//! Files (formats in `frame.rs`): `wal`, one frame per committed transaction carrying its
//! commit version; `snapshot`, one frame with every live key and the version it reflects,
//! replaced atomically (written as `snapshot.tmp`, fdatasync'd, renamed, directory fsync'd).
//!
//! Invariants:
//! - a commit is acknowledged only after its frame (or a snapshot containing it) is durable,
//!   and a read version never exceeds the newest durable commit, so nobody reads a write that a
//!   power loss could take back;
//! - every name the engine relies on is durable before it is relied on: the directory is
//!   fsync'd after the log is created and after a snapshot is renamed into place, and the log
//!   is emptied only after that;
//! - commit versions strictly increase across reopens: opening resumes at the snapshot's
//!   version plus the frames after it, which must continue it one by one (a gap, e.g. a lost
//!   snapshot, refuses to open);
//! - opening cuts only a torn tail (a last frame running past the end or failing its checksum
//!   with no whole frame after it: a crash mid-append of unacknowledged commits); a damaged
//!   frame with a whole frame after it, or an unreadable or damaged snapshot, refuses to open
//!   with an error naming the file (and the byte offset), never silently dropping commits;
//! - a failed write or sync poisons the engine: every later call is `Unavailable` until it is
//!   reopened (a failed fsync is never retried: the kernel may have dropped the dirty pages).
//!
//! Not here: replication (etcd is the distributed engine), history before the snapshot a
//! reopen starts from (reads below it are `TooOld`), and telling reordered, unsynced tail pages
//! from media damage: a crash that persists a later unacknowledged frame but not an earlier one
//! refuses to open (the safe side; an operator cuts the log at the reported offset).

mod frame;
pub mod fs;
mod group;
#[cfg(test)]
mod lazy_fs;
#[cfg(test)]
mod power_loss;
#[cfg(test)]
mod tests;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use t3fs_core::kv::mem::MemKv;
use t3fs_core::kv::{CommitReq, KeyRange, KvEngine, KvError, KvVersion, Mutation, Value};

use self::frame::LOG_HEADER;
use self::fs::{Fs, LogFile, StdFs};
pub use self::group::{GroupStats, SharedWalKv};

/// Commits of history the engine keeps for conflict checks and snapshot reads.
const WINDOW: u64 = 100_000;
/// Log size that triggers a snapshot and an empty log.
pub const COMPACT_AT: u64 = 64 << 20;
const LOG: &str = "wal";
const SNAPSHOT: &str = "snapshot";
const SNAPSHOT_TMP: &str = "snapshot.tmp";

/// An I/O error naming the file it happened on.
fn named(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// A file whose contents are not what the engine wrote.
fn damaged(path: &Path, why: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {why}", path.display()),
    )
}

/// Applies recovered writes as one commit of `mem`.
fn replay(mem: &mut MemKv, mutations: Vec<Mutation>) -> Result<(), KvError> {
    let req = CommitReq {
        read_version: mem.read_version()?,
        read_conflicts: Vec::new(),
        mutations,
    };
    mem.commit(req).map(|_| ())
}

/// What [`Core::decide`] did with a commit.
enum Decided {
    /// Nothing to write: answered at this version.
    Nothing(KvVersion),
    /// Applied in memory and appended to the log at this version, not yet durable.
    Logged(KvVersion),
}

/// The state both forms share: the in-memory engine, the open log, and the durability marks.
struct Core {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    mem: MemKv,
    /// The engine's versions are `mem`'s plus `base`: `mem` restarts at 0 on every open, while
    /// versions must continue where the snapshot and log left off.
    base: u64,
    /// The snapshot version this open started from; older versions have no history here.
    floor: u64,
    /// Shared so that a group commit leader can sync it without holding the engine's lock.
    wal: Arc<dyn LogFile>,
    wal_bytes: u64,
    compact_at: u64,
    poisoned: bool,
    /// The newest version whose writes are durable (in the log or a snapshot).
    durable: u64,
}

impl Core {
    fn open(fs: Arc<dyn Fs>, dir: &Path, compact_at: u64) -> io::Result<Self> {
        fs.create_dir_all(dir).map_err(|e| named(dir, e))?;
        let snap_path = dir.join(SNAPSHOT);
        let (snap_version, sets) = match fs.read(&snap_path) {
            Ok(bytes) => frame::parse_snapshot(&bytes).map_err(|why| damaged(&snap_path, why))?,
            // No snapshot yet: only the log holds commits. Any other error is not "no snapshot":
            // the log was emptied when the snapshot was written, so reading on would lose it.
            Err(e) if e.kind() == io::ErrorKind::NotFound => (0, Vec::new()),
            Err(e) => return Err(named(&snap_path, e)),
        };
        let mut mem = MemKv::new(WINDOW);
        if !sets.is_empty() {
            if snap_version == 0 {
                return Err(damaged(&snap_path, "live keys at version 0"));
            }
            replay(&mut mem, sets).map_err(|e| damaged(&snap_path, e))?;
        }
        let base = snap_version - mem.version().0;
        let log_path = dir.join(LOG);
        let at_log = |e| named(&log_path, e);
        let wal: Arc<dyn LogFile> = fs.open_append(&log_path).map_err(at_log)?.into();
        let mut data = fs.read(&log_path).map_err(at_log)?;
        if data.len() < LOG_HEADER.len() {
            if !LOG_HEADER.starts_with(&data) {
                return Err(damaged(&log_path, "not a t3fs log (bad header)"));
            }
            // A log whose creation a crash cut short: it never held a frame.
            wal.set_len(0).map_err(at_log)?;
            wal.append(LOG_HEADER).map_err(at_log)?;
            wal.sync_data().map_err(at_log)?;
            data = LOG_HEADER.to_vec();
        } else if !data.starts_with(LOG_HEADER) {
            return Err(damaged(&log_path, "not a t3fs log (bad header)"));
        }
        let (commits, good) = frame::scan(&data, LOG_HEADER.len()).map_err(|at| {
            damaged(
                &log_path,
                format!(
                    "damaged frame at byte {at} with whole frames after it (possibly \
                     acknowledged commits); refusing to open"
                ),
            )
        })?;
        let mut next = snap_version + 1;
        for c in commits {
            if next == snap_version + 1 && c.version <= snap_version {
                // Already in the snapshot: a crash came between its rename and the log's
                // truncation.
                continue;
            }
            if c.version != next {
                let hint = if next == snap_version + 1 {
                    " (the commits between are missing: a lost snapshot?)"
                } else {
                    ""
                };
                let why = format!(
                    "frame at byte {} has version {}, expected {next}{hint}",
                    c.offset, c.version
                );
                return Err(damaged(&log_path, why));
            }
            replay(&mut mem, c.mutations).map_err(|e| damaged(&log_path, e))?;
            if mem.version().0 + base != next {
                let why = format!("frame at byte {} writes nothing", c.offset);
                return Err(damaged(&log_path, why));
            }
            next += 1;
        }
        if good < data.len() {
            // Cut the torn tail so new frames follow the last whole one.
            wal.set_len(good as u64).map_err(at_log)?;
            wal.sync_data().map_err(at_log)?;
        }
        // The log's name, when this call created it, must survive a power loss too.
        fs.sync_dir(dir).map_err(|e| named(dir, e))?;
        Ok(Self {
            fs,
            dir: dir.to_path_buf(),
            mem,
            base,
            floor: snap_version,
            wal,
            wal_bytes: good as u64,
            compact_at,
            poisoned: false,
            durable: next - 1,
        })
    }

    /// The newest version applied in memory (durable or not).
    fn version(&self) -> u64 {
        self.mem.version().0 + self.base
    }

    fn to_mem(&self, at: KvVersion) -> Result<KvVersion, KvError> {
        if at.0 < self.floor {
            return Err(KvError::TooOld);
        }
        Ok(KvVersion(at.0 - self.base))
    }

    fn check(&self) -> Result<(), KvError> {
        if self.poisoned {
            Err(KvError::Unavailable)
        } else {
            Ok(())
        }
    }

    fn read_version(&self) -> Result<KvVersion, KvError> {
        self.check()?;
        Ok(KvVersion(self.durable))
    }

    fn get(&mut self, at: KvVersion, key: &[u8]) -> Result<Option<Value>, KvError> {
        self.check()?;
        let at = self.to_mem(at)?;
        self.mem.get(at, key)
    }

    fn range(
        &mut self,
        at: KvVersion,
        range: &KeyRange,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Value)>, KvError> {
        self.check()?;
        let at = self.to_mem(at)?;
        self.mem.range(at, range, limit)
    }

    /// Lets the in-memory engine decide `req` (conflicts, version) and appends an accepted
    /// commit's frame to the log. Only a commit it accepts is logged; the caller acknowledges
    /// it once the log is durable up to the returned version.
    fn decide(&mut self, mut req: CommitReq) -> Result<Decided, KvError> {
        self.check()?;
        req.read_version = self.to_mem(req.read_version)?;
        if req.mutations.is_empty() {
            // `MemKv` answers at the read version and writes nothing: nothing to make durable.
            let v = self.mem.commit(req)?;
            return Ok(Decided::Nothing(KvVersion(v.0 + self.base)));
        }
        let version = self.version() + 1;
        let bytes = frame::encode(version, &req.mutations);
        let v = self.mem.commit(req)?;
        debug_assert_eq!(v.0 + self.base, version);
        if self.wal.append(&bytes).is_err() {
            // Applied in memory, maybe (partly) on disk: the caller must treat it as unknown,
            // and no one may read it until a reopen settles what the disk holds.
            self.poisoned = true;
            return Err(KvError::CommitUnknown);
        }
        self.wal_bytes += bytes.len() as u64;
        Ok(Decided::Logged(KvVersion(version)))
    }

    /// Compacts when the log has grown past its limit; a failure poisons (the commits are
    /// durable, but the log's state is unknown).
    fn maybe_compact(&mut self) {
        if self.wal_bytes >= self.compact_at && self.compact().is_err() {
            self.poisoned = true;
        }
    }

    /// Writes every live key as the snapshot and empties the log. The caller guarantees no
    /// sync of the log runs meanwhile.
    fn compact(&mut self) -> io::Result<()> {
        let version = self.version();
        let sets: Vec<Mutation> = self
            .mem
            .latest()
            .into_iter()
            .map(|(k, v)| Mutation::Set(k, v))
            .collect();
        let (tmp, snap) = (self.dir.join(SNAPSHOT_TMP), self.dir.join(SNAPSHOT));
        let f = self.fs.create(&tmp).map_err(|e| named(&tmp, e))?;
        f.append(&frame::encode_snapshot(version, &sets))
            .and_then(|()| f.sync_data())
            .map_err(|e| named(&tmp, e))?;
        drop(f);
        self.fs.rename(&tmp, &snap).map_err(|e| named(&snap, e))?;
        self.fs
            .sync_dir(&self.dir)
            .map_err(|e| named(&self.dir, e))?;
        // The snapshot is durable, and with it every commit up to `version` (group commit may
        // have appended frames not yet synced: they are in it).
        self.durable = version;
        // Only now is the log redundant; a crash before its truncation is durable leaves frames
        // the snapshot already holds, which opening skips by version.
        let log = self.dir.join(LOG);
        self.wal
            .set_len(LOG_HEADER.len() as u64)
            .and_then(|()| self.wal.sync_data())
            .map_err(|e| named(&log, e))?;
        self.wal_bytes = LOG_HEADER.len() as u64;
        Ok(())
    }
}

/// The engine, for one owner: every commit fdatasyncs the log before it returns.
pub struct WalKv {
    core: Core,
}

impl WalKv {
    /// Opens (or creates) the engine in `dir`, recovering every acknowledged commit.
    pub fn open(dir: &Path) -> io::Result<Self> {
        Self::open_with(dir, COMPACT_AT)
    }

    /// [`WalKv::open`] with the log size that triggers compaction.
    pub fn open_with(dir: &Path, compact_at: u64) -> io::Result<Self> {
        Self::open_on(Arc::new(StdFs), dir, compact_at)
    }

    /// [`WalKv::open_with`] on the file system `fs`.
    pub fn open_on(fs: Arc<dyn Fs>, dir: &Path, compact_at: u64) -> io::Result<Self> {
        Core::open(fs, dir, compact_at).map(|core| Self { core })
    }

    /// Bytes in the log now (its header included).
    pub fn wal_bytes(&self) -> u64 {
        self.core.wal_bytes
    }

    /// Writes every live key as the snapshot and empties the log.
    pub fn compact(&mut self) -> io::Result<()> {
        self.core.compact()
    }

    /// The shareable form, with group commit.
    pub fn into_shared(self) -> SharedWalKv {
        SharedWalKv::from_core(self.core)
    }
}

impl KvEngine for WalKv {
    fn read_version(&mut self) -> Result<KvVersion, KvError> {
        self.core.read_version()
    }

    fn get(&mut self, at: KvVersion, key: &[u8]) -> Result<Option<Value>, KvError> {
        self.core.get(at, key)
    }

    fn range(
        &mut self,
        at: KvVersion,
        range: &KeyRange,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Value)>, KvError> {
        self.core.range(at, range, limit)
    }

    fn commit(&mut self, req: CommitReq) -> Result<KvVersion, KvError> {
        let v = match self.core.decide(req)? {
            Decided::Nothing(v) => return Ok(v),
            Decided::Logged(v) => v,
        };
        if self.core.wal.sync_data().is_err() {
            self.core.poisoned = true;
            return Err(KvError::CommitUnknown);
        }
        self.core.durable = v.0;
        self.core.maybe_compact();
        Ok(v)
    }
}
