//! t3fs-real: the lab. Local clusters of real processes, scenario files and soaks on them,
//! `demo --real`, benchmarks, the host probe and calibration inputs, and run observers. The
//! services a node runs are `t3fs-services`; what a user links (native client, FUSE mount) is
//! `t3fs-client`; both are re-exported here under the names the lab and the CLI use. It never
//! depends on t3fs-sim (`scripts/check-deps.sh`).
//!
//! Local clusters ([`cluster`], [`cluster_rdma`], [`ports`], [`netns`], [`netns_rules`]),
//! scenario files on real processes ([`scenario_run`]), `demo --real` ([`demo_real`]),
//! benchmarks ([`bench_io`], [`bench_mdtest`], [`bench_transport`], [`bench_report`],
//! [`bench_verify`], [`bench_run`]), the host probe and calibration inputs ([`probe`],
//! [`probe_message`], [`probe_store`], [`cpu`], [`roofline`]), and run observers
//! ([`routing_watch`], [`chunk_dump`], [`wire_tally`]).
// `unsafe` is denied crate-wide and allowed only for single libc calls, each with a SAFETY
// comment: `cluster::signal` (kill) and `netns` (geteuid).
#![deny(unsafe_code)]

pub mod bench_io;
pub mod bench_job;
pub mod bench_mdtest;
pub mod bench_report;
pub mod bench_run;
pub mod bench_transport;
pub mod bench_verify;
pub mod chunk_dump;
pub mod cluster;
pub mod cluster_node;
pub mod cluster_rdma;
pub mod cpu;
pub mod demo_real;
pub mod netns;
pub mod netns_rules;
pub mod ports;
pub mod probe;
pub mod probe_message;
pub mod probe_store;
pub mod roofline;
pub mod routing_watch;
pub mod scenario_run;
pub mod wire_tally;
pub mod workload;
