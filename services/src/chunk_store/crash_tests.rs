//! SIGKILL crash tests: a child process (this test binary re-invoked on [`crash_child`] with
//! `T3FS_CRASH_DIR` set) writes through a store on a [`StoreThread`] and prints each commit
//! after its completion; the parent kills it (SIGKILL) after some acknowledgements, reopens the
//! store and checks that every acknowledged commit is there with its exact bytes, and that
//! every listed pending version reads back exactly too. The parent always kills and reaps the
//! child, pass or fail. Three kills per store on one directory: each child continues from the
//! versions the reopened store lists.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use t3fs_core::chunk::{ChunkDone, ChunkOp, ChunkStore, UpdateKind};
use t3fs_core::ids::{ChainVersion, ChunkId, ChunkVersion, IoId};

use super::{FileChunkStore, StoreThread};

const CHUNKS: u32 = 8;

/// The content of version `v` of chunk `c` (same length for every version of a chunk, so a
/// `Write` at offset 0 and a `Replace` give the same result).
fn content(c: u32, v: u32) -> Vec<u8> {
    let len = 3000 + 1500 * c as usize;
    (0..len)
        .map(|i| (i as u32 ^ c.wrapping_mul(31) ^ v.wrapping_mul(131)) as u8)
        .collect()
}

fn open(kind: &str, dir: &Path) -> Box<dyn ChunkStore + Send> {
    match kind {
        "file" => Box::new(FileChunkStore::open(dir).expect("open file store")),
        #[cfg(feature = "uring")]
        "uring" => Box::new(super::UringChunkStore::open(dir).expect("open uring store")),
        other => panic!("no store kind {other}"),
    }
}

fn run1(
    store: &mut dyn ChunkStore,
    op: ChunkOp,
) -> Result<ChunkDone, t3fs_core::chunk::ChunkError> {
    store.submit(IoId(1), op);
    let mut done = Vec::new();
    while done.is_empty() {
        store.poll_completions(&mut done);
        if done.is_empty() {
            store.wait(std::time::Duration::from_millis(1));
        }
    }
    done.pop().expect("one").1
}

fn list(store: &mut dyn ChunkStore) -> Vec<t3fs_core::chunk::ChunkMeta> {
    match run1(store, ChunkOp::List) {
        Ok(ChunkDone::Listed(m)) => m,
        other => panic!("list: {other:?}"),
    }
}

/// The child: writes until killed. A subprocess helper, not a test: ignored (and left out of
/// nextest's default set in .config/nextest.toml), its parent runs it with `--ignored`; it does
/// nothing without its parent's environment.
#[test]
#[ignore = "subprocess helper of sigkill_keeps_acknowledged_commits"]
fn crash_child() {
    let (Ok(dir), Ok(kind)) = (
        std::env::var("T3FS_CRASH_DIR"),
        std::env::var("T3FS_CRASH_KIND"),
    ) else {
        return;
    };
    let mut store = open(&kind, Path::new(&dir));
    let mut next = vec![1u32; CHUNKS as usize];
    for m in list(&mut *store) {
        next[m.chunk.index as usize] = m.committed.0 + 1;
    }
    let (tx, rx) = mpsc::channel();
    let h = StoreThread::spawn(
        "crash-child",
        store,
        Box::new(move |id, r| {
            tx.send((id, r)).expect("parent side alive");
        }),
    )
    .expect("spawn");
    loop {
        for c in 0..CHUNKS {
            let v = next[c as usize];
            let data = content(c, v);
            let kind = if v.is_multiple_of(2) {
                UpdateKind::Write {
                    offset: 0,
                    data: data.into(),
                }
            } else {
                UpdateKind::Replace { data: data.into() }
            };
            let chunk = ChunkId::new(7, c);
            let version = ChunkVersion(v);
            h.submit(
                IoId(2 * c as u64),
                ChunkOp::Update {
                    chunk,
                    version,
                    kind,
                    tag: None,
                },
            );
            h.submit(
                IoId(2 * c as u64 + 1),
                ChunkOp::Commit {
                    chunk,
                    version,
                    chain_version: ChainVersion(1),
                },
            );
            // The next version is left pending, to be listed after the kill.
            let version = ChunkVersion(v + 1);
            let kind = UpdateKind::Replace {
                data: content(c, v + 1).into(),
            };
            h.submit(
                IoId(100 + c as u64),
                ChunkOp::Update {
                    chunk,
                    version,
                    kind,
                    tag: None,
                },
            );
        }
        for _ in 0..3 * CHUNKS {
            let (id, r) = rx.recv().expect("completion");
            let r = r.unwrap_or_else(|e| panic!("child: {id:?}: {e:?}"));
            if let ChunkDone::Committed(m) = r {
                println!("ack {} {}", m.chunk.index, m.committed.0);
            }
        }
        next.iter_mut().for_each(|v| *v += 1);
    }
}

/// Kills and reaps the child however the test ends.
struct Reap(Child);
impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sigkill_keeps_acknowledged_commits(kind: &str) {
    let dir = std::env::temp_dir().join(format!("t3fs-kill-{kind}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (round, kill_after) in [40usize, 150, 400].into_iter().enumerate() {
        let exe = std::env::current_exe().expect("test binary");
        let child = Command::new(exe)
            .args([
                "--exact",
                "chunk_store::crash_tests::crash_child",
                "--ignored",
                "--nocapture",
            ])
            .env("T3FS_CRASH_DIR", &dir)
            .env("T3FS_CRASH_KIND", kind)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn child");
        let mut child = Reap(child);
        let out = BufReader::new(child.0.stdout.take().expect("stdout"));
        let mut acked = vec![0u32; CHUNKS as usize];
        let mut n = 0;
        for line in out.lines() {
            let line = line.expect("child output");
            let Some(rest) = line.strip_prefix("ack ") else {
                continue;
            };
            let (c, v) = rest.split_once(' ').expect("ack c v");
            let (c, v): (usize, u32) = (c.parse().expect("c"), v.parse().expect("v"));
            acked[c] = acked[c].max(v);
            n += 1;
            if n == kill_after {
                break;
            }
        }
        assert_eq!(n, kill_after, "round {round}: the child stopped early");
        drop(child); // SIGKILL mid-stream, then reap.
        let mut store = open(kind, &dir);
        let metas = list(&mut *store);
        for (c, &v) in acked.iter().enumerate() {
            let m = metas.iter().find(|m| m.chunk.index == c as u32);
            let got = m.map_or(0, |m| m.committed.0);
            assert!(
                got >= v,
                "round {round}: chunk {c}: acknowledged v{v}, found v{got}"
            );
        }
        for m in &metas {
            let mut reads = vec![(false, m.committed.0)];
            reads.extend(m.pending.as_ref().map(|p| (true, p.version.0)));
            for (uncommitted, v) in reads {
                let op = ChunkOp::Read {
                    chunk: m.chunk,
                    offset: 0,
                    len: u32::MAX,
                    uncommitted,
                    unverified: false,
                };
                match run1(&mut *store, op) {
                    Ok(ChunkDone::Read(Some(r))) => {
                        assert_eq!(r.version.0, v);
                        assert!(
                            r.data == content(m.chunk.index, v),
                            "{} v{v}: wrong bytes",
                            m.chunk
                        );
                    }
                    other => panic!("round {round}: read {} v{v}: {other:?}", m.chunk),
                }
            }
        }
    }
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn sigkill_file_store_keeps_acknowledged_commits() {
    sigkill_keeps_acknowledged_commits("file");
}

#[cfg(feature = "uring")]
#[test]
fn sigkill_uring_store_keeps_acknowledged_commits() {
    sigkill_keeps_acknowledged_commits("uring");
}
