//! t3fs-crosscheck: where a real cluster meets the simulator. The lab (t3fs-real) starts,
//! breaks and measures real clusters and never links the simulator; the simulator (t3fs-sim)
//! never links a real service. What needs both lives here, so that neither of them has to:
//!
//! - [`cluster_run`]: `t3fs cluster run SCENARIO` — a scenario file on real processes, its
//!   history judged by the simulator's checkers ([`cluster_agree`]: replicas agree,
//!   [`cluster_ns`]: the namespace verdicts), written as a run directory ([`real_run`]);
//! - [`cluster_soak`]: `t3fs cluster soak` — random fault schedules on real processes, each
//!   judged the same way;
//! - [`calibrate`]: `t3fs calibrate` — the simulator's performance model against a real
//!   loopback cluster on this host ([`calibrate_profile`]: each resource measured through the
//!   real component the cluster uses; [`supervised`]: the cluster it starts and always stops);
//! - [`provenance`]: the commit, host and profile every run directory records, and writing a
//!   simulated run's directory.
//!
//! Invariants: a real run is judged by the same checker code as a simulated one (no second
//! implementation of a verdict); every cluster a command here starts is stopped whatever
//! happens. Not here: argument parsing beyond the option structs the CLI flattens (the CLI, `src/`),
//! the checkers themselves (t3fs-sim), the real services (t3fs-services, t3fs-client).

pub mod calibrate;
pub mod calibrate_cpu;
pub mod calibrate_load;
pub mod calibrate_probes;
pub mod calibrate_profile;
pub mod cluster_agree;
pub mod cluster_ns;
pub mod cluster_run;
pub mod cluster_soak;
pub mod provenance;
pub mod real_run;
pub mod supervised;
