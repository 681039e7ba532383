//! t3fs-services: the t3fs machines as real services. Everything a server process runs lives
//! here; nothing here starts a cluster, measures one or mounts a file system (that is
//! `t3fs-real`, the lab, and `t3fs-client`). It depends on `t3fs-core` for the machines and on
//! `t3fs-scenario` only for the cluster plan a node config names; never on `t3fs-sim`,
//! `t3fs-client` or `t3fs-real` (`scripts/check-deps.sh`).
//!
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
//! - the durable-file layer the chunk stores' metadata log and `wal_kv` share ([`durable`]):
//!   the fs seam, the log framing, and the power-loss tests' lazy file system;
//! - fault injection and observability of a running node: [`metrics`] (`/metrics`, `/ready`,
//!   `/status`, the fault endpoint), [`fault_query`], [`kv_faults`]; buffer pools ([`vec_pool`]).
// `unsafe` is denied crate-wide and allowed only where a system interface needs it, each use
// with a SAFETY comment: the io_uring chunk store (`chunk_store::uring`: pushing SQEs, aligned
// buffers), the rdma-sys verbs provider (`rdma::ibv`), and single libc calls in
// `durable::fs` (fallocate, fstatvfs).
#![deny(unsafe_code)]

pub mod chunk_store;
pub mod config;
pub mod durable;
#[cfg(feature = "etcd")]
pub mod etcd_kv;
pub mod fault_query;
pub mod jitter;
pub mod kv_commits;
pub mod kv_faults;
pub mod kv_service;
pub mod metrics;
pub mod node;
pub mod rdma;
pub mod rdma_config;
pub mod serve;
pub mod transport;
pub mod vec_pool;
pub mod wal_kv;
