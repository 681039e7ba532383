//! The file-system calls the chunk stores make, behind a trait so that the power-loss tests can
//! run a store on a file system that forgets what was not synced (`lazy_fs.rs`, test-only),
//! while production runs on `std::fs` ([`StdFs`]).
//!
//! Durability points are explicit, as in `wal_kv::fs`: [`StoreFile::sync_data`] (fdatasync)
//! makes a file's contents and size durable, [`StoreFs::sync_dir`] (fsync of the directory)
//! makes the names in it durable. Nothing else is assumed durable.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// A file read and written at offsets (pread/pwrite).
pub trait StoreFile: Send + Sync {
    /// Fills `buf` from `offset`; an `UnexpectedEof` error if the file is shorter.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `data` at `offset`, growing the file if needed.
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()>;
    /// Makes every byte written so far, and the size, durable (fdatasync).
    fn sync_data(&self) -> io::Result<()>;
    /// Cuts or extends the file to `len` bytes (durable only after `sync_data`).
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// The file's size.
    fn size(&self) -> io::Result<u64>;
}

/// A directory tree.
pub trait StoreFs: Send + Sync {
    /// Makes `dir` exist, durably.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> io::Result<bool>;
    /// Opens `path` for reading and writing, creating it empty if absent (a created name is
    /// durable only after `sync_dir`).
    fn open(&self, path: &Path) -> io::Result<Box<dyn StoreFile>>;
    /// Creates `path` empty, replacing any file there.
    fn create(&self, path: &Path) -> io::Result<Box<dyn StoreFile>>;
    /// Renames `from` to `to`, replacing `to` (durable only after `sync_dir`).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes the names in `dir` durable (fsync of the directory).
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// The real file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct StdFs;

impl StoreFile for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        FileExt::write_all_at(self, data, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }
    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
}

impl StoreFs for StdFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        if dir.is_dir() {
            return Ok(());
        }
        fs::create_dir_all(dir)?;
        match dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent) => self.sync_dir(parent),
            None => Ok(()),
        }
    }
    fn exists(&self, path: &Path) -> io::Result<bool> {
        path.try_exists()
    }
    fn open(&self, path: &Path) -> io::Result<Box<dyn StoreFile>> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        Ok(Box::new(f))
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn StoreFile>> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(Box::new(f))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}
