//! The cluster manager (3FS §2).
pub mod chain_update;
