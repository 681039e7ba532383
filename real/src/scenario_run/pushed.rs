//! A real run's per-node faults that belong to a node's host rather than to the network: its
//! disks (EIO, ENOSPC, latency), its clock (offset, drift) and, on the kv node, the KV
//! service's faults (unavailable, spurious conflicts, unknown commits). The steps set what each node
//! should have; [`PerNode::apply`] pushes every change through the node's fault RPC
//! (`PUT /disk?...`, `PUT /clock?...`).
//!
//! Invariants: a node that cannot be reached (paused, down) keeps its pending faults and is
//! retried at the next `apply`, never silently skipped; what a restarted process had applied is
//! forgotten (`restarted`), so its faults are pushed again, or dropped where they end with the
//! process (disk modes, as the simulator's do). Not here: the fault layers themselves
//! (chunk_store/faults.rs, node/clock.rs) or the network's faults (net.rs).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::cluster;
use t3fs_services::chunk_store::DiskFaults;
use t3fs_services::kv_faults::KvFaults;
use t3fs_services::node::clock::ClockFaults;

/// A fault a node's fault RPC takes as a whole.
pub trait HostFault: Clone + Default + PartialEq {
    /// The RPC's resource (`/disk`).
    const PATH: &'static str;
    /// Whether the fault ends with the process (a restarted one comes back without it).
    const ENDS_WITH_PROCESS: bool;
    /// Whether nodes of `role` have this fault.
    fn applies_to(role: &str) -> bool;
    /// The RPC's query string.
    fn query(&self) -> String;
}

impl HostFault for DiskFaults {
    const PATH: &'static str = "/disk";
    const ENDS_WITH_PROCESS: bool = true;
    fn applies_to(role: &str) -> bool {
        role == "storage"
    }
    fn query(&self) -> String {
        self.to_query()
    }
}

impl HostFault for ClockFaults {
    const PATH: &'static str = "/clock";
    const ENDS_WITH_PROCESS: bool = false;
    fn applies_to(role: &str) -> bool {
        role != "kv"
    }
    fn query(&self) -> String {
        self.to_query()
    }
}

impl HostFault for KvFaults {
    const PATH: &'static str = "/kv";
    const ENDS_WITH_PROCESS: bool = false;
    fn applies_to(role: &str) -> bool {
        role == "kv"
    }
    fn query(&self) -> String {
        self.to_query()
    }
}

/// What each node should have, and what it was last given.
#[derive(Clone, Debug, Default)]
pub struct PerNode<F> {
    /// Faults by process name (absent: none).
    pub want: BTreeMap<String, F>,
    applied: BTreeMap<String, F>,
}

impl<F: HostFault> PerNode<F> {
    /// Changes `name`'s fault with `f`.
    pub fn set(&mut self, name: &str, f: impl FnOnce(&mut F)) {
        let e = self.want.entry(name.to_string()).or_default();
        f(e);
        if *e == F::default() {
            self.want.remove(name);
        }
    }

    /// Every node's fault goes back to `base` (pushed at the next `apply`).
    pub fn reset_to(&mut self, base: &BTreeMap<String, F>) {
        self.want = base.clone();
    }

    /// `name`'s process restarted: nothing is applied there any more.
    pub fn restarted(&mut self, name: &str) {
        self.applied.remove(name);
        if F::ENDS_WITH_PROCESS {
            self.want.remove(name);
        }
    }

    /// Pushes every changed node's fault; returns the nodes that could not be reached.
    pub fn apply(&mut self, dir: &Path) -> Result<Vec<String>, String> {
        let want = &self.want;
        push_changed(
            dir,
            F::applies_to,
            |n| want.get(&n.name).cloned().unwrap_or_default(),
            &mut self.applied,
            |f| format!("{}?{}", F::PATH, f.query()),
        )
    }
}

/// Pushes `want_of(node)` to every node whose role `applies` and whose fault differs from what
/// it was last given (`applied`, updated), as `PUT path_query(fault)`; returns the nodes that
/// could not be reached (not running, or not answering).
pub fn push_changed<F: Clone + Default + PartialEq>(
    dir: &Path,
    applies: impl Fn(&str) -> bool,
    want_of: impl Fn(&cluster::NodeEntry) -> F,
    applied: &mut BTreeMap<String, F>,
    path_query: impl Fn(&F) -> String,
) -> Result<Vec<String>, String> {
    let entries = cluster::nodes(dir)?;
    let pids = cluster::pids(dir);
    let mut missed = Vec::new();
    for n in entries.iter().filter(|n| applies(&n.role)) {
        let want = want_of(n);
        if applied.get(&n.name).cloned().unwrap_or_default() == want {
            continue;
        }
        let alive = pids.get(&n.name).is_some_and(|p| cluster::alive(*p));
        let addr = n
            .cfg
            .node
            .metrics
            .parse()
            .map_err(|e| format!("{}: {e}", n.name))?;
        let put = alive.then(|| {
            t3fs_services::metrics::put(
                addr,
                &n.cfg.cluster.token,
                &path_query(&want),
                Duration::from_secs(1),
            )
        });
        match put {
            Some(Ok(())) => {
                applied.insert(n.name.clone(), want);
            }
            _ => missed.push(n.name.clone()),
        }
    }
    Ok(missed)
}

impl PerNode<DiskFaults> {
    /// Nodes whose disks failed (EIO) and wait for a replacement.
    pub fn failed(&self) -> Vec<String> {
        self.want
            .iter()
            .filter(|(_, f)| f.eio)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Slow and full disks become healthy; failed ones stay failed (they are replaced).
    pub fn heal(&mut self) {
        for f in self.want.values_mut() {
            f.full = false;
            f.latency = None;
        }
        self.want.retain(|_, f| !f.is_clear());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heal_ends_slow_and_full_disks_but_a_failed_one_waits_for_replacement() {
        let mut d = PerNode::<DiskFaults>::default();
        d.set("storage-0", |f| f.full = true);
        d.set("storage-1", |f| f.eio = true);
        d.set("storage-2", |f| {
            f.latency = Some((Duration::from_millis(50), Duration::from_millis(200)))
        });
        assert_eq!(d.failed(), vec!["storage-1".to_string()]);
        d.heal();
        assert_eq!(d.want.keys().collect::<Vec<_>>(), vec!["storage-1"]);
        d.restarted("storage-1");
        assert!(
            d.want.is_empty() && d.failed().is_empty(),
            "disk modes end with the process"
        );
        d.set("storage-0", |f| f.full = true);
        d.set("storage-0", |f| *f = DiskFaults::default());
        assert!(d.want.is_empty(), "a healed entry is dropped");
    }

    #[test]
    fn a_clock_outlives_its_process() {
        let mut c = PerNode::<ClockFaults>::default();
        c.set("mgmtd-0", |f| f.offset_ns -= 2_000_000_000);
        c.set("mgmtd-0", |f| f.offset_ns -= 1_000_000_000);
        c.restarted("mgmtd-0");
        assert_eq!(
            c.want["mgmtd-0"].offset_ns, -3_000_000_000,
            "steps add up and stay"
        );
        assert!(ClockFaults::applies_to("storage") && !ClockFaults::applies_to("kv"));
        assert!(DiskFaults::applies_to("storage") && !DiskFaults::applies_to("mgmtd"));
    }
}
