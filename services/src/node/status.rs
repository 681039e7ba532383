//! A running node's snapshot: Prometheus metrics (machine counters, I/O latency summaries,
//! transport counters) and, on the primary mgmtd, the cluster status `t3fs cluster status`
//! prints: nodes with heartbeat state and measured clock offsets, and every chain in chain
//! notation (`c1@v3: t1 SERVING → t4 SERVING → t7 OFFLINE`). Not here: serving it (metrics.rs).

use std::fmt::Write;

use t3fs_core::ids::NodeId;
use t3fs_core::mgmtd::Mgmtd;
use t3fs_core::node::{counters_of, Process};
use t3fs_core::routing::{ChainInfo, PublicState};
use t3fs_core::storage::StorageNode;

use crate::transport::Transport;

use super::stats::IoStats;
use super::Snapshot;

/// The upper-case name of a public state, as 3FS and the simulator print it.
pub fn state_name(s: PublicState) -> &'static str {
    match s {
        PublicState::Serving => "SERVING",
        PublicState::Syncing => "SYNCING",
        PublicState::Waiting => "WAITING",
        PublicState::LastSrv => "LASTSRV",
        PublicState::Offline => "OFFLINE",
    }
}

/// A chain in chain notation.
pub fn chain_line(c: &ChainInfo) -> String {
    let members: Vec<String> = c
        .targets
        .iter()
        .map(|t| format!("{} {}", t.target, state_name(t.state)))
        .collect();
    format!("{}@{}: {}", c.chain, c.version, members.join(" → "))
}

/// Builds the snapshot of a node.
pub fn snapshot(
    me: NodeId,
    p: &Process,
    stats: &IoStats,
    transport: &Transport,
    malformed: u64,
) -> Snapshot {
    let mut metrics = String::new();
    write_machine_counters(&mut metrics, p);
    stats.prometheus(&mut metrics);
    write_transport_counters(&mut metrics, transport, malformed);
    let (status, ready) = match p {
        Process::Mgmtd(m) => mgmtd_status(me, m, &mut metrics),
        Process::None => (String::from("stopped\n"), false),
        // What a fault-injection run waits on before comparing replicas: no update in
        // progress and every target in a chain UPTODATE on the routing it acts on.
        Process::Storage(st) => storage_status(me, st, &mut metrics),
        _ => (format!("running {me}\n"), true),
    };
    Snapshot {
        metrics,
        status,
        ready,
        routing: None,
    }
}

/// Writes the machine's counters and mgmtd's chain-update row counts to `metrics`.
fn write_machine_counters(metrics: &mut String, p: &Process) {
    let (counters, rows) = counters_of(p);
    let _ = writeln!(metrics, "# TYPE t3fs_machine_total counter");
    for (k, v) in counters {
        let _ = writeln!(metrics, "t3fs_machine_total{{name=\"{k}\"}} {v}");
    }
    for (r, v) in rows {
        let _ = writeln!(
            metrics,
            "t3fs_mgmtd_chain_update_rows_total{{row=\"{r:?}\"}} {v}"
        );
    }
}

/// Writes the transport's counters to `metrics`; `malformed` adds the node's own count.
fn write_transport_counters(metrics: &mut String, transport: &Transport, malformed: u64) {
    let c = transport.counters();
    let _ = writeln!(metrics, "# TYPE t3fs_transport_total counter");
    for (k, v) in [
        ("frames_in", c.frames_in),
        ("bytes_in", c.bytes_in),
        ("frames_out", c.frames_out),
        ("bytes_out", c.bytes_out),
        ("dropped_full", c.dropped_full),
        ("dropped_write", c.dropped_write),
        ("no_route", c.no_route),
        ("malformed", c.malformed + malformed),
        ("oversized", c.oversized),
        ("truncated", c.truncated),
        ("auth_rejected", c.auth_rejected),
        ("id_taken", c.id_taken),
        ("peers_full", c.peers_full),
        ("refused_role", c.refused_role),
        ("connects", c.connects),
        ("reconnects", c.reconnects),
        ("connect_failures", c.connect_failures),
        ("disconnects", c.disconnects),
        ("fault_dropped", c.fault_dropped),
        ("fault_duplicated", c.fault_duplicated),
        ("fault_delayed", c.fault_delayed),
        ("rdma_frames_in", c.rdma_frames_in),
        ("rdma_frames_out", c.rdma_frames_out),
        ("rdma_read_bytes", c.rdma_read_bytes),
        ("rdma_write_bytes", c.rdma_write_bytes),
        ("rdma_failures", c.rdma_failures),
    ] {
        let _ = writeln!(metrics, "t3fs_transport_total{{name=\"{k}\"}} {v}");
    }
}

/// The primary mgmtd's cluster status (nodes with clock offsets, every chain), writing each
/// node's clock offset to `metrics`; a standby's one line.
fn mgmtd_status(me: NodeId, m: &Mgmtd, metrics: &mut String) -> (String, bool) {
    match (m.routing(), m.nodes()) {
        (Some(r), Some(nodes)) => {
            let mut s = format!("primary {me} routing v{}\n", r.version.0);
            for (n, rec) in nodes {
                let _ = writeln!(
                    s,
                    "node {n} {} clock_offset_ms {:.3}",
                    if rec.connected {
                        "connected"
                    } else {
                        "disconnected"
                    },
                    *rec.clock_offset_ns as f64 / 1e6
                );
                let _ = writeln!(
                    metrics,
                    "t3fs_node_clock_offset_seconds{{node=\"{}\"}} {:.9}",
                    n.0,
                    *rec.clock_offset_ns as f64 / 1e9
                );
            }
            for c in r.chains.values() {
                let _ = writeln!(s, "chain {}", chain_line(c));
            }
            (s, true)
        }
        // A standby serves its role (ready to take the lease over), so it is ready; only the
        // primary answers with the cluster's status.
        _ => (format!("standby {me}\n"), true),
    }
}

/// A storage node's status line with its updating and not-UPTODATE target counts, which it
/// also writes to `metrics`.
fn storage_status(me: NodeId, st: &StorageNode, metrics: &mut String) -> (String, bool) {
    let busy = st.targets().filter(|t| !t.locks.is_empty()).count();
    let behind = st
        .targets()
        .filter(|t| {
            t.local_state != t3fs_core::routing::LocalState::UpToDate
                && st.routing().chain_of_target(t.id).is_some()
        })
        .count();
    let _ = writeln!(metrics, "t3fs_storage_targets_updating {busy}");
    let _ = writeln!(metrics, "t3fs_storage_targets_not_uptodate {behind}");
    (
        format!(
            "running {me} routing v{} targets_updating {busy} targets_not_uptodate {behind}\n",
            st.routing().version.0
        ),
        true,
    )
}
