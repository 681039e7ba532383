//! From the client's types to Python's: a failure to an `OSError` with the errno a local file
//! system gives (the FUSE mount's table, so the mount and the package answer alike), an inode
//! to the `info` dictionary fsspec expects.
//!
//! Not here: which call failed (the caller adds the path).

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use t3fs_client::client::ClientError;
use t3fs_client::fuse::errno::errno;
use t3fs_core::meta::{Inode, InodeKind};

/// `OSError(errno, "path: message")`; Python picks the subclass from the errno.
pub fn os_error(e: &ClientError, path: &str) -> PyErr {
    PyOSError::new_err((errno(e).code(), format!("{path}: {e}")))
}

/// `OSError(errno, message)` for an errno of our own (EISDIR for a directory opened as a file).
pub fn os_error_code(code: i32, what: String) -> PyErr {
    PyOSError::new_err((code, what))
}

/// The length of a file inode (0 for other kinds).
pub fn length_of(i: &Inode) -> u64 {
    match &i.kind {
        InodeKind::File { length, .. } => *length,
        _ => 0,
    }
}

/// fsspec's `info` of `path`: name, size, type, and the POSIX attributes.
pub fn info<'py>(py: Python<'py>, path: &str, i: &Inode) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let (kind, mode_type) = match &i.kind {
        InodeKind::File { .. } => ("file", 0o100000),
        InodeKind::Directory { .. } => ("directory", 0o040000),
        InodeKind::Symlink { .. } => ("other", 0o120000),
        InodeKind::Special { kind, .. } => ("other", kind.mode_bits()),
    };
    d.set_item("name", path)?;
    d.set_item("size", length_of(i))?;
    d.set_item("type", kind)?;
    d.set_item("mode", mode_type | i.perm)?;
    d.set_item("uid", i.uid)?;
    d.set_item("gid", i.gid)?;
    d.set_item("nlink", i.nlink)?;
    d.set_item("ino", i.id.0)?;
    d.set_item("mtime", i.mtime)?;
    d.set_item("ctime", i.ctime)?;
    if let InodeKind::Symlink { target } = &i.kind {
        d.set_item("destination", String::from_utf8_lossy(target).into_owned())?;
    }
    Ok(d)
}
