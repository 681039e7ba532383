//! What write-behind and readahead need from below them: a runtime to send on, and chunk
//! writes and reads of an open file. The mount's `Inner<C>` is the backend (its client's
//! writes and reads, mount_client.rs: the native client in production, the in-memory one in
//! the file system's unit tests); write-behind's and readahead's own tests give a gated one
//! (gated_backend.rs), so the ordering and caching logic is tested without a cluster or
//! `/dev/fuse`.
//!
//! Object-safe (boxed futures), unlike `MountClient`: write-behind and readahead take any
//! backend without being generic over the client. A leaf: it names no other module of the
//! mount, so write_behind.rs and read_ahead.rs depend on it instead of on `Inner` (which owns
//! their handles). Not here: namespace calls (mount_client.rs).

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use tokio::runtime::Handle;

use crate::client::{ClientError, File};

/// A boxed future of a backend call (object-safe, `Send` for spawning).
pub(super) type Call<'a, T> = Pin<Box<dyn Future<Output = Result<T, ClientError>> + Send + 'a>>;

/// Where write-behind sends its pieces and readahead reads its units.
pub(super) trait Backend: Send + Sync + 'static {
    /// The runtime pieces and units are sent on.
    fn runtime(&self) -> &Handle;
    /// Writes `data` at `offset` of `file`; resolves once its chains committed it.
    fn write<'a>(&'a self, file: &'a File, offset: u64, data: Vec<u8>) -> Call<'a, ()>;
    /// Reads `len` bytes at `offset` of `file` (holes read as zeros; short at its end).
    fn read<'a>(&'a self, file: &'a File, offset: u64, len: u64) -> Call<'a, Vec<u8>>;
    /// A write of `file` landed (its chains committed it). The mount forgets the file's
    /// readahead here as well as when the write is accepted: a unit started in between read
    /// the bytes from before the write.
    fn landed(&self, _file: &File) {}
}

/// Locks `m`, taking the data of a poisoned lock as it is (a panicking request task must not
/// wedge every later request on the handle).
pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
