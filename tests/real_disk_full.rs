//! A full disk for real: the chunk stores (file and io_uring) and the embedded KV engine (both
//! forms) each on their own 8 MiB tmpfs, filled until the file system refuses. Checked: what
//! does not fit is refused with a clear answer (`NoSpace` from a store, `NoSpace` with nothing
//! written from the engine, never `Failed`, `Unavailable` or `CommitUnknown`), everything
//! acknowledged before reads back byte for byte, reads go on and nothing is poisoned, removes
//! and deletes go through on the full disk, and then writes fit again (the stores punch the
//! blocks of removed chunks out of their data file; the engine compacts deleted keys away), and
//! a reopen finds every acknowledged write. The stores' metadata log is also run out of room on
//! the full disk (refused, not poisoned) and then given room by a file removed beside it. The
//! in-process versions of these checks, on a file system model, are `chunk_store::space_tests`
//! and `wal_kv::tests` in t3fs-real.
//!
//! Needs root (to mount the tmpfs); skips (recorded in the skip report) otherwise. Each tmpfs
//! is unmounted when its test ends, pass or fail.
//!
//! Reproduce: `cargo nextest run -p t3fs --test real_disk_full`.

mod support;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use t3fs_core::chunk::{ChunkDone, ChunkError, ChunkOp, ChunkStore, UpdateKind};
use t3fs_core::ids::{ChainVersion, ChunkId, ChunkVersion, IoId};
use t3fs_core::kv::{KvEngine, KvError, Txn};
use t3fs_services::chunk_store::{FileChunkStore, UringChunkStore};
use t3fs_services::wal_kv::{SharedWalKv, WalKv};

/// A size-limited tmpfs mounted on a fresh directory; unmounted and removed on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts an 8 MiB tmpfs for the test `name`; `None` (a skip recorded) without root.
    fn mount(name: &str) -> Option<Self> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            support::skip("root (mounting a size-limited tmpfs)", "host:root");
            return None;
        }
        if !support::have_or_skip("mount", "mount") {
            return None;
        }
        let dir = std::env::temp_dir().join(format!("t3fs-full-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mount point");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=8m", "tmpfs"])
            .arg(&dir)
            .output()
            .expect("mount runs");
        if !out.status.success() {
            let _ = std::fs::remove_dir(&dir);
            let why = support::text_of(&out);
            support::skip(
                &format!("mounting a tmpfs (root with CAP_SYS_ADMIN): {}", why.trim()),
                "host:root",
            );
            return None;
        }
        Some(Self(dir))
    }

    /// Bytes free on it.
    fn free(&self) -> u64 {
        let dir = File::open(&self.0).expect("the mount point");
        t3fs_services::durable::fs::free_space(&dir).expect("statvfs")
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let umount = |lazy: bool| {
            let mut c = Command::new("umount");
            if lazy {
                c.arg("-l");
            }
            c.arg(&self.0).status().is_ok_and(|s| s.success())
        };
        if !umount(false) && !umount(true) {
            eprintln!("could not unmount {}", self.0.display());
            return;
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

type Res = Result<ChunkDone, ChunkError>;

/// Runs `ops` as one batch; their results in order. No operation may answer `Failed`.
fn run(s: &mut dyn ChunkStore, ops: Vec<ChunkOp>) -> Vec<Res> {
    let n = ops.len();
    for (i, op) in ops.into_iter().enumerate() {
        s.submit(IoId(i as u64), op);
    }
    let mut done = Vec::new();
    loop {
        s.poll_completions(&mut done);
        if done.len() == n {
            break;
        }
        s.wait(Duration::from_millis(1));
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

const CHUNK_LEN: usize = 256 << 10;

fn chunk(i: u32) -> ChunkId {
    ChunkId::new(1, i)
}

fn content(i: u32) -> Vec<u8> {
    let mut x = u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..CHUNK_LEN)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Writes chunk `i`'s content at version `v` and commits it: the update's answer (the commit's
/// must match it).
fn put(s: &mut dyn ChunkStore, i: u32, v: u32) -> Res {
    let ops = vec![
        ChunkOp::Update {
            chunk: chunk(i),
            version: ChunkVersion(v),
            kind: UpdateKind::Replace {
                data: content(i).into(),
            },
            tag: None,
        },
        ChunkOp::Commit {
            chunk: chunk(i),
            version: ChunkVersion(v),
            chain_version: ChainVersion(1),
        },
    ];
    let mut r = run(s, ops);
    let (update, commit) = (r.remove(0), r.remove(0));
    match &update {
        Ok(_) => assert!(commit.is_ok(), "chunk {i}: commit {commit:?}"),
        Err(_) => assert_eq!(commit, Err(ChunkError::VersionConflict), "nothing pending"),
    }
    update
}

fn remove(s: &mut dyn ChunkStore, i: u32, v: u32) {
    let ops = vec![
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
    ];
    let r = run(s, ops);
    assert!(
        r.iter().all(Result::is_ok),
        "remove {i} on a full disk: {r:?}"
    );
}

fn read(s: &mut dyn ChunkStore, i: u32) -> Option<Vec<u8>> {
    let op = ChunkOp::Read {
        chunk: chunk(i),
        offset: 0,
        len: CHUNK_LEN as u32,
        uncommitted: false,
        unverified: false,
    };
    match run(s, vec![op]).pop() {
        Some(Ok(ChunkDone::Read(r))) => r.map(|r| r.data.to_vec()),
        other => panic!("read {i}: {other:?}"),
    }
}

fn check_all(s: &mut dyn ChunkStore, acked: &BTreeMap<u32, Vec<u8>>, when: &str) {
    for (&i, want) in acked {
        let got = read(s, i);
        assert!(
            got.as_ref() == Some(want),
            "chunk {i} {when}: wrong or missing"
        );
    }
}

/// Writes chunks from `from` on until the store answers `NoSpace`; the ones acknowledged.
fn fill(s: &mut dyn ChunkStore, from: u32, acked: &mut BTreeMap<u32, Vec<u8>>) -> usize {
    let mut i = from;
    loop {
        match put(s, i, 1) {
            Ok(_) => acked.insert(i, content(i)),
            Err(ChunkError::NoSpace) => return (i - from) as usize,
            Err(e) => panic!("chunk {i}: {e:?}, not NoSpace"),
        };
        i += 1;
        assert!(i < from + 100, "an 8 MiB file system never filled");
    }
}

/// A store on a full tmpfs: filled, some chunks removed, written again; filled again and its
/// metadata log's room used up by removes; space freed outside it, written again; reopened.
fn store_on_a_full_disk(name: &str, open: fn(&Path) -> Box<dyn ChunkStore>) {
    let Some(fs) = Tmpfs::mount(name) else {
        return;
    };
    // Room that something else on the file system holds, given back at the end.
    let ballast = fs.0.join("ballast");
    std::fs::write(&ballast, vec![1u8; 2 << 20]).expect("ballast");
    let dir = fs.0.join("target");
    let mut s = open(&dir);
    let mut acked = BTreeMap::new();
    let n = fill(&mut *s, 0, &mut acked);
    assert!(n >= 6, "only {n} chunks fitted");
    check_all(&mut *s, &acked, "when full");
    // Not poisoned: new content is still refused with NoSpace (not Failed), lists answer.
    assert_eq!(put(&mut *s, 90, 1), Err(ChunkError::NoSpace));
    match run(&mut *s, vec![ChunkOp::List]).pop() {
        Some(Ok(ChunkDone::Listed(l))) => assert_eq!(l.len(), acked.len()),
        other => panic!("list: {other:?}"),
    }
    // Removes go through on the full disk, and give their blocks back to the file system.
    let free = fs.free();
    for i in 0..4 {
        remove(&mut *s, i, 2);
        acked.remove(&i);
    }
    assert!(
        fs.free() >= free + 3 * CHUNK_LEN as u64,
        "removed chunks' blocks given back: {} then {} bytes free",
        free,
        fs.free()
    );
    // Writes fit again.
    for i in [90, 91] {
        assert!(put(&mut *s, i, 1).is_ok(), "chunk {i} after the removes");
        acked.insert(i, content(i));
    }
    check_all(&mut *s, &acked, "after the removes");
    // Full again, then the metadata log's own room used up by removes of chunks that are not
    // there (records, no content): refused with NoSpace too, never a failed append.
    fill(&mut *s, 100, &mut acked);
    let mut next = 10_000;
    loop {
        let ops = (next..next + 2000).flat_map(|i| {
            let (version, chain_version) = (ChunkVersion(1), ChainVersion(1));
            [
                ChunkOp::Update {
                    chunk: chunk(i),
                    version,
                    kind: UpdateKind::Remove,
                    tag: None,
                },
                ChunkOp::Commit {
                    chunk: chunk(i),
                    version,
                    chain_version,
                },
            ]
        });
        next += 2000;
        if run(&mut *s, ops.collect()).contains(&Err(ChunkError::NoSpace)) {
            break;
        }
        assert!(next < 100_000, "the metadata log never ran out of room");
    }
    check_all(&mut *s, &acked, "with the log full");
    eprintln!(
        "{name}: {n} chunks of {} KiB fitted; the log's room ran out after {} removes",
        CHUNK_LEN >> 10,
        next - 10_000
    );
    // Space freed outside the store: writes fit again.
    std::fs::remove_file(&ballast).expect("ballast gone");
    assert!(put(&mut *s, 95, 1).is_ok(), "a write once space was freed");
    acked.insert(95, content(95));
    drop(s);
    let mut s = open(&dir);
    check_all(&mut *s, &acked, "after a reopen");
    for i in 0..4 {
        assert_eq!(read(&mut *s, i), None, "removed chunk {i} came back");
    }
}

#[test]
fn the_file_store_on_a_full_disk() {
    store_on_a_full_disk("file", |dir| {
        Box::new(FileChunkStore::open(dir).expect("open the file store"))
    });
}

#[test]
fn the_uring_store_on_a_full_disk() {
    store_on_a_full_disk("uring", |dir| {
        Box::new(UringChunkStore::open(dir).expect("open the io_uring store"))
    });
}

const VALUE_LEN: usize = 16 << 10;

fn value(i: u32) -> Vec<u8> {
    let mut v = content(i);
    v.truncate(VALUE_LEN);
    v
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn get(kv: &mut dyn KvEngine, k: &[u8]) -> Option<Vec<u8>> {
    Txn::new(kv).get(k).expect("a read on a full disk")
}

/// Fills the engine on a full tmpfs, deletes most keys, writes again, reopens.
fn kv_on_a_full_disk(name: &str, open: fn(&Path) -> Box<dyn KvEngine>) {
    let Some(fs) = Tmpfs::mount(name) else {
        return;
    };
    let dir = fs.0.join("kv");
    let mut kv = open(&dir);
    let mut acked = BTreeMap::new();
    let mut i = 0;
    let refused = loop {
        let mut t = Txn::new(&mut *kv);
        t.set(&key(i), &value(i));
        match t.commit() {
            Ok(_) => acked.insert(i, value(i)),
            Err(e) => break e,
        };
        i += 1;
        assert!(i < 1000, "an 8 MiB file system never filled");
    };
    assert_eq!(
        refused,
        KvError::NoSpace,
        "refused with nothing written, not an unknown outcome"
    );
    assert!(acked.len() >= 100, "only {} commits fitted", acked.len());
    eprintln!(
        "{name}: {} commits of {} KiB fitted",
        acked.len(),
        VALUE_LEN >> 10
    );
    // Not poisoned: reads answer, every acknowledged commit is there.
    for (&i, v) in &acked {
        assert_eq!(
            get(&mut *kv, &key(i)).as_ref(),
            Some(v),
            "key {i} when full"
        );
    }
    let mut t = Txn::new(&mut *kv);
    t.set(&key(i), &value(i));
    assert_eq!(t.commit(), Err(KvError::NoSpace), "still full");
    // Deletes go through on the full disk.
    let keep: Vec<u32> = acked.keys().copied().step_by(20).collect();
    for i in acked
        .keys()
        .copied()
        .filter(|i| !keep.contains(i))
        .collect::<Vec<_>>()
    {
        let mut t = Txn::new(&mut *kv);
        t.clear(&key(i));
        t.commit().expect("a delete on a full disk");
        acked.remove(&i);
    }
    // Writes fit again: the deleted keys are compacted away.
    for i in 5000..5010 {
        let mut t = Txn::new(&mut *kv);
        t.set(&key(i), &value(i));
        t.commit().expect("a write after the deletes");
        acked.insert(i, value(i));
    }
    drop(kv);
    let mut kv = open(&dir);
    for (&i, v) in &acked {
        assert_eq!(
            get(&mut *kv, &key(i)).as_ref(),
            Some(v),
            "key {i} after a reopen"
        );
    }
    assert_eq!(get(&mut *kv, &key(1)), None, "a deleted key came back");
}

#[test]
fn the_kv_engine_on_a_full_disk() {
    kv_on_a_full_disk("walkv", |dir| Box::new(WalKv::open(dir).expect("open")));
}

#[test]
fn the_shared_kv_engine_on_a_full_disk() {
    kv_on_a_full_disk("sharedkv", |dir| {
        Box::new(SharedWalKv::open(dir).expect("open"))
    });
}
