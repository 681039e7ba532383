//! One node of a cluster directory as the lab tools see it: its name, role, config file and
//! parsed config. The type is the client's (`t3fs_client::client::cluster_dir`, which reads a
//! cluster directory for clients and the lab alike); this leaf names it for the cluster manager
//! (cluster.rs) and the tools beside it (cluster_rdma.rs, wire_tally.rs, chunk_dump.rs), so they
//! can all name a node without naming each other.

pub use t3fs_client::client::cluster_dir::NodeEntry;
