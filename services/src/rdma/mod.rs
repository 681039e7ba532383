//! RDMA: the verbs seam ([`verbs`]) the RDMA transport is written against, and its software
//! provider ([`soft`]), an in-process fabric that enforces the rules of verbs so that the
//! transport's tests meet the failures hardware gives without hardware, and the provider on
//! real devices through rdma-sys (`ibv`, behind the `rdma` feature; compiled, not yet run on
//! hardware).
//!
//! The transport built on them lives in `transport::rdma` (frames by SEND/RECV with credits,
//! chunk payloads by one-sided READ and WRITE as in 3FS); the software fabric across processes
//! in `soft::remote`.

pub mod channel;
#[cfg(test)]
mod channel_tests;
#[cfg(feature = "rdma")]
pub mod ibv;
pub mod soft;
pub mod verbs;
