//! t3fs-real: the t3fs machines as real services. Landed: the embedded persistent KV engine
//! ([`wal_kv`]), behind the `etcd` feature the distributed one (`etcd_kv`), and the TCP
//! transport ([`transport`]).
//!
//! It will hold the tokio driver that executes `t3fs_core::machine::Action`s, the RDMA transport
//! (behind the `rdma` feature), the file and io_uring chunk stores (both must pass
//! `t3fs_core::testing::chunk_store_suite`), KV engines up to etcd, the service binaries, the
//! FUSE client and the benchmark client. It never depends on t3fs-sim.
// `unsafe` is denied everywhere but the io_uring chunk store, which allows it for the ring's
// submission calls (each with a SAFETY comment).
#![deny(unsafe_code)]

pub mod chunk_store;
pub mod kv_service;
pub mod node;
#[cfg(feature = "etcd")]
pub mod etcd_kv;
pub mod transport;
pub mod wal_kv;
