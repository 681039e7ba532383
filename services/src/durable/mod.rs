//! One durable-file layer for the engines that keep their own files durable: the chunk stores'
//! metadata log (and data file) and WalKv's log and snapshot.
//!
//! - [`fs`]: the file-system seam, a trait with explicit durability points (fdatasync, fsync of
//!   a directory) and the real implementation over `std::fs`;
//! - `frame`: the log framing `[magic][len][crc32c][payload]`, one magic per engine;
//! - `lazy_fs` (test-only): an in-memory file system that forgets at a simulated power loss
//!   what was not made durable;
//! - `power_loss` (test-only): what the engines' power-loss suites share (their random source
//!   and how much of an unsynced write a crash keeps).
//!
//! Invariants: nothing here knows an engine (no import of `chunk_store` or `wal_kv`), and an
//! engine's on-disk bytes do not depend on this layer beyond the framing it names.
//!
//! Not here: what a payload holds, file headers, when to sync, and what recovery does with a
//! damaged frame: those stay each engine's, which is why the power-loss suites stay beside the
//! engines they test.

pub(crate) mod frame;
pub mod fs;
#[cfg(test)]
pub(crate) mod lazy_fs;
#[cfg(test)]
pub(crate) mod power_loss;
