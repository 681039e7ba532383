//! The chunk store's file system on turmoil's simulated one ([`SimFs`]): per host, written
//! bytes are pending until synced, and a crash (`Sim::crash`) discards what was pending, files
//! never synced included.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use t3fs_services::durable::fs::{DurableFile, DurableFs};
use turmoil::fs::shim::std::fs as sfs;

/// The simulated file system of the host the caller runs on.
#[derive(Clone, Copy, Debug, Default)]
pub struct SimFs;

/// A simulated file.
pub struct SimFile(sfs::File);

impl DurableFile for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_all_at(data, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn size(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
}

fn open(path: &Path, truncate: bool) -> io::Result<Box<dyn DurableFile>> {
    let f = sfs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(truncate)
        .open(path)?;
    Ok(Box::new(SimFile(f)))
}

impl DurableFs for SimFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        sfs::create_dir_all(dir)?;
        match dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent) => self.sync_dir(parent),
            None => Ok(()),
        }
    }
    fn exists(&self, path: &Path) -> io::Result<bool> {
        Ok(sfs::exists(path))
    }
    fn open(&self, path: &Path) -> io::Result<Box<dyn DurableFile>> {
        open(path, false)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn DurableFile>> {
        open(path, true)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        sfs::rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        sfs::sync_dir(dir)
    }
}
