//! The few file-system calls the engine makes, behind a trait so that the power-loss tests can
//! run the engine on a file system that forgets what was not synced (`lazy_fs.rs`, test-only)
//! while production runs on `std::fs` ([`StdFs`]).
//!
//! The trait names durability points explicitly: `LogFile::sync_data` (fdatasync) makes a
//! file's contents and size durable, `Fs::sync_dir` (fsync of the directory) makes the names in
//! it durable (a created file, a rename). Nothing else is assumed durable.
//!
//! Space: [`LogFile::reserve`] allocates a file's blocks ahead of its end (fallocate with
//! KEEP_SIZE), so that appends into them cannot meet a full file system; [`no_space`] tells an
//! error that means the file system (or a quota) is full.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// A file the engine appends to.
pub trait LogFile: Send + Sync {
    /// Appends `data` at the end.
    fn append(&self, data: &[u8]) -> io::Result<()>;
    /// Makes every byte appended so far, and the size, durable (fdatasync).
    fn sync_data(&self) -> io::Result<()>;
    /// Cuts or extends the file to `len` bytes (durable only after `sync_data`). Blocks
    /// reserved past `len` are given back to the file system.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Allocates the blocks for `len` bytes at `offset` without changing the file's size, so
    /// that appending into them needs no new space; a no-space error when the file system has
    /// no room. Where a file system cannot, nothing happens (appends allocate as they go).
    fn reserve(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }
}

/// Whether `e` says the file system (or the writer's quota) is full.
pub fn no_space(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

/// A directory tree.
pub trait Fs: Send + Sync {
    /// Makes `dir` exist, durably.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// The whole contents of `path`; an error of kind `NotFound` when it does not exist.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Opens `path` for appending, creating it empty if absent (its name is durable only after
    /// `sync_dir`).
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn LogFile>>;
    /// Creates `path` empty, replacing any file there.
    fn create(&self, path: &Path) -> io::Result<Box<dyn LogFile>>;
    /// Renames `from` to `to`, replacing `to` (durable only after `sync_dir`).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes the names in `dir` durable (fsync of the directory).
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// The real file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct StdFs;

impl LogFile for File {
    fn append(&self, data: &[u8]) -> io::Result<()> {
        // `&File` writes at the file offset; every engine file is written front to back (the log
        // is opened with O_APPEND), so this appends.
        let mut f: &File = self;
        f.write_all(data)
    }
    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }
    #[allow(unsafe_code)]
    fn reserve(&self, offset: u64, len: u64) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        let (fd, mode) = (self.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE);
        // SAFETY: fallocate takes a descriptor this file keeps open for the call and integers.
        if unsafe { libc::fallocate(fd, mode, offset as i64, len as i64) } == 0 {
            return Ok(());
        }
        match io::Error::last_os_error() {
            e if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOSYS)) => Ok(()),
            e => Err(e),
        }
    }
}

impl Fs for StdFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        if dir.is_dir() {
            return Ok(());
        }
        fs::create_dir_all(dir)?;
        // The new directory's own name lives in its parent.
        match dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent) => self.sync_dir(parent),
            None => Ok(()),
        }
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn LogFile>> {
        let f = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)?;
        Ok(Box::new(f))
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn LogFile>> {
        Ok(Box::new(File::create(path)?))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}
