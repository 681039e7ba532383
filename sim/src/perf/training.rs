//! MLPerf Storage's training workload (DLIO) in the flow model: every simulated accelerator
//! trains on batches of `batch` samples, each sample a whole file read from a random replica of
//! a random chain (SSD → storage NIC → client NIC); a batch's computation takes `compute_s`
//! (DLIO sleeps for it); the data loader reads ahead up to `prefetch` batches, the samples of a
//! batch in parallel, as DLIO's reader workers do. Accelerator utilisation (AU) is computation
//! time over elapsed time within the measured window (the run's second half, so the first
//! batches' warm-up is out, as DLIO drops its first step), bounded by what the batches that
//! arrived in the window could feed (`au`), so a short window does not count the read-ahead
//! buffer's drain as storage keeping up.
//!
//! Invariant: an accelerator computes only a batch whose every sample has arrived, and reads
//! ahead at most `prefetch` batches. Deterministic: chains and replicas from the seeded stream.
//!
//! Not here: the host's CPU (decoding, the loader's copies), the client's page cache, or
//! shuffling's effect on which files are read (every read is of a random chunk).

use t3fs_scenario::rng::Rng;

use super::engine::{Request, Source};
use super::layout::Layout;
use super::scenario::TrainingSection;

#[derive(Clone, Default)]
struct Accel {
    client: u32,
    /// Batches read and waiting.
    ready: u32,
    /// Samples still in flight of each batch being read, oldest first.
    samples_left: Vec<u32>,
    /// When the computation under way began, if one is.
    computing: Option<f64>,
}

/// Tags: accelerator number << 1, the low bit set for the end of a computation.
const TIMER: u64 = 1;

/// Accelerators on every client, training.
pub struct Training<'a> {
    layout: &'a Layout,
    t: TrainingSection,
    rng: Rng,
    latency: f64,
    /// A resource no flow fills: computations are zero-byte requests over it, due after
    /// `compute_s`.
    clock: u32,
    accels: Vec<Accel>,
    /// The measured window's start, seconds.
    window: f64,
    /// Computation seconds inside the window, over all accelerators.
    pub computed: f64,
    /// Batches whose last sample arrived inside the window.
    pub arrived: u64,
}

impl<'a> Training<'a> {
    /// `t.accelerators_per_client` accelerators on each of `layout`'s clients; `clock` is a
    /// resource of unbounded capacity; AU counts from `window` seconds on.
    pub fn new(
        layout: &'a Layout,
        t: TrainingSection,
        (seed, latency): (u64, f64),
        clock: u32,
        window: f64,
    ) -> Self {
        let per_client = t.accelerators_per_client;
        let accels = (0..layout.clients)
            .flat_map(|c| (0..per_client).map(move |_| c))
            .map(|client| Accel {
                client,
                ..Accel::default()
            })
            .collect();
        Self {
            layout,
            t,
            rng: Rng::new(seed),
            latency,
            clock,
            accels,
            window,
            computed: 0.0,
            arrived: 0,
        }
    }

    /// Accelerators in the run.
    pub fn accelerators(&self) -> usize {
        self.accels.len()
    }

    /// Accelerator `a` reads ahead while its loader has room.
    fn read_ahead(&mut self, a: usize, out: &mut Vec<Request>) {
        while self.accels[a].ready + (self.accels[a].samples_left.len() as u32) < self.t.prefetch {
            self.accels[a].samples_left.push(self.t.batch);
            for _ in 0..self.t.batch {
                let (node, disk) = self.layout.random_replica(&mut self.rng, None);
                out.push(Request {
                    path: self.layout.read_path(node, disk, self.accels[a].client),
                    bytes: self.t.sample_bytes,
                    delay: self.latency,
                    tag: (a as u64) << 1,
                });
            }
        }
    }

    /// Accelerator `a` starts computing a ready batch at `now` if it is idle.
    fn compute(&mut self, a: usize, now: f64, out: &mut Vec<Request>) {
        let acc = &mut self.accels[a];
        if acc.computing.is_some() || acc.ready == 0 {
            return;
        }
        acc.ready -= 1;
        acc.computing = Some(now);
        out.push(Request {
            path: vec![self.clock],
            bytes: 0.0,
            delay: self.t.compute_s,
            tag: (a as u64) << 1 | TIMER,
        });
    }
}

impl Source for Training<'_> {
    fn start(&mut self, out: &mut Vec<Request>) {
        for a in 0..self.accels.len() {
            self.read_ahead(a, out);
        }
    }

    fn done(&mut self, tag: u64, now: f64, out: &mut Vec<Request>) {
        let a = (tag >> 1) as usize;
        if tag & TIMER != 0 {
            // A computation ended: what of it lies in the window counts.
            let began = self.accels[a]
                .computing
                .take()
                .expect("a computation was under way");
            self.computed += (now - self.window.max(began)).max(0.0);
        } else {
            // A sample arrived; batches complete in order, as a loader hands them over.
            let acc = &mut self.accels[a];
            let oldest = acc
                .samples_left
                .iter_mut()
                .find(|n| **n > 0)
                .expect("a sample arrives for a batch being read");
            *oldest -= 1;
            while acc.samples_left.first() == Some(&0) {
                acc.samples_left.remove(0);
                acc.ready += 1;
                if now > self.window {
                    self.arrived += 1;
                }
            }
        }
        self.compute(a, now, out);
        self.read_ahead(a, out);
    }
}

impl Training<'_> {
    /// The run ended at `end`: the computations still under way count up to it.
    pub fn finish(&mut self, end: f64) {
        for acc in &self.accels {
            if let Some(began) = acc.computing {
                self.computed += (end - self.window.max(began)).max(0.0);
            }
        }
    }

    /// Mean AU over the window up to `end`, as storage sustains it: the computation time, but
    /// no more than the batches that arrived in the window could feed. (Batches read ahead
    /// before the window would otherwise keep starved accelerators busy for up to `prefetch`
    /// batches, an optimism a short window cannot afford.)
    pub fn au(&self, end: f64) -> f64 {
        let fed = self.arrived as f64 * self.t.compute_s;
        self.computed.min(fed) / (end - self.window) / self.accels.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::engine;
    use crate::perf::hardware::Hardware;
    use t3fs_scenario::chain_table::ChainTable;

    fn au(per_client: u32, compute_s: f64) -> f64 {
        // 3 storage nodes (3 x 49 GB/s of NIC), one client: its NIC (24.6 GB/s) binds.
        let hw = Hardware::threefs_2025();
        let mut l = Layout::new(&hw, 3, 1, ChainTable::balanced(3, 1, 3).unwrap(), 0.0);
        let clock = l.add(1e30);
        let t = TrainingSection {
            sample_bytes: 1e8,
            batch: 4,
            compute_s,
            prefetch: 2,
            accelerators_per_client: per_client,
            au_floor: 0.9,
            sweep: Vec::new(),
        };
        let mut src = Training::new(&l, t, (1, 0.0), clock, 1.0);
        engine::run(&l.caps, &mut src, 3.0, 0.1, 0.0, |_| {});
        src.finish(3.0);
        src.au(3.0)
    }

    #[test]
    fn an_accelerator_is_busy_while_storage_keeps_up_and_waits_when_it_cannot() {
        // One accelerator wanting 0.4 GB per 0.1 s (4 GB/s) of a 24.6 GB/s NIC: always busy.
        let one = au(1, 0.1);
        assert!(one > 0.995, "{one}");
        // Twelve want 48 GB/s of it: about half of the time each waits for data.
        let many = au(12, 0.1);
        assert!((0.4..0.6).contains(&many), "{many}");
    }
}
