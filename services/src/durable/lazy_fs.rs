//! A test-only, in-memory [`DurableFs`] that forgets at a simulated power loss what was not made
//! durable (in the manner of LazyFS): a file's writes since its last fdatasync, and directory
//! entries (creations, renames) made since the directory's last fsync.
//!
//! Why: killing a process (kill -9) leaves the page cache intact, so it cannot tell a missing
//! fsync from a present one; this can. The power fails at the n-th mutating call
//! ([`LazyFs::fail_after`]): that call and every later one fail, as on a dead machine. The power
//! then comes back in one of two ways, one per engine's power-loss suite, each as that suite had
//! it before this layer was shared (so that its seeds keep exercising what they did):
//! - [`LazyFs::crash_writes`] (the chunk store's): per file, the durable contents plus a random
//!   prefix of its unsynced writes in order, the last one possibly torn (a prefix of its
//!   bytes), as a disk that wrote part of its queue;
//! - [`LazyFs::crash_appends`] (WalKv's): per file, the durable contents plus a prefix of the
//!   bytes appended since (none when the file was cut since its last sync).
//!
//! Lies, which show that a suite's check can fail: `lie_sync` names files whose fdatasyncs do
//! nothing (a disk that ignores flushes: the chunk store's checksums must catch what it loses),
//! `skip_data_sync` makes every fdatasync do nothing, `skip_dir_sync` every directory fsync.
//! Faults with the power on: `fail_next_sync` (EIO), `hold_syncs` (fdatasyncs block until
//! [`LazyFs::release`]), `sync_delay`. `full` makes it a full file system: a call that needs new
//! space (a write or append past a file's allocated blocks, a reservation past them) fails with
//! ENOSPC and changes nothing, unless space freed while full (a truncation, which gives back the
//! blocks past the new size, or a file replaced by a rename) covers it.
//!
//! Not modelled: directories themselves (they always exist), reordering of unsynced writes
//! within a file, and how much space there is (full or not, nothing between).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::fs::{DurableFile, DurableFs};

/// One unsynced change of a file, in the order made.
enum Change {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

impl Change {
    /// Applies the change to `data`, a write only its first `keep` bytes (all when `None`).
    fn apply(&self, data: &mut Vec<u8>, keep: Option<usize>) {
        match self {
            Self::Write(off, bytes) => {
                let bytes = &bytes[..keep.unwrap_or(bytes.len()).min(bytes.len())];
                let (start, end) = (*off as usize, *off as usize + bytes.len());
                if data.len() < end {
                    data.resize(end, 0);
                }
                data[start..end].copy_from_slice(bytes);
            }
            Self::SetLen(len) => data.resize(*len as usize, 0),
        }
    }
}

#[derive(Default)]
struct Node {
    data: Vec<u8>,
    durable: Vec<u8>,
    /// The changes since the last fdatasync that took effect.
    unsynced: Vec<Change>,
    /// Blocks are allocated up to here (or to the data's end, if further).
    reserved: usize,
}

impl Node {
    fn allocated(&self) -> usize {
        self.reserved.max(self.data.len())
    }

    /// What [`LazyFs::crash_writes`] keeps: the durable bytes, then `pick`'s prefix of the
    /// unsynced changes, the next one maybe torn.
    fn kept_writes(&self, pick: &mut impl FnMut(usize) -> usize) -> Vec<u8> {
        let mut data = self.durable.clone();
        let kept = pick(self.unsynced.len() + 1);
        for c in &self.unsynced[..kept] {
            c.apply(&mut data, None);
        }
        if let Some(c @ Change::Write(_, bytes)) = self.unsynced.get(kept) {
            if pick(2) == 1 {
                c.apply(&mut data, Some(pick(bytes.len() + 1)));
            }
        }
        data
    }

    /// What [`LazyFs::crash_appends`] keeps: the durable bytes and `torn`'s part of what was
    /// appended after them.
    fn kept_appends(&self, torn: &mut impl FnMut(usize) -> usize) -> Vec<u8> {
        let appended = self.data.len().saturating_sub(self.durable.len());
        if appended > 0 && self.data.starts_with(&self.durable) {
            let keep = torn(appended).min(appended);
            self.data[..self.durable.len() + keep].to_vec()
        } else {
            self.durable.clone()
        }
    }
}

#[derive(Default)]
pub(crate) struct State {
    nodes: Vec<Node>,
    names: BTreeMap<PathBuf, usize>,
    durable_names: BTreeMap<PathBuf, usize>,
    /// Mutating calls left before the power fails; `None`: it does not.
    countdown: Option<u64>,
    /// The power is out: every call fails until a crash brings it back.
    down: bool,
    /// What each power failure interrupted (for checking coverage): "call file".
    pub(crate) cut_in: Vec<String>,
    /// Lie: fdatasyncs of the files of these names (as opened) do nothing.
    pub(crate) lie_sync: Vec<String>,
    /// Lie: directory fsyncs do nothing.
    pub(crate) skip_dir_sync: bool,
    /// Lie: fdatasyncs do nothing.
    pub(crate) skip_data_sync: bool,
    /// The next fdatasync fails (with EIO), the power staying on.
    pub(crate) fail_next_sync: bool,
    /// fdatasyncs that block until this is cleared (see [`LazyFs::release`]).
    pub(crate) hold_syncs: bool,
    /// fdatasyncs now blocked by `hold_syncs`.
    pub(crate) held: usize,
    /// Each fdatasync takes this long (outside the lock), as a disk's flush does.
    pub(crate) sync_delay: Duration,
    /// fdatasyncs made (including skipped ones).
    pub(crate) data_syncs: u64,
    /// The file system is full: what needs new space fails with ENOSPC, beyond `credit`.
    pub(crate) full: bool,
    /// Bytes freed while full, which later calls may allocate again.
    credit: usize,
}

impl State {
    /// Allocates blocks for `ino` up to `to` bytes; ENOSPC when full beyond the credit.
    fn allocate(&mut self, ino: usize, to: usize) -> io::Result<()> {
        let extra = to.saturating_sub(self.nodes[ino].allocated());
        if self.full && extra > 0 {
            if extra > self.credit {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            self.credit -= extra;
        }
        let node = &mut self.nodes[ino];
        node.reserved = node.reserved.max(to);
        Ok(())
    }

    /// `ino`'s blocks from `to` on are given back.
    fn free(&mut self, ino: usize, to: usize) {
        let freed = self.nodes[ino].allocated().saturating_sub(to);
        if self.full {
            self.credit += freed;
        }
        self.nodes[ino].reserved = to;
    }

    /// Counts one mutating call named `what` on `path`; an error if the power is (now) out.
    fn step(&mut self, what: &str, path: &Path) -> io::Result<()> {
        if self.down {
            return Err(eio("the power is out"));
        }
        match self.countdown {
            Some(0) => {
                self.down = true;
                self.cut_in.push(format!("{what} {}", name(path)));
                Err(eio("the power failed"))
            }
            Some(n) => {
                self.countdown = Some(n - 1);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// [`State::step`] for a call on the file `ino`, named by its current name (or its inode
    /// when it has none).
    fn step_file(&mut self, what: &str, ino: usize) -> io::Result<()> {
        let path = self
            .names
            .iter()
            .find(|(_, &i)| i == ino)
            .map_or_else(|| PathBuf::from(format!("inode{ino}")), |(p, _)| p.clone());
        self.step(what, &path)
    }

    fn new_node(&mut self, path: &Path) -> usize {
        self.nodes.push(Node::default());
        let ino = self.nodes.len() - 1;
        self.names.insert(path.to_path_buf(), ino);
        ino
    }

    /// Makes `c` to `ino`'s contents, not yet durable.
    fn change(&mut self, ino: usize, c: Change) {
        let node = &mut self.nodes[ino];
        c.apply(&mut node.data, None);
        node.unsynced.push(c);
    }
}

/// The file system; clones share it.
#[derive(Clone, Default)]
pub(crate) struct LazyFs {
    inner: Arc<(Mutex<State>, Condvar)>,
}

fn eio(why: &str) -> io::Error {
    io::Error::other(why.to_string())
}

fn name(path: &Path) -> String {
    path.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

impl LazyFs {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The state, to read counters or set switches.
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.inner.0.lock().unwrap()
    }

    /// The power fails during the `n`-th mutating call from now (`n` = 0: the next one).
    pub(crate) fn fail_after(&self, n: u64) {
        self.state().countdown = Some(n);
    }

    /// Whether the power is out.
    pub(crate) fn is_down(&self) -> bool {
        self.state().down
    }

    /// Unblocks held fdatasyncs and stops holding new ones.
    pub(crate) fn release(&self) {
        self.state().hold_syncs = false;
        self.inner.1.notify_all();
    }

    /// Waits until `n` fdatasyncs are held.
    pub(crate) fn wait_held(&self, n: usize) {
        let mut s = self.state();
        while s.held < n {
            s = self.inner.1.wait(s).unwrap();
        }
    }

    /// The power comes back, each file keeping its durable contents plus a prefix of its
    /// unsynced writes, the next one maybe torn. `pick(n)` chooses a number in `0..n` (the
    /// test's random source): how many writes survive, whether the next one is torn, and where.
    pub(crate) fn crash_writes(&self, mut pick: impl FnMut(usize) -> usize) {
        self.power_back(|node| node.kept_writes(&mut pick));
    }

    /// The power comes back, each file keeping its durable contents plus `torn(n)` (at most
    /// `n`) of the `n` bytes appended since, as a disk that wrote part of them.
    pub(crate) fn crash_appends(&self, mut torn: impl FnMut(usize) -> usize) {
        self.power_back(|node| node.kept_appends(&mut torn));
    }

    /// Names are what was durable, each file's contents what `kept` says survived.
    fn power_back(&self, mut kept: impl FnMut(&Node) -> Vec<u8>) {
        let mut s = self.state();
        s.names = s.durable_names.clone();
        for node in &mut s.nodes {
            let data = kept(node);
            node.unsynced.clear();
            node.reserved = data.len();
            node.durable = data.clone();
            node.data = data;
        }
        s.countdown = None;
        s.down = false;
    }

    fn handle(&self, ino: usize, path: &Path) -> Box<dyn DurableFile> {
        Box::new(Handle {
            fs: self.clone(),
            ino,
            name: name(path),
        })
    }
}

impl DurableFs for LazyFs {
    fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        Ok(self.state().names.contains_key(path))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let s = self.state();
        if s.down {
            return Err(eio("the power is out"));
        }
        match s.names.get(path) {
            Some(&ino) => Ok(s.nodes[ino].data.clone()),
            None => Err(io::ErrorKind::NotFound.into()),
        }
    }

    fn open(&self, path: &Path) -> io::Result<Box<dyn DurableFile>> {
        let mut s = self.state();
        s.step("open", path)?;
        let ino = match s.names.get(path) {
            Some(&ino) => ino,
            None => s.new_node(path),
        };
        Ok(self.handle(ino, path))
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn DurableFile>> {
        let mut s = self.state();
        s.step("create", path)?;
        let ino = s.new_node(path);
        Ok(self.handle(ino, path))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.state();
        s.step("rename", to)?;
        let ino = s.names.remove(from).ok_or(io::ErrorKind::NotFound)?;
        if let Some(old) = s.names.insert(to.to_path_buf(), ino) {
            // The file replaced goes (the engines hold no handle on a replaced file).
            s.free(old, 0);
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.state();
        s.step("sync dir", dir)?;
        if s.skip_dir_sync {
            return Ok(());
        }
        let in_dir = |p: &PathBuf| p.parent() == Some(dir);
        let s = &mut *s;
        s.durable_names.retain(|p, _| !in_dir(p));
        for (p, &ino) in s.names.iter().filter(|(p, _)| in_dir(p)) {
            s.durable_names.insert(p.clone(), ino);
        }
        Ok(())
    }
}

struct Handle {
    fs: LazyFs,
    ino: usize,
    /// The name it was opened by, which `lie_sync` names.
    name: String,
}

impl DurableFile for Handle {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let s = self.fs.state();
        if s.down {
            return Err(eio("the power is out"));
        }
        let data = &s.nodes[self.ino].data;
        let src = data
            .get(offset as usize..offset as usize + buf.len())
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        let mut s = self.fs.state();
        s.step_file("write", self.ino)?;
        s.allocate(self.ino, offset as usize + data.len())?;
        s.change(self.ino, Change::Write(offset, data.to_vec()));
        Ok(())
    }

    fn append(&self, data: &[u8]) -> io::Result<()> {
        let mut s = self.fs.state();
        s.step_file("append", self.ino)?;
        let at = s.nodes[self.ino].data.len();
        s.allocate(self.ino, at + data.len())?;
        s.change(self.ino, Change::Write(at as u64, data.to_vec()));
        Ok(())
    }

    fn reserve(&self, offset: u64, len: u64) -> io::Result<()> {
        let mut s = self.fs.state();
        s.step_file("reserve", self.ino)?;
        s.allocate(self.ino, (offset + len) as usize)
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut s = self.fs.state();
        if s.hold_syncs {
            s.held += 1;
            self.fs.inner.1.notify_all();
            while s.hold_syncs {
                s = self.fs.inner.1.wait(s).unwrap();
            }
            s.held -= 1;
        }
        let delay = s.sync_delay;
        if !delay.is_zero() {
            drop(s);
            std::thread::sleep(delay);
            s = self.fs.state();
        }
        s.step_file("sync", self.ino)?;
        s.data_syncs += 1;
        if std::mem::take(&mut s.fail_next_sync) {
            return Err(eio("injected fdatasync failure"));
        }
        if !s.skip_data_sync && !s.lie_sync.contains(&self.name) {
            let node = &mut s.nodes[self.ino];
            node.durable = node.data.clone();
            node.unsynced.clear();
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut s = self.fs.state();
        s.step_file("truncate", self.ino)?;
        s.free(self.ino, len as usize);
        s.change(self.ino, Change::SetLen(len));
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.fs.state().nodes[self.ino].data.len() as u64)
    }
}
