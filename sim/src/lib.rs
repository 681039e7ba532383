//! t3fs-sim: the deterministic side of t3fs.
//!
//! - `world`: the seeded discrete-event world running the core machines of a whole cluster with
//!   network, disk, KV and clock fault models;
//! - `run`: a scenario's safety and liveness phases and its verdicts; `swarm`: scenarios drawn
//!   from seeds; `check`: the history checkers; `history`: what the world records and the
//!   checkers read (a leaf both depend on); `rundir`: the run directory a report is made of;
//! - `model` (feature `model`): the stateright models, exhaustive on tiny configurations.
//!
//! This crate never depends on t3fs-real: simulation uses only the sans-IO machines of
//! t3fs-core.
#![forbid(unsafe_code)]

pub mod bench;
pub mod bugs;
pub mod check;
pub mod history;
#[cfg(feature = "model")]
pub mod model;
pub mod perf;
pub mod run;
pub mod rundir;
pub mod soak;
pub mod swarm;
pub mod world;
