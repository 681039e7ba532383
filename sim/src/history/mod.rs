//! What a run leaves for its checkers: the histories the world records while it runs (the
//! chunk workload's operations, the namespace requests, the file data path's log) and the
//! shape of the end state it gathers for them (each serving target's committed chunks).
//!
//! A leaf: it names neither the world (which writes these records) nor the checkers (which
//! read them afterwards), so both depend on it and not on each other; a real run's log is
//! replayed into the same types. Invariant: recording only appends and stamps (each history
//! keeps one strictly increasing logical clock); nothing here judges. Not here: the checkers
//! (`check`), producing the records (`world`, or a real runner's log).

pub mod file_io;
pub mod ns;

use std::collections::BTreeMap;

use t3fs_core::ids::ChunkId;

/// The chunk workload's history: shared with t3fs-scenario so real runs record the same.
pub use t3fs_scenario::history::{History, OpKind, OpRec};

/// One target's committed chunks: (committed version, bytes) by chunk.
pub type Content = BTreeMap<ChunkId, (u32, Vec<u8>)>;
