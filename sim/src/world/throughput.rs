//! What a run's workload achieved, from its history: operations and bytes per simulated second
//! and latency percentiles, for reads and writes apart, over the safety phase. With
//! `[hardware]` these are the figures the resources bound (and what calibration against a real
//! cluster compares); without it they only reflect the fault model's latencies.
//!
//! Invariant: only operations that returned count; a failed or open operation has no latency.
//! Not here: the resources themselves (resources.rs).

use crate::history::{OpKind, OpRec};

use super::World;

/// One operation kind's figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KindLoad {
    /// Operations that returned.
    pub ops: u64,
    /// Operations per simulated second.
    pub ops_per_s: f64,
    /// Payload bytes per simulated second.
    pub bytes_per_s: f64,
    /// Median latency, seconds.
    pub p50: f64,
    /// 99th percentile latency, seconds.
    pub p99: f64,
}

/// Reads and writes of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Load {
    /// Reads.
    pub reads: KindLoad,
    /// Writes.
    pub writes: KindLoad,
}

/// The value at quantile `q` of sorted nanoseconds `v` (nearest rank), in seconds.
pub(super) fn quantile(v: &[u64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i] as f64 / 1e9
}

/// `ops`' figures; rates over the time from the first one's invocation to `end_ns` (a
/// prefill or a late start does not dilute them).
fn kind_load(ops: &[&OpRec], size: u32, end_ns: u64) -> KindLoad {
    let first = ops.iter().map(|o| o.invoke_ns).min().unwrap_or(0);
    let secs = (end_ns.saturating_sub(first) as f64 / 1e9).max(1e-9);
    let mut lat: Vec<u64> = ops
        .iter()
        .filter_map(|o| o.ret_ns.map(|r| r.saturating_sub(o.invoke_ns)))
        .collect();
    lat.sort_unstable();
    let n = lat.len() as u64;
    KindLoad {
        ops: n,
        ops_per_s: n as f64 / secs,
        bytes_per_s: (n * u64::from(size)) as f64 / secs,
        p50: quantile(&lat, 0.5),
        p99: quantile(&lat, 0.99),
    }
}

impl World {
    /// The workload's figures over the safety phase (operations invoked before it ended); a
    /// prefill's writes are left out.
    pub fn load(&self) -> Load {
        let end = self.scenario.duration.as_nanos() as u64;
        let prefill = if self.scenario.workload.prefill {
            self.scenario.workload.chunks as usize
        } else {
            0
        };
        let mut seen: std::collections::BTreeMap<u32, usize> = Default::default();
        let size = self.scenario.workload.write_size;
        let ops: Vec<&OpRec> = self
            .sim
            .history
            .ops
            .iter()
            .filter(|o| o.invoke_ns < end)
            .filter(|o| {
                let n = seen.entry(o.client).or_default();
                *n += 1;
                *n > prefill
            })
            .collect();
        let (reads, writes): (Vec<&OpRec>, Vec<&OpRec>) = ops
            .into_iter()
            .partition(|o| matches!(o.kind, OpKind::Read(_)));
        Load {
            reads: kind_load(&reads, size, end),
            writes: kind_load(&writes, size, end),
        }
    }

    /// Lines describing the modelled hardware and how busy it was; empty without `[hardware]`.
    pub fn hardware_report(&self) -> Vec<String> {
        let Some(r) = &self.sim.resources else {
            return Vec::new();
        };
        let name = |i: usize| self.nodes[i].ctx.name.clone();
        let mut out = vec![format!("hardware `{}`", r.hardware().profile)];
        out.extend(r.summary(core::time::Duration::from_nanos(self.sim.now().0), &name));
        out.extend(r.store_ops.lines(&name));
        let l = self.load();
        for (what, k) in [("reads", &l.reads), ("writes", &l.writes)] {
            out.push(format!(
                "{what}: {:.0} ops/s, {:.1} MiB/s, p50 {:.0} us, p99 {:.0} us",
                k.ops_per_s,
                k.bytes_per_s / (1 << 20) as f64,
                k.p50 * 1e6,
                k.p99 * 1e6
            ));
        }
        out
    }
}
