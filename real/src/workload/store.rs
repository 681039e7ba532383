//! Where a workload's files live: the cluster through the native client, or a POSIX directory
//! (the FUSE mount, or a local directory for the side-by-side run), behind one small set of
//! file operations, so each workload is written once and runs on all three.
//!
//! Invariant: a file the workload closed with [`Store::close`] is durable before the call
//! returns. The native client's writes return once every chunk committed on its whole chain
//! (each replica fdatasyncs before it acknowledges), and the close publishes the length; a
//! POSIX file is fsynced, then closed. Not here: what is written (the workloads) or timing it
//! (recorder.rs).

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use t3fs_client::client::{Client, ClientOptions, File};
use t3fs_core::meta::{InodeKind, MetaError};

/// A store: one native client of the cluster, or a directory.
#[derive(Clone)]
pub enum Store {
    /// The cluster through a native client; paths are absolute paths in its namespace.
    Native(Arc<Client>),
    /// A directory; paths are taken relative to it.
    Posix(PathBuf),
}

/// An open file.
pub enum Handle {
    /// A native file (a write session when created).
    Native(File),
    /// A POSIX file.
    Posix(Arc<std::fs::File>),
}

fn io(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Runs blocking file-system work off the runtime's workers.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(io)?
        .map_err(io)
}

impl Store {
    /// A native client of the cluster `opts` describes.
    pub async fn native(opts: ClientOptions) -> Result<Self, String> {
        let c = Client::connect(opts).await.map_err(io)?;
        Ok(Self::Native(Arc::new(c)))
    }

    fn local(dir: &Path, path: &str) -> PathBuf {
        dir.join(path.trim_start_matches('/'))
    }

    /// Makes `path` and any missing parents.
    pub async fn mkdir_all(&self, path: &str) -> Result<(), String> {
        match self {
            Self::Native(c) => {
                let mut at = String::new();
                for part in path.split('/').filter(|p| !p.is_empty()) {
                    at = format!("{at}/{part}");
                    match c.mkdir(&at).await {
                        Ok(()) | Err(t3fs_client::client::ClientError::Meta(MetaError::Exists)) => {
                        }
                        Err(e) => return Err(format!("mkdir {at}: {e}")),
                    }
                }
                Ok(())
            }
            Self::Posix(d) => {
                let p = Self::local(d, path);
                blocking(move || std::fs::create_dir_all(p)).await
            }
        }
    }

    /// Creates `path` (it must not exist) for writing.
    pub async fn create(&self, path: &str) -> Result<Handle, String> {
        match self {
            Self::Native(c) => c
                .create(path, 0o644)
                .await
                .map(Handle::Native)
                .map_err(|e| format!("create {path}: {e}")),
            Self::Posix(d) => {
                let p = Self::local(d, path);
                let f = blocking(move || {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(p)
                })
                .await
                .map_err(|e| format!("create {path}: {e}"))?;
                Ok(Handle::Posix(Arc::new(f)))
            }
        }
    }

    /// Writes `data` at `offset` of `h`.
    pub async fn write(&self, h: &Handle, offset: u64, data: Vec<u8>) -> Result<(), String> {
        match (self, h) {
            (Self::Native(c), Handle::Native(f)) => c.write(f, offset, data).await.map_err(io),
            (Self::Posix(_), Handle::Posix(f)) => {
                let f = f.clone();
                blocking(move || f.write_all_at(&data, offset)).await
            }
            _ => Err("a handle of another store".into()),
        }
    }

    /// Makes `h` durable at length `len` and closes it.
    pub async fn close(&self, h: Handle, len: u64) -> Result<(), String> {
        match (self, h) {
            (Self::Native(c), Handle::Native(f)) => c.close_file(&f, len).await.map_err(io),
            (Self::Posix(_), Handle::Posix(f)) => blocking(move || f.sync_all()).await,
            _ => Err("a handle of another store".into()),
        }
    }

    /// Opens `path` for reading; the handle and the file's length.
    pub async fn open(&self, path: &str) -> Result<(Handle, u64), String> {
        match self {
            Self::Native(c) => {
                let (f, inode) = c
                    .open_with_inode(path, false)
                    .await
                    .map_err(|e| format!("open {path}: {e}"))?;
                let len = match inode.kind {
                    InodeKind::File { length, .. } => length,
                    _ => return Err(format!("{path}: not a file")),
                };
                Ok((Handle::Native(f), len))
            }
            Self::Posix(d) => {
                let p = Self::local(d, path);
                let f = blocking(move || std::fs::File::open(p))
                    .await
                    .map_err(|e| format!("open {path}: {e}"))?;
                let len = f.metadata().map_err(io)?.len();
                Ok((Handle::Posix(Arc::new(f)), len))
            }
        }
    }

    /// Reads `len` bytes at `offset` of `h` (short only at the end of the file).
    pub async fn read(&self, h: &Handle, offset: u64, len: u64) -> Result<Vec<u8>, String> {
        match (self, h) {
            (Self::Native(c), Handle::Native(f)) => c.read(f, offset, len).await.map_err(io),
            (Self::Posix(_), Handle::Posix(f)) => {
                let f = f.clone();
                blocking(move || read_at_most(&f, offset, len as usize)).await
            }
            _ => Err("a handle of another store".into()),
        }
    }

    /// The whole contents of each of `paths`; `None` for a path that does not exist (a
    /// KVCache block the GC removed is a miss, not an error).
    pub async fn read_whole(&self, paths: Vec<String>) -> Result<Vec<Option<Vec<u8>>>, String> {
        match self {
            Self::Native(c) => {
                let answers = c.read_files(paths.clone()).await.map_err(io)?;
                answers
                    .into_iter()
                    .zip(paths)
                    .map(|(a, p)| match a {
                        Ok(b) => Ok(Some(b)),
                        Err(t3fs_client::client::ClientError::Meta(MetaError::NotFound)) => {
                            Ok(None)
                        }
                        Err(e) => Err(format!("read {p}: {e}")),
                    })
                    .collect()
            }
            Self::Posix(d) => {
                let ps: Vec<PathBuf> = paths.iter().map(|p| Self::local(d, p)).collect();
                blocking(move || ps.iter().map(|p| read_if_there(p)).collect()).await
            }
        }
    }

    /// Removes `path` (a file, or with `recursive` a tree); `false` if it was not there.
    pub async fn remove(&self, path: &str, recursive: bool) -> Result<bool, String> {
        match self {
            Self::Native(c) => match c.remove(path, recursive).await {
                Ok(()) => Ok(true),
                Err(t3fs_client::client::ClientError::Meta(MetaError::NotFound)) => Ok(false),
                Err(e) => Err(format!("remove {path}: {e}")),
            },
            Self::Posix(d) => {
                let p = Self::local(d, path);
                blocking(move || {
                    let r = if recursive && p.is_dir() {
                        std::fs::remove_dir_all(&p)
                    } else {
                        std::fs::remove_file(&p)
                    };
                    match r {
                        Ok(()) => Ok(true),
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                        Err(e) => Err(e),
                    }
                })
                .await
            }
        }
    }
}

fn read_at_most(f: &std::fs::File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        let n = f.read_at(&mut buf[got..], offset + got as u64)?;
        if n == 0 {
            break;
        }
        got += n;
    }
    buf.truncate(got);
    Ok(buf)
}

fn read_if_there(p: &Path) -> std::io::Result<Option<Vec<u8>>> {
    match std::fs::read(p) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}
