//! The file-system calls the chunk stores make, behind a trait so that the power-loss tests can
//! run a store on a file system that forgets what was not synced (`lazy_fs.rs`, test-only),
//! while production runs on `std::fs` ([`StdFs`]).
//!
//! Durability points are explicit, as in `wal_kv::fs`: [`StoreFile::sync_data`] (fdatasync)
//! makes a file's contents and size durable, [`StoreFs::sync_dir`] (fsync of the directory)
//! makes the names in it durable. Nothing else is assumed durable.
//!
//! Space: [`StoreFile::punch_hole`] gives a free extent's blocks back to the file system and
//! [`StoreFile::free_space`] says how much is left (both best effort, for a full disk: see
//! `space.rs`); [`no_space`] tells an error that means the file system (or a quota) is full.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
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
    /// Gives the blocks of `len` bytes at `offset` back to the file system, keeping the size
    /// (the range reads as zeros after). Only for ranges nothing durable references. Where a
    /// file system cannot, nothing happens: the space stays the store's, for its later writes.
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }
    /// Bytes an unprivileged writer may still allocate on the file's file system (`None`:
    /// unknown).
    fn free_space(&self) -> io::Result<Option<u64>> {
        Ok(None)
    }
}

/// Whether `e` says the file system (or the writer's quota) is full.
pub fn no_space(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
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
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        punch_hole(self, offset, len)
    }
    fn free_space(&self) -> io::Result<Option<u64>> {
        free_space(self).map(Some)
    }
}

/// fallocate(PUNCH_HOLE | KEEP_SIZE) on `f`; a file system that cannot punch is no error.
#[allow(unsafe_code)]
pub fn punch_hole(f: &File, offset: u64, len: u64) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    // SAFETY: fallocate takes a file descriptor `f` keeps open for the call and two integers.
    let r = unsafe { libc::fallocate(f.as_raw_fd(), mode, offset as i64, len as i64) };
    if r == 0 {
        return Ok(());
    }
    match io::Error::last_os_error() {
        e if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOSYS)) => Ok(()),
        e => Err(e),
    }
}

/// The bytes an unprivileged writer may still allocate on `f`'s file system (fstatvfs).
#[allow(unsafe_code)]
pub fn free_space(f: &File) -> io::Result<u64> {
    // SAFETY: an all-zero statvfs is a valid value of that plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open for the call and `st` is a valid, writable statvfs.
    if unsafe { libc::fstatvfs(f.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
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
