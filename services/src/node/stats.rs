//! Per-operation latency histograms of a node's I/O (chunk reads, updates, commits, installs,
//! lists; KV reads and commits), measured from submission to completion, for the metrics
//! endpoint. Not here: client-side call latencies (the native client and `t3fs bench`).

use std::collections::BTreeMap;
use std::time::Instant;

use hdrhistogram::Histogram;
use t3fs_core::ids::IoId;

/// Latencies by operation kind, in microseconds.
pub struct IoStats {
    started: BTreeMap<IoId, (&'static str, Instant)>,
    /// Histograms by kind.
    pub hist: BTreeMap<&'static str, Histogram<u64>>,
}

impl Default for IoStats {
    fn default() -> Self {
        Self::new()
    }
}

impl IoStats {
    /// Empty.
    pub fn new() -> Self {
        Self {
            started: BTreeMap::new(),
            hist: BTreeMap::new(),
        }
    }

    /// I/O `id` of `kind` was submitted now.
    pub fn submitted(&mut self, id: IoId, kind: &'static str) {
        self.started.insert(id, (kind, Instant::now()));
    }

    /// I/O `id` completed now: its kind, if it was submitted here.
    pub fn completed(&mut self, id: IoId) -> Option<&'static str> {
        let (kind, t) = self.started.remove(&id)?;
        let us = t.elapsed().as_micros().clamp(1, 3_600_000_000) as u64;
        let h = self.hist.entry(kind).or_insert_with(|| {
            Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
        });
        let _ = h.record(us);
        Some(kind)
    }

    /// Chunk I/Os submitted longer than `age` ago and not completed, oldest first, with their
    /// kind.
    pub fn older_than(&self, age: std::time::Duration) -> Vec<(IoId, &'static str)> {
        let mut v: Vec<(Instant, IoId, &'static str)> = self
            .started
            .iter()
            .filter(|(_, (kind, t))| kind.starts_with("chunk_") && t.elapsed() >= age)
            .map(|(id, (kind, t))| (*t, *id, *kind))
            .collect();
        v.sort();
        v.into_iter().map(|(_, id, kind)| (id, kind)).collect()
    }

    /// Forgets an I/O that will never complete (its answer was dropped).
    pub fn forget(&mut self, id: IoId) {
        self.started.remove(&id);
    }

    /// Prometheus summary lines for every kind.
    pub fn prometheus(&self, out: &mut String) {
        use std::fmt::Write;
        if self.hist.is_empty() {
            return;
        }
        let _ = writeln!(out, "# TYPE t3fs_io_latency_us summary");
        for (kind, h) in &self.hist {
            for q in [0.5, 0.9, 0.99, 0.999, 0.9999] {
                let _ = writeln!(
                    out,
                    "t3fs_io_latency_us{{op=\"{kind}\",quantile=\"{q}\"}} {}",
                    h.value_at_quantile(q)
                );
            }
            let _ = writeln!(out, "t3fs_io_latency_us_count{{op=\"{kind}\"}} {}", h.len());
        }
    }
}
