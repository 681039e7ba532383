//! A full file system, in process: the file store on a [`DurableFs`] that, once `full` is set,
//! refuses every write needing new space (past a file's end) with ENOSPC, after writing the part
//! that fits, as a real one does. Writes within a file's size succeed (a simplification: a real
//! file system also allocates for a punched hole; `tests/real_disk_full.rs` at the workspace
//! root runs the stores on a real, size-limited tmpfs). Punches are counted.
//!
//! Checked: a full file system poisons nothing (no `Failed`, ever): new content answers
//! `NoSpace`, reads, removes and commits go on, the blocks of removed chunks are punched, a
//! write fits again in their room, the log's own room running out refuses with `NoSpace` too, a
//! compaction that does not fit is skipped, and everything acknowledged survives a reopen.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use t3fs_core::chunk::{ChunkDone, ChunkError, ChunkOp, ChunkStore, UpdateKind};
use t3fs_core::ids::{ChainVersion, ChunkId, ChunkVersion, IoId};

use super::{FileChunkStore, Options};
use crate::durable::fs::{DurableFile, DurableFs, StdFs};

#[derive(Default)]
struct Disk {
    full: AtomicBool,
    punched: AtomicU64,
}

/// The real file system, refusing new space while `full`.
#[derive(Clone, Default)]
struct Tight(Arc<Disk>);

struct TightFile(Box<dyn DurableFile>, Arc<Disk>);

impl DurableFile for TightFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        let size = self.0.size()?;
        if self.1.full.load(Ordering::SeqCst) && offset + data.len() as u64 > size {
            let fits = size.saturating_sub(offset) as usize;
            self.0.write_at(&data[..fits.min(data.len())], offset)?;
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        self.0.write_at(data, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn size(&self) -> io::Result<u64> {
        self.0.size()
    }
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        self.1.punched.fetch_add(len, Ordering::SeqCst);
        self.0.punch_hole(offset, len)
    }
}

impl DurableFs for Tight {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        StdFs.create_dir_all(dir)
    }
    fn exists(&self, path: &Path) -> io::Result<bool> {
        StdFs.exists(path)
    }
    fn open(&self, path: &Path) -> io::Result<Box<dyn DurableFile>> {
        Ok(Box::new(TightFile(StdFs.open(path)?, self.0.clone())))
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn DurableFile>> {
        Ok(Box::new(TightFile(StdFs.create(path)?, self.0.clone())))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        StdFs.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        StdFs.sync_dir(dir)
    }
}

/// A test's store directory, removed when the test ends (pass or fail).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    let d = std::env::temp_dir().join(format!("t3fs-space-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    Scratch(d)
}

type Res = Result<ChunkDone, ChunkError>;

/// Runs `ops` as one batch; their results in order. No operation may answer `Failed`.
fn run(s: &mut dyn ChunkStore, ops: Vec<ChunkOp>) -> Vec<Res> {
    let n = ops.len();
    for (i, op) in ops.into_iter().enumerate() {
        s.submit(IoId(i as u64), op);
    }
    let mut done = Vec::new();
    while done.len() < n {
        s.poll_completions(&mut done);
    }
    done.sort_by_key(|(id, _)| *id);
    let out: Vec<Res> = done.into_iter().map(|(_, r)| r).collect();
    let failed = out
        .iter()
        .filter(|r| **r == Err(ChunkError::Failed))
        .count();
    assert_eq!(
        failed, 0,
        "the store failed (poisoned): {failed} of {n} operations"
    );
    out
}

fn chunk(i: u32) -> ChunkId {
    ChunkId::new(7, i)
}

fn bytes(i: u32, v: u32) -> Vec<u8> {
    (0..8192u32)
        .map(|b| (b ^ (i * 31) ^ (v * 131)) as u8)
        .collect()
}

/// Replaces chunk `i`'s content at version `v` and commits it.
fn put(i: u32, v: u32, data: Vec<u8>) -> Vec<ChunkOp> {
    vec![
        ChunkOp::Update {
            chunk: chunk(i),
            version: ChunkVersion(v),
            kind: UpdateKind::Replace { data: data.into() },
            tag: None,
        },
        ChunkOp::Commit {
            chunk: chunk(i),
            version: ChunkVersion(v),
            chain_version: ChainVersion(1),
        },
    ]
}

/// Removes chunk `i` at version `v` (absent or not).
fn remove(i: u32, v: u32) -> Vec<ChunkOp> {
    vec![
        ChunkOp::Update {
            chunk: chunk(i),
            version: ChunkVersion(v),
            kind: UpdateKind::Remove,
            tag: None,
        },
        ChunkOp::Commit {
            chunk: chunk(i),
            version: ChunkVersion(v),
            chain_version: ChainVersion(1),
        },
    ]
}

fn read(s: &mut dyn ChunkStore, i: u32) -> Option<Vec<u8>> {
    let op = ChunkOp::Read {
        chunk: chunk(i),
        offset: 0,
        len: 1 << 20,
        uncommitted: false,
        unverified: false,
    };
    match run(s, vec![op]).pop() {
        Some(Ok(ChunkDone::Read(r))) => r.map(|r| r.data.to_vec()),
        other => panic!("read {i}: {other:?}"),
    }
}

fn open(fs: &Tight, dir: &Path, opts: Options) -> FileChunkStore {
    FileChunkStore::open_with(Arc::new(fs.clone()), dir, opts).expect("open")
}

#[test]
fn a_full_file_system_poisons_nothing_and_space_comes_back() {
    let dir = scratch("full");
    let fs = Tight::default();
    let mut s = open(&fs, &dir.0, Options::default());
    let mut want = std::collections::BTreeMap::new();
    for i in 0..5 {
        assert!(run(&mut s, put(i, 1, bytes(i, 1)))
            .iter()
            .all(Result::is_ok));
        want.insert(i, bytes(i, 1));
    }
    fs.0.full.store(true, Ordering::SeqCst);
    // New content needs the data file to grow: refused before anything is recorded.
    let r = run(&mut s, put(10, 1, bytes(10, 1)));
    assert_eq!(r[0], Err(ChunkError::NoSpace));
    for (&i, b) in &want {
        assert_eq!(read(&mut s, i).as_ref(), Some(b), "chunk {i} readable");
    }
    // A remove goes through; once its record is durable its blocks are punched.
    assert!(run(&mut s, remove(0, 2)).iter().all(Result::is_ok));
    want.remove(&0);
    assert!(
        fs.0.punched.load(Ordering::SeqCst) >= 8192,
        "freed blocks punched"
    );
    // Its room takes the next write.
    assert!(run(&mut s, put(10, 1, bytes(10, 1)))
        .iter()
        .all(Result::is_ok));
    want.insert(10, bytes(10, 1));
    // Commits and removes only (no content) until the log's own room is spent: refused with
    // NoSpace, never a failed append. New content was refused before, at the reserve.
    let mut refused = false;
    let mut next = 1000;
    while !refused {
        let ops: Vec<ChunkOp> = (next..next + 2000).flat_map(|i| remove(i, 1)).collect();
        next += 2000;
        refused = run(&mut s, ops).contains(&Err(ChunkError::NoSpace));
        assert!(next < 100_000, "the log never ran out of room");
    }
    let r = run(&mut s, put(11, 1, vec![1; 100]));
    assert_eq!(
        r[0],
        Err(ChunkError::NoSpace),
        "content refused at the reserve"
    );
    for (&i, b) in &want {
        assert_eq!(
            read(&mut s, i).as_ref(),
            Some(b),
            "chunk {i} readable when full"
        );
    }
    // Space again: writes succeed, and everything acknowledged survives a reopen.
    fs.0.full.store(false, Ordering::SeqCst);
    assert!(run(&mut s, put(20, 1, bytes(20, 1)))
        .iter()
        .all(Result::is_ok));
    want.insert(20, bytes(20, 1));
    drop(s);
    let mut s = open(&fs, &dir.0, Options::default());
    for (&i, b) in &want {
        assert_eq!(
            read(&mut s, i).as_ref(),
            Some(b),
            "chunk {i} after a reopen"
        );
    }
    assert_eq!(read(&mut s, 0), None, "the removed chunk stays removed");
}

#[test]
fn a_compaction_that_does_not_fit_is_skipped() {
    let dir = scratch("compact");
    let fs = Tight::default();
    let opts = Options { compact_min: 4 };
    let mut s = open(&fs, &dir.0, opts);
    assert!(run(&mut s, put(1, 1, bytes(1, 1)))
        .iter()
        .all(Result::is_ok));
    fs.0.full.store(true, Ordering::SeqCst);
    // Truncates write no content, so only the compaction's copy of the log needs space.
    let mut v = 2;
    for _ in 0..10 {
        let ops = vec![
            ChunkOp::Update {
                chunk: chunk(1),
                version: ChunkVersion(v),
                kind: UpdateKind::Truncate { len: 0 },
                tag: None,
            },
            ChunkOp::Commit {
                chunk: chunk(1),
                version: ChunkVersion(v),
                chain_version: ChainVersion(1),
            },
        ];
        assert!(run(&mut s, ops).iter().all(Result::is_ok));
        v += 1;
    }
    let tmp = std::fs::metadata(dir.0.join("meta.tmp")).expect("a compaction was tried");
    assert_eq!(tmp.len(), 0, "the copy that did not fit is cut");
    fs.0.full.store(false, Ordering::SeqCst);
    assert!(run(&mut s, put(1, v, bytes(1, v)))
        .iter()
        .all(Result::is_ok));
    for _ in 0..10 {
        v += 1;
        assert!(run(&mut s, put(1, v, bytes(1, v)))
            .iter()
            .all(Result::is_ok));
    }
    assert!(
        !dir.0.join("meta.tmp").exists(),
        "compacted (renamed over the log) once there was room"
    );
    drop(s);
    let mut s = open(&fs, &dir.0, opts);
    assert_eq!(read(&mut s, 1), Some(bytes(1, v)));
}
