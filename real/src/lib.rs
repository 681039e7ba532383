//! t3fs-real: the t3fs machines as real services. Landed: the embedded persistent KV engine
//! ([`wal_kv`]), behind the `etcd` feature the distributed one (`etcd_kv`), the file and
//! io_uring chunk stores with their thread wrapper ([`chunk_store`]), the TCP transport
//! ([`transport`]), the tokio node driver ([`node`]), the `kv` service ([`kv_service`]), the
//! service configuration and processes ([`config`], [`serve`]), the native client ([`client`]),
//! local clusters ([`cluster`], [`netns`]), and the benchmark side: fio-style load
//! ([`bench_io`], [`bench_report`], [`bench_verify`]), mdtest ([`bench_mdtest`]), the host probe
//! ([`probe`]), CPU accounting ([`cpu`]), the roofline ([`roofline`]), mgmtd's routing history
//! ([`routing_watch`]), real run directories ([`bench_run`]), `demo --real` ([`demo_real`]),
//! the FUSE mount ([`fuse`]), and the verbs seam with its software provider ([`rdma`]).
//!
//! Still to come: the RDMA transport and its rdma-sys provider (behind the `rdma` feature). It
//! never depends on t3fs-sim.
// `unsafe` is denied everywhere but the io_uring chunk store, which allows it for pushing SQEs
// and for its aligned buffers (each use with a SAFETY comment).
#![deny(unsafe_code)]

pub mod bench_io;
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
