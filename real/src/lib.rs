//! t3fs-real: the t3fs machines as real services, their clients and the lab tools around them.
//! It never depends on t3fs-sim (`scripts/check-deps.sh`). One crate today; splitting it into
//! services, client and lab tooling is planned (see `docs/ARCHITECTURE.md`).
//!
//! Services:
//! - the process of one node: [`serve`] (`t3fs serve ROLE`), its [`config`], and the tokio
//!   driver [`node`], which runs a core machine through the shared node runtime;
//! - transports ([`transport`]): TCP with the token handshake and per-message sender checks,
//!   and RDMA (`transport::rdma`) over the verbs seam of [`rdma`] (a software provider, and
//!   behind the `rdma` feature the rdma-sys provider, compiled but not yet run on hardware),
//!   sized by [`rdma_config`];
//! - chunk stores ([`chunk_store`]): the file store and, behind the `uring` feature (on by
//!   default), the io_uring store, each on a thread of its own;
//! - KV engines: the embedded persistent engine ([`wal_kv`]) served by the `kv` role
//!   ([`kv_service`]), and behind the `etcd` feature the distributed one (`etcd_kv`);
//! - fault injection and observability of a running node: [`metrics`] (`/metrics`, `/ready`,
//!   `/status`, the fault endpoint), [`fault_query`], [`kv_faults`]; buffer pools ([`vec_pool`]).
//!
//! Client and mount: the native client library ([`client`], [`client_ns`]) and the FUSE mount
//! ([`fuse`]).
//!
//! Lab tooling: local clusters ([`cluster`], [`cluster_rdma`], [`ports`], [`netns`],
//! [`netns_rules`]), scenario files on real processes ([`scenario_run`]), `demo --real`
//! ([`demo_real`]), benchmarks ([`bench_io`], [`bench_mdtest`], [`bench_transport`],
//! [`bench_report`], [`bench_verify`], [`bench_run`]), the host probe and calibration inputs
//! ([`probe`], [`probe_message`], [`probe_store`], [`cpu`], [`roofline`]), and run observers
//! ([`routing_watch`], [`chunk_dump`], [`wire_tally`]).
// `unsafe` is denied crate-wide and allowed only where a system interface needs it, each use
// with a SAFETY comment: the io_uring chunk store (`chunk_store::uring`: pushing SQEs, aligned
// buffers), the rdma-sys verbs provider (`rdma::ibv`), and single libc calls in
// `chunk_store::fs` (fallocate, fstatvfs), `wal_kv::fs` (fallocate), `cluster::signal` (kill)
// and `netns` (geteuid).
#![deny(unsafe_code)]

pub mod bench_io;
pub mod bench_job;
pub mod bench_mdtest;
pub mod bench_report;
pub mod bench_run;
pub mod bench_transport;
pub mod bench_verify;
pub mod chunk_dump;
pub mod chunk_store;
pub mod client;
pub mod client_ns;
pub mod cluster;
pub mod cluster_node;
pub mod cluster_rdma;
pub mod config;
pub mod cpu;
pub mod demo_real;
#[cfg(feature = "etcd")]
pub mod etcd_kv;
pub mod fault_query;
pub mod fuse;
pub mod kv_faults;
pub mod kv_service;
pub mod metrics;
pub mod netns;
pub mod netns_rules;
pub mod node;
pub mod ports;
pub mod probe;
pub mod probe_message;
pub mod probe_store;
pub mod rdma;
pub mod rdma_config;
pub mod roofline;
pub mod routing_watch;
pub mod scenario_run;
pub mod serve;
pub mod transport;
pub mod vec_pool;
pub mod wal_kv;
pub mod wire_tally;
