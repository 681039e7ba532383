//! [`UringChunkStore`]: the chunk store on io_uring with O_DIRECT data I/O. Same on-disk format,
//! metadata log and catalog as the file store (module docs of `chunk_store`); data reads,
//! writes and fdatasyncs go through the ring, the metadata append and its fdatasync are plain
//! buffered calls on the store's thread (one per poll at most).
//!
//! Flow: `submit` queues. Each `poll_completions` starts queued operations whose chunk is idle
//! (one operation per chunk at a time, so mutations of a chunk complete in submission order and
//! an extent is never freed under a read), at most [`DEPTH`] - 1 at once (the rest stay
//! queued); pushes their SQEs and submits the ring once; reaps completions and advances each
//! operation (an update reads its base, verifies it, writes a fresh extent); issues one data
//! fdatasync covering every write completed so far; appends and syncs the metadata records of
//! the operations whose data is durable; and only then reports them.
//!
//! Buffers: every SQE points into a 4 KiB-aligned heap buffer owned by its operation's slot,
//! which lives until the completion is reaped (dropping the store waits for every SQE in
//! flight), then goes back to the store's pool; a read's result is copied into a vector from a
//! second pool, which it returns to when the payload's last holder drops it (vec_pool.rs says why).
//! Not registered buffers (registration would pin the pool; left for a benchmark to justify).
//!
//! O_DIRECT: when the file system refuses it (tmpfs answers EINVAL at open), the data file is
//! opened buffered instead and the reason is printed to stderr once; durability is the same
//! (fdatasync through the ring), only the page cache is involved.
//!
//! A failed write or sync poisons the store as in the file store (every later operation, and
//! those in flight, answer `Failed`); a short read (the extent lies past the end of the file)
//! answers `Corrupt`. A full file system does not poison, as in the file store (`space.rs`): a
//! mutation claims room in the metadata log for its record when it starts writing (after its
//! base read) and answers `NoSpace` if the log cannot grow for it; ENOSPC on a data write
//! answers `NoSpace` too. The claim travels with the operation until its record is staged.

use std::collections::{BTreeSet, VecDeque};
use std::fs::{File, OpenOptions};
use std::io;
use std::ops::Range;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use io_uring::{opcode, types, IoUring};
use t3fs_core::chunk::{ChunkDone, ChunkError, ChunkOp, ChunkStore, UpdateKind, UpdateTag};
use t3fs_core::ids::{ChainVersion, ChunkId, ChunkVersion, IoId};

use self::buf::{Buf, BufPool};
use super::catalog::{Catalog, Src, Written};
use super::meta::{Claim, MetaLog};
use super::space::Space;
use super::{Options, BLOCK, DATA};
use crate::durable::fs::StdFs;
use crate::vec_pool::{VecPool, CHUNK};

mod buf;
mod ops;

/// Ring entries; operations in flight at once are one fewer (room for the data fdatasync).
pub const DEPTH: u32 = 64;
const SYNC: u64 = u64::MAX;

/// What a data write is for.
#[derive(Clone, Copy)]
enum Then {
    Pending(ChunkVersion, Option<UpdateTag>),
    Install(ChunkVersion, ChainVersion),
}

enum Stage {
    /// A read's data read is in flight.
    Read(ReadStage),
    /// An update's base read is in flight.
    Base(BaseStage),
    /// A data write is in flight.
    Write(WriteStage),
    /// Written; waits for a data fdatasync.
    Unsynced {
        written: Written,
        then: Then,
        claim: Claim,
    },
}

/// A read whose data read is in flight.
struct ReadStage {
    src: Src,
    span: Range<u64>,
    buf: Buf,
    offset: u32,
    len: u32,
    unverified: bool,
}

/// An update whose base read is in flight.
struct BaseStage {
    src: Src,
    buf: Buf,
    version: ChunkVersion,
    kind: UpdateKind,
    tag: Option<UpdateTag>,
}

/// A data write in flight (of `buf` from byte `done` on: a short write's rest goes again).
struct WriteStage {
    buf: Buf,
    written: Written,
    then: Then,
    claim: Claim,
    done: usize,
}

struct Active {
    id: IoId,
    chunk: ChunkId,
    stage: Stage,
}

type Done = (IoId, Result<ChunkDone, ChunkError>);

/// A chunk store on io_uring and O_DIRECT.
pub struct UringChunkStore {
    ring: IoUring,
    data: File,
    log: MetaLog,
    cat: Catalog,
    waiting: VecDeque<(IoId, ChunkOp)>,
    slots: Vec<Option<Active>>,
    busy: BTreeSet<ChunkId>,
    /// SQEs pushed whose completion is not yet reaped.
    sqes: usize,
    unsynced: Vec<usize>,
    syncing: Option<Vec<usize>>,
    ready: Vec<(Done, Option<ChunkId>)>,
    failed: bool,
    space: Space,
    bufs: BufPool,
    results: VecPool,
}

impl UringChunkStore {
    /// Opens the store in `dir` (creating it when absent).
    pub fn open(dir: &Path) -> io::Result<Self> {
        Self::open_with(dir, Options::default())
    }

    /// Opens the store in `dir` with `opts`.
    pub fn open_with(dir: &Path, opts: Options) -> io::Result<Self> {
        let fs = Arc::new(StdFs);
        crate::durable::fs::DurableFs::create_dir_all(&*fs, dir)?;
        let path = dir.join(DATA);
        let mut o = OpenOptions::new();
        o.read(true).write(true).create(true).truncate(false);
        let data = match o.clone().custom_flags(libc::O_DIRECT).open(&path) {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                eprintln!(
                    "t3fs uring chunk store: {}: O_DIRECT refused ({e}); using buffered I/O",
                    path.display()
                );
                o.open(&path)?
            }
            Err(e) => return Err(e),
        };
        let (log, chunks) = MetaLog::open(fs, dir, opts.compact_min)?;
        Ok(Self {
            ring: IoUring::new(DEPTH)?,
            data,
            log,
            cat: Catalog::new(chunks),
            waiting: VecDeque::new(),
            slots: Vec::new(),
            busy: BTreeSet::new(),
            sqes: 0,
            unsynced: Vec::new(),
            syncing: None,
            ready: Vec::new(),
            failed: false,
            space: Space::default(),
            bufs: BufPool::default(),
            results: VecPool::new(CHUNK),
        })
    }

    fn active(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    fn finish(&mut self, id: IoId, chunk: Option<ChunkId>, mut r: Result<ChunkDone, ChunkError>) {
        if self.failed && r.is_ok() {
            r = Err(ChunkError::Failed);
        }
        self.ready.push(((id, r), chunk));
    }

    fn fail(&mut self, id: IoId, chunk: ChunkId, why: String) {
        self.poison(why);
        self.finish(id, Some(chunk), Err(ChunkError::Failed));
    }

    /// Fails the store for good, saying why once (every later operation answers `Failed`).
    fn poison(&mut self, why: String) {
        if !self.failed {
            tracing::error!("io_uring chunk store failed: {why}");
        }
        self.failed = true;
    }

    /// Pushes one SQE. The caller keeps the buffer it points into alive in `slots` until the
    /// completion is reaped.
    fn push(&mut self, entry: io_uring::squeue::Entry) {
        if self.ring.submission().is_full() {
            let _ = self.ring.submit();
        }
        // SAFETY: every buffer an entry points into is owned by the slot named in its user data
        // (or the entry has none: fdatasync) and is dropped only after its completion is reaped:
        // slots are emptied in `reap`, and `Drop` waits for every SQE in flight.
        let pushed = unsafe { self.ring.submission().push(&entry) };
        pushed.expect("room in the SQ: at most DEPTH - 1 operations and one fdatasync");
        self.sqes += 1;
    }

    fn place(&mut self, a: Active) -> usize {
        match self.slots.iter().position(Option::is_none) {
            Some(i) => {
                self.slots[i] = Some(a);
                i
            }
            None => {
                self.slots.push(Some(a));
                self.slots.len() - 1
            }
        }
    }

    fn fd(&self) -> types::Fd {
        types::Fd(self.data.as_raw_fd())
    }

    /// Starts queued operations whose chunk is idle, as room allows, in submission order.
    fn start_waiting(&mut self) {
        let mut blocked = self.busy.clone();
        let mut i = 0;
        while i < self.waiting.len() && self.active() < DEPTH as usize - 1 {
            let chunk = op_chunk(&self.waiting[i].1);
            match chunk {
                Some(c) if blocked.contains(&c) => {
                    i += 1;
                }
                _ => {
                    let (id, op) = self.waiting.remove(i).expect("in range");
                    if let Some(c) = chunk {
                        blocked.insert(c);
                        self.busy.insert(c);
                    }
                    self.start(id, op);
                }
            }
        }
    }

    /// One round: start what can start, sync what was written, submit once, reap. Whether any
    /// completion was reaped.
    fn step(&mut self) -> bool {
        self.start_waiting();
        if self.syncing.is_none() && !self.unsynced.is_empty() {
            self.syncing = Some(std::mem::take(&mut self.unsynced));
            let e = opcode::Fsync::new(self.fd())
                .flags(types::FsyncFlags::DATASYNC)
                .build()
                .user_data(SYNC);
            self.push(e);
        }
        if let Err(e) = self.ring.submit() {
            if e.raw_os_error() != Some(libc::EBUSY) && e.raw_os_error() != Some(libc::EINTR) {
                self.poison(format!("io_uring submit: {e}"));
            }
        }
        let cqes: Vec<(u64, i32)> = self
            .ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        self.sqes -= cqes.len();
        for &(slot, res) in &cqes {
            if slot == SYNC {
                let slots = self.syncing.take().expect("a sync in flight");
                self.synced(slots, res);
            } else {
                self.reap(slot as usize, res);
            }
        }
        !cqes.is_empty()
    }
}

/// The chunk an operation is about (`None`: List).
fn op_chunk(op: &ChunkOp) -> Option<ChunkId> {
    match op {
        ChunkOp::List => None,
        ChunkOp::Commit { chunk, .. }
        | ChunkOp::Install { chunk, .. }
        | ChunkOp::Read { chunk, .. }
        | ChunkOp::Update { chunk, .. } => Some(*chunk),
    }
}

impl ChunkStore for UringChunkStore {
    fn submit(&mut self, id: IoId, op: ChunkOp) {
        self.waiting.push_back((id, op));
    }

    fn poll_completions(&mut self, done: &mut Vec<Done>) {
        while self.step() {}
        if !self.ready.is_empty() {
            if !self.failed {
                match self.log.flush() {
                    Ok(()) => {
                        let freed = self.cat.durable();
                        self.space.released(&self.data, &self.cat, &freed);
                        if let Err(e) = self.log.maybe_compact(self.cat.chunks()) {
                            self.poison(format!("compacting the metadata log: {e}"));
                        }
                    }
                    Err(e) => self.poison(format!("appending to the metadata log: {e}")),
                }
            }
            for ((id, mut r), chunk) in self.ready.drain(..) {
                if self.failed && r.is_ok() {
                    r = Err(ChunkError::Failed);
                }
                if let Some(c) = chunk {
                    self.busy.remove(&c);
                }
                done.push((id, r));
            }
        }
    }

    fn in_flight(&self) -> usize {
        self.waiting.len() + self.active() + self.ready.len()
    }

    fn wait(&mut self, timeout: Duration) {
        if self.sqes == 0 || !self.ready.is_empty() {
            return;
        }
        let ts = types::Timespec::new()
            .sec(timeout.as_secs())
            .nsec(timeout.subsec_nanos());
        let args = types::SubmitArgs::new().timespec(&ts);
        // ETIME (the timeout) and EINTR are ordinary returns.
        let _ = self.ring.submitter().submit_with_args(1, &args);
    }
}

impl Drop for UringChunkStore {
    fn drop(&mut self) {
        // The kernel may still write into buffers of SQEs in flight: wait for all of them.
        while self.sqes > 0 {
            if self.ring.submit_and_wait(1).is_err() {
                continue;
            }
            let n = self.ring.completion().count();
            self.sqes -= n;
        }
    }
}

impl super::rot::Rot for UringChunkStore {
    fn rot(&mut self, pick: u64) -> io::Result<Option<ChunkId>> {
        let Some((chunk, offset, bit)) = super::rot::site(&self.cat, pick) else {
            return Ok(None);
        };
        let mut buf = Buf::new(BLOCK as usize);
        super::rot::flip_in_block(&self.data, buf.as_mut_slice(), offset, bit)?;
        Ok(Some(chunk))
    }
}

#[cfg(test)]
mod tests;
