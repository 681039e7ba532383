//! The performance model: NICs, SSDs and the fabric as resources with capacities, bulk
//! transfers as flows sharing them max-min fairly (`flow.rs`), an event loop that recomputes
//! rates as flows start and end (`engine.rs`), hardware profiles with their sources
//! (`hardware.rs`), and scenarios built on them: 3FS's peak read (`peak_read.rs`), a node's
//! recovery under two chain tables (`recovery.rs`), phased jobs whose tasks hold the clients'
//! cores (`pipeline.rs`: smallpond GraySort, a checkpoint's save and load) and DLIO's training
//! loop of simulated accelerators (`training.rs`), run from `scenarios/perf/*.toml`.
//!
//! The model answers "what would this cluster deliver and what binds it": it is separate from
//! the correctness world (no machines run here; a flow stands for a chunk's bytes), so
//! correctness runs keep their speed and trace hashes. CPU enters only as a pipeline phase's
//! per-core rate. Not here: per-request CPU costs, the message-level world's own resources
//! (`world/resources.rs` has them), calibration against real runs (`t3fs calibrate`).

pub mod engine;
pub mod flow;
pub mod hardware;
pub mod layout;
pub mod peak_read;
pub mod pipeline;
pub mod pipeline_run;
pub mod recovery;
pub mod run;
pub mod run_dir;
pub mod scenario;
pub mod setup;
pub mod sweep;
#[cfg(test)]
mod tests;
pub mod training;
pub mod training_run;
