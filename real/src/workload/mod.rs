//! The AI workloads 3FS was built for, run on a real cluster through the native client or on
//! any POSIX directory (the FUSE mount, or a local directory for the side-by-side run):
//! distributed checkpoints ([`checkpoint`]), 3FS's KVCache ([`kvcache`]), and GraySort's
//! record format and validator ([`graysort`]; the sort itself is a smallpond pipeline,
//! `python/bench/graysort.py`). Each records what it did interval by interval ([`recorder`])
//! and becomes a run directory with a report ([`run_dir`]).
//!
//! Invariant: every workload validates what it read against what was written; a validator
//! that did not pass fails the run. Not here: the sort itself (smallpond's), or the simulator's
//! predictions (t3fs-sim).

pub mod checkpoint;
pub mod graysort;
pub mod kvcache;
pub mod recorder;
pub mod run_dir;
pub mod store;
