//! t3fs-real: the t3fs machines as real services. Landed: the embedded persistent KV engine
//! ([`wal_kv`]), behind the `etcd` feature the distributed one (`etcd_kv`), and the file and
//! io_uring chunk stores with their thread wrapper ([`chunk_store`]).
//!
//! It will hold the tokio driver that executes `t3fs_core::machine::Action`s, the TCP transport
//! (RDMA behind the `rdma` feature), the service binaries, the FUSE client and the benchmark
//! client. It never depends on t3fs-sim.
// `unsafe` is denied everywhere but the io_uring chunk store, which allows it for pushing SQEs
// and for its aligned buffers (each use with a SAFETY comment).
#![deny(unsafe_code)]

pub mod chunk_store;
#[cfg(feature = "etcd")]
pub mod etcd_kv;
pub mod wal_kv;
