//! `t3fs._native`: the Python package's binding of the t3fs native client (pyo3, abi3).
//!
//! Purpose: give Python the namespace and file verbs of [`t3fs_client::client::Client`] with
//! Python's own conventions, for `t3fs.fs` (the fsspec file system) and the PyTorch connector
//! built on it. One [`client::Client`] is one connected native client with its own tokio
//! runtime; [`file::File`] is one open file of it.
//!
//! Invariants: every call that waits on the cluster releases the interpreter (`Python::detach`),
//! so other Python threads (DataLoader's, a training loop's) run meanwhile; every failure is an
//! `OSError` whose errno is the one a local file system gives (Python then raises its own
//! subclass: `FileNotFoundError`, `FileExistsError`, `PermissionError`, `IsADirectoryError`,
//! `NotADirectoryError`), with the cluster's message; a client used in a process forked from
//! the one that made it refuses to run (its runtime's threads did not survive the fork) and is
//! never torn down there, so the child makes a client of its own (`t3fs.fs` does).
//!
//! Not here: paths relative to a bucket or protocol prefixes (`t3fs/fs.py`), buffering and
//! readahead (fsspec's file classes), datasets and checkpoints (Python).

mod client;
mod convert;
mod file;

use pyo3::prelude::*;

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<client::Client>()?;
    m.add_class::<file::File>()?;
    Ok(())
}
