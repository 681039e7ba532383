//! How long each node's chunk store operations took in a run with `[hardware]`, from the
//! node's submission to the completion the node sees, by kind: the same span a real node's
//! `t3fs_io_latency_us` histograms measure (services/src/node/stats.rs), so a simulated run
//! and a real one can be split at the same place (the store operation, and everything outside
//! it) when they disagree.
//!
//! Invariant: recording draws nothing and schedules nothing, so a run's events and trace hash
//! do not depend on it. Not here: how long an operation takes (resources.rs, disk.rs).

use std::collections::BTreeMap;

use t3fs_core::ids::NodeId;

/// An operation by node index, incarnation and I/O id.
type Key = (usize, u64, u64);

/// Durations by node and kind, nanoseconds.
#[derive(Clone, Debug, Default)]
pub struct StoreOps {
    by: BTreeMap<(NodeId, &'static str), Vec<u64>>,
    /// Submitted and not yet complete: node, kind and submission time (ns).
    open: BTreeMap<Key, (NodeId, &'static str, u64)>,
}

impl StoreOps {
    /// `node` submitted operation `key` of `kind` at `at` (ns).
    pub fn submitted(&mut self, key: Key, (node, kind): (NodeId, &'static str), at: u64) {
        self.open.insert(key, (node, kind, at));
    }

    /// Operation `key` completed at `at` (ns), as its node sees it: its duration is recorded.
    /// (Recorded at completion, not when first projected: a shared resource can postpone it.)
    pub fn completed(&mut self, key: Key, at: u64) {
        if let Some((node, kind, from)) = self.open.remove(&key) {
            self.record(node, kind, at.saturating_sub(from));
        }
    }

    /// Operation `key` will not complete (its node went down).
    pub fn forget(&mut self, key: Key) {
        self.open.remove(&key);
    }

    /// `node`'s operation of `kind` took `ns`.
    pub fn record(&mut self, node: NodeId, kind: &'static str, ns: u64) {
        self.by.entry((node, kind)).or_default().push(ns);
    }

    /// The median and 99th percentile (nearest rank), microseconds, and the count.
    pub fn quantiles(&self, node: NodeId, kind: &'static str) -> Option<(f64, f64, usize)> {
        let mut v = self.by.get(&(node, kind))?.clone();
        v.sort_unstable();
        let us = |q: f64| super::throughput::quantile(&v, q) * 1e6;
        Some((us(0.5), us(0.99), v.len()))
    }

    /// One line per node that ran chunk operations: each kind's median, p99 and count.
    pub fn lines(&self, name: &dyn Fn(usize) -> String) -> Vec<String> {
        let mut by_node: BTreeMap<NodeId, Vec<String>> = BTreeMap::new();
        for &(n, k) in self.by.keys() {
            if let Some((p50, p99, count)) = self.quantiles(n, k) {
                let kind = format!("{k} p50 {p50:.0} us, p99 {p99:.0} us ({count})");
                by_node.entry(n).or_default().push(kind);
            }
        }
        by_node
            .into_iter()
            .map(|(n, kinds)| {
                format!(
                    "store operations of {} (submission to completion): {}",
                    name(n.0 as usize),
                    kinds.join("; ")
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_runs_from_submission_to_completion_and_a_forgotten_one_counts_nothing() {
        let mut s = StoreOps::default();
        s.submitted((1, 0, 7), (NodeId(1), "chunk_update"), 1_000);
        s.submitted((1, 0, 8), (NodeId(1), "chunk_update"), 2_000);
        s.forget((1, 0, 8));
        // A completion never submitted (or already counted) records nothing.
        s.completed((1, 0, 8), 9_000);
        s.completed((1, 0, 7), 5_000);
        s.completed((1, 0, 7), 6_000);
        assert_eq!(
            s.quantiles(NodeId(1), "chunk_update"),
            Some((4.0, 4.0, 1)),
            "4 us"
        );
    }

    #[test]
    fn each_node_and_kind_has_its_own_quantiles() {
        let mut s = StoreOps::default();
        for i in 1..=100 {
            s.record(NodeId(1), "chunk_update", i * 1000);
        }
        s.record(NodeId(2), "chunk_read", 7000);
        assert_eq!(
            s.quantiles(NodeId(1), "chunk_update"),
            Some((50.0, 99.0, 100))
        );
        assert_eq!(s.quantiles(NodeId(2), "chunk_read"), Some((7.0, 7.0, 1)));
        assert_eq!(s.quantiles(NodeId(2), "chunk_update"), None);
        let lines = s.lines(&|i| format!("storage-{i}"));
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].starts_with("store operations of storage-1"),
            "{lines:?}"
        );
        assert!(
            lines[0].contains("chunk_update p50 50 us, p99 99 us (100)"),
            "{lines:?}"
        );
    }
}
