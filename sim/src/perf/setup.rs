//! What every performance run shares: its hardware with the scenario's overrides, its cluster
//! laid out under a chain table, the engine run at the scenario's sampling and quantum, the
//! report's files and its "model and assumptions" section.
//!
//! Not here: any scenario's traffic or report (`run.rs`, `pipeline_run.rs`, `training_run.rs`).

use std::fmt::Write as _;
use std::path::Path;

use t3fs_scenario::chain_table::ChainTable;

use super::engine::{self, Sample, Stats};
use super::hardware::Hardware;
use super::layout::Layout;
use super::scenario::PerfScenario;

pub fn hardware(sc: &PerfScenario) -> Hardware {
    let mut hw = Hardware::profile(&sc.hardware.profile).expect("checked at load");
    if let Some(o) = sc.hardware.oversubscription {
        hw.oversubscription = o;
    }
    if let Some(d) = sc.hardware.ssds {
        hw.storage.ssds = d;
    }
    if let Some(g) = sc.hardware.nic_gbps {
        hw.storage.nic_bytes = super::hardware::gbps(g);
        hw.client.nic_bytes = super::hardware::gbps(g);
    }
    if let Some(g) = sc.hardware.client_nic_gbps {
        hw.client.nic_bytes = super::hardware::gbps(g);
    }
    hw
}

/// The scenario's cluster laid out with chain table `kind`.
pub fn layout(sc: &PerfScenario, hw: &Hardware, kind: &str) -> Result<Layout, String> {
    let c = &sc.cluster;
    let t = table(sc, kind)?;
    Ok(Layout::new(
        hw,
        c.storage_nodes,
        c.clients,
        t,
        sc.hardware.background,
    ))
}

/// Runs `src` on `layout` for the scenario's duration, sampling and quantum.
pub fn simulate(
    sc: &PerfScenario,
    layout: &Layout,
    src: &mut dyn engine::Source,
    on_sample: impl FnMut(&Sample),
) -> Stats {
    let (every, quantum) = (sc.sample_ms * 1e-3, sc.quantum_us * 1e-6);
    engine::run(&layout.caps, src, sc.duration_s, every, quantum, on_sample)
}

fn table(sc: &PerfScenario, kind: &str) -> Result<ChainTable, String> {
    let c = &sc.cluster;
    match kind {
        "round-robin" => ChainTable::round_robin(c.storage_nodes, c.targets_per_disk, c.replicas),
        _ => ChainTable::balanced(c.storage_nodes, c.targets_per_disk, c.replicas),
    }
}

pub fn write(dir: &Path, name: &str, text: &str) -> Result<(), String> {
    std::fs::write(dir.join(name), text).map_err(|e| format!("{name}: {e}"))
}

pub fn assumptions(sc: &PerfScenario, hw: &Hardware, stats: &Stats) -> String {
    let mut s = String::from("## Model and assumptions\n\n");
    let q = sc.quantum_us * 1e-6;
    let _ = writeln!(
        s,
        "- Flow-level, max-min fair sharing recomputed at every flow start and end (events \
         within {:.0} us handled together: about {:.2}% optimism here at worst, one quantum \
         over a mean flow time of {:.3} ms); {} recomputations, {} flows, at most {} at once.",
        sc.quantum_us,
        100.0 * q / stats.mean_flow_time.max(1e-12),
        stats.mean_flow_time * 1e3,
        stats.allocations,
        stats.flows,
        stats.peak_flows
    );
    s.push_str(
        "- A flow gets its fair share at once (no congestion control dynamics); a request \
         costs a fixed latency before its bytes flow; NICs are full duplex; an SSD's reads and \
         writes share its bandwidth.\n",
    );
    s.push_str(if sc.kind == "pipeline" {
        "- CPU: each task slot is a resource of the phase's per-core rate times its cores' \
         Amdahl speedup (pipeline.rs); a task reads, computes and writes at one pace.\n"
    } else {
        "- No CPU costs.\n"
    });
    let _ = writeln!(s, "- Hardware profile `{}`:", hw.name);
    let h = &sc.hardware;
    let overrides: Vec<String> = [
        h.nic_gbps.map(|g| format!("every NIC {g} Gbps")),
        h.client_nic_gbps.map(|g| format!("client NICs {g} Gbps")),
        h.ssds.map(|d| format!("{d} SSDs per storage node")),
        h.oversubscription
            .map(|o| format!("fabric oversubscription {o}")),
        h.client_cores.map(|c| format!("{c} cores per client")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !overrides.is_empty() {
        let _ = writeln!(
            s,
            "  - the scenario's overrides (its file says where each comes from): {}",
            overrides.join(", ")
        );
    }
    for src in &hw.sources {
        let _ = writeln!(s, "  - {src}");
    }
    s
}
