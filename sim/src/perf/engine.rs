//! The flow-level event loop: requests become flows after their fixed latency, flows share
//! capacity max-min fairly (`flow.rs`), rates are recomputed whenever a flow starts or ends,
//! and a [`Source`] answers every completion with the requests that follow it (closed-loop
//! clients, recovery streams).
//!
//! Time quantum: events closer than `quantum` are handled together (a flow whose remaining
//! time is within the quantum completes at the event, its bytes counted, and the request after
//! it still starts when the flow would have ended). That bounds the events per simulated
//! second by about 2/quantum whatever the cluster's size; its price is that the capacity a
//! finishing flow would have held for up to one quantum goes to others early, and requests
//! start up to a quantum early: an optimism of about quantum / the mean flow time at worst (an
//! estimate: a flow that speeds up near its end can gain a little more), which reports
//! state. Quantum 0 is exact.
//!
//! Deterministic: no clocks and no randomness (sources draw from their own seeded streams),
//! flows in start order, ties broken by index. Not here: what the flows are (the scenarios).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::flow::{allocate, Flow, Scratch, PATH_MAX};

/// A request: after `delay` seconds, `bytes` flow over `path`; `tag` is the source's.
#[derive(Clone, Debug)]
pub struct Request {
    /// Resources crossed.
    pub path: Vec<u32>,
    /// Payload bytes.
    pub bytes: f64,
    /// Seconds before the bytes start to flow (request latency).
    pub delay: f64,
    /// The source's own id for it.
    pub tag: u64,
}

/// What drives a run.
pub trait Source {
    /// The requests at time 0.
    fn start(&mut self, out: &mut Vec<Request>);
    /// A request's bytes all arrived at `now`: the requests that follow it.
    fn done(&mut self, tag: u64, now: f64, out: &mut Vec<Request>);
    /// Whether the run is over before its time limit (a recovery that ended).
    fn finished(&self) -> bool {
        false
    }
}

/// Bytes each resource carried between two samples, and when.
#[derive(Clone, Debug)]
pub struct Sample {
    /// End of the interval, seconds.
    pub t: f64,
    /// Length of the interval, seconds.
    pub dt: f64,
    /// Bytes per resource in the interval.
    pub bytes: Vec<f64>,
}

/// Counts of a run, for its report.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Rate recomputations.
    pub allocations: u64,
    /// Flows completed.
    pub flows: u64,
    /// Most flows active at once.
    pub peak_flows: usize,
    /// Mean flow time, seconds.
    pub mean_flow_time: f64,
}

struct Pending(f64, u64, Request);

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        self.0 == o.0 && self.1 == o.1
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0).then(self.1.cmp(&o.1))
    }
}

struct Active {
    left: f64,
    tag: u64,
    began: f64,
}

/// A run's moving parts: the flows in start order with their progress, the requests not yet
/// flowing, and the counts.
struct Engine {
    flows: Vec<Flow>,
    active: Vec<Active>,
    pending: BinaryHeap<Reverse<Pending>>,
    /// Requests queued so far: ties between equal due times go to the earlier.
    seq: u64,
    /// The requests a source just issued.
    out: Vec<Request>,
    stats: Stats,
    /// Seconds of every completed flow, from its start to its end.
    flow_time: f64,
}

impl Engine {
    /// Queues the requests in `out`, issued at `at`, in their order.
    fn push(&mut self, at: f64) {
        for r in self.out.drain(..) {
            self.seq += 1;
            self.pending
                .push(Reverse(Pending(at + r.delay, self.seq, r)));
        }
    }

    /// Starts the requests due within `quantum` of `now` as flows; whether any started.
    fn admit(&mut self, now: f64, quantum: f64) -> bool {
        let mut started = false;
        while let Some(Reverse(Pending(at, _, _))) = self.pending.peek() {
            if *at > now + quantum {
                break;
            }
            let Reverse(Pending(_, _, r)) = self.pending.pop().expect("peeked");
            debug_assert!(r.path.len() <= PATH_MAX);
            self.flows.push(Flow::new(&r.path));
            self.active.push(Active {
                left: r.bytes,
                tag: r.tag,
                began: now,
            });
            started = true;
        }
        started
    }

    /// Seconds to the next event: a flow's end, a request's start, `sample_t` or `until`.
    fn step(&self, now: f64, sample_t: f64, until: f64) -> f64 {
        let next_flow = self
            .flows
            .iter()
            .zip(&self.active)
            .filter(|(f, _)| f.rate > 0.0)
            .map(|(f, a)| a.left / f.rate)
            .fold(f64::INFINITY, f64::min);
        let next_req = self
            .pending
            .peek()
            .map_or(f64::INFINITY, |Reverse(p)| p.0 - now);
        next_flow
            .min(next_req)
            .min(sample_t - now)
            .min(until - now)
            .max(0.0)
    }

    /// Moves `dt` seconds of every flow's bytes, counting them on its resources in `bytes`.
    fn carry(&mut self, dt: f64, bytes: &mut [f64]) {
        for (f, a) in self.flows.iter().zip(self.active.iter_mut()) {
            let moved = (f.rate * dt).min(a.left);
            a.left -= moved;
            for &x in f.resources() {
                bytes[x as usize] += moved;
            }
        }
    }

    /// Completes the flows within `quantum` of their end, queueing what follows; whether any did.
    fn complete(
        &mut self,
        now: f64,
        quantum: f64,
        bytes: &mut [f64],
        source: &mut dyn Source,
    ) -> bool {
        let mut ended = false;
        let mut k = 0;
        while k < self.flows.len() {
            let (f, a) = (&self.flows[k], &self.active[k]);
            // A picosecond of slack absorbs floating-point residue of an exact finish.
            let due = a.left <= 0.0 || (f.rate > 0.0 && a.left / f.rate <= quantum + 1e-12);
            if !due {
                k += 1;
                continue;
            }
            let end = now + if f.rate > 0.0 { a.left / f.rate } else { 0.0 };
            for &x in f.resources() {
                bytes[x as usize] += a.left;
            }
            self.flow_time += end - a.began;
            self.stats.flows += 1;
            let tag = a.tag;
            self.flows.swap_remove(k);
            self.active.swap_remove(k);
            source.done(tag, end, &mut self.out);
            self.push(end);
            ended = true;
        }
        ended
    }
}

/// Runs `source` on resources of `caps` until `until` seconds, sampling every `every` seconds.
pub fn run(
    caps: &[f64],
    source: &mut dyn Source,
    until: f64,
    every: f64,
    quantum: f64,
    mut on_sample: impl FnMut(&Sample),
) -> Stats {
    let mut e = Engine {
        flows: Vec::new(),
        active: Vec::new(),
        pending: BinaryHeap::new(),
        seq: 0,
        out: Vec::new(),
        stats: Stats::default(),
        flow_time: 0.0,
    };
    let mut now = 0.0f64;
    source.start(&mut e.out);
    e.push(0.0);
    let mut sample = Sample {
        t: every,
        dt: every,
        bytes: vec![0.0; caps.len()],
    };
    // Sample ends are k x every (not a running sum, whose drift would leave a sliver of an
    // interval at the end); the run stops within a billionth of an interval of `until`.
    let (mut k_sample, tiny) = (1u64, every * 1e-9);
    let (mut scratch, mut dirty) = (Scratch::default(), true);
    while until - now > tiny && !source.finished() {
        // Requests due within a quantum become flows.
        if e.admit(now, quantum) {
            dirty = true;
        }
        if dirty {
            allocate(caps, &mut e.flows, &mut scratch);
            e.stats.allocations += 1;
            e.stats.peak_flows = e.stats.peak_flows.max(e.flows.len());
            dirty = false;
        }
        let dt = e.step(now, sample.t, until);
        e.carry(dt, &mut sample.bytes);
        now += dt;
        // Flows within a quantum of their end complete now; what follows them starts when
        // they would have ended.
        if e.complete(now, quantum, &mut sample.bytes, source) {
            dirty = true;
        }
        if now >= sample.t - tiny {
            on_sample(&sample);
            sample.bytes.iter_mut().for_each(|b| *b = 0.0);
            k_sample += 1;
            sample.t = every * k_sample as f64;
        }
    }
    if sample.bytes.iter().any(|b| *b > 0.0) && sample.t - now < every - tiny {
        // The partial interval of a run that ended early.
        sample.dt -= sample.t - now;
        sample.t = now;
        on_sample(&sample);
    }
    e.stats.mean_flow_time = e.flow_time / e.stats.flows.max(1) as f64;
    e.stats
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` clients each keep one request of `bytes` in flight over `path`.
    struct Loop {
        n: u64,
        bytes: f64,
        path: Vec<u32>,
    }

    impl Source for Loop {
        fn start(&mut self, out: &mut Vec<Request>) {
            for c in 0..self.n {
                self.done(c, 0.0, out);
            }
        }
        fn done(&mut self, tag: u64, _: f64, out: &mut Vec<Request>) {
            out.push(Request {
                path: self.path.clone(),
                bytes: self.bytes,
                delay: 0.0,
                tag,
            });
        }
    }

    #[test]
    fn a_saturated_link_carries_its_capacity_and_latency_costs_what_it_should() {
        // 4 closed-loop streams on a 1 GB/s link: the link is full.
        let mut src = Loop {
            n: 4,
            bytes: 1e6,
            path: vec![0],
        };
        let mut total = 0.0;
        let s = run(&[1e9], &mut src, 1.0, 0.1, 0.0, |x| total += x.bytes[0]);
        assert!((total - 1e9).abs() / 1e9 < 1e-6, "{total}");
        assert_eq!(s.flows, 1000, "1 GB in 1 MB requests");
        // One stream with 1 ms of latency per 1 MB request at 1 GB/s: half the time waits.
        struct Slow(Loop);
        impl Source for Slow {
            fn start(&mut self, out: &mut Vec<Request>) {
                self.0.start(out);
                out.iter_mut().for_each(|r| r.delay = 1e-3);
            }
            fn done(&mut self, tag: u64, now: f64, out: &mut Vec<Request>) {
                self.0.done(tag, now, out);
                out.iter_mut().for_each(|r| r.delay = 1e-3);
            }
        }
        let mut slow = Slow(Loop {
            n: 1,
            bytes: 1e6,
            path: vec![0],
        });
        let mut got = 0.0;
        run(&[1e9], &mut slow, 1.0, 0.1, 0.0, |x| got += x.bytes[0]);
        assert!((got - 0.5e9).abs() / 0.5e9 < 0.01, "{got}");
    }

    #[test]
    fn the_quantum_changes_throughput_by_less_than_its_stated_bound() {
        // Flows of 1 ms at their fair share; a 50 us quantum may gain at most 2.5%.
        let mk = || Loop {
            n: 8,
            bytes: 1.25e5,
            path: vec![0],
        };
        let (mut exact, mut coarse) = (0.0, 0.0);
        let s = run(&[1e9], &mut mk(), 0.5, 0.1, 0.0, |x| exact += x.bytes[0]);
        run(&[1e9], &mut mk(), 0.5, 0.1, 50e-6, |x| coarse += x.bytes[0]);
        let bound = 50e-6 / s.mean_flow_time;
        assert!(coarse >= exact * (1.0 - 1e-9), "{coarse} < {exact}");
        assert!(
            coarse <= exact * (1.0 + bound + 1e-6),
            "{coarse} vs {exact}, bound {bound}"
        );
    }
}
