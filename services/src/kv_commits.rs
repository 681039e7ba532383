//! The kv service's commits: each decided and appended on the runtime by the task that serves
//! it, made durable by one syncer thread, and waited for without a thread of its own.
//!
//! Why: a commit run on tokio's blocking pool cost two hand-offs between threads per commit (to
//! a pool thread, back to the runtime) and, under load, a condition-variable wake-up of every
//! waiting pool thread per sync; a profile of the kv service under 8 ranks of creates put 42%
//! of its samples in context switches and wake-ups. Here a group of commits costs the syncer's
//! wake-up and one wake of the runtime, whatever the group's size.
//!
//! Invariants: a commit is answered `Ok` only once the durable version the syncer reports
//! covers it (the engine's read versions are that same durable version, so no one reads a
//! commit before it is durable); once the engine is poisoned, a commit not covered is
//! answered `CommitUnknown`; a commit the log has no room for without a compaction goes to the
//! engine's blocking commit on the pool, which may compact. The syncer thread stops when the
//! last handle goes (after the sync it may be running). A compaction runs on the syncer thread
//! under the engine's lock, so the runtime's appends and reads wait for it, as its reads always
//! did. Not here: the engine's group commit itself (`wal_kv/group.rs`), serving requests
//! (`kv_service.rs`), compaction off the lock.

use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::sync::watch;

use t3fs_core::kv::{CommitReq, KvEngine, KvError, KvVersion};

use crate::wal_kv::{Decided, SharedWalKv};

/// The engine's durable version and whether it is poisoned, as the syncer last reported.
type Durable = (u64, bool);

/// A handle on the engine and its syncer thread; clones share them.
#[derive(Clone)]
pub struct Commits(Arc<Syncer>);

struct Syncer {
    engine: SharedWalKv,
    durable: watch::Receiver<Durable>,
    thread: Option<JoinHandle<()>>,
}

impl Commits {
    /// Starts the syncer thread of `engine`.
    pub fn start(engine: SharedWalKv) -> std::io::Result<Self> {
        let (tx, durable) = watch::channel((0, false));
        let e = engine.clone();
        let thread = std::thread::Builder::new()
            .name("kv-syncer".into())
            .spawn(move || {
                e.sync_appended(|d, p| {
                    tx.send_replace((d, p));
                })
            })?;
        Ok(Self(Arc::new(Syncer {
            engine,
            durable,
            thread: Some(thread),
        })))
    }

    /// Commits `req`: answered once durable (see the module's invariants).
    pub async fn commit(&self, req: CommitReq) -> Result<KvVersion, KvError> {
        let v = match self.0.engine.append(req)? {
            Decided::Nothing(v) => return Ok(v),
            Decided::Logged(v) => v,
            Decided::NoRoom(req) => {
                let mut e = self.0.engine.clone();
                return tokio::task::spawn_blocking(move || e.commit(req))
                    .await
                    .unwrap_or(Err(KvError::Unavailable));
            }
        };
        let mut durable = self.0.durable.clone();
        let seen = durable
            .wait_for(|&(d, poisoned)| d >= v.0 || poisoned)
            .await;
        match seen.map(|s| *s) {
            Ok((d, _)) if d >= v.0 => Ok(v),
            // Poisoned before a sync covered it, or the syncer is gone: on disk or not.
            _ => Err(KvError::CommitUnknown),
        }
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        self.engine.stop_syncing();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use t3fs_core::kv::{KvEngine, KvError, Mutation, Txn};

    use super::*;
    use crate::durable::lazy_fs::LazyFs;
    use crate::wal_kv::WalKv;

    fn open(lazy: &LazyFs) -> SharedWalKv {
        SharedWalKv::open_on(Arc::new(lazy.clone()), Path::new("/db"), 1 << 20).unwrap()
    }

    fn set(kv: &SharedWalKv, k: &[u8], v: &[u8]) -> CommitReq {
        CommitReq {
            read_version: kv.clone().read_version().unwrap(),
            read_conflicts: Vec::new(),
            mutations: vec![Mutation::Set(k.to_vec(), v.to_vec())],
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        // Workers of its own, so that a spawned commit runs while the test waits on a thread.
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn concurrent_commits_share_syncs_and_every_answered_one_is_durable() {
        let lazy = LazyFs::new();
        lazy.state().sync_delay = Duration::from_millis(2);
        let kv = open(&lazy);
        let commits = Commits::start(kv.clone()).unwrap();
        runtime().block_on(async {
            let tasks: Vec<_> = (0..8u8)
                .map(|t| {
                    let (c, kv) = (commits.clone(), kv.clone());
                    tokio::spawn(async move {
                        for i in 0..25u8 {
                            c.commit(set(&kv, &[b'k', t, i], &[i])).await.unwrap();
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        });
        let stats = kv.stats();
        assert_eq!(stats.commits, 200);
        assert!(stats.syncs * 2 <= stats.commits, "no sharing: {stats:?}");
        drop((commits, kv));
        // Whatever was never synced is gone; every answered commit must be there.
        lazy.crash_writes(|_| 0);
        let mut kv = WalKv::open_on(Arc::new(lazy), Path::new("/db"), 1 << 20).unwrap();
        for t in 0..8u8 {
            for i in 0..25u8 {
                assert_eq!(Txn::new(&mut kv).get(&[b'k', t, i]).unwrap(), Some(vec![i]));
            }
        }
    }

    #[test]
    fn a_commit_is_answered_only_after_the_sync_that_covers_it() {
        let lazy = LazyFs::new();
        let kv = open(&lazy);
        let commits = Commits::start(kv.clone()).unwrap();
        let rt = runtime();
        lazy.state().hold_syncs = true;
        let c = commits.clone();
        let req = set(&kv, b"k", b"v");
        let mut pending = rt.spawn(async move { c.commit(req).await });
        lazy.wait_held(1);
        let early = rt.block_on(async {
            tokio::time::timeout(Duration::from_millis(50), &mut pending).await
        });
        let visible = Txn::new(&mut kv.clone()).get(b"k").unwrap();
        // Released before any assertion: a failed one would otherwise wait forever for the
        // syncer, held in its sync, to stop.
        lazy.release();
        assert!(early.is_err(), "answered before its sync ended");
        assert!(visible.is_none(), "readable before its sync ended");
        let v = rt.block_on(pending).unwrap().unwrap();
        assert!(kv.clone().read_version().unwrap() >= v);
    }

    #[test]
    fn a_failed_sync_answers_commit_unknown() {
        let lazy = LazyFs::new();
        let kv = open(&lazy);
        let commits = Commits::start(kv.clone()).unwrap();
        lazy.state().fail_next_sync = true;
        let commit = commits.commit(set(&kv, b"k", b"v"));
        // Bounded: a commit that ignored the poisoning would wait for a sync that never comes.
        let r = runtime()
            .block_on(async { tokio::time::timeout(Duration::from_secs(10), commit).await });
        assert_eq!(r, Ok(Err(KvError::CommitUnknown)));
        assert_eq!(kv.clone().read_version(), Err(KvError::Unavailable));
    }
}
