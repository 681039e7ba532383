//! How one operation of the [`UringChunkStore`] advances: started from the queue (its base or
//! data read, or its data write, pushed to the ring), then moved on by each completion reaped
//! (a verified base becomes a write, a short write goes again, a write waits for the data
//! fdatasync), and published to the metadata log once its data is durable. Not here: the queue,
//! the ring's submission and the fdatasync round (mod.rs).

use std::ops::Range;

use io_uring::opcode;
use t3fs_core::chunk::{ChunkDone, ChunkError, ChunkOp, UpdateKind, UpdateTag};
use t3fs_core::ids::{ChainVersion, ChunkId, ChunkVersion, IoId};
use t3fs_core::payload::Payload;

use super::buf::Buf;
use super::{
    op_chunk, Active, BaseStage, ReadStage, Stage, Then, UringChunkStore, WriteStage, BLOCK,
};
use crate::chunk_store::catalog::{Catalog, Written};
use crate::chunk_store::meta::Claim;
use crate::chunk_store::Extent;

impl UringChunkStore {
    /// Starts operation `op` (answers it at once when no I/O is needed).
    pub(super) fn start(&mut self, id: IoId, op: ChunkOp) {
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
            } => self.start_read(id, chunk, offset, len, uncommitted, unverified),
            ChunkOp::Update {
                chunk,
                version,
                kind,
                tag,
            } => self.start_update(id, chunk, version, kind, tag),
            ChunkOp::Commit {
                chunk,
                version,
                chain_version,
            } => self.start_commit(id, chunk, version, chain_version),
            ChunkOp::Install {
                chunk,
                version,
                chain_version,
                data,
            } => self.write(id, chunk, data, Then::Install(version, chain_version)),
        }
    }

    /// Starts a read: its data read, or its answer at once when it reads no blocks.
    fn start_read(
        &mut self,
        id: IoId,
        chunk: ChunkId,
        offset: u32,
        len: u32,
        uncommitted: bool,
        unverified: bool,
    ) {
        match self.cat.read_src(chunk, uncommitted) {
            None => self.finish(id, Some(chunk), Ok(ChunkDone::Read(None))),
            Some(src) => {
                let span = Catalog::read_span(&src, offset, len);
                let Some(ext) = src.data.filter(|_| !span.is_empty()) else {
                    let r =
                        Catalog::finish_read(&src, span, Vec::new(), offset, len, unverified, None);
                    return self.finish(id, Some(chunk), r);
                };
                self.read(id, chunk, ext, span.clone(), |buf| {
                    Stage::Read(ReadStage {
                        src,
                        span,
                        buf,
                        offset,
                        len,
                        unverified,
                    })
                })
            }
        }
    }

    /// Starts an update: the read of its base, or its write when the base has no data.
    fn start_update(
        &mut self,
        id: IoId,
        chunk: ChunkId,
        version: ChunkVersion,
        kind: UpdateKind,
        tag: Option<UpdateTag>,
    ) {
        match self.cat.update_base(chunk, version, &kind) {
            Err(e) => self.finish(id, Some(chunk), Err(e)),
            Ok(Some(src)) if src.data.is_some() => {
                let (ext, span) = (src.data.expect("guarded"), 0..u64::from(src.len));
                self.read(id, chunk, ext, span, |buf| {
                    Stage::Base(BaseStage {
                        src,
                        buf,
                        version,
                        kind,
                        tag,
                    })
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
        }
    }

    /// A commit: no data I/O, only its metadata record in claimed room.
    fn start_commit(
        &mut self,
        id: IoId,
        chunk: ChunkId,
        version: ChunkVersion,
        chain_version: ChainVersion,
    ) {
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
            stage: Stage::Write(WriteStage {
                buf,
                written,
                then,
                claim,
                done: 0,
            }),
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

    /// Advances the operation in `slot` with its completion `res`.
    pub(super) fn reap(&mut self, slot: usize, res: i32) {
        let a = self.slots[slot].take().expect("an active slot");
        let (id, chunk) = (a.id, a.chunk);
        match a.stage {
            Stage::Read(stage) => self.reaped_read(id, chunk, res, stage),
            Stage::Base(stage) => self.reaped_base(id, chunk, res, stage),
            Stage::Write(stage) => self.reaped_write(slot, id, chunk, res, stage),
            Stage::Unsynced { .. } => unreachable!("no SQE in flight while unsynced"),
        }
    }

    /// Answers a read whose data read completed with `res`.
    fn reaped_read(&mut self, id: IoId, chunk: ChunkId, res: i32, stage: ReadStage) {
        let ReadStage {
            src,
            span,
            buf,
            offset,
            len,
            unverified,
        } = stage;
        let r = loaded(res, &buf, &span).map(|bytes| {
            let mut v = self.results.take(bytes.len());
            v.extend_from_slice(bytes);
            v
        });
        self.bufs.put(buf);
        match r {
            Ok(bytes) => {
                let pool = Some(&self.results);
                let r = Catalog::finish_read(&src, span, bytes, offset, len, unverified, pool);
                self.finish(id, Some(chunk), r);
            }
            Err(ChunkError::Failed) => self.fail(id, chunk, errno("a read", res)),
            Err(e) => self.finish(id, Some(chunk), Err(e)),
        }
    }

    /// Moves an update whose base read completed with `res` on to its write.
    fn reaped_base(&mut self, id: IoId, chunk: ChunkId, res: i32, stage: BaseStage) {
        let BaseStage {
            src,
            buf,
            version,
            kind,
            tag,
        } = stage;
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

    /// Moves a data write in `slot` that completed with `res` on: its rest again, or waiting
    /// for the data fdatasync, or answered (`NoSpace`, `Failed`).
    fn reaped_write(&mut self, slot: usize, id: IoId, chunk: ChunkId, res: i32, stage: WriteStage) {
        let WriteStage {
            buf,
            written,
            then,
            claim,
            done,
        } = stage;
        let len = buf.len;
        let ext = written.data.expect("a data write has an extent");
        if res > 0 && done + (res as usize) < len {
            // A short write (a file system taking what it has room for): the rest goes
            // again, and then says why it cannot go (ENOSPC) or goes.
            let done = done + res as usize;
            let e = self.write_sqe(&buf, ext, done).user_data(slot as u64);
            let stage = Stage::Write(WriteStage {
                buf,
                written,
                then,
                claim,
                done,
            });
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

    /// The data fdatasync covering the operations in `slots` completed with `res`.
    pub(super) fn synced(&mut self, slots: Vec<usize>, res: i32) {
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
