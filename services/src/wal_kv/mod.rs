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
//! Both go through the durable-file layer the chunk store shares ([`crate::durable`]: the fs
//! seam, the framing, the power-loss tests' lazy file system); the engine's policy (when to
//! sync, what opening does with damage) stays here.
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
//!   reopened (a failed fsync is never retried: the kernel may have dropped the dirty pages);
//! - a full file system poisons nothing (below).
//!
//! # A full file system
//!
//! A commit is applied in memory before its frame is appended, so an append that fails cannot
//! be taken back: it would poison. Hence the log's blocks are reserved ahead of its end
//! (fallocate KEEP_SIZE, [`AHEAD`] at a time) and a commit is admitted only when its frame fits
//! in them, checked before anything else happens to it; a commit that only sets keys must leave
//! [`RESERVE`] reserved bytes after its frame, one that clears any key (a delete, an unlink or a
//! rename of the meta service) may use them, so that space can still be freed on a full file
//! system. When the reserve cannot grow, the engine first tries a compaction, at most once per
//! change of the log (deletes since make a smaller snapshot), and otherwise refuses the commit
//! with `NoSpace` (nothing was written; retrying helps only once space is freed) and counts it
//! ([`WalKv::no_space_refusals`]). Reads go on; commits
//! succeed again once space is freed (deleted keys compacted away, or files removed elsewhere).
//!
//! The snapshot needs new space while the log still holds its own: on a disk this log filled,
//! a compaction fits once the live keys fit in the log's unused reserve, which it then gives
//! back first. A compaction whose snapshot does not fit is skipped, its partial file cut, the
//! log left as it was; a threshold compaction is then tried again once the log has grown by
//! half.
//!
//! This holds on file systems that allocate at fallocate or write time (ext4, xfs, tmpfs); on
//! one that cannot fallocate, or allocates on overwrite (btrfs, zfs), an append can still meet
//! ENOSPC, and that poisons as any failed write.
//!
//! Not here: replication (etcd is the distributed engine), history before the snapshot a
//! reopen starts from (reads below it are `TooOld`), and telling reordered, unsynced tail pages
//! from media damage: a crash that persists a later unacknowledged frame but not an earlier one
//! refuses to open (the safe side; an operator cuts the log at the reported offset).

mod frame;
mod group;
#[cfg(test)]
mod power_loss;
mod recover;
#[cfg(test)]
mod tests;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use t3fs_core::kv::mem::MemKv;
use t3fs_core::kv::{CommitReq, KeyRange, KvEngine, KvError, KvVersion, Mutation, Value};

use self::frame::LOG_HEADER;
pub use self::group::{GroupStats, SharedWalKv};
use crate::durable::fs::{no_space, DurableFile, DurableFs, StdFs};

/// Commits of history the engine keeps for conflict checks and snapshot reads.
const WINDOW: u64 = 100_000;
/// Log size that triggers a snapshot and an empty log.
pub const COMPACT_AT: u64 = 64 << 20;
const LOG: &str = "wal";
const SNAPSHOT: &str = "snapshot";
const SNAPSHOT_TMP: &str = "snapshot.tmp";
/// The step by which the log's reserved blocks grow ahead of its end (one fallocate per step;
/// the appends change the file's size anyway, so a bigger step would save nothing else).
const AHEAD: u64 = 64 << 10;
/// Reserved log bytes a commit that only sets keys must leave after its frame: what commits
/// that clear keys may still use on a full file system (some 20,000 deletes of 30-byte keys).
pub const RESERVE: u64 = 1 << 20;

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

/// What [`Core::decide`] (and [`SharedWalKv::append`]) did with a commit.
pub enum Decided {
    /// Nothing to write: answered at this version.
    Nothing(KvVersion),
    /// Applied in memory and appended to the log at this version, not yet durable.
    Logged(KvVersion),
    /// The log has no room for it and no compaction was allowed: the request, untouched, for
    /// a call that allows one.
    NoRoom(CommitReq),
}

/// Why a compaction did not happen.
enum CompactError {
    /// The snapshot did not fit: nothing changed (its partial file was cut).
    NoRoom(io::Error),
    /// Anything else: the engine's files are in a state only a reopen settles.
    Failed(io::Error),
}

impl CompactError {
    fn into_inner(self) -> io::Error {
        match self {
            Self::NoRoom(e) | Self::Failed(e) => e,
        }
    }
}

/// The state both forms share: the in-memory engine, the open log, and the durability marks.
struct Core {
    fs: Arc<dyn DurableFs>,
    dir: PathBuf,
    mem: MemKv,
    /// The engine's versions are `mem`'s plus `base`: `mem` restarts at 0 on every open, while
    /// versions must continue where the snapshot and log left off.
    base: u64,
    /// The snapshot version this open started from; older versions have no history here.
    floor: u64,
    /// Shared so that a group commit leader can sync it without holding the engine's lock.
    wal: Arc<dyn DurableFile>,
    wal_bytes: u64,
    /// The log's blocks are reserved up to here (at least `wal_bytes`).
    reserved: u64,
    /// `wal_bytes` when a compaction last did not fit (`None`: the last one did).
    no_room_at: Option<u64>,
    /// Commits refused for want of space.
    refused: u64,
    compact_at: u64,
    poisoned: bool,
    /// The newest version whose writes are durable (in the log or a snapshot).
    durable: u64,
}

impl Core {
    fn open(fs: Arc<dyn DurableFs>, dir: &Path, compact_at: u64) -> io::Result<Self> {
        fs.create_dir_all(dir).map_err(|e| named(dir, e))?;
        let (snap_version, mut mem) = recover::load_snapshot(&*fs, dir)?;
        let base = snap_version - mem.version().0;
        let log_path = dir.join(LOG);
        let at_log = |e| named(&log_path, e);
        let (wal, data) = recover::open_log(&*fs, &log_path)?;
        let (next, good) = recover::replay_log(&mut mem, &log_path, &data, snap_version, base)?;
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
            // Whatever a previous run reserved is unknown: reserved again (cheaply) when needed.
            reserved: good as u64,
            no_room_at: None,
            refused: 0,
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
    ///
    /// Before anything else, the frame must fit in the log's reserved blocks (module docs);
    /// when it does not, `may_compact` allows a compaction to make room (the caller guarantees
    /// no sync of the log runs meanwhile), and without it the request comes back unchanged.
    fn decide(&mut self, mut req: CommitReq, may_compact: bool) -> Result<Decided, KvError> {
        self.check()?;
        if !req.mutations.is_empty() {
            let len = frame::encoded_len(&req.mutations) as u64;
            let adds = req.mutations.iter().all(|m| matches!(m, Mutation::Set(..)));
            if !self.room(len, adds)? {
                if !may_compact {
                    return Ok(Decided::NoRoom(req));
                }
                if !(self.make_room() && self.room(len, adds)?) {
                    return Err(self.refuse());
                }
            }
        }
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

    /// Whether a frame of `len` bytes fits in the log's reserved blocks, leaving [`RESERVE`]
    /// after it when `keep`; reserves more (up to a multiple of [`AHEAD`]) when needed.
    /// `Ok(false)`: the file system has no room for that. Nothing is written either way.
    fn room(&mut self, len: u64, keep: bool) -> Result<bool, KvError> {
        let need = self.wal_bytes + len + if keep { RESERVE } else { 0 };
        if need <= self.reserved {
            return Ok(true);
        }
        // From the log's end, not from `reserved`: reserving blocks already reserved is cheap,
        // and after a reopen what a previous run reserved is unknown. A whole step, or on a
        // file system too full for that, just what is needed.
        let step = need.next_multiple_of(AHEAD);
        let mut reserved = self
            .wal
            .reserve(self.wal_bytes, step - self.wal_bytes)
            .map(|()| step);
        if reserved.as_ref().is_err_and(no_space) && step > need {
            reserved = self
                .wal
                .reserve(self.wal_bytes, need - self.wal_bytes)
                .map(|()| need);
        }
        match reserved {
            Ok(to) => {
                self.reserved = to;
                Ok(true)
            }
            Err(e) if no_space(&e) => Ok(false),
            Err(e) => {
                // Nothing was written or applied: this commit fails, the engine goes on.
                tracing::error!("wal kv {}: reserving log space: {e}", self.dir.display());
                Err(KvError::Unavailable)
            }
        }
    }

    /// No room for a commit: compacts, if the log changed since the last compaction that did
    /// not fit (deletes since make a smaller snapshot). Whether it compacted. The caller
    /// guarantees no sync of the log runs meanwhile.
    fn make_room(&mut self) -> bool {
        if self.wal_bytes <= LOG_HEADER.len() as u64 || self.no_room_at == Some(self.wal_bytes) {
            return false;
        }
        let (version, bytes) = self.snapshot();
        // When the snapshot fits in the log's unused reserved blocks, they go first, to make
        // room for it (on a file system filled by this log, nothing else would): they hold
        // nothing (the log ends at `wal_bytes`), and a compaction empties the log anyway. Not
        // otherwise: the reserve is what deletes use while the disk stays full.
        let unused = self.reserved - self.wal_bytes;
        if bytes.len() as u64 <= unused && self.wal.set_len(self.wal_bytes).is_ok() {
            self.reserved = self.wal_bytes;
        }
        match self.compact_into(version, &bytes) {
            Ok(()) => true,
            Err(CompactError::NoRoom(_)) => {
                // Reserve again what the attempt gave back, for the deletes that may follow.
                let _ = self.room(0, true);
                false
            }
            Err(CompactError::Failed(_)) => {
                self.poisoned = true;
                false
            }
        }
    }

    /// Counts and answers a commit refused for want of space.
    fn refuse(&mut self) -> KvError {
        if self.refused == 0 || self.refused.is_power_of_two() {
            tracing::warn!(
                "wal kv {}: the file system is full; commits refused (nothing written, \
                 NoSpace): {} so far",
                self.dir.display(),
                self.refused + 1
            );
        }
        self.refused += 1;
        KvError::NoSpace
    }

    /// Compacts when the log has grown past its limit (and, after a compaction that did not
    /// fit, by half again since); a failure other than no room poisons (the commits are
    /// durable, but the log's state is unknown).
    fn maybe_compact(&mut self) {
        if self.wal_bytes < self.compact_at {
            return;
        }
        if let Some(at) = self.no_room_at {
            if self.wal_bytes < at + at / 2 {
                return;
            }
        }
        if let Err(CompactError::Failed(_)) = self.compact() {
            self.poisoned = true;
        }
    }

    /// Writes every live key as the snapshot and empties the log. The caller guarantees no
    /// sync of the log runs meanwhile. A snapshot that does not fit changes nothing
    /// ([`CompactError::NoRoom`]).
    fn compact(&mut self) -> Result<(), CompactError> {
        let (version, bytes) = self.snapshot();
        self.compact_into(version, &bytes)
    }

    /// The newest version and a snapshot file of every live key at it.
    fn snapshot(&self) -> (u64, Vec<u8>) {
        let version = self.version();
        let sets: Vec<Mutation> = self
            .mem
            .latest()
            .into_iter()
            .map(|(k, v)| Mutation::Set(k, v))
            .collect();
        (version, frame::encode_snapshot(version, &sets))
    }

    /// [`Core::compact`] with the snapshot of `version` made.
    fn compact_into(&mut self, version: u64, bytes: &[u8]) -> Result<(), CompactError> {
        debug_assert_eq!(version, self.version());
        let (tmp, snap) = (self.dir.join(SNAPSHOT_TMP), self.dir.join(SNAPSHOT));
        let failed = |path: &Path| {
            let path = path.to_path_buf();
            move |e| CompactError::Failed(named(&path, e))
        };
        let f = self.fs.create(&tmp).map_err(|e| self.no_room(&tmp, e))?;
        // Reserved first: on a full file system this fails before megabytes are written.
        let written = f
            .reserve(0, bytes.len() as u64)
            .and_then(|()| f.append(bytes))
            .and_then(|()| f.sync_data());
        if let Err(e) = written {
            if no_space(&e) {
                // Nothing refers to the partial snapshot: cut, its blocks go back.
                let _ = f.set_len(0);
            }
            return Err(self.no_room(&tmp, e));
        }
        drop(f);
        self.fs.rename(&tmp, &snap).map_err(failed(&snap))?;
        self.fs.sync_dir(&self.dir).map_err(failed(&self.dir))?;
        // The snapshot is durable, and with it every commit up to `version` (group commit may
        // have appended frames not yet synced: they are in it).
        self.durable = version;
        // Only now is the log redundant; a crash before its truncation is durable leaves frames
        // the snapshot already holds, which opening skips by version.
        let log = self.dir.join(LOG);
        self.wal
            .set_len(LOG_HEADER.len() as u64)
            .and_then(|()| self.wal.sync_data())
            .map_err(failed(&log))?;
        self.wal_bytes = LOG_HEADER.len() as u64;
        self.reserved = self.wal_bytes;
        self.no_room_at = None;
        Ok(())
    }

    /// A failure writing the snapshot file `tmp`: no room when the file system is full (the
    /// log stays as it is; noted, so that the next try waits for the log to change).
    fn no_room(&mut self, tmp: &Path, e: io::Error) -> CompactError {
        if !no_space(&e) {
            return CompactError::Failed(named(tmp, e));
        }
        tracing::warn!(
            "wal kv {}: no room to compact: {e}; the log stays as it is",
            self.dir.display()
        );
        self.no_room_at = Some(self.wal_bytes);
        // Keeps its errno, so that callers can tell no space from a failure.
        CompactError::NoRoom(e)
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
    pub fn open_on(fs: Arc<dyn DurableFs>, dir: &Path, compact_at: u64) -> io::Result<Self> {
        Core::open(fs, dir, compact_at).map(|core| Self { core })
    }

    /// Bytes in the log now (its header included).
    pub fn wal_bytes(&self) -> u64 {
        self.core.wal_bytes
    }

    /// Writes every live key as the snapshot and empties the log. When the snapshot does not
    /// fit on the file system the error says so (no space) and nothing changed; any other
    /// error leaves the engine usable only after a reopen.
    pub fn compact(&mut self) -> io::Result<()> {
        self.core.compact().map_err(|e| {
            if let CompactError::Failed(_) = e {
                self.core.poisoned = true;
            }
            e.into_inner()
        })
    }

    /// Commits refused so far because the file system had no room for them (answered
    /// `NoSpace`, nothing written).
    pub fn no_space_refusals(&self) -> u64 {
        self.core.refused
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
        let v = match self.core.decide(req, true)? {
            Decided::Nothing(v) => return Ok(v),
            Decided::Logged(v) => v,
            Decided::NoRoom(_) => unreachable!("a compaction was allowed"),
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
