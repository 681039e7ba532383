//! A real run's disk faults: what the scenario's disk steps set on each storage node (EIO,
//! ENOSPC, added latency), pushed to the node's chunk-store fault layer through the fault RPC,
//! and which nodes' disks failed and must be replaced before the run's liveness phase ends.
//!
//! Invariants, as the simulator's disks: the modes belong to the process, so a node that
//! restarts comes back with healthy disks and its entry is forgotten; `heal` ends slow and full
//! disks but not a failed one (a failed disk is replaced, never healed); a node that cannot be
//! reached keeps its faults pending and is retried at the next `apply`. Not here: the fault
//! layer itself (chunk_store/faults.rs) or the replacement (steps.rs kills, wipes, restarts).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::chunk_store::DiskFaults;
use crate::cluster;

/// The storage nodes' disks as the steps have left them.
#[derive(Clone, Debug, Default)]
pub struct Disks {
    /// Faults by process name (absent: healthy).
    pub faults: BTreeMap<String, DiskFaults>,
    applied: BTreeMap<String, DiskFaults>,
}

impl Disks {
    /// Changes `name`'s faults with `f`.
    pub fn set(&mut self, name: &str, f: impl FnOnce(&mut DiskFaults)) {
        let e = self.faults.entry(name.to_string()).or_default();
        f(e);
        if e.is_clear() {
            self.faults.remove(name);
        }
    }

    /// Nodes whose disks failed (EIO) and wait for a replacement.
    pub fn failed(&self) -> Vec<String> {
        self.faults
            .iter()
            .filter(|(_, f)| f.eio)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Slow and full disks become healthy; failed ones stay failed.
    pub fn heal(&mut self) {
        for f in self.faults.values_mut() {
            f.full = false;
            f.latency = None;
        }
        self.faults.retain(|_, f| !f.is_clear());
    }

    /// `name`'s process restarted: its disks are healthy and nothing is applied there.
    pub fn forget(&mut self, name: &str) {
        self.faults.remove(name);
        self.applied.remove(name);
    }

    /// Pushes every changed node's faults; returns the nodes that could not be reached.
    pub fn apply(&mut self, dir: &Path) -> Result<Vec<String>, String> {
        let entries = cluster::nodes(dir)?;
        let pids = cluster::pids(dir);
        let mut missed = Vec::new();
        for n in entries.iter().filter(|n| n.role == "storage") {
            let want = self.faults.get(&n.name).cloned().unwrap_or_default();
            let had = self.applied.get(&n.name).cloned().unwrap_or_default();
            if want == had {
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
                crate::metrics::put_disk_faults(
                    addr,
                    &n.cfg.cluster.token,
                    &want,
                    Duration::from_secs(1),
                )
            });
            match put {
                Some(Ok(())) => {
                    self.applied.insert(n.name.clone(), want);
                }
                _ => missed.push(n.name.clone()),
            }
        }
        Ok(missed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heal_ends_slow_and_full_disks_but_a_failed_one_waits_for_replacement() {
        let mut d = Disks::default();
        d.set("storage-0", |f| f.full = true);
        d.set("storage-1", |f| f.eio = true);
        d.set("storage-2", |f| {
            f.latency = Some((Duration::from_millis(50), Duration::from_millis(200)))
        });
        assert_eq!(d.failed(), vec!["storage-1".to_string()]);
        d.heal();
        assert_eq!(d.faults.keys().collect::<Vec<_>>(), vec!["storage-1"]);
        d.forget("storage-1");
        assert!(d.faults.is_empty() && d.failed().is_empty());
        d.set("storage-0", |f| f.full = true);
        d.set("storage-0", |f| *f = DiskFaults::default());
        assert!(d.faults.is_empty(), "a healed entry is dropped");
    }
}
