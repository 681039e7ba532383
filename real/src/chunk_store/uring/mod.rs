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
use t3fs_core::payload::Payload;

use self::buf::{Buf, BufPool};
use super::catalog::{Catalog, Src, Written};
use super::fs::StdFs;
use super::meta::{Claim, MetaLog};
use super::space::Space;
use super::{Extent, Options, BLOCK, DATA};
use crate::vec_pool::{VecPool, CHUNK};

mod buf;

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
    Read {
        src: Src,
        span: Range<u64>,
        buf: Buf,
        offset: u32,
        len: u32,
        unverified: bool,
    },
    /// An update's base read is in flight.
    Base {
        src: Src,
        buf: Buf,
        version: ChunkVersion,
        kind: UpdateKind,
        tag: Option<UpdateTag>,
    },
    /// A data write is in flight (of `buf` from byte `done` on: a short write's rest goes
    /// again).
    Write {
        buf: Buf,
        written: Written,
        then: Then,
        claim: Claim,
        done: usize,
    },
    /// Written; waits for a data fdatasync.
    Unsynced {
        written: Written,
        then: Then,
        claim: Claim,
    },
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
        super::fs::StoreFs::create_dir_all(&*fs, dir)?;
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

    /// Reads the bytes `span` of the content in `ext` (whole blocks: O_DIRECT) into a fresh
    /// buffer owned by a new slot in the stage `stage` makes.
    fn read(
        &mut self,
        id: IoId,
        chunk: ChunkId,
        ext: Extent,
        span: Range<u64>,
        stage: impl FnOnce(Buf) -> Stage,
    ) {
        let buf = self
            .bufs
            .take((span.end.div_ceil(BLOCK) * BLOCK - span.start) as usize);
        // The heap buffer does not move when `Buf` moves into the slot.
        let (ptr, len) = (buf.ptr.as_ptr(), buf.len as u32);
        let slot = self.place(Active {
            id,
            chunk,
            stage: stage(buf),
        });
        let e = opcode::Read::new(self.fd(), ptr, len)
            .offset(ext.offset + span.start)
            .build()
            .user_data(slot as u64);
        self.push(e);
    }

    /// Claims room in the metadata log for the record of an operation on `chunk` bringing `len`
    /// bytes of new content (0: none), before it writes anything (`space.rs`); `None`: it was
    /// answered (`NoSpace`, or `Failed` on an I/O error growing the log).
    fn admit(&mut self, id: IoId, chunk: ChunkId, len: usize) -> Option<Claim> {
        let bound = self.cat.record_bound(chunk, len);
        let (log, data, cat) = (&mut self.log, &self.data, &self.cat);
        match self.space.admit(log, data, cat, bound, len > 0) {
            Ok(Some(claim)) => Some(claim),
            Ok(None) => {
                self.finish(id, Some(chunk), Err(ChunkError::NoSpace));
                None
            }
            Err(e) => {
                self.fail(id, chunk, format!("growing the metadata log: {e}"));
                None
            }
        }
    }

    /// Writes `content` into a fresh extent (or finishes at once when no data I/O is needed).
    fn write(&mut self, id: IoId, chunk: ChunkId, content: Option<Payload>, then: Then) {
        let Some(claim) = self.admit(id, chunk, content.as_ref().map_or(0, |c| c.len())) else {
            return;
        };
        let written = content
            .as_ref()
            .map(|c| Written::new(c, self.cat.alloc(c.len())));
        let Some(ext) = written.as_ref().and_then(|w| w.data) else {
            return self.publish(id, chunk, written, then, claim);
        };
        let mut buf = self.bufs.take(ext.len as usize);
        let content = content.expect("content");
        let (data, pad) = buf.as_mut_slice().split_at_mut(content.len());
        data.copy_from_slice(&content);
        pad.fill(0); // A pooled buffer holds its last user's bytes.
        let e = self.write_sqe(&buf, ext, 0);
        let written = written.expect("written");
        let slot = self.place(Active {
            id,
            chunk,
            stage: Stage::Write {
                buf,
                written,
                then,
                claim,
                done: 0,
            },
        });
        self.push(e.user_data(slot as u64));
    }

    /// The SQE writing `buf` from byte `done` on into `ext` (user data still to set).
    fn write_sqe(&self, buf: &Buf, ext: Extent, done: usize) -> io_uring::squeue::Entry {
        let rest = &buf.as_slice()[done..];
        opcode::Write::new(self.fd(), rest.as_ptr(), rest.len() as u32)
            .offset(ext.offset + done as u64)
            .build()
    }

    /// The data is durable (or there is none): records the metadata change in `claim`'s room.
    fn publish(
        &mut self,
        id: IoId,
        chunk: ChunkId,
        written: Option<Written>,
        then: Then,
        claim: Claim,
    ) {
        if self.failed {
            self.log.release(claim);
            return self.finish(id, Some(chunk), Err(ChunkError::Failed));
        }
        let (rec, done) = match then {
            Then::Pending(v, tag) => {
                let (m, r) = self.cat.set_pending(chunk, v, written, tag);
                (r, ChunkDone::Updated(m))
            }
            Then::Install(v, cv) => {
                let (m, r) = self.cat.install(chunk, v, cv, written);
                (r, ChunkDone::Committed(m))
            }
        };
        self.log.stage(&rec, claim);
        self.finish(id, Some(chunk), Ok(done));
    }

    fn start(&mut self, id: IoId, op: ChunkOp) {
        if self.failed {
            let chunk = op_chunk(&op);
            return self.finish(id, chunk, Err(ChunkError::Failed));
        }
        match op {
            ChunkOp::List => {
                let l = self.cat.list();
                self.finish(id, None, Ok(ChunkDone::Listed(l)));
            }
            ChunkOp::Read {
                chunk,
                offset,
                len,
                uncommitted,
                unverified,
            } => match self.cat.read_src(chunk, uncommitted) {
                None => self.finish(id, Some(chunk), Ok(ChunkDone::Read(None))),
                Some(src) => {
                    let span = Catalog::read_span(&src, offset, len);
                    let Some(ext) = src.data.filter(|_| !span.is_empty()) else {
                        let r = Catalog::finish_read(
                            &src,
                            span,
                            Vec::new(),
                            offset,
                            len,
                            unverified,
                            None,
                        );
                        return self.finish(id, Some(chunk), r);
                    };
                    self.read(id, chunk, ext, span.clone(), |buf| Stage::Read {
                        src,
                        span,
                        buf,
                        offset,
                        len,
                        unverified,
                    })
                }
            },
            ChunkOp::Update {
                chunk,
                version,
                kind,
                tag,
            } => match self.cat.update_base(chunk, version, &kind) {
                Err(e) => self.finish(id, Some(chunk), Err(e)),
                Ok(Some(src)) if src.data.is_some() => {
                    let (ext, span) = (src.data.expect("guarded"), 0..u64::from(src.len));
                    self.read(id, chunk, ext, span, |buf| Stage::Base {
                        src,
                        buf,
                        version,
                        kind,
                        tag,
                    })
                }
                Ok(base) => {
                    if let Some(src) = &base {
                        if let Err(e) = Catalog::verify(src, &[]) {
                            return self.finish(id, Some(chunk), Err(e));
                        }
                    }
                    let content = kind.apply_owned(base.map(|_| Vec::new()));
                    self.write(id, chunk, content, Then::Pending(version, tag));
                }
            },
            ChunkOp::Commit {
                chunk,
                version,
                chain_version,
            } => {
                let Some(claim) = self.admit(id, chunk, 0) else {
                    return;
                };
                match self.cat.commit(chunk, version, chain_version) {
                    Ok((meta, rec)) => {
                        match rec {
                            Some(rec) => self.log.stage(&rec, claim),
                            None => self.log.release(claim),
                        }
                        self.finish(id, Some(chunk), Ok(ChunkDone::Committed(meta)));
                    }
                    Err(e) => {
                        self.log.release(claim);
                        self.finish(id, Some(chunk), Err(e));
                    }
                }
            }
            ChunkOp::Install {
                chunk,
                version,
                chain_version,
                data,
            } => self.write(id, chunk, data, Then::Install(version, chain_version)),
        }
    }

    /// Advances the operation in `slot` with its completion `res`.
    fn reap(&mut self, slot: usize, res: i32) {
        let a = self.slots[slot].take().expect("an active slot");
        let (id, chunk) = (a.id, a.chunk);
        match a.stage {
            Stage::Read {
                src,
                span,
                buf,
                offset,
                len,
                unverified,
            } => {
                let r = loaded(res, &buf, &span).map(|bytes| {
                    let mut v = self.results.take(bytes.len());
                    v.extend_from_slice(bytes);
                    v
                });
                self.bufs.put(buf);
                match r {
                    Ok(bytes) => {
                        let pool = Some(&self.results);
                        let r =
                            Catalog::finish_read(&src, span, bytes, offset, len, unverified, pool);
                        self.finish(id, Some(chunk), r);
                    }
                    Err(ChunkError::Failed) => self.fail(id, chunk, errno("a read", res)),
                    Err(e) => self.finish(id, Some(chunk), Err(e)),
                }
            }
            Stage::Base {
                src,
                buf,
                version,
                kind,
                tag,
            } => {
                let base = loaded(res, &buf, &(0..u64::from(src.len)))
                    .and_then(|c| Catalog::verify(&src, c).map(|()| c.to_vec()));
                self.bufs.put(buf);
                match base {
                    Ok(base) => {
                        let content = kind.apply_owned(Some(base));
                        self.write(id, chunk, content, Then::Pending(version, tag));
                    }
                    Err(ChunkError::Failed) => self.fail(id, chunk, errno("a base read", res)),
                    Err(e) => self.finish(id, Some(chunk), Err(e)),
                }
            }
            Stage::Write {
                buf,
                written,
                then,
                claim,
                done,
            } => {
                let len = buf.len;
                let ext = written.data.expect("a data write has an extent");
                if res > 0 && done + (res as usize) < len {
                    // A short write (a file system taking what it has room for): the rest goes
                    // again, and then says why it cannot go (ENOSPC) or goes.
                    let done = done + res as usize;
                    let e = self.write_sqe(&buf, ext, done).user_data(slot as u64);
                    let stage = Stage::Write {
                        buf,
                        written,
                        then,
                        claim,
                        done,
                    };
                    self.slots[slot] = Some(Active { id, chunk, stage });
                    return self.push(e);
                }
                self.bufs.put(buf);
                if res == -libc::ENOSPC || res == -libc::EDQUOT {
                    self.log.release(claim);
                    self.cat.release_unused(written.data);
                    self.space.write_failed(&self.data, &self.cat, written.data);
                    self.finish(id, Some(chunk), Err(ChunkError::NoSpace));
                } else if res <= 0 || done + res as usize != len {
                    self.log.release(claim);
                    let why = format!("{} of {} bytes", errno("a write", res), len - done);
                    self.fail(id, chunk, why);
                } else {
                    let stage = Stage::Unsynced {
                        written,
                        then,
                        claim,
                    };
                    self.slots[slot] = Some(Active { id, chunk, stage });
                    self.unsynced.push(slot);
                }
            }
            Stage::Unsynced { .. } => unreachable!("no SQE in flight while unsynced"),
        }
    }

    /// The data fdatasync covering the operations in `slots` completed with `res`.
    fn synced(&mut self, slots: Vec<usize>, res: i32) {
        if res < 0 {
            self.poison(errno("fdatasync of data", res));
        }
        for slot in slots {
            let a = self.slots[slot].take().expect("an unsynced slot");
            let Stage::Unsynced {
                written,
                then,
                claim,
            } = a.stage
            else {
                unreachable!("only unsynced slots wait for a sync")
            };
            self.publish(a.id, a.chunk, Some(written), then, claim);
        }
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

/// What a completion `res` of `what` said (an errno, or a byte count).
fn errno(what: &str, res: i32) -> String {
    if res < 0 {
        format!(
            "{what} answered {}",
            std::io::Error::from_raw_os_error(-res)
        )
    } else {
        format!("{what} moved {res} bytes")
    }
}

/// The content bytes `span` from a completed read of them, from the block at `span.start` on,
/// into `buf`.
fn loaded<'a>(res: i32, buf: &'a Buf, span: &Range<u64>) -> Result<&'a [u8], ChunkError> {
    let want = (span.end - span.start) as usize;
    if res < 0 {
        return Err(ChunkError::Failed);
    }
    if (res as usize) < want {
        return Err(ChunkError::Corrupt); // The extent runs past the end of the file.
    }
    Ok(&buf.as_slice()[..want])
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
