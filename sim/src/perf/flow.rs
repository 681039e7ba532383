//! Max-min fair sharing of capacities among flows: the bandwidth model of the performance
//! simulator, in the manner of SimGrid's flow models. Every resource (a NIC direction, an SSD, a
//! fabric link) has a capacity in bytes per second; every flow crosses a short path of
//! resources; [`allocate`] gives each flow the rate progressive filling gives it: all rates
//! grow together until a resource saturates, the flows through it are frozen at its fair share,
//! and the rest keep growing, until every flow is frozen.
//!
//! Invariants: no resource carries more than its capacity; every flow crosses at least one
//! saturated resource on which its rate is the largest (max-min fairness); the result depends
//! only on the inputs (ties go to the lower resource index), so runs are reproducible.
//! Cost: O((F·P + R) log R) for F flows of path length P over R resources.
//!
//! Not here: latency (the engine adds per-request delays), TCP's or RDMA's own dynamics (a flow
//! gets its fair share at once, which is the model's main assumption: it holds for long
//! transfers, not for short ones whose rate never settles).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Most resources on one flow's path.
pub const PATH_MAX: usize = 16;

/// One flow: its path and, after [`allocate`], its rate.
#[derive(Clone, Debug)]
pub struct Flow {
    /// Resources it crosses (`len` of them).
    pub path: [u32; PATH_MAX],
    /// How many entries of `path` are used.
    pub len: u8,
    /// Bytes per second, set by [`allocate`].
    pub rate: f64,
}

impl Flow {
    /// A flow over `path` (at most [`PATH_MAX`] resources).
    pub fn new(path: &[u32]) -> Self {
        let mut p = [0; PATH_MAX];
        p[..path.len()].copy_from_slice(path);
        Self {
            path: p,
            len: path.len() as u8,
            rate: 0.0,
        }
    }

    /// The resources it crosses.
    pub fn resources(&self) -> &[u32] {
        &self.path[..self.len as usize]
    }
}

/// A share ordered for the heap (total order on f64, then the resource index).
#[derive(PartialEq)]
struct Share(f64, u32);

impl Eq for Share {}
impl PartialOrd for Share {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Share {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0).then(self.1.cmp(&o.1))
    }
}

/// Reusable buffers of [`allocate`].
#[derive(Default)]
pub struct Scratch {
    left: Vec<f64>,
    count: Vec<u32>,
    start: Vec<u32>,
    members: Vec<u32>,
    frozen: Vec<bool>,
}

/// Sets every flow's max-min fair rate under `caps` (bytes per second per resource).
pub fn allocate(caps: &[f64], flows: &mut [Flow], s: &mut Scratch) {
    let r = caps.len();
    debug_assert!(
        caps.iter().all(|c| c.is_finite() && *c >= 0.0),
        "capacities"
    );
    for f in flows.iter_mut() {
        debug_assert!(f.len > 0, "a flow crosses at least one resource");
        debug_assert!(
            (1..f.len as usize).all(|i| !f.path[..i].contains(&f.path[i])),
            "a path lists a resource once"
        );
        f.rate = 0.0;
    }
    s.left.clear();
    s.left.extend_from_slice(caps);
    s.count.clear();
    s.count.resize(r, 0);
    for f in flows.iter() {
        for &x in f.resources() {
            s.count[x as usize] += 1;
        }
    }
    // Flows by resource (CSR), to freeze a saturated resource's flows.
    s.start.clear();
    s.start.resize(r + 1, 0);
    for i in 0..r {
        s.start[i + 1] = s.start[i] + s.count[i];
    }
    s.members.clear();
    s.members.resize(s.start[r] as usize, 0);
    let mut fill = s.start.clone();
    for (k, f) in flows.iter().enumerate() {
        for &x in f.resources() {
            s.members[fill[x as usize] as usize] = k as u32;
            fill[x as usize] += 1;
        }
    }
    s.frozen.clear();
    s.frozen.resize(flows.len(), false);
    let mut heap: BinaryHeap<Reverse<Share>> = (0..r)
        .filter(|&i| s.count[i] > 0)
        .map(|i| Reverse(Share(s.left[i] / f64::from(s.count[i]), i as u32)))
        .collect();
    while let Some(Reverse(Share(share, x))) = heap.pop() {
        let xi = x as usize;
        // A stale entry: the resource's share changed since it was pushed, or it is done.
        if s.count[xi] == 0 || share != s.left[xi] / f64::from(s.count[xi]) {
            continue;
        }
        let share = share.max(0.0);
        for m in s.start[xi]..s.start[xi + 1] {
            let k = s.members[m as usize] as usize;
            if s.frozen[k] {
                continue;
            }
            s.frozen[k] = true;
            flows[k].rate = share;
            for &y in flows[k].resources() {
                let yi = y as usize;
                s.left[yi] -= share;
                s.count[yi] -= 1;
                if yi != xi && s.count[yi] > 0 {
                    heap.push(Reverse(Share(s.left[yi] / f64::from(s.count[yi]), y)));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(caps: &[f64], paths: &[&[u32]]) -> Vec<f64> {
        let mut flows: Vec<Flow> = paths.iter().map(|p| Flow::new(p)).collect();
        allocate(caps, &mut flows, &mut Scratch::default());
        flows.iter().map(|f| f.rate).collect()
    }

    #[test]
    fn a_bottleneck_is_shared_evenly_and_the_rest_goes_to_those_it_does_not_bind() {
        // Two flows share link 0 (10); the second also crosses link 1 (2): it gets 2, the
        // first takes the rest of link 0.
        assert_eq!(rates(&[10.0, 2.0], &[&[0], &[0, 1]]), vec![8.0, 2.0]);
        // Three equal flows on one link.
        assert_eq!(rates(&[9.0], &[&[0], &[0], &[0]]), vec![3.0; 3]);
        // The classic line: flow 0 crosses both links, flows 1 and 2 one each.
        assert_eq!(rates(&[1.0, 1.0], &[&[0, 1], &[0], &[1]]), vec![0.5; 3]);
    }

    #[test]
    fn no_resource_is_overloaded_and_every_flow_is_bound_somewhere() {
        // A pseudo-random mesh: 40 resources, 300 flows of 1-4 hops.
        let mut seed = 7u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let caps: Vec<f64> = (0..40).map(|_| 1.0 + (next() % 100) as f64).collect();
        let paths: Vec<Vec<u32>> = (0..300)
            .map(|_| {
                let n = 1 + next() % 4;
                let mut p: Vec<u32> = (0..n).map(|_| (next() % 40) as u32).collect();
                p.sort_unstable();
                p.dedup();
                p
            })
            .collect();
        let mut flows: Vec<Flow> = paths.iter().map(|p| Flow::new(p)).collect();
        allocate(&caps, &mut flows, &mut Scratch::default());
        let mut load = vec![0.0; caps.len()];
        for f in &flows {
            for &x in f.resources() {
                load[x as usize] += f.rate;
            }
        }
        for (x, (&l, &c)) in load.iter().zip(&caps).enumerate() {
            assert!(l <= c * (1.0 + 1e-9), "resource {x} carries {l} of {c}");
        }
        // Max-min: each flow crosses a saturated resource where no flow is faster.
        for (k, f) in flows.iter().enumerate() {
            let bound = f.resources().iter().any(|&x| {
                let xi = x as usize;
                let full = load[xi] >= caps[xi] * (1.0 - 1e-9);
                let top = flows
                    .iter()
                    .filter(|g| g.resources().contains(&x))
                    .all(|g| g.rate <= f.rate * (1.0 + 1e-9));
                full && top
            });
            assert!(
                bound,
                "flow {k} ({:?}) at {} is not bottlenecked",
                f.resources(),
                f.rate
            );
        }
    }
}
