//! A test-only, in-memory file system that forgets at a simulated power loss everything that
//! was not made durable (in the manner of LazyFS): file contents written since the file's last
//! fdatasync, and directory entries (creations, renames) made since the directory's last fsync.
//!
//! Why: killing a process (kill -9) leaves the page cache intact, so it cannot tell a missing
//! fsync from a present one; this can. The power can be made to fail at the n-th mutating call
//! (the call fails and every later one fails too, as on a dead machine) and [`LazyFs::crash`]
//! then keeps what was durable, plus optionally a prefix of a file's unsynced appends (a torn
//! write). Two switches make it lie like a disk that ignores flushes (`skip_dir_sync`,
//! `skip_data_sync`), which is how the tests show the power-loss check can fail.
//!
//! A third switch, `full`, makes it a full file system: a call that needs new space (an append
//! past a file's allocated blocks, a reservation past them) fails with ENOSPC and changes
//! nothing, unless space freed while full (a truncation, which gives back the blocks past the
//! new size, or a file replaced by a rename) covers it.
//!
//! Not modelled: directories themselves (they always exist), reordered pages within a file's
//! unsynced appends, data written but never appended (the engine only appends), and how much
//! space there is (full or not, nothing between).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::fs::{Fs, LogFile};

struct Node {
    data: Vec<u8>,
    durable: Vec<u8>,
    /// Blocks are allocated up to here (or to the data's end, if further).
    reserved: usize,
}

#[derive(Default)]
pub struct State {
    nodes: Vec<Node>,
    names: BTreeMap<PathBuf, usize>,
    durable_names: BTreeMap<PathBuf, usize>,
    /// Mutating calls left before the power fails; `None`: it does not.
    countdown: Option<u64>,
    /// The power is out: every call fails until `crash`.
    down: bool,
    /// What each power failure interrupted (for checking coverage).
    pub cut_in: Vec<String>,
    /// Lie: directory fsyncs do nothing.
    pub skip_dir_sync: bool,
    /// Lie: fdatasyncs do nothing.
    pub skip_data_sync: bool,
    /// The next fdatasync fails (with EIO), the power staying on.
    pub fail_next_sync: bool,
    /// fdatasyncs that block until this is cleared (see [`LazyFs::release`]).
    pub hold_syncs: bool,
    /// fdatasyncs now blocked by `hold_syncs`.
    pub held: usize,
    /// Each fdatasync takes this long (outside the lock), as a disk's flush does.
    pub sync_delay: Duration,
    /// fdatasyncs made (including skipped ones).
    pub data_syncs: u64,
    /// The file system is full: what needs new space fails with ENOSPC, beyond `credit`.
    pub full: bool,
    /// Bytes freed while full, which later calls may allocate again.
    credit: usize,
}

impl State {
    /// Allocates blocks for `ino` up to `to` bytes; ENOSPC when full beyond the credit.
    fn allocate(&mut self, ino: usize, to: usize) -> io::Result<()> {
        let extra = to.saturating_sub(self.nodes[ino].allocated());
        if self.full && extra > 0 {
            if extra > self.credit {
                return Err(enospc());
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
}

impl Node {
    fn allocated(&self) -> usize {
        self.reserved.max(self.data.len())
    }
}

/// The file system; clones share it.
#[derive(Clone, Default)]
pub struct LazyFs {
    inner: Arc<(Mutex<State>, Condvar)>,
}

fn eio(why: &str) -> io::Error {
    io::Error::other(why.to_string())
}

fn enospc() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOSPC)
}

impl LazyFs {
    pub fn new() -> Self {
        Self::default()
    }

    /// The state, to read counters or set switches.
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.inner.0.lock().unwrap()
    }

    /// The power fails during the `n`-th mutating call from now (`n` = 0: the next one).
    pub fn fail_after(&self, n: u64) {
        self.state().countdown = Some(n);
    }

    /// Whether the power is out.
    pub fn is_down(&self) -> bool {
        self.state().down
    }

    /// Unblocks held fdatasyncs and stops holding new ones.
    pub fn release(&self) {
        self.state().hold_syncs = false;
        self.inner.1.notify_all();
    }

    /// Waits until `n` fdatasyncs are held.
    pub fn wait_held(&self, n: usize) {
        let mut s = self.state();
        while s.held < n {
            s = self.inner.1.wait(s).unwrap();
        }
    }

    /// The power comes back: names and contents are what was durable; when `torn` is given,
    /// each file keeps `torn(unsynced appended bytes)` of its unsynced appends (at most that
    /// many), as a disk that wrote part of them before the power went.
    pub fn crash(&self, mut torn: impl FnMut(usize) -> usize) {
        let mut s = self.state();
        s.names = s.durable_names.clone();
        for node in &mut s.nodes {
            let appended = node.data.len().saturating_sub(node.durable.len());
            if appended > 0 && node.data.starts_with(&node.durable) {
                let keep = torn(appended).min(appended);
                node.data.truncate(node.durable.len() + keep);
            } else {
                node.data = node.durable.clone();
            }
            node.durable = node.data.clone();
            node.reserved = node.data.len();
        }
        s.countdown = None;
        s.down = false;
    }

    /// Counts one mutating call named `what`; an error if the power is (now) out.
    fn step(s: &mut State, what: &str, path: &Path) -> io::Result<()> {
        if s.down {
            return Err(eio("the power is out"));
        }
        match s.countdown {
            Some(0) => {
                s.down = true;
                s.cut_in.push(format!("{what} {}", name(path)));
                Err(eio("the power failed"))
            }
            Some(n) => {
                s.countdown = Some(n - 1);
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn new_node(s: &mut State, path: &Path) -> usize {
        s.nodes.push(Node {
            data: Vec::new(),
            durable: Vec::new(),
            reserved: 0,
        });
        let ino = s.nodes.len() - 1;
        s.names.insert(path.to_path_buf(), ino);
        ino
    }

    fn handle(&self, ino: usize) -> Box<dyn LogFile> {
        Box::new(Handle {
            fs: self.clone(),
            ino,
        })
    }
}

fn name(path: &Path) -> String {
    path.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

impl Fs for LazyFs {
    fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
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

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn LogFile>> {
        let mut s = self.state();
        Self::step(&mut s, "open", path)?;
        let ino = match s.names.get(path) {
            Some(&ino) => ino,
            None => Self::new_node(&mut s, path),
        };
        Ok(self.handle(ino))
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn LogFile>> {
        let mut s = self.state();
        Self::step(&mut s, "create", path)?;
        let ino = Self::new_node(&mut s, path);
        Ok(self.handle(ino))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.state();
        Self::step(&mut s, "rename", to)?;
        let ino = s.names.remove(from).ok_or(io::ErrorKind::NotFound)?;
        if let Some(old) = s.names.insert(to.to_path_buf(), ino) {
            // The file replaced goes (the engine holds no handle on a replaced snapshot).
            s.free(old, 0);
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.state();
        Self::step(&mut s, "sync dir", dir)?;
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
}

impl LogFile for Handle {
    fn append(&self, data: &[u8]) -> io::Result<()> {
        let mut s = self.fs.state();
        Self::step(&mut s, "append", self.ino)?;
        let to = s.nodes[self.ino].data.len() + data.len();
        s.allocate(self.ino, to)?;
        s.nodes[self.ino].data.extend_from_slice(data);
        Ok(())
    }

    fn reserve(&self, offset: u64, len: u64) -> io::Result<()> {
        let mut s = self.fs.state();
        Self::step(&mut s, "reserve", self.ino)?;
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
        Self::step(&mut s, "sync", self.ino)?;
        s.data_syncs += 1;
        if std::mem::take(&mut s.fail_next_sync) {
            return Err(eio("injected fdatasync failure"));
        }
        if !s.skip_data_sync {
            let node = &mut s.nodes[self.ino];
            node.durable = node.data.clone();
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut s = self.fs.state();
        Self::step(&mut s, "truncate", self.ino)?;
        s.free(self.ino, len as usize);
        s.nodes[self.ino].data.resize(len as usize, 0);
        Ok(())
    }
}

impl Handle {
    fn step(s: &mut State, what: &str, ino: usize) -> io::Result<()> {
        // Name the file by its current name (or its inode when it has none).
        let path = s
            .names
            .iter()
            .find(|(_, &i)| i == ino)
            .map_or_else(|| PathBuf::from(format!("inode{ino}")), |(p, _)| p.clone());
        LazyFs::step(s, what, &path)
    }
}
