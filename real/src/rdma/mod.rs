//! RDMA: the verbs seam ([`verbs`]) the RDMA transport is written against, and its software
//! provider ([`soft`]), an in-process fabric that enforces the rules of verbs so that the
//! transport's tests meet the failures hardware gives without hardware. The provider on
//! rdma-sys (behind the `rdma` feature) and the transport itself build on this seam.
//!
//! Not here yet: the rdma-sys provider and the transport (control messages by SEND/RECV with
//! credits, chunk payloads by one-sided READ and WRITE as in 3FS).

pub mod soft;
pub mod verbs;
