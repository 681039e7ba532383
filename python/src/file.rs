//! `t3fs._native.File`: one open file of a client — reads at any offset, and for a writer,
//! writes at any offset, a length sync (fsync's) and the close that tells meta the length.
//!
//! Invariants: a write returns once every chunk it touched committed on its whole chain (the
//! native client's guarantee), so a file closed after its writes returned holds them; the
//! length meta records is the one `close`/`sync` give (the end of the acknowledged writes),
//! never more than was written. A reader sees the length of the file when it was opened.
//!
//! Not here: buffering (fsspec's `AbstractBufferedFile` above it), which file a path names
//! (`client.rs`).

use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use t3fs_client::client::File as NativeFile;

use crate::client::{wait, Native};

/// An open file.
#[pyclass(module = "t3fs._native", frozen)]
pub struct File {
    native: Arc<Native>,
    path: String,
    file: Mutex<Option<NativeFile>>,
    writable: bool,
    size: u64,
}

impl File {
    pub(crate) fn new(
        native: Arc<Native>,
        path: &str,
        f: NativeFile,
        writable: bool,
        size: u64,
    ) -> Self {
        Self {
            native,
            path: path.into(),
            file: Mutex::new(Some(f)),
            writable,
            size,
        }
    }

    /// The open file (a copy of its handle: reads and writes do not change it), or `OSError`
    /// once closed.
    fn handle(&self) -> PyResult<NativeFile> {
        let guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        guard
            .clone()
            .ok_or_else(|| PyOSError::new_err(format!("{}: file is closed", self.path)))
    }

    fn writer(&self) -> PyResult<NativeFile> {
        if !self.writable {
            return Err(PyOSError::new_err((
                9,
                format!("{}: not open for writing", self.path),
            )));
        }
        self.handle()
    }
}

#[pymethods]
impl File {
    /// The file's length when it was opened (0 after `w`).
    #[getter]
    fn size(&self) -> u64 {
        self.size
    }

    /// The path it was opened as.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// `length` bytes at `offset` (holes read as zeros; the caller keeps reads inside the
    /// file's length).
    fn read<'py>(
        &self,
        py: Python<'py>,
        offset: u64,
        length: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let f = self.handle()?;
        let (rt, c) = self.native.parts()?;
        let data = wait(py, rt, &self.path, c.read(&f, offset, length))?;
        Ok(PyBytes::new(py, &data))
    }

    /// Many `(offset, length)` ranges in one call; the bytes in range order (holes read as
    /// zeros). Every chunk read of every range is in flight together (up to half the client's
    /// call bound at once), each checksummed; a chunk read that fails is retried alone, so a
    /// range resumes where it stopped.
    fn read_ranges<'py>(
        &self,
        py: Python<'py>,
        ranges: Vec<(u64, u64)>,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let f = self.handle()?;
        let (rt, c) = self.native.parts()?;
        let got = wait(py, rt, &self.path, c.read_ranges(&f, &ranges))?;
        Ok(got.data.iter().map(|p| PyBytes::new(py, p)).collect())
    }

    /// Writes `data` at `offset`; returns once it is committed on every replica.
    fn write(&self, py: Python<'_>, offset: u64, data: &[u8]) -> PyResult<()> {
        let f = self.writer()?;
        let (rt, c) = self.native.parts()?;
        wait(py, rt, &self.path, c.write(&f, offset, data.to_vec()))
    }

    /// Tells meta the file's length is `length` (the end of the writes so far): fsync.
    fn sync(&self, py: Python<'_>, length: u64) -> PyResult<()> {
        let f = self.writer()?;
        let (rt, c) = self.native.parts()?;
        wait(py, rt, &self.path, c.sync_length(&f, length))
    }

    /// Closes the file; a writer tells meta its length, `length`. A second close does nothing.
    #[pyo3(signature = (length=0))]
    fn close(&self, py: Python<'_>, length: u64) -> PyResult<()> {
        let taken = self.file.lock().unwrap_or_else(|e| e.into_inner()).take();
        match taken {
            Some(f) if self.writable => {
                let (rt, c) = self.native.parts()?;
                wait(py, rt, &self.path, c.close_file(&f, length))
            }
            _ => Ok(()),
        }
    }
}
