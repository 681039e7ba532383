//! Per-block checksums at the store API: a read loads and verifies only the blocks it covers
//! (counted through the [`DurableFs`] seam), rot in a block is caught by exactly the reads and
//! read-modify-writes that cover it, a write replacing the whole content reads nothing and
//! heals rot, and a metadata log of format 1 is refused with a clear error.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use t3fs_core::chunk::{ChunkDone, ChunkError, ChunkOp, ChunkStore, UpdateKind};
use t3fs_core::crc32c;
use t3fs_core::ids::{ChainVersion, ChunkId, ChunkVersion, IoId};

use super::{FileChunkStore, Options, BLOCK, DATA};
use crate::durable::fs::{DurableFile, DurableFs, StdFs};

const CHUNK: ChunkId = ChunkId::new(1, 0);
const LEN: usize = 8 * BLOCK as usize;

/// The real file system, counting the bytes read from the data file.
#[derive(Default)]
struct Counting(Arc<AtomicU64>);

struct CountingFile(Box<dyn DurableFile>, Option<Arc<AtomicU64>>);

impl DurableFile for CountingFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        if let Some(n) = &self.1 {
            n.fetch_add(buf.len() as u64, Ordering::Relaxed);
        }
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, data: &[u8], offset: u64) -> std::io::Result<()> {
        self.0.write_at(data, offset)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.0.sync_data()
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.0.set_len(len)
    }
    fn size(&self) -> std::io::Result<u64> {
        self.0.size()
    }
}

impl DurableFs for Counting {
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        StdFs.create_dir_all(dir)
    }
    fn exists(&self, path: &Path) -> std::io::Result<bool> {
        StdFs.exists(path)
    }
    fn open(&self, path: &Path) -> std::io::Result<Box<dyn DurableFile>> {
        let count = path.ends_with(DATA).then(|| self.0.clone());
        Ok(Box::new(CountingFile(StdFs.open(path)?, count)))
    }
    fn create(&self, path: &Path) -> std::io::Result<Box<dyn DurableFile>> {
        StdFs.create(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        StdFs.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        StdFs.sync_dir(dir)
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("t3fs-blocks-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn content() -> Vec<u8> {
    (0..LEN as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8)
        .collect()
}

/// Runs `ops` as one batch; their results in order.
fn run(s: &mut dyn ChunkStore, ops: Vec<ChunkOp>) -> Vec<Result<ChunkDone, ChunkError>> {
    let n = ops.len();
    for (i, op) in ops.into_iter().enumerate() {
        s.submit(IoId(i as u64), op);
    }
    let mut done = Vec::new();
    while done.len() < n {
        s.poll_completions(&mut done);
    }
    done.sort_by_key(|(id, _)| *id);
    done.into_iter().map(|(_, r)| r).collect()
}

fn write(v: u32, offset: u32, data: Vec<u8>) -> Vec<ChunkOp> {
    vec![
        ChunkOp::Update {
            chunk: CHUNK,
            version: ChunkVersion(v),
            kind: UpdateKind::Write {
                offset,
                data: data.into(),
            },
            tag: None,
        },
        ChunkOp::Commit {
            chunk: CHUNK,
            version: ChunkVersion(v),
            chain_version: ChainVersion(1),
        },
    ]
}

fn read(offset: u32, len: u32) -> ChunkOp {
    ChunkOp::Read {
        chunk: CHUNK,
        offset,
        len,
        uncommitted: false,
        unverified: false,
    }
}

fn read_ok(r: &Result<ChunkDone, ChunkError>) -> Vec<u8> {
    match r {
        Ok(ChunkDone::Read(Some(r))) => {
            assert_eq!(r.checksum, crc32c::checksum(&r.data), "the read's checksum");
            r.data.to_vec()
        }
        other => panic!("a read, not {other:?}"),
    }
}

#[test]
fn reads_load_only_their_blocks_and_whole_writes_load_nothing() {
    let dir = tmp("count");
    let fs = Counting::default();
    let bytes = fs.0.clone();
    let mut s = FileChunkStore::open_with(Arc::new(fs), &dir, Options::default()).expect("open");
    let data = content();
    assert!(run(&mut s, write(1, 0, data.clone()))
        .iter()
        .all(Result::is_ok));
    let loaded = |n: &AtomicU64| n.swap(0, Ordering::Relaxed);
    assert_eq!(loaded(&bytes), 0, "a first write reads nothing");
    let r = run(&mut s, vec![read(5000, 100)]);
    assert_eq!(read_ok(&r[0]), &data[5000..5100]);
    assert_eq!(loaded(&bytes), BLOCK, "one block for a read inside it");
    let r = run(&mut s, vec![read(4000, 200)]);
    assert_eq!(read_ok(&r[0]), &data[4000..4200]);
    assert_eq!(
        loaded(&bytes),
        2 * BLOCK,
        "two blocks for a read across their border"
    );
    let r = run(&mut s, vec![read(0, LEN as u32)]);
    assert_eq!(read_ok(&r[0]), data);
    assert_eq!(loaded(&bytes), LEN as u64);
    let fresh: Vec<u8> = data.iter().map(|b| b ^ 0x5a).collect();
    assert!(run(&mut s, write(2, 0, fresh.clone()))
        .iter()
        .all(Result::is_ok));
    assert_eq!(loaded(&bytes), 0, "a whole overwrite reads no base");
    assert!(run(&mut s, write(3, 10, vec![1; 10]))
        .iter()
        .all(Result::is_ok));
    assert_eq!(
        loaded(&bytes),
        LEN as u64,
        "a partial write reads and verifies its base"
    );
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

/// Flips one bit of block `block` of the (single) extent in `dir`'s data file.
fn rot(dir: &Path, block: u64) {
    let path = dir.join(DATA);
    let mut bytes = std::fs::read(&path).expect("data");
    bytes[(block * BLOCK + 17) as usize] ^= 0x08;
    std::fs::write(&path, bytes).expect("rot");
}

/// `name`: the store's own directory (the tests of both stores run at once in one process).
fn rot_is_caught_by_the_reads_covering_it(name: &str, open: impl Fn(&Path) -> Box<dyn ChunkStore>) {
    let dir = tmp(name);
    let data = content();
    let mut s = open(&dir);
    assert!(run(&mut *s, write(1, 0, data.clone()))
        .iter()
        .all(Result::is_ok));
    drop(s);
    rot(&dir, 3);
    let mut s = open(&dir);
    let r = run(
        &mut *s,
        vec![read(0, 3 * BLOCK as u32), read(3 * BLOCK as u32 + 100, 1)],
    );
    assert_eq!(
        read_ok(&r[0]),
        &data[..3 * BLOCK as usize],
        "blocks 0-2 are intact"
    );
    assert_eq!(r[1], Err(ChunkError::Corrupt), "block 3 is not");
    let r = run(&mut *s, vec![read(0, LEN as u32)]);
    assert_eq!(r[0], Err(ChunkError::Corrupt));
    let r = run(&mut *s, write(2, 0, vec![9; 100]));
    assert_eq!(
        r[0],
        Err(ChunkError::Corrupt),
        "no laundering by a partial write"
    );
    let r = run(&mut *s, write(3, 0, data.clone()));
    assert!(
        r.iter().all(Result::is_ok),
        "a whole overwrite heals: {r:?}"
    );
    let r = run(&mut *s, vec![read(0, LEN as u32)]);
    assert_eq!(read_ok(&r[0]), data);
    drop(s);
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn file_store_catches_rot_in_exactly_the_blocks_read() {
    rot_is_caught_by_the_reads_covering_it("rot-file", |d| {
        Box::new(FileChunkStore::open(d).expect("open"))
    });
}

#[cfg(feature = "uring")]
#[test]
fn uring_store_catches_rot_in_exactly_the_blocks_read() {
    rot_is_caught_by_the_reads_covering_it("rot-uring", |d| {
        Box::new(super::UringChunkStore::open(d).expect("open"))
    });
}

#[test]
fn a_format_1_log_is_refused_naming_the_format() {
    let dir = tmp("format1");
    drop(FileChunkStore::open(&dir).expect("open"));
    std::fs::write(dir.join(super::meta::META), b"t3fschk1").expect("an old log");
    let err = FileChunkStore::open(&dir).err().expect("refused");
    assert!(err.to_string().contains("format 1"), "{err}");
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
