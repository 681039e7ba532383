//! What a workload did, interval by interval: completed operations, bytes and latency per
//! operation name, per client where a workload reports clients apart (KVCache's per-client
//! read throughput), and the phase boundaries, ready to become a run directory's series,
//! histograms and events.
//!
//! Invariant: every operation lands in the interval it completed in, counted once; intervals
//! start at the recorder's creation. Not here: what the operations are (the workloads) or the
//! report (run_dir.rs).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use t3fs_reports::rundir::new_histogram;

/// One interval's tally of one operation.
#[derive(Clone, Default)]
struct Bin {
    ops: u64,
    bytes: u64,
    lat: Option<Histogram<u64>>,
}

#[derive(Default)]
struct Inner {
    /// op → interval → tally.
    bins: BTreeMap<String, Vec<Bin>>,
    /// client → interval → bytes read (for per-client throughput).
    client_bytes: BTreeMap<usize, Vec<u64>>,
    /// (seconds since start, phase name), in order.
    phases: Vec<(f64, String)>,
}

/// Shared between a workload's tasks.
#[derive(Clone)]
pub struct Recorder {
    start: Instant,
    interval: Duration,
    inner: Arc<Mutex<Inner>>,
}

/// What a recorder holds at the end.
pub struct Tally {
    /// Interval length, seconds.
    pub interval: f64,
    /// op → completed operations per interval.
    pub ops: BTreeMap<String, Vec<u64>>,
    /// op → bytes per interval.
    pub bytes: BTreeMap<String, Vec<u64>>,
    /// op → latency histogram (µs) per interval.
    pub latencies: BTreeMap<String, Vec<Histogram<u64>>>,
    /// client → bytes read per interval.
    pub client_bytes: BTreeMap<usize, Vec<u64>>,
    /// (seconds since start, phase name).
    pub phases: Vec<(f64, String)>,
    /// Seconds from start to the tally.
    pub seconds: f64,
}

fn slot<T: Default + Clone>(v: &mut Vec<T>, i: usize) -> &mut T {
    if v.len() <= i {
        v.resize(i + 1, T::default());
    }
    &mut v[i]
}

impl Recorder {
    /// A recorder with intervals of `interval`, starting now.
    pub fn new(interval: Duration) -> Self {
        Self {
            start: Instant::now(),
            interval: interval.max(Duration::from_millis(10)),
            inner: Arc::new(Mutex::new(Inner::default())),
        }
    }

    /// Seconds since the start.
    pub fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn index(&self) -> usize {
        (self.start.elapsed().as_secs_f64() / self.interval.as_secs_f64()) as usize
    }

    /// Marks the start of phase `name` now.
    pub fn phase(&self, name: &str) {
        let t = self.now();
        self.inner
            .lock()
            .expect("recorder")
            .phases
            .push((t, name.into()));
    }

    /// One `op` of `bytes` that took `lat`, completed now.
    pub fn done(&self, op: &str, bytes: u64, lat: Duration) {
        let i = self.index();
        let mut g = self.inner.lock().expect("recorder");
        let bins = g.bins.entry(op.to_string()).or_default();
        let b = slot(bins, i);
        b.ops += 1;
        b.bytes += bytes;
        let h = b.lat.get_or_insert_with(new_histogram);
        let _ = h.record((lat.as_micros() as u64).max(1));
    }

    /// `bytes` read by `client`, completed now (on top of [`Recorder::done`]).
    pub fn client_read(&self, client: usize, bytes: u64) {
        let i = self.index();
        let mut g = self.inner.lock().expect("recorder");
        *slot(g.client_bytes.entry(client).or_default(), i) += bytes;
    }

    /// Everything so far, every series padded to the same number of intervals.
    pub fn tally(&self) -> Tally {
        let n = self.index() + 1;
        let g = self.inner.lock().expect("recorder");
        let mut t = Tally {
            interval: self.interval.as_secs_f64(),
            ops: BTreeMap::new(),
            bytes: BTreeMap::new(),
            latencies: BTreeMap::new(),
            client_bytes: BTreeMap::new(),
            phases: g.phases.clone(),
            seconds: self.now(),
        };
        for (op, bins) in &g.bins {
            let mut bins = bins.clone();
            bins.resize(n.max(bins.len()), Bin::default());
            t.ops
                .insert(op.clone(), bins.iter().map(|b| b.ops).collect());
            t.bytes
                .insert(op.clone(), bins.iter().map(|b| b.bytes).collect());
            let hs = bins
                .into_iter()
                .map(|b| b.lat.unwrap_or_else(new_histogram))
                .collect();
            t.latencies.insert(op.clone(), hs);
        }
        for (c, v) in &g.client_bytes {
            let mut v = v.clone();
            v.resize(n.max(v.len()), 0);
            t.client_bytes.insert(*c, v);
        }
        t
    }
}

impl Tally {
    /// Operations of `op` in all.
    pub fn total_ops(&self, op: &str) -> u64 {
        self.ops.get(op).map_or(0, |v| v.iter().sum())
    }

    /// Bytes of `op` in all.
    pub fn total_bytes(&self, op: &str) -> u64 {
        self.bytes.get(op).map_or(0, |v| v.iter().sum())
    }

    /// The intervals between phase `name`'s start and the next phase's (or the end), as an
    /// index range, and its length in seconds.
    pub fn phase_span(&self, name: &str) -> Option<(std::ops::Range<usize>, f64)> {
        let k = self.phases.iter().position(|(_, n)| n == name)?;
        let from = self.phases[k].0;
        let to = self.phases.get(k + 1).map_or(self.seconds, |p| p.0);
        let a = (from / self.interval) as usize;
        let b = ((to / self.interval).ceil() as usize).max(a + 1);
        Some((a..b, (to - from).max(1e-9)))
    }
}

impl Recorder {
    /// The current phase and what has completed so far, for a progress line.
    pub fn status(&self) -> String {
        let g = self.inner.lock().expect("recorder");
        let phase = g.phases.last().map_or("starting", |p| p.1.as_str());
        let parts: Vec<String> = g
            .bins
            .iter()
            .map(|(op, bins)| {
                let ops: u64 = bins.iter().map(|b| b.ops).sum();
                let bytes: u64 = bins.iter().map(|b| b.bytes).sum();
                if bytes > 0 {
                    format!("{op} {ops} ({:.0} MiB)", bytes as f64 / (1u64 << 20) as f64)
                } else {
                    format!("{op} {ops}")
                }
            })
            .collect();
        format!("{phase}: {}", parts.join(", "))
    }
}
