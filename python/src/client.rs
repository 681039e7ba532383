//! `t3fs._native.Client`: one connected native client and the runtime it runs on.
//!
//! Invariants: a client answers only in the process that made it; in a process forked from
//! that one it raises `OSError` instead of touching a runtime whose threads stayed behind, and
//! when it is collected there it is leaked, not shut down (shutting down would wait for those
//! threads). Every call that waits on the cluster runs with the interpreter released.
//!
//! Not here: fsspec's path conventions (`t3fs/fs.py`), open files (`file.rs`).

use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use t3fs_client::client::{Client as NativeClient, ClientError, ClientOptions};
use t3fs_core::meta::InodeKind;

use crate::convert::{info, length_of, os_error, os_error_code};
use crate::file::File;

/// EISDIR: what open(2) answers for a directory opened as a file.
const EISDIR: i32 = 21;

/// A connected client, its runtime, and the process both belong to.
pub(crate) struct Native {
    rt: Option<tokio::runtime::Runtime>,
    client: Option<NativeClient>,
    pid: u32,
}

impl Native {
    /// The runtime and the client, in the process that made them.
    pub(crate) fn parts(&self) -> PyResult<(&tokio::runtime::Runtime, &NativeClient)> {
        if std::process::id() != self.pid {
            return Err(PyOSError::new_err(
                "this t3fs client was made before a fork: make a new one in this process",
            ));
        }
        match (&self.rt, &self.client) {
            (Some(rt), Some(client)) => Ok((rt, client)),
            _ => Err(PyOSError::new_err("this t3fs client is closed")),
        }
    }
}

/// Runs `fut` to its end on `rt` with the interpreter released; a failure is `OSError` about
/// `path`.
pub(crate) fn wait<T, Fut>(
    py: Python<'_>,
    rt: &tokio::runtime::Runtime,
    path: &str,
    fut: Fut,
) -> PyResult<T>
where
    T: Send,
    Fut: Future<Output = Result<T, ClientError>> + Send,
{
    py.detach(|| rt.block_on(fut))
        .map_err(|e| os_error(&e, path))
}

impl Drop for Native {
    fn drop(&mut self) {
        let (rt, client) = (self.rt.take(), self.client.take());
        if std::process::id() != self.pid {
            // Forked: the runtime's threads are in the parent only. Leak both.
            std::mem::forget(client);
            std::mem::forget(rt);
            return;
        }
        if let (Some(rt), Some(client)) = (rt, client) {
            rt.block_on(client.close());
        }
    }
}

/// A client of one t3fs cluster.
#[pyclass(module = "t3fs._native", frozen)]
pub struct Client {
    native: Mutex<Option<Arc<Native>>>,
}

impl Client {
    /// The live client, or `OSError` once closed.
    fn native(&self) -> PyResult<Arc<Native>> {
        let guard = self.native.lock().unwrap_or_else(|e| e.into_inner());
        guard
            .clone()
            .ok_or_else(|| PyOSError::new_err("this t3fs client is closed"))
    }
}

fn options(
    cluster: Option<&str>,
    mgmtd: Option<&str>,
    token: Option<&str>,
) -> PyResult<ClientOptions> {
    match (cluster, mgmtd, token) {
        (Some(dir), None, None) => ClientOptions::from_cluster_dir(Path::new(dir))
            .map_err(|e| PyValueError::new_err(format!("cluster {dir}: {e}"))),
        (None, Some(addr), Some(token)) => {
            let addr = addr
                .parse()
                .map_err(|e| PyValueError::new_err(format!("mgmtd address {addr}: {e}")))?;
            Ok(ClientOptions::new(addr, token))
        }
        _ => Err(PyValueError::new_err(
            "give either cluster=DIR (a `t3fs cluster up` directory) or mgmtd=HOST:PORT and token",
        )),
    }
}

#[pymethods]
impl Client {
    /// Connects to the cluster in directory `cluster`, or to mgmtd at `mgmtd` with `token`.
    #[new]
    #[pyo3(signature = (cluster=None, *, mgmtd=None, token=None))]
    fn new(
        py: Python<'_>,
        cluster: Option<&str>,
        mgmtd: Option<&str>,
        token: Option<&str>,
    ) -> PyResult<Self> {
        let opts = options(cluster, mgmtd, token)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| PyOSError::new_err(format!("t3fs client runtime: {e}")))?;
        let client = py
            .detach(|| rt.block_on(NativeClient::connect(opts)))
            .map_err(|e| os_error(&e, "connect"))?;
        let native = Native {
            rt: Some(rt),
            client: Some(client),
            pid: std::process::id(),
        };
        Ok(Self {
            native: Mutex::new(Some(Arc::new(native))),
        })
    }

    /// stat of `path` (a final symlink followed): fsspec's `info` dictionary.
    fn stat<'py>(&self, py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyDict>> {
        let n = self.native()?;
        let (rt, c) = n.parts()?;
        info(py, path, &wait(py, rt, path, c.stat(path))?)
    }

    /// stat of `path` without following a final symlink.
    fn lstat<'py>(&self, py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyDict>> {
        let n = self.native()?;
        let (rt, c) = n.parts()?;
        info(py, path, &wait(py, rt, path, c.lstat(path))?)
    }

    /// The entries of directory `path` with their `info` (symlinks followed; an entry removed
    /// meanwhile is left out), in name order.
    fn ls<'py>(&self, py: Python<'py>, path: &str) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let n = self.native()?;
        let (rt, c) = n.parts()?;
        let names = wait(py, rt, path, c.list_after(path, Vec::new(), u32::MAX))?;
        let dir = path.trim_end_matches('/');
        let full: Vec<String> = names
            .iter()
            .map(|(name, _)| format!("{dir}/{}", String::from_utf8_lossy(name)))
            .collect();
        // Thousands of entries: their stats go many batched requests at once.
        let stats = wait(py, rt, path, c.stat_many(full.clone()))?;
        let mut out = Vec::with_capacity(full.len());
        for (p, s) in full.iter().zip(stats) {
            if let Ok(i) = s {
                out.push(info(py, p, &i)?);
            }
        }
        Ok(out)
    }

    /// The whole contents of each of `paths`, in order: 64 paths per stat request and their
    /// reads all in flight together (small samples in few round trips). The first path that
    /// cannot be read raises its `OSError`.
    fn read_files<'py>(
        &self,
        py: Python<'py>,
        paths: Vec<String>,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let n = self.native()?;
        let (rt, c) = n.parts()?;
        let results = wait(py, rt, "read_files", c.read_files(paths.clone()))?;
        paths
            .iter()
            .zip(results)
            .map(|(p, r)| {
                r.map(|data| PyBytes::new(py, &data))
                    .map_err(|e| os_error(&e, p))
            })
            .collect()
    }

    /// mkdir of `path` with mode `mode` (its parent must exist).
    #[pyo3(signature = (path, mode=0o755))]
    fn mkdir(&self, py: Python<'_>, path: &str, mode: u32) -> PyResult<()> {
        let n = self.native()?;
        let (rt, c) = n.parts()?;
        wait(py, rt, path, c.mkdir_mode(path, mode)).map(|_| ())
    }

    /// Removes `path`: a file, an empty directory, or with `recursive` a whole tree.
    #[pyo3(signature = (path, recursive=false))]
    fn remove(&self, py: Python<'_>, path: &str, recursive: bool) -> PyResult<()> {
        let n = self.native()?;
        let (rt, c) = n.parts()?;
        wait(py, rt, path, c.remove(path, recursive))
    }

    /// rename(2): moves `src` to `dst`, replacing a file (or an empty directory) there.
    fn rename(&self, py: Python<'_>, src: &str, dst: &str) -> PyResult<()> {
        let n = self.native()?;
        let (rt, c) = n.parts()?;
        wait(py, rt, src, c.rename(src, dst))
    }

    /// Opens `path`: `r` to read, `w` to write from empty (created if absent), `x` to create
    /// (`FileExistsError` if it exists), `a` to write after its end (created if absent).
    #[pyo3(signature = (path, mode="r", perm=0o644))]
    fn open(&self, py: Python<'_>, path: &str, mode: &str, perm: u32) -> PyResult<File> {
        let write = match mode {
            "r" => false,
            "w" | "x" | "a" => true,
            m => {
                return Err(PyValueError::new_err(format!(
                    "mode {m:?}: use r, w, x or a"
                )))
            }
        };
        let n = self.native()?;
        let (rt, c) = n.parts()?;
        if write {
            wait(py, rt, path, c.create_file(path, perm, mode == "x"))?;
        }
        let (mut f, inode) = match py.detach(|| rt.block_on(c.open_with_inode(path, write))) {
            Ok(opened) => opened,
            // Meta opens only files; the client names any other kind invalid. A directory
            // is EISDIR, as open(2) answers (one more round trip, on the failure path only).
            Err(e @ ClientError::Invalid(_)) => {
                let kind = wait(py, rt, path, c.stat(path))?.kind;
                return Err(match kind {
                    InodeKind::Directory { .. } => {
                        os_error_code(EISDIR, format!("{path}: is a directory"))
                    }
                    _ => os_error(&e, path),
                });
            }
            Err(e) => return Err(os_error(&e, path)),
        };
        let mut size = length_of(&inode);
        if mode == "w" && size > 0 {
            wait(py, rt, path, c.truncate(&mut f, &inode, 0))?;
            size = 0;
        }
        Ok(File::new(n.clone(), path, f, write, size))
    }

    /// Stops the client (also done when it is collected); later calls raise `OSError`.
    fn close(&self) {
        let taken = self.native.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(taken);
    }
}
