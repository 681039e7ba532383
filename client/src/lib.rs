//! t3fs-client: what a user of a t3fs cluster links. The native client library ([`client`],
//! with the namespace calls of [`client_ns`]) and the FUSE mount ([`fuse`], `t3fs mount`).
//! It speaks to the cluster through `t3fs-services`' transport and node runtime, and never
//! depends on `t3fs-real` (the lab) or `t3fs-sim` (`scripts/check-deps.sh`). A language
//! binding (the Python package) is meant to link this crate and `t3fs-core` alone.
#![deny(unsafe_code)]

// The transport and node runtime, under the names the client's modules use (`crate::transport`).
use t3fs_services::{node, transport};

pub mod client;
pub mod client_ns;
pub mod fuse;
