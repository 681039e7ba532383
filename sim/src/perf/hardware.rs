//! Hardware of a performance run: named profiles with each figure's source, and the resources
//! a cluster of them offers (NIC directions, SSDs, an optional fabric core).
//!
//! Units: bytes per second for bandwidth, seconds for latency. A NIC is full duplex: each
//! direction is its own resource. An SSD's reads and writes share one resource (its bandwidth
//! for the mix). `nic_efficiency` is the share of line rate left for payload after the wire's
//! own headers (InfiniBand: 4 KiB MTU, ~1.5% of headers per packet; RDMA's request messages are
//! not counted). Nothing here is fitted to a published result.
//!
//! Not here: CPU costs (a pipeline scenario brings its own per-core rates), per-SSD queue depth
//! and latency distributions (a fixed access latency per request stands for them).

/// Gbps in bytes per second.
pub const fn gbps(g: f64) -> f64 {
    g * 1e9 / 8.0
}

/// One node kind's hardware.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeHw {
    /// NICs per node.
    pub nics: u32,
    /// Line rate of each NIC, bytes per second, each direction.
    pub nic_bytes: f64,
    /// SSDs per node (0 for clients).
    pub ssds: u32,
    /// Bandwidth of each SSD, bytes per second.
    pub ssd_bytes: f64,
}

/// A cluster's hardware.
#[derive(Clone, Debug, PartialEq)]
pub struct Hardware {
    /// The profile's name.
    pub name: String,
    /// Storage nodes.
    pub storage: NodeHw,
    /// Client nodes.
    pub client: NodeHw,
    /// Payload share of line rate.
    pub nic_efficiency: f64,
    /// One request's fixed cost before its bytes flow: network round trip and SSD access.
    pub request_latency: f64,
    /// Fabric oversubscription (1: non-blocking; 2: the core carries half of what the edge
    /// could send).
    pub oversubscription: f64,
    /// Where each figure comes from.
    pub sources: Vec<&'static str>,
}

impl Hardware {
    /// 3FS's peak-read cluster as published (reference/3fs.md §7, workloads.md).
    pub fn threefs_2025() -> Self {
        Self {
            name: "3fs-2025".into(),
            storage: NodeHw {
                nics: 2,
                nic_bytes: gbps(200.0),
                ssds: 16,
                ssd_bytes: 7.0e9,
            },
            client: NodeHw {
                nics: 1,
                nic_bytes: gbps(200.0),
                ssds: 0,
                ssd_bytes: 0.0,
            },
            nic_efficiency: 0.985,
            request_latency: 100e-6,
            oversubscription: 1.0,
            sources: vec![
                "storage: 2 x 200 Gbps InfiniBand and 16 NVMe SSDs per node (3FS README, peak read)",
                "client: 1 x 200 Gbps InfiniBand per node (3FS README)",
                "SSD: 7.0 GB/s sequential read, a PCIe 4.0 x4 NVMe drive's datasheet class \
                 (3FS names no model; workloads.md assumes Gen4 x4)",
                "nic_efficiency 0.985: InfiniBand 4 KiB MTU payload share after LRH/BTH/ICRC \
                 headers (~66 B per packet)",
                "request_latency 100 us: an RDMA round trip (~5 us) plus an NVMe read access \
                 (~90 us at queue depth 1, datasheet class)",
                "fabric: non-blocking fat tree (3FS paper: two-layer fat tree)",
            ],
        }
    }

    /// The profile named `name`.
    pub fn profile(name: &str) -> Option<Self> {
        match name {
            "3fs-2025" => Some(Self::threefs_2025()),
            _ => None,
        }
    }

    /// Payload bandwidth of one node's NICs together, one direction.
    pub fn nic_payload(&self, n: &NodeHw) -> f64 {
        f64::from(n.nics) * n.nic_bytes * self.nic_efficiency
    }
}
