//! An in-memory [`Backend`] for the mount's unit tests: every write reaches it (recorded in
//! `started`), waits until its offset is released, then applies its bytes, or fails if its
//! offset is in `fail`; reads answer at once from the bytes (recorded in `reads`). Tasks run on a current-thread runtime and a test yields to let them run, so nothing
//! depends on timing. Test-only.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use tokio::runtime::Handle;
use tokio::sync::watch;

use super::backend::{lock, Backend, Call};
use crate::client::{ClientError, File};
use t3fs_core::ids::{ChainId, InodeId};
use t3fs_core::layout::FileLayout;

/// Storage in memory: a write reaches it (recorded in `started`), waits until its offset is
/// released, then applies its bytes, or fails if its offset is in `fail`.
pub(super) struct Gated {
    rt: Handle,
    released: watch::Sender<BTreeSet<u64>>,
    started: Mutex<Vec<u64>>,
    landed: Mutex<Vec<u64>>,
    pub(super) bytes: Mutex<Vec<u8>>,
    /// Reads that reached the backend: (offset, len).
    pub(super) reads: Mutex<Vec<(u64, u64)>>,
    /// Writes reported landed (`Backend::landed`), in order: their offsets.
    pub(super) reported: Mutex<Vec<u64>>,
    /// The offset of each write that applied, in order, for `landed` to report.
    applied: Mutex<Vec<u64>>,
    fail: BTreeSet<u64>,
}

impl Gated {
    pub(super) fn new(rt: Handle, fail: &[u64]) -> Arc<Self> {
        Arc::new(Self {
            rt,
            released: watch::channel(BTreeSet::new()).0,
            started: Mutex::default(),
            landed: Mutex::default(),
            bytes: Mutex::default(),
            fail: fail.iter().copied().collect(),
            reads: Mutex::default(),
            reported: Mutex::default(),
            applied: Mutex::default(),
        })
    }

    /// Holding every storage byte `bytes` at the start.
    pub(super) fn holding(rt: Handle, bytes: &[u8]) -> Arc<Self> {
        let g = Self::new(rt, &[]);
        *lock(&g.bytes) = bytes.to_vec();
        g
    }

    /// The reads that reached storage: (offset, len).
    pub(super) fn reads(&self) -> Vec<(u64, u64)> {
        lock(&self.reads).clone()
    }

    pub(super) fn release(&self, offset: u64) {
        self.released.send_modify(|r| {
            r.insert(offset);
        });
    }

    pub(super) fn started(&self) -> Vec<u64> {
        lock(&self.started).clone()
    }

    pub(super) fn landed(&self) -> Vec<u64> {
        lock(&self.landed).clone()
    }
}

impl Backend for Gated {
    fn runtime(&self) -> &Handle {
        &self.rt
    }

    fn write<'a>(&'a self, _file: &'a File, offset: u64, data: Vec<u8>) -> Call<'a, ()> {
        Box::pin(async move {
            lock(&self.started).push(offset);
            let mut rx = self.released.subscribe();
            while !rx.borrow_and_update().contains(&offset) {
                if rx.changed().await.is_err() {
                    break;
                }
            }
            lock(&self.landed).push(offset);
            if self.fail.contains(&offset) {
                return Err(ClientError::Failed("planted".into()));
            }
            let mut b = lock(&self.bytes);
            let (at, end) = (offset as usize, offset as usize + data.len());
            if b.len() < end {
                b.resize(end, 0);
            }
            b[at..end].copy_from_slice(&data);
            lock(&self.applied).push(offset);
            Ok(())
        })
    }

    fn landed(&self, _file: &File) {
        let applied = lock(&self.applied);
        let mut reported = lock(&self.reported);
        let next = applied.get(reported.len()).copied();
        reported.extend(next);
    }

    fn read<'a>(&'a self, _file: &'a File, offset: u64, len: u64) -> Call<'a, Vec<u8>> {
        Box::pin(async move {
            lock(&self.reads).push((offset, len));
            let b = lock(&self.bytes);
            let from = (offset as usize).min(b.len());
            let to = (offset + len).min(b.len() as u64) as usize;
            Ok(b[from..to].to_vec())
        })
    }
}

/// A file of 16-byte chunks on one chain.
pub(super) fn file16() -> File {
    File {
        inode: InodeId(7),
        layout: FileLayout {
            chunk_size: 16,
            chains: vec![ChainId(1)],
        },
        session: 1,
        truncate_ver: 0,
        length: 0,
    }
}

/// Lets every spawned task run until it waits on something.
pub(super) async fn run_tasks() {
    for _ in 0..64 {
        tokio::task::yield_now().await;
    }
}

pub(super) fn runtime() -> tokio::runtime::Runtime {
    // Timers for the closes that wait for company (unwritten_closes.rs).
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime")
}
