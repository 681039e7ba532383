//! t3fs-sim: the deterministic side of t3fs.
//!
//! Today it holds the stateright models (feature `model`): exhaustive checks of the core
//! machines on tiny configurations. The seeded discrete-event world, its fault models, the
//! checkers for long histories and the swarm arrive with the simulator issue. This crate never
//! depends on t3fs-real: simulation uses only the sans-IO machines of t3fs-core.
#![forbid(unsafe_code)]

#[cfg(feature = "model")]
pub mod model;
