//! The file-system calls the engines make (the chunk stores' metadata log and data file, WalKv's
//! log and snapshot), behind a trait, so that the power-loss tests can run an engine on a file
//! system that forgets what was not synced (`lazy_fs.rs`, test-only) while production runs on
//! `std::fs` ([`StdFs`]).
//!
//! Invariants: durability points are explicit, and nothing else is assumed durable.
//! [`DurableFile::sync_data`] (fdatasync) makes a file's contents and size durable,
//! [`DurableFs::sync_dir`] (fsync of the directory) makes the names in it durable (a created
//! file, a rename).
//!
//! Space: [`DurableFile::reserve`] allocates a file's blocks ahead of its end (fallocate with
//! KEEP_SIZE), so that appends into them cannot meet a full file system;
//! [`DurableFile::punch_hole`] gives a free range's blocks back to the file system and
//! [`DurableFile::free_space`] says how much is left (all three best effort: a file system
//! that cannot does nothing); [`no_space`] tells an error that means the file system (or a
//! quota) is full.
//!
//! Not here: what the files hold (`frame.rs` and the engines), when to sync (the engines), and
//! O_DIRECT I/O (the io_uring store opens its data file itself).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// A file read and written at offsets (pread/pwrite) or appended to.
pub trait DurableFile: Send + Sync {
    /// Fills `buf` from `offset`; an `UnexpectedEof` error if the file is shorter.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `data` at `offset`, growing the file if needed.
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()>;
    /// Appends `data` at the end. The default writes at the file's size: a file system written
    /// for positional I/O only (a test's wrapper) appends correctly without knowing appends.
    fn append(&self, data: &[u8]) -> io::Result<()> {
        self.write_at(data, self.size()?)
    }
    /// Makes every byte written so far, and the size, durable (fdatasync).
    fn sync_data(&self) -> io::Result<()>;
    /// Cuts or extends the file to `len` bytes (durable only after `sync_data`). Blocks
    /// reserved past `len` are given back to the file system.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// The file's size.
    fn size(&self) -> io::Result<u64>;
    /// Allocates the blocks for `len` bytes at `offset` without changing the file's size, so
    /// that appending into them needs no new space; a no-space error when the file system has
    /// no room. Where a file system cannot, nothing happens (appends allocate as they go).
    fn reserve(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }
    /// Gives the blocks of `len` bytes at `offset` back to the file system, keeping the size
    /// (the range reads as zeros after). Only for ranges nothing durable references. Where a
    /// file system cannot, nothing happens: the space stays the file's, for its later writes.
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
pub trait DurableFs: Send + Sync {
    /// Makes `dir` exist, durably.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> io::Result<bool>;
    /// The whole contents of `path`; an error of kind `NotFound` when it does not exist. The
    /// default reads through [`DurableFs::open`], for a file system written for the chunk
    /// store only (a test's wrapper).
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        if !self.exists(path)? {
            return Err(io::ErrorKind::NotFound.into());
        }
        let f = self.open(path)?;
        let mut buf = vec![0; f.size()? as usize];
        f.read_at(&mut buf, 0)?;
        Ok(buf)
    }
    /// Opens `path` for reading and writing, creating it empty if absent (a created name is
    /// durable only after `sync_dir`).
    fn open(&self, path: &Path) -> io::Result<Box<dyn DurableFile>>;
    /// [`DurableFs::open`] for a file only appended to (O_APPEND on the real file system). The
    /// default is `open`: [`DurableFile::append`] appends on any file.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn DurableFile>> {
        self.open(path)
    }
    /// Creates `path` empty, replacing any file there.
    fn create(&self, path: &Path) -> io::Result<Box<dyn DurableFile>>;
    /// Renames `from` to `to`, replacing `to` (durable only after `sync_dir`).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes the names in `dir` durable (fsync of the directory).
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// The real file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct StdFs;

impl DurableFile for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        FileExt::write_all_at(self, data, offset)
    }
    fn append(&self, data: &[u8]) -> io::Result<()> {
        // `&File` writes at the file offset: the end for a file opened by `open_append`
        // (O_APPEND), and for one made by `create` and only appended to since, as every file an
        // engine appends to is. No size lookup: one write(2) per append.
        let mut f: &File = self;
        f.write_all(data)
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
    fn reserve(&self, offset: u64, len: u64) -> io::Result<()> {
        fallocate(self, libc::FALLOC_FL_KEEP_SIZE, offset, len)
    }
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        fallocate(self, mode, offset, len)
    }
    fn free_space(&self) -> io::Result<Option<u64>> {
        free_space(self).map(Some)
    }
}

/// fallocate(`mode`) of `len` bytes at `offset` of `f`; a file system that cannot is no error.
#[allow(unsafe_code)]
fn fallocate(f: &File, mode: libc::c_int, offset: u64, len: u64) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    // SAFETY: fallocate takes a file descriptor `f` keeps open for the call and integers.
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

/// Opens `path` as `how` says, for reading too, creating it if absent.
fn open_std(path: &Path, how: &mut OpenOptions) -> io::Result<Box<dyn DurableFile>> {
    Ok(Box::new(how.read(true).create(true).open(path)?))
}

impl DurableFs for StdFs {
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
    fn exists(&self, path: &Path) -> io::Result<bool> {
        path.try_exists()
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }
    fn open(&self, path: &Path) -> io::Result<Box<dyn DurableFile>> {
        open_std(path, OpenOptions::new().write(true))
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn DurableFile>> {
        open_std(path, OpenOptions::new().append(true))
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn DurableFile>> {
        // Readable too: the chunk store reads back what it creates (WalKv only appends).
        open_std(path, OpenOptions::new().write(true).truncate(true))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A file system of one file, in memory, giving only what the traits require: the rest is
    /// their defaults.
    #[derive(Clone, Default)]
    struct OneFile(Arc<Mutex<Option<Vec<u8>>>>);

    impl OneFile {
        fn with<T>(&self, f: impl FnOnce(&mut Vec<u8>) -> T) -> io::Result<T> {
            let mut file = self.0.lock().unwrap();
            Ok(f(file.as_mut().ok_or(io::ErrorKind::NotFound)?))
        }
    }

    impl DurableFs for OneFile {
        fn create_dir_all(&self, _: &Path) -> io::Result<()> {
            Ok(())
        }
        fn exists(&self, _: &Path) -> io::Result<bool> {
            Ok(self.0.lock().unwrap().is_some())
        }
        fn open(&self, _: &Path) -> io::Result<Box<dyn DurableFile>> {
            self.0.lock().unwrap().get_or_insert_with(Vec::new);
            Ok(Box::new(self.clone()))
        }
        fn create(&self, _: &Path) -> io::Result<Box<dyn DurableFile>> {
            *self.0.lock().unwrap() = Some(Vec::new());
            Ok(Box::new(self.clone()))
        }
        fn rename(&self, _: &Path, _: &Path) -> io::Result<()> {
            Ok(())
        }
        fn sync_dir(&self, _: &Path) -> io::Result<()> {
            Ok(())
        }
    }

    impl DurableFile for OneFile {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            let from = offset as usize;
            let src = self.with(|d| d.get(from..from + buf.len()).map(<[u8]>::to_vec))?;
            buf.copy_from_slice(&src.ok_or(io::ErrorKind::UnexpectedEof)?);
            Ok(())
        }
        fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
            let (from, to) = (offset as usize, offset as usize + data.len());
            self.with(|d| {
                d.resize(d.len().max(to), 0);
                d[from..to].copy_from_slice(data);
            })
        }
        fn sync_data(&self) -> io::Result<()> {
            Ok(())
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            self.with(|d| d.resize(len as usize, 0))
        }
        fn size(&self) -> io::Result<u64> {
            self.with(|d| d.len() as u64)
        }
    }

    #[test]
    fn the_defaults_append_and_read_whole_files() {
        let (fs, path) = (OneFile::default(), Path::new("/log"));
        let err = fs.read(path).unwrap_err();
        assert_eq!(
            err.kind(),
            io::ErrorKind::NotFound,
            "absent, and not created"
        );
        assert!(!fs.exists(path).unwrap());
        let f = fs.open_append(path).unwrap();
        f.append(b"head").unwrap();
        f.write_at(b"HE", 0).unwrap();
        f.append(b"tail").unwrap();
        assert_eq!(fs.read(path).unwrap(), b"HEadtail");
        assert_eq!(
            f.reserve(0, 1 << 20).map(|()| f.size().unwrap()).unwrap(),
            8
        );
    }

    #[test]
    fn the_real_file_systems_appends_land_at_the_end() {
        let dir = std::env::temp_dir().join(format!("t3fs-durable-fs-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        StdFs.create_dir_all(&dir).unwrap();
        let path = dir.join("log");
        assert_eq!(
            StdFs.read(&path).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        let f = StdFs.create(&path).unwrap();
        f.append(b"head").unwrap();
        f.append(b"tail").unwrap();
        f.sync_data().unwrap();
        let f = StdFs.open_append(&path).unwrap();
        f.append(b"!").unwrap();
        f.reserve(9, 4096).unwrap();
        assert_eq!(StdFs.read(&path).unwrap(), b"headtail!");
        assert_eq!(f.size().unwrap(), 9, "a reservation keeps the size");
        fs::remove_dir_all(&dir).unwrap();
    }
}
