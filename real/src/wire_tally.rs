//! What each wire carried in a running cluster: the nodes' transport counters (`/metrics`)
//! summed, so a run on RDMA shows that its payloads moved one-sided and how many frames went
//! over RDMA against TCP. Read-only; a node that does not answer is named, not guessed.
//!
//! Not here: the counters themselves (`transport::counters`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use crate::cluster_node::NodeEntry;

/// The transport counters of one node, by name.
pub fn node_counters(n: &NodeEntry) -> Result<BTreeMap<String, u64>, String> {
    let addr: SocketAddr = n.cfg.node.metrics.parse().map_err(|e| format!("{e}"))?;
    let (code, body) = t3fs_services::metrics::get(addr, "/metrics", Duration::from_secs(2))
        .map_err(|e| format!("{}: {e}", n.name))?;
    if code != 200 {
        return Err(format!("{}: /metrics answered {code}", n.name));
    }
    Ok(body
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("t3fs_transport_total{name=\"")?;
            let (name, v) = rest.split_once("\"} ")?;
            Some((name.to_string(), v.trim().parse().ok()?))
        })
        .collect())
}

/// One line: what the storage nodes moved with RDMA READ and WRITE, and the frames every node
/// received over RDMA out of all it received.
pub fn tally(entries: &[NodeEntry]) -> String {
    let (mut read, mut write, mut rdma_in, mut all_in) = (0, 0, 0, 0);
    let mut silent = Vec::new();
    for n in entries {
        let c = match node_counters(n) {
            Ok(c) => c,
            Err(_) => {
                silent.push(n.name.clone());
                continue;
            }
        };
        let get = |k: &str| c.get(k).copied().unwrap_or(0);
        if n.role == "storage" {
            read += get("rdma_read_bytes");
            write += get("rdma_write_bytes");
        }
        rdma_in += get("rdma_frames_in");
        all_in += get("frames_in");
    }
    let mut s = format!(
        "wire: storage pulled {read} bytes with RDMA READ and pushed {write} bytes with RDMA \
         WRITE; {rdma_in} of {all_in} frames received went over RDMA"
    );
    if !silent.is_empty() {
        s.push_str(&format!(" (no counters from {})", silent.join(", ")));
    }
    s
}
