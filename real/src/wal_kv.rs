//! The embedded persistent KV engine for a single-host deployment: the in-memory MVCC engine of
//! t3fs-core (which already decides reads, versions and conflicts) made durable by a redo log
//! and a snapshot in one directory.
//!
//! Why not an embedded database crate: the KV contract needs MVCC read versions and
//! serializable conflict checks, which `MemKv` implements and the conformance suite checks;
//! persistence only has to make committed writes survive a crash. A redo log of committed
//! mutations (fdatasync'd before the commit is acknowledged) plus a periodic snapshot does that
//! in ~250 lines with no dependency, where a database crate would add a large build and a
//! second concurrency model to reason about.
//!
//! Files: `wal` holds frames `[len u32][crc32c u32][payload]`, one per committed transaction;
//! `snapshot` holds one frame with every live key. Invariants: a commit is acknowledged only
//! after its frame is durable; opening replays the snapshot then every whole, checksummed frame
//! of the log and cuts the log at the first torn or corrupt frame (a crash mid-append leaves at
//! most the last, unacknowledged commit there); a failed log write poisons the engine (every
//! later call is `Unavailable` until it is reopened), so no reader sees a write that may vanish.
//! Not here: replication (etcd is the distributed engine) and group commit.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use t3fs_core::crc32c;
use t3fs_core::kv::mem::MemKv;
use t3fs_core::kv::{CommitReq, KeyRange, KvEngine, KvError, KvVersion, Mutation, Value};

/// Commits of history the engine keeps for conflict checks and snapshot reads.
const WINDOW: u64 = 100_000;
/// Log size that triggers a snapshot and an empty log.
pub const COMPACT_AT: u64 = 64 << 20;

/// The engine.
pub struct WalKv {
    mem: MemKv,
    dir: PathBuf,
    wal: File,
    wal_bytes: u64,
    compact_at: u64,
    poisoned: bool,
}

fn put_u32(out: &mut Vec<u8>, x: u32) {
    out.extend_from_slice(&x.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, b.len() as u32);
    out.extend_from_slice(b);
}

/// Encodes mutations as one frame payload.
fn encode(mutations: &[Mutation]) -> Vec<u8> {
    let mut p = Vec::new();
    put_u32(&mut p, mutations.len() as u32);
    for m in mutations {
        match m {
            Mutation::Set(k, v) => {
                p.push(0);
                put_bytes(&mut p, k);
                put_bytes(&mut p, v);
            }
            Mutation::Clear(k) => {
                p.push(1);
                put_bytes(&mut p, k);
            }
            Mutation::ClearRange(r) => {
                p.push(2);
                put_bytes(&mut p, &r.begin);
                put_bytes(&mut p, &r.end);
            }
        }
    }
    p
}

struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn u32(&mut self) -> Option<u32> {
        let (h, t) = self.0.split_at_checked(4)?;
        self.0 = t;
        Some(u32::from_le_bytes(h.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.u32()? as usize;
        let (h, t) = self.0.split_at_checked(n)?;
        self.0 = t;
        Some(h.to_vec())
    }
    fn u8(&mut self) -> Option<u8> {
        let (h, t) = self.0.split_first()?;
        self.0 = t;
        Some(*h)
    }
}

fn decode(payload: &[u8]) -> Option<Vec<Mutation>> {
    let mut c = Cursor(payload);
    let n = c.u32()?;
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(match c.u8()? {
            0 => Mutation::Set(c.bytes()?, c.bytes()?),
            1 => Mutation::Clear(c.bytes()?),
            2 => Mutation::ClearRange(KeyRange {
                begin: c.bytes()?,
                end: c.bytes()?,
            }),
            _ => return None,
        });
    }
    c.0.is_empty().then_some(out)
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(payload.len() + 8);
    put_u32(&mut f, payload.len() as u32);
    put_u32(&mut f, crc32c::checksum(payload));
    f.extend_from_slice(payload);
    f
}

/// The whole, checksummed frames at the start of `data` and the length they cover.
fn frames(data: &[u8]) -> (Vec<Vec<Mutation>>, usize) {
    let (mut out, mut at) = (Vec::new(), 0);
    while let Some(head) = data.get(at..at + 8) {
        let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(head[4..].try_into().expect("4 bytes"));
        let Some(payload) = data.get(at + 8..at + 8 + len) else {
            break; // Torn: the crash came mid-append.
        };
        if crc32c::checksum(payload) != crc {
            break;
        }
        let Some(m) = decode(payload) else { break };
        out.push(m);
        at += 8 + len;
    }
    (out, at)
}

fn kv_err(e: KvError) -> io::Error {
    io::Error::other(format!("replaying the log: {e}"))
}

fn apply(mem: &mut MemKv, mutations: Vec<Mutation>) -> io::Result<()> {
    let read_version = mem.read_version().map_err(kv_err)?;
    let req = CommitReq {
        read_version,
        read_conflicts: Vec::new(),
        mutations,
    };
    mem.commit(req).map(|_| ()).map_err(kv_err)
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl WalKv {
    /// Opens (or creates) the engine in `dir`, recovering every acknowledged commit.
    pub fn open(dir: &Path) -> io::Result<Self> {
        Self::open_with(dir, COMPACT_AT)
    }

    /// [`WalKv::open`] with the log size that triggers compaction.
    pub fn open_with(dir: &Path, compact_at: u64) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        let mut mem = MemKv::new(WINDOW);
        if let Ok(snap) = fs::read(dir.join("snapshot")) {
            let (mut all, used) = frames(&snap);
            if used != snap.len() || all.len() != 1 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: damaged snapshot", dir.join("snapshot").display()),
                ));
            }
            apply(&mut mem, all.pop().expect("one frame"))?;
        }
        let mut wal = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(dir.join("wal"))?;
        let mut data = Vec::new();
        wal.read_to_end(&mut data)?;
        let (commits, good) = frames(&data);
        for m in commits {
            apply(&mut mem, m)?;
        }
        if good < data.len() {
            // Cut the torn tail so new frames follow the last whole one.
            wal.set_len(good as u64)?;
            wal.sync_data()?;
        }
        wal.seek(SeekFrom::End(0))?;
        Ok(Self {
            mem,
            dir: dir.to_path_buf(),
            wal,
            wal_bytes: good as u64,
            compact_at,
            poisoned: false,
        })
    }

    /// Bytes in the log now.
    pub fn wal_bytes(&self) -> u64 {
        self.wal_bytes
    }

    /// Writes every live key as the snapshot and empties the log.
    pub fn compact(&mut self) -> io::Result<()> {
        let sets: Vec<Mutation> = self
            .mem
            .latest()
            .into_iter()
            .map(|(k, v)| Mutation::Set(k, v))
            .collect();
        let tmp = self.dir.join("snapshot.tmp");
        let mut f = File::create(&tmp)?;
        f.write_all(&frame(&encode(&sets)))?;
        f.sync_all()?;
        fs::rename(&tmp, self.dir.join("snapshot"))?;
        sync_dir(&self.dir)?;
        // Only now is the log redundant; a crash before this point replays it over the new
        // snapshot, which is harmless (the same writes in the same order).
        self.wal.set_len(0)?;
        self.wal.sync_data()?;
        self.wal_bytes = 0;
        Ok(())
    }

    fn check(&self) -> Result<(), KvError> {
        if self.poisoned {
            Err(KvError::Unavailable)
        } else {
            Ok(())
        }
    }
}

impl KvEngine for WalKv {
    fn read_version(&mut self) -> Result<KvVersion, KvError> {
        self.check()?;
        self.mem.read_version()
    }

    fn get(&mut self, at: KvVersion, key: &[u8]) -> Result<Option<Value>, KvError> {
        self.check()?;
        self.mem.get(at, key)
    }

    fn range(
        &mut self,
        at: KvVersion,
        range: &KeyRange,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Value)>, KvError> {
        self.check()?;
        self.mem.range(at, range, limit)
    }

    fn commit(&mut self, req: CommitReq) -> Result<KvVersion, KvError> {
        self.check()?;
        let bytes = frame(&encode(&req.mutations));
        // The in-memory engine decides (conflicts, version) first; only a commit it accepts is
        // logged, and it is acknowledged only once the log is durable.
        let v = self.mem.commit(req)?;
        let durable = self
            .wal
            .write_all(&bytes)
            .and_then(|()| self.wal.sync_data());
        if durable.is_err() {
            // Applied in memory, maybe not on disk: the caller must treat it as unknown, and no
            // one may read it until a reopen settles what the disk holds.
            self.poisoned = true;
            return Err(KvError::CommitUnknown);
        }
        self.wal_bytes += bytes.len() as u64;
        if self.wal_bytes >= self.compact_at && self.compact().is_err() {
            self.poisoned = true; // The commit itself is durable; later calls are refused.
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use t3fs_core::kv::Txn;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("t3fs-walkv-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    fn put(kv: &mut WalKv, k: &[u8], v: &[u8]) {
        let mut t = Txn::new(kv);
        t.set(k, v);
        t.commit().unwrap();
    }

    fn get(kv: &mut WalKv, k: &[u8]) -> Option<Vec<u8>> {
        Txn::new(kv).get(k).unwrap()
    }

    #[test]
    fn passes_the_kv_conformance_suite() {
        let mut n = 0;
        t3fs_core::testing::kv_suite(|| {
            n += 1;
            WalKv::open(&scratch(&format!("suite{n}"))).unwrap()
        });
    }

    #[test]
    fn acknowledged_commits_survive_a_restart_and_a_torn_tail_is_cut() {
        let dir = scratch("crash");
        let mut kv = WalKv::open(&dir).unwrap();
        put(&mut kv, b"a", b"1");
        put(&mut kv, b"b", b"2");
        let mut t = Txn::new(&mut kv);
        t.clear(b"a");
        t.commit().unwrap();
        let whole = kv.wal_bytes();
        drop(kv);
        // A crash mid-append: half a frame after the last whole one.
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.join("wal"))
            .unwrap();
        f.write_all(&frame(&encode(&[Mutation::Set(b"c".to_vec(), b"3".to_vec())]))[..7])
            .unwrap();
        drop(f);
        let mut kv = WalKv::open(&dir).unwrap();
        assert_eq!(kv.wal_bytes(), whole, "the torn tail is cut");
        assert_eq!(get(&mut kv, b"a"), None);
        assert_eq!(get(&mut kv, b"b"), Some(b"2".to_vec()));
        assert_eq!(
            get(&mut kv, b"c"),
            None,
            "an unacknowledged commit is not there"
        );
        put(&mut kv, b"d", b"4");
        drop(kv);
        let mut kv = WalKv::open(&dir).unwrap();
        assert_eq!(
            get(&mut kv, b"d"),
            Some(b"4".to_vec()),
            "appends after the cut replay"
        );
    }

    /// The writer process of the crash test: commits keys forever, printing each one only
    /// after its commit returned (was acknowledged). A no-op unless the crash test runs it.
    #[test]
    fn crash_child_writer() {
        let Ok(dir) = std::env::var("T3FS_WALKV_CHILD") else {
            return;
        };
        let mut kv = WalKv::open_with(Path::new(&dir), 4_096).unwrap();
        let mut out = io::stdout();
        for i in 0u64.. {
            put(&mut kv, format!("key{i:08}").as_bytes(), &i.to_le_bytes());
            writeln!(out, "acked {i}").unwrap();
            out.flush().unwrap();
        }
    }

    #[test]
    fn every_acknowledged_commit_survives_kill_9() {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let dir = scratch("kill9");
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "wal_kv::tests::crash_child_writer",
                "--nocapture",
            ])
            .env("T3FS_WALKV_CHILD", &dir)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut acked = Vec::new();
        for line in io::BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            if let Some(i) = line.strip_prefix("acked ") {
                acked.push(i.parse::<u64>().unwrap());
                if acked.len() == 300 {
                    child.kill().unwrap(); // SIGKILL: no destructor, no flush, mid-append.
                    break;
                }
            }
        }
        child.wait().unwrap();
        assert_eq!(acked.len(), 300, "the writer ran and was killed mid-stream");
        let mut kv = WalKv::open(&dir).unwrap();
        for i in acked {
            let k = format!("key{i:08}");
            assert_eq!(
                get(&mut kv, k.as_bytes()),
                Some(i.to_le_bytes().to_vec()),
                "{k} lost"
            );
        }
    }

    #[test]
    fn compaction_keeps_every_live_key_and_empties_the_log() {
        let dir = scratch("compact");
        let mut kv = WalKv::open_with(&dir, 2_000).unwrap();
        for i in 0..200u32 {
            put(&mut kv, format!("k{}", i % 50).as_bytes(), &i.to_le_bytes());
        }
        assert!(kv.wal_bytes() < 2_000, "compacted along the way");
        drop(kv);
        let mut kv = WalKv::open(&dir).unwrap();
        for i in 150..200u32 {
            let k = format!("k{}", i % 50);
            assert_eq!(get(&mut kv, k.as_bytes()), Some(i.to_le_bytes().to_vec()));
        }
        // A damaged snapshot is an error naming the file, never an empty store.
        fs::write(dir.join("snapshot"), b"garbage").unwrap();
        let err = WalKv::open(&dir).err().expect("refused");
        assert!(err.to_string().contains("snapshot"), "{err}");
    }
}
