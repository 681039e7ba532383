//! [`FileChunkStore`]: the chunk store on plain file I/O (pread, pwrite, fdatasync) through the
//! [`DurableFs`] seam; layout and commit argument in the module docs of `chunk_store`.
//!
//! `submit` only queues. `poll_completions` executes everything queued, in submission order
//! (so mutations of a chunk complete in order, and a read sees every earlier operation), then
//! makes the batch durable with at most one fdatasync of `data` and one append plus fdatasync
//! of `meta`, and only then reports the batch. A failed write or sync poisons the store: the
//! batch and every later operation answer `Failed` until it is reopened (a failed fsync is
//! never retried: the kernel may have dropped the dirty pages).
//!
//! A full file system does not poison (`space.rs`): each mutation claims room in the metadata
//! log for its record before it writes anything and answers `NoSpace` when the log cannot grow
//! for it; ENOSPC on a data write answers `NoSpace` too (nothing durable references the
//! extent). Either way nothing of the operation was written, and the rest of the batch goes on.

use std::collections::VecDeque;
use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use t3fs_core::chunk::{ChunkDone, ChunkError, ChunkOp, ChunkStore};
use t3fs_core::ids::{ChunkId, IoId};
use t3fs_core::payload::Payload;

use super::catalog::{Catalog, Src, Written};
use super::meta::{Claim, MetaLog};
use super::space::Space;
use super::DATA;
use crate::durable::fs::{no_space, DurableFile, DurableFs, StdFs};

/// Tuning of a store.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Records in the metadata log below which it is never compacted (it is compacted when it
    /// holds more than this and more than four records per live chunk).
    pub compact_min: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            compact_min: 1 << 16,
        }
    }
}

type Done = (IoId, Result<ChunkDone, ChunkError>);

/// A chunk store on pread/pwrite/fdatasync.
pub struct FileChunkStore {
    data: Box<dyn DurableFile>,
    log: MetaLog,
    cat: Catalog,
    queue: VecDeque<(IoId, ChunkOp)>,
    failed: bool,
    wrote_data: bool,
    space: Space,
}

impl FileChunkStore {
    /// Opens the store in `dir` (creating it when absent) on the real file system.
    pub fn open(dir: &Path) -> io::Result<Self> {
        Self::open_with(Arc::new(StdFs), dir, Options::default())
    }

    /// Opens the store in `dir` on `fs`.
    pub fn open_with(fs: Arc<dyn DurableFs>, dir: &Path, opts: Options) -> io::Result<Self> {
        fs.create_dir_all(dir)?;
        // Created before the metadata log, whose creation fsyncs the directory.
        let data = fs.open(&dir.join(DATA))?;
        let (log, chunks) = MetaLog::open(fs, dir, opts.compact_min)?;
        Ok(Self {
            data,
            log,
            cat: Catalog::new(chunks),
            queue: VecDeque::new(),
            failed: false,
            wrote_data: false,
            space: Space::default(),
        })
    }

    fn io_failed(&mut self, e: io::Error) -> ChunkError {
        if !self.failed {
            tracing::error!("file chunk store failed: {e}");
        }
        self.failed = true;
        ChunkError::Failed
    }

    /// The bytes `span` of `src`'s content. A short file (an extent whose bytes never reached
    /// the disk although its record did: a disk that lied about a flush) is `Corrupt`.
    fn load(&mut self, src: &Src, span: Range<u64>) -> Result<Vec<u8>, ChunkError> {
        let Some(ext) = src.data.filter(|_| !span.is_empty()) else {
            return Ok(Vec::new());
        };
        let mut buf = vec![0; (span.end - span.start) as usize];
        match self.data.read_at(&mut buf, ext.offset + span.start) {
            Ok(()) => Ok(buf),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(ChunkError::Corrupt),
            Err(e) => Err(self.io_failed(e)),
        }
    }

    /// Writes `content` into a fresh extent (not yet synced). The extent's tail past the
    /// content is left as it is: reads never load past a content's end.
    fn store(&mut self, content: &Payload) -> Result<Written, ChunkError> {
        let written = Written::new(content, self.cat.alloc(content.len()));
        if let Some(ext) = written.data {
            if let Err(e) = self.data.write_at(content, ext.offset) {
                self.cat.release_unused(written.data);
                if no_space(&e) {
                    self.space
                        .write_failed(&*self.data, &self.cat, written.data);
                    return Err(ChunkError::NoSpace);
                }
                return Err(self.io_failed(e));
            }
            self.wrote_data = true;
        }
        Ok(written)
    }

    /// Claims room in the metadata log for the record of an operation on `chunk` bringing `len`
    /// bytes of new content (0: none), before it writes anything (`space.rs`).
    fn admit(&mut self, chunk: ChunkId, len: usize) -> Result<Claim, ChunkError> {
        let bound = self.cat.record_bound(chunk, len);
        match self
            .space
            .admit(&mut self.log, &*self.data, &self.cat, bound, len > 0)
        {
            Ok(Some(claim)) => Ok(claim),
            Ok(None) => Err(ChunkError::NoSpace),
            Err(e) => Err(self.io_failed(e)),
        }
    }

    /// Writes `content` (if any) after claiming log room for its record.
    fn admit_and_store(
        &mut self,
        chunk: ChunkId,
        content: Option<&Payload>,
    ) -> Result<(Claim, Option<Written>), ChunkError> {
        let claim = self.admit(chunk, content.map_or(0, |c| c.len()))?;
        match content.map(|c| self.store(c)).transpose() {
            Ok(written) => Ok((claim, written)),
            Err(e) => {
                self.log.release(claim);
                Err(e)
            }
        }
    }

    fn execute(&mut self, op: ChunkOp) -> Result<ChunkDone, ChunkError> {
        match op {
            ChunkOp::List => Ok(ChunkDone::Listed(self.cat.list())),
            ChunkOp::Read {
                chunk,
                offset,
                len,
                uncommitted,
                unverified,
            } => {
                let Some(src) = self.cat.read_src(chunk, uncommitted) else {
                    return Ok(ChunkDone::Read(None));
                };
                let span = Catalog::read_span(&src, offset, len);
                let bytes = self.load(&src, span.clone())?;
                Catalog::finish_read(&src, span, bytes, offset, len, unverified, None)
            }
            ChunkOp::Update {
                chunk,
                version,
                kind,
                tag,
            } => {
                let base = match self.cat.update_base(chunk, version, &kind)? {
                    Some(src) => {
                        let content = self.load(&src, 0..u64::from(src.len))?;
                        Catalog::verify(&src, &content)?;
                        Some(content)
                    }
                    None => None,
                };
                let content = kind.apply_owned(base);
                let (claim, written) = self.admit_and_store(chunk, content.as_ref())?;
                let (meta, rec) = self.cat.set_pending(chunk, version, written, tag);
                self.log.stage(&rec, claim);
                Ok(ChunkDone::Updated(meta))
            }
            ChunkOp::Commit {
                chunk,
                version,
                chain_version,
            } => {
                let claim = self.admit(chunk, 0)?;
                let (meta, rec) = match self.cat.commit(chunk, version, chain_version) {
                    Ok(done) => done,
                    Err(e) => {
                        self.log.release(claim);
                        return Err(e);
                    }
                };
                match rec {
                    Some(rec) => self.log.stage(&rec, claim),
                    None => self.log.release(claim),
                }
                Ok(ChunkDone::Committed(meta))
            }
            ChunkOp::Install {
                chunk,
                version,
                chain_version,
                data,
            } => {
                let (claim, written) = self.admit_and_store(chunk, data.as_ref())?;
                let (meta, rec) = self.cat.install(chunk, version, chain_version, written);
                self.log.stage(&rec, claim);
                Ok(ChunkDone::Committed(meta))
            }
        }
    }

    /// Makes the batch durable: data first, then the records naming it.
    fn sync(&mut self) -> io::Result<()> {
        if std::mem::take(&mut self.wrote_data) {
            self.data.sync_data()?;
        }
        if self.log.has_staged() {
            self.log.flush()?;
            let freed = self.cat.durable();
            self.space.released(&*self.data, &self.cat, &freed);
            self.log.maybe_compact(self.cat.chunks())?;
        }
        Ok(())
    }
}

impl ChunkStore for FileChunkStore {
    fn submit(&mut self, id: IoId, op: ChunkOp) {
        self.queue.push_back((id, op));
    }

    fn poll_completions(&mut self, done: &mut Vec<Done>) {
        let mut batch = Vec::with_capacity(self.queue.len());
        while let Some((id, op)) = self.queue.pop_front() {
            let result = if self.failed {
                Err(ChunkError::Failed)
            } else {
                self.execute(op)
            };
            batch.push((id, result));
        }
        if !self.failed {
            if let Err(e) = self.sync() {
                self.io_failed(e);
            }
        }
        if self.failed {
            // Nothing of a failed batch is reported as done: it may not be durable.
            for (_, r) in &mut batch {
                if r.is_ok() {
                    *r = Err(ChunkError::Failed);
                }
            }
        }
        done.extend(batch);
    }

    fn in_flight(&self) -> usize {
        self.queue.len()
    }
}

impl super::rot::Rot for FileChunkStore {
    fn rot(&mut self, pick: u64) -> io::Result<Option<t3fs_core::ids::ChunkId>> {
        let Some((chunk, offset, bit)) = super::rot::site(&self.cat, pick) else {
            return Ok(None);
        };
        let mut b = [0u8; 1];
        self.data.read_at(&mut b, offset)?;
        b[0] ^= 1 << bit;
        self.data.write_at(&b, offset)?;
        Ok(Some(chunk))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use t3fs_core::chunk::UpdateKind;

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("t3fs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn file_store_conforms() {
        let root = tmp("file-suite");
        let mut n = 0;
        t3fs_core::testing::chunk_store_suite(|| {
            n += 1;
            FileChunkStore::open(&root.join(n.to_string())).expect("open")
        });
        std::fs::remove_dir_all(&root).expect("cleanup");
    }

    #[test]
    fn file_store_conforms_when_reopened_after_every_op() {
        // Each check runs on a store reopened from disk, so boot must list what was written.
        let root = tmp("file-reopen");
        let mut n = 0;
        t3fs_core::testing::chunk_store_suite(|| {
            n += 1;
            Reopening {
                dir: root.join(n.to_string()),
                store: None,
            }
        });
        std::fs::remove_dir_all(&root).expect("cleanup");
    }

    /// Reopens the store from disk before every operation.
    struct Reopening {
        dir: std::path::PathBuf,
        store: Option<FileChunkStore>,
    }

    impl ChunkStore for Reopening {
        fn submit(&mut self, id: IoId, op: ChunkOp) {
            if self.store.as_ref().is_none_or(|s| s.in_flight() == 0) {
                let opts = Options { compact_min: 4 };
                let s = FileChunkStore::open_with(Arc::new(StdFs), &self.dir, opts);
                self.store = Some(s.expect("reopen"));
            }
            self.store.as_mut().expect("open").submit(id, op);
        }
        fn poll_completions(&mut self, done: &mut Vec<Done>) {
            if let Some(s) = &mut self.store {
                s.poll_completions(done);
            }
        }
    }

    #[test]
    fn rot_at_rest_is_corrupt_never_served() {
        use t3fs_core::ids::{ChainVersion, ChunkId, ChunkVersion};
        let dir = tmp("file-rot");
        let mut s = FileChunkStore::open(&dir).expect("open");
        let a = ChunkId::new(1, 0);
        let mut done = Vec::new();
        let ops = [
            ChunkOp::Update {
                chunk: a,
                version: ChunkVersion(1),
                kind: UpdateKind::Replace {
                    data: b"precious".to_vec().into(),
                },
                tag: None,
            },
            ChunkOp::Commit {
                chunk: a,
                version: ChunkVersion(1),
                chain_version: ChainVersion(1),
            },
        ];
        for (i, op) in ops.into_iter().enumerate() {
            s.submit(IoId(i as u64), op);
        }
        s.poll_completions(&mut done);
        assert!(done.iter().all(|(_, r)| r.is_ok()), "{done:?}");
        drop(s);
        let path = dir.join(DATA);
        let mut bytes = std::fs::read(&path).expect("data");
        bytes[3] ^= 0x40;
        std::fs::write(&path, bytes).expect("rot");
        let mut s = FileChunkStore::open(&dir).expect("reopen");
        let read = |unverified| ChunkOp::Read {
            chunk: a,
            offset: 0,
            len: 8,
            uncommitted: false,
            unverified,
        };
        s.submit(IoId(10), read(false));
        s.submit(
            IoId(11),
            ChunkOp::Update {
                chunk: a,
                version: ChunkVersion(2),
                kind: UpdateKind::Extend { len: 20 },
                tag: None,
            },
        );
        s.submit(IoId(12), read(true));
        done.clear();
        s.poll_completions(&mut done);
        assert_eq!(done[0].1, Err(ChunkError::Corrupt));
        assert_eq!(done[1].1, Err(ChunkError::Corrupt), "no laundering by RMW");
        assert!(
            matches!(&done[2].1, Ok(ChunkDone::Read(Some(r))) if r.data[..] != b"precious"[..])
        );
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
