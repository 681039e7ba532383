//! [`StoreThread`]: runs one [`ChunkStore`] on a std thread of its own, so that the node
//! runtime (tokio) never blocks on disk I/O. The runtime submits through a [`StoreHandle`]
//! (never blocks) and receives completions through the callback given at spawn, called on the
//! store's thread (the tokio driver passes a closure pushing into an unbounded channel).
//!
//! Loop: take every operation waiting in the channel and submit it; poll completions and hand
//! them to the callback; while the store reports operations in flight, wait on it (bounded, so
//! that new submissions are picked up promptly); when idle, block on the channel.
//!
//! Shutdown: dropping the handle (or [`StoreHandle::shutdown`], which also joins) closes the
//! channel; the thread then drains: every operation already submitted completes and is
//! reported, and the thread exits. Completions are durable when reported, so there is nothing
//! else to flush.
//!
//! [`StoreHandle::inline`] runs the store on the submitting task instead: each submission is
//! carried out and its completions reported before `submit` returns. That is for a driver run on
//! one thread under a simulation (turmoil's file system belongs to the host whose task calls
//! it, and a second thread would make the order of completions a race); services use threads.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Duration;

use t3fs_core::chunk::{ChunkDone, ChunkError, ChunkOp, ChunkStore};
use t3fs_core::ids::IoId;

/// Receives each completion, on the store's thread.
pub type Completion = Box<dyn Fn(IoId, Result<ChunkDone, ChunkError>) + Send>;

/// How long one `wait` on the store lasts before new submissions are looked at.
const WAIT: Duration = Duration::from_millis(1);

/// Spawns store threads.
pub struct StoreThread;

/// Submits operations to a store thread (or to an inline store).
pub struct StoreHandle {
    tx: Option<Sender<(IoId, ChunkOp)>>,
    join: Option<JoinHandle<()>>,
    inline: Option<Mutex<Inline>>,
}

/// A store run on the submitting task, with its completion callback.
struct Inline {
    store: Box<dyn ChunkStore + Send>,
    done: Completion,
    out: Vec<(IoId, Result<ChunkDone, ChunkError>)>,
}

impl StoreThread {
    /// Runs `store` on a new thread named `name`; each completion goes to `done`.
    pub fn spawn(
        name: &str,
        store: Box<dyn ChunkStore + Send>,
        done: Completion,
    ) -> std::io::Result<StoreHandle> {
        let (tx, rx) = mpsc::channel();
        let join = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || run(store, rx, done))?;
        Ok(StoreHandle {
            tx: Some(tx),
            join: Some(join),
            inline: None,
        })
    }
}

fn run(mut store: Box<dyn ChunkStore + Send>, rx: Receiver<(IoId, ChunkOp)>, done: Completion) {
    let mut out = Vec::new();
    let mut open = true;
    loop {
        // Take everything queued; block only when the store has nothing in flight.
        let mut took = false;
        while open {
            let next = if took || store.in_flight() > 0 {
                rx.try_recv().map_err(|e| e == TryRecvError::Disconnected)
            } else {
                rx.recv_timeout(Duration::from_secs(3600))
                    .map_err(|e| e == RecvTimeoutError::Disconnected)
            };
            match next {
                Ok((id, op)) => {
                    store.submit(id, op);
                    took = true;
                }
                Err(true) => open = false,
                Err(false) => break,
            }
        }
        store.poll_completions(&mut out);
        for (id, r) in out.drain(..) {
            done(id, r);
        }
        if store.in_flight() > 0 {
            store.wait(WAIT);
        } else if !open {
            return;
        }
    }
}

impl StoreHandle {
    /// Runs `store` on whichever task submits to it; each completion goes to `done` before the
    /// submission returns.
    pub fn inline(store: Box<dyn ChunkStore + Send>, done: Completion) -> Self {
        let inline = Inline {
            store,
            done,
            out: Vec::new(),
        };
        Self {
            tx: None,
            join: None,
            inline: Some(Mutex::new(inline)),
        }
    }

    /// Queues `op` on the store thread; never blocks. After the thread has died (a panic in the
    /// store) the operation is dropped and never completes: the driver's I/O timeouts see it.
    /// An inline store carries `op` out now and reports its completion.
    pub fn submit(&self, id: IoId, op: ChunkOp) {
        if let Some(tx) = &self.tx {
            let _ = tx.send((id, op));
        } else if let Some(m) = &self.inline {
            let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
            let Inline { store, done, out } = &mut *g;
            store.submit(id, op);
            loop {
                store.poll_completions(out);
                for (id, r) in out.drain(..) {
                    done(id, r);
                }
                if store.in_flight() == 0 {
                    break;
                }
                store.wait(WAIT);
            }
        }
    }

    /// Whether the store runs on the submitting task (its shutdown has nothing to wait for).
    pub fn is_inline(&self) -> bool {
        self.inline.is_some()
    }

    /// Closes the channel, lets every submitted operation complete and report, and joins.
    pub fn shutdown(mut self) {
        self.tx = None;
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

impl Drop for StoreHandle {
    fn drop(&mut self) {
        // Closing the channel is enough: the thread drains and exits on its own.
        self.tx = None;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use t3fs_core::ids::{ChainVersion, ChunkId, ChunkVersion};
    use t3fs_core::testing::MemChunkStore;

    use super::*;
    use crate::chunk_store::FileChunkStore;

    type Log = Arc<Mutex<Vec<(IoId, Result<ChunkDone, ChunkError>)>>>;

    fn drive(store: Box<dyn ChunkStore + Send>, inline: bool) -> Log {
        let log: Log = Arc::default();
        let sink = log.clone();
        let done: Completion = Box::new(move |id, r| sink.lock().unwrap().push((id, r)));
        let h = if inline {
            StoreHandle::inline(store, done)
        } else {
            StoreThread::spawn("store-test", store, done).expect("spawn")
        };
        let a = ChunkId::new(1, 0);
        for v in 1..=50u32 {
            h.submit(
                IoId(2 * v as u64),
                ChunkOp::Update {
                    chunk: a,
                    version: ChunkVersion(v),
                    kind: t3fs_core::chunk::UpdateKind::Write {
                        offset: v,
                        data: vec![v as u8].into(),
                    },
                    tag: None,
                },
            );
            h.submit(
                IoId(2 * v as u64 + 1),
                ChunkOp::Commit {
                    chunk: a,
                    version: ChunkVersion(v),
                    chain_version: ChainVersion(1),
                },
            );
        }
        h.shutdown();
        log
    }

    #[test]
    fn store_thread_drains_on_shutdown_in_order_and_inline_stores_complete_in_order() {
        let dir = std::env::temp_dir().join(format!("t3fs-thread-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let file = FileChunkStore::open(&dir.join("file")).expect("open");
        let mut logs = vec![
            drive(Box::new(MemChunkStore::new()), false),
            drive(Box::new(file), false),
            drive(Box::new(MemChunkStore::new()), true),
        ];
        let inline_file = FileChunkStore::open(&dir.join("inline")).expect("open");
        logs.push(drive(Box::new(inline_file), true));
        #[cfg(feature = "uring")]
        {
            let s = crate::chunk_store::UringChunkStore::open(&dir.join("uring")).expect("open");
            logs.push(drive(Box::new(s), false));
            let s = crate::chunk_store::UringChunkStore::open(&dir.join("uring-inline"));
            logs.push(drive(Box::new(s.expect("open")), true));
        }
        for log in logs {
            let log = log.lock().unwrap();
            let ids: Vec<u64> = log.iter().map(|(id, _)| id.0).collect();
            assert_eq!(ids, (2..=101).collect::<Vec<_>>(), "all, in order");
            assert!(log.iter().all(|(_, r)| r.is_ok()), "{log:?}");
        }
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
