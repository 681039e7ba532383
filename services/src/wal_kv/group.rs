//! Group commit: the engine shared by threads, where concurrent commits share one fdatasync.
//!
//! A committer takes the lock, lets the in-memory engine decide its commit, appends the frame,
//! and then waits until the durable version covers its commit version. Frames are appended in
//! version order under the lock, so "durable up to version v" means "the log is synced past the
//! frame of v". When nobody is syncing, a waiter becomes the leader: it notes the newest
//! appended version, releases the lock, fdatasyncs (covering every frame appended before the
//! call, its own and everyone else's), retakes the lock, raises the durable version to what it
//! noted and wakes everyone. Commits appended during that sync wait for the next leader, so
//! under load one sync serves every commit that arrived while the previous one ran.
//!
//! Invariants: a commit is acknowledged only once `durable >= its version`; read versions are
//! the durable version, so a transaction never reads a commit a power loss could take back
//! (an unsynced commit still conflicts with transactions that read what it wrote); at most one
//! sync runs at a time, and compaction (which truncates the log) runs only while none does; a
//! failed sync or append poisons the engine, and every waiter not yet covered gets
//! `CommitUnknown` (its frame may or may not be on disk). A commit the log has no room for
//! (module docs of `wal_kv`) waits until no sync runs, lets a compaction make room, and is
//! refused (`NoSpace`, nothing written) when that does not help; the engine goes on.
//!
//! Not here: fairness between threads beyond the mutex's, a bound on how long a leader waits
//! to gather a bigger group (it syncs at once: the batch is whatever queued meanwhile), and
//! compaction off the lock (a compaction writes and syncs the snapshot while every other call
//! waits; it runs once per `compact_at` bytes of log). A transaction whose reads conflict with
//! an unsynced commit aborts and, retried, may conflict again until that sync lands.

use std::io;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use t3fs_core::kv::{CommitReq, KeyRange, KvEngine, KvError, KvVersion, Value};

use super::{Core, Decided, COMPACT_AT};
use crate::durable::fs::{DurableFs, StdFs};

/// What group commit did so far.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
pub struct GroupStats {
    /// Commits appended to the log (write-less commits excluded).
    pub commits: u64,
    /// fdatasyncs of the log made by leaders.
    pub syncs: u64,
}

struct State {
    core: Core,
    /// A leader is syncing the log (with the lock released).
    syncing: bool,
    stats: GroupStats,
    /// [`SharedWalKv::sync_appended`] is to return.
    stop_syncer: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled whenever `durable`, `syncing` or `poisoned` changes.
    changed: Condvar,
}

/// A handle on the engine; clones share it. Each thread uses its own clone as a [`KvEngine`].
#[derive(Clone)]
pub struct SharedWalKv {
    shared: Arc<Shared>,
}

impl SharedWalKv {
    /// Opens (or creates) the engine in `dir`, recovering every acknowledged commit.
    pub fn open(dir: &Path) -> io::Result<Self> {
        Self::open_with(dir, COMPACT_AT)
    }

    /// [`SharedWalKv::open`] with the log size that triggers compaction.
    pub fn open_with(dir: &Path, compact_at: u64) -> io::Result<Self> {
        Self::open_on(Arc::new(StdFs), dir, compact_at)
    }

    /// [`SharedWalKv::open_with`] on the file system `fs`.
    pub fn open_on(fs: Arc<dyn DurableFs>, dir: &Path, compact_at: u64) -> io::Result<Self> {
        Core::open(fs, dir, compact_at).map(Self::from_core)
    }

    pub(super) fn from_core(core: Core) -> Self {
        let state = State {
            core,
            syncing: false,
            stats: GroupStats::default(),
            stop_syncer: false,
        };
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                changed: Condvar::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic under the lock left the engine half-updated: propagate it rather than serve.
        self.shared
            .state
            .lock()
            .expect("a thread panicked in the WAL engine")
    }

    fn wait<'a>(&self, s: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.shared
            .changed
            .wait(s)
            .expect("a thread panicked in the WAL engine")
    }

    /// Commits and syncs so far.
    pub fn stats(&self) -> GroupStats {
        self.lock().stats
    }

    /// Bytes in the log now (its header included).
    pub fn wal_bytes(&self) -> u64 {
        self.lock().core.wal_bytes
    }

    /// Commits refused so far because the file system had no room for them.
    pub fn no_space_refusals(&self) -> u64 {
        self.lock().core.refused
    }

    /// Decides `req` and appends its frame without waiting for it to be durable: for a caller
    /// that waits elsewhere (the kv service's tasks), while [`SharedWalKv::sync_appended`]
    /// syncs on a thread of its own. A commit so appended is acknowledged only once a durable
    /// version that `sync_appended` reports covers it. One that gets `NoRoom` goes through
    /// [`KvEngine::commit`], which may compact.
    pub fn append(&self, req: CommitReq) -> Result<Decided, KvError> {
        let mut s = self.lock();
        let decided = s.core.decide(req, false);
        let logged = matches!(decided, Ok(Decided::Logged(_)));
        s.stats.commits += u64::from(logged);
        // The syncer learns of a new frame, or of the poisoning a failed append caused.
        if logged || s.core.poisoned {
            self.shared.changed.notify_all();
        }
        decided
    }

    /// Syncs the log whenever it holds frames beyond the durable version, until
    /// [`SharedWalKv::stop_syncing`], and compacts as a committer would. `tell(durable,
    /// poisoned)` hears every change of either, outside the lock: the durable version covers
    /// a commit appended at or below it, and once poisoned, a commit it does not cover has an
    /// unknown outcome. One thread runs this; commits through [`KvEngine::commit`] may lead
    /// syncs meanwhile (they take turns through `syncing`).
    pub fn sync_appended(&self, mut tell: impl FnMut(u64, bool)) {
        let mut told = None;
        let mut s = self.lock();
        // A stop asked of an earlier syncer of this engine is not this one's.
        s.stop_syncer = false;
        loop {
            let now = (s.core.durable, s.core.poisoned);
            if told != Some(now) {
                drop(s);
                tell(now.0, now.1);
                told = Some(now);
                s = self.lock();
                continue;
            }
            if s.stop_syncer {
                return;
            }
            if s.core.poisoned || s.syncing || s.core.version() <= s.core.durable {
                s = self.wait(s);
                continue;
            }
            s = self.lead(s);
            self.compact_if_idle(&mut s);
        }
    }

    /// Compacts when the log is due for it. Compaction truncates the log, so only while no
    /// leader is syncing it; if one is, a later commit compacts.
    fn compact_if_idle(&self, s: &mut State) {
        if !s.syncing && !s.core.poisoned {
            s.core.maybe_compact();
            self.shared.changed.notify_all();
        }
    }

    /// Makes [`SharedWalKv::sync_appended`] return (after the sync it may be running).
    pub fn stop_syncing(&self) {
        self.lock().stop_syncer = true;
        self.shared.changed.notify_all();
    }

    /// Syncs every frame appended so far, the lock released meanwhile; `s.syncing` was false.
    fn lead<'a>(&'a self, mut s: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        s.syncing = true;
        let target = s.core.version();
        let wal = Arc::clone(&s.core.wal);
        drop(s);
        let synced = wal.sync_data();
        let mut s = self.lock();
        s.syncing = false;
        s.stats.syncs += 1;
        match synced {
            Ok(()) => s.core.durable = s.core.durable.max(target),
            Err(_) => s.core.poisoned = true,
        }
        self.shared.changed.notify_all();
        s
    }

    /// Writes every live key as the snapshot and empties the log. When the snapshot does not
    /// fit on the file system the error says so (no space) and nothing changed; any other
    /// error poisons.
    pub fn compact(&self) -> io::Result<()> {
        let mut s = self.lock();
        while s.syncing {
            s = self.wait(s);
        }
        let r = s.core.compact().map_err(|e| {
            if let super::CompactError::Failed(_) = e {
                s.core.poisoned = true;
            }
            e.into_inner()
        });
        self.shared.changed.notify_all();
        r
    }
}

impl KvEngine for SharedWalKv {
    fn read_version(&mut self) -> Result<KvVersion, KvError> {
        self.lock().core.read_version()
    }

    fn get(&mut self, at: KvVersion, key: &[u8]) -> Result<Option<Value>, KvError> {
        self.lock().core.get(at, key)
    }

    fn range(
        &mut self,
        at: KvVersion,
        range: &KeyRange,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Value)>, KvError> {
        self.lock().core.range(at, range, limit)
    }

    fn commit(&mut self, req: CommitReq) -> Result<KvVersion, KvError> {
        let mut s = self.lock();
        let mut decided = s.core.decide(req, false);
        if let Ok(Decided::NoRoom(req)) = decided {
            // A compaction may make room; it truncates the log, so only while no one syncs it.
            while s.syncing {
                s = self.wait(s);
            }
            decided = s.core.decide(req, true);
            // A compaction raised the durable version: wake whoever it covers.
            self.shared.changed.notify_all();
        }
        let v = match decided {
            Ok(Decided::Nothing(v)) => return Ok(v),
            Ok(Decided::Logged(v)) => v,
            Ok(Decided::NoRoom(_)) => unreachable!("a compaction was allowed"),
            Err(e) => {
                // A failed append poisoned the engine: wake the waiters so they learn it.
                self.shared.changed.notify_all();
                return Err(e);
            }
        };
        s.stats.commits += 1;
        loop {
            if s.core.durable >= v.0 {
                break;
            }
            if s.core.poisoned {
                return Err(KvError::CommitUnknown);
            }
            if s.syncing {
                s = self.wait(s);
                continue;
            }
            // Lead: every frame appended so far rides on this sync.
            s = self.lead(s);
        }
        self.compact_if_idle(&mut s);
        Ok(v)
    }
}

impl From<super::WalKv> for SharedWalKv {
    fn from(kv: super::WalKv) -> Self {
        kv.into_shared()
    }
}
