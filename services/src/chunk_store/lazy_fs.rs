//! A test-only, in-memory [`StoreFs`] that forgets at a simulated power loss what was not made
//! durable (in the manner of LazyFS, like `wal_kv`'s, but with positional writes): each file's
//! writes since its last fdatasync, and directory entries made since the directory's last fsync.
//!
//! The power fails at the n-th mutating call ([`LazyFs::fail_after`]): that call and every later
//! one fail, as on a dead machine. [`LazyFs::crash`] then brings the power back keeping, per
//! file, the durable contents plus a random prefix of its unsynced writes in order, the last one
//! possibly torn (a prefix of its bytes), as a disk that wrote part of its queue. `lie_sync`
//! names a file whose fdatasyncs do nothing (a disk that ignores flushes), to show that what
//! such a disk loses is caught by the checksums.
//!
//! Not modelled: reordering of unsynced writes within a file, directories themselves.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::fs::{StoreFile, StoreFs};

enum Change {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

impl Change {
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
    unsynced: Vec<Change>,
}

#[derive(Default)]
pub struct State {
    nodes: Vec<Node>,
    names: BTreeMap<PathBuf, usize>,
    durable_names: BTreeMap<PathBuf, usize>,
    countdown: Option<u64>,
    down: bool,
    /// Files (by name) whose fdatasyncs do nothing.
    pub lie_sync: Vec<String>,
}

/// The file system; clones share it.
#[derive(Clone, Default)]
pub struct LazyFs(Arc<Mutex<State>>);

fn eio(why: &str) -> io::Error {
    io::Error::other(why.to_string())
}

impl LazyFs {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap()
    }

    /// The power fails during the `n`-th mutating call from now.
    pub fn fail_after(&self, n: u64) {
        self.state().countdown = Some(n);
    }

    pub fn is_down(&self) -> bool {
        self.state().down
    }

    /// The power comes back. `pick(n)` chooses a number in `0..n` (the test's random source):
    /// how many unsynced writes of each file survive, whether the next one is torn, and where.
    pub fn crash(&self, mut pick: impl FnMut(usize) -> usize) {
        let mut s = self.state();
        s.names = s.durable_names.clone();
        for node in &mut s.nodes {
            let mut data = node.durable.clone();
            let changes = std::mem::take(&mut node.unsynced);
            let kept = pick(changes.len() + 1);
            for c in &changes[..kept] {
                c.apply(&mut data, None);
            }
            if let Some(c @ Change::Write(_, bytes)) = changes.get(kept) {
                if pick(2) == 1 {
                    c.apply(&mut data, Some(pick(bytes.len() + 1)));
                }
            }
            node.durable = data.clone();
            node.data = data;
        }
        s.countdown = None;
        s.down = false;
    }

    fn step(s: &mut State) -> io::Result<()> {
        if s.down {
            return Err(eio("the power is out"));
        }
        match s.countdown {
            Some(0) => {
                s.down = true;
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
        s.nodes.push(Node::default());
        let ino = s.nodes.len() - 1;
        s.names.insert(path.to_path_buf(), ino);
        ino
    }

    fn handle(&self, ino: usize, path: &Path) -> Box<dyn StoreFile> {
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        Box::new(Handle {
            fs: self.clone(),
            ino,
            name,
        })
    }
}

impl StoreFs for LazyFs {
    fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        Ok(self.state().names.contains_key(path))
    }

    fn open(&self, path: &Path) -> io::Result<Box<dyn StoreFile>> {
        let mut s = self.state();
        Self::step(&mut s)?;
        let ino = match s.names.get(path) {
            Some(&ino) => ino,
            None => Self::new_node(&mut s, path),
        };
        Ok(self.handle(ino, path))
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn StoreFile>> {
        let mut s = self.state();
        Self::step(&mut s)?;
        let ino = Self::new_node(&mut s, path);
        Ok(self.handle(ino, path))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.state();
        Self::step(&mut s)?;
        let ino = s.names.remove(from).ok_or(io::ErrorKind::NotFound)?;
        s.names.insert(to.to_path_buf(), ino);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.state();
        Self::step(&mut s)?;
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
    name: String,
}

impl Handle {
    fn change(&self, c: Change) -> io::Result<()> {
        let mut s = self.fs.state();
        LazyFs::step(&mut s)?;
        let node = &mut s.nodes[self.ino];
        c.apply(&mut node.data, None);
        node.unsynced.push(c);
        Ok(())
    }
}

impl StoreFile for Handle {
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
        self.change(Change::Write(offset, data.to_vec()))
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut s = self.fs.state();
        LazyFs::step(&mut s)?;
        if s.lie_sync.contains(&self.name) {
            return Ok(());
        }
        let node = &mut s.nodes[self.ino];
        node.durable = node.data.clone();
        node.unsynced.clear();
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.change(Change::SetLen(len))
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.fs.state().nodes[self.ino].data.len() as u64)
    }
}
