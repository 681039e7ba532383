//! Benchmarks of the simulator and its checkers (simulation.md §6c): the standard 10-host
//! cluster under faults (simulated seconds per wall second, events per second, client
//! operations per simulated second), and the linearizability checker on synthetic histories
//! that are linearizable by construction (or made invalid on purpose).
//!
//! Invariant: every figure is measured, never assumed; a checker run that does not return the
//! expected verdict is reported as such. Timing uses the wall clock, so this module is for the
//! CLI (`t3fs bench`), never for tests. Not here: printing (the CLI) and real-cluster benchmarks.

use core::time::Duration;
use std::time::Instant as WallClock;

use t3fs_scenario::{
    Action, Cluster, Expect, Faults, NodeRef, Rng, Scenario, Step, Timeouts, Workload,
};

use crate::check::linearizability::{self, Interval, Outcome, RegOp};
use crate::check::LIN_BUDGET;

/// The §6c cluster: one mgmtd, six storage nodes (three targets each), six 3-replica chains, two
/// clients driving ≥ 1,000 operations per simulated second over an RDMA-class network and
/// NVMe-class disks, and faults on: background loss, latency spikes, a storage crash and
/// restart, a flapping link and a slow disk.
pub fn ten_host_scenario(duration: Duration) -> Scenario {
    let ms = Duration::from_millis;
    let at = |f: f64| Duration::from_secs_f64(duration.as_secs_f64() * f);
    let step = |at: Duration, action: Action| Step {
        at,
        line: 0,
        action,
    };
    Scenario {
        name: "bench_ten_hosts".into(),
        about: "Benchmark: 1 mgmtd, 6 storage nodes, 3-replica chains, 2 clients, faults on."
            .into(),
        seeds: vec![1],
        duration,
        converge_within: Duration::from_secs(90),
        cluster: Cluster {
            mgmtd: 1,
            storage_nodes: 6,
            targets_per_node: 3,
            replicas: 3,
            chains: 6,
            clients: 2,
            meta: 0,
            timeouts: Timeouts::Fast,
            reject_dirty_reads: true,
            storage_lease: false,
            serial_forwarding: false,
            client_boot_empty: false,
        },
        namespace: None,
        workload: Workload {
            chunks: 32,
            write_size: 4096,
            read_fraction: 0.5,
            think: Duration::ZERO..Duration::from_micros(200),
            ops_per_client: None,
            prefill: false,
        },
        // RDMA-class network and NVMe-class disks, as 3FS is deployed.
        faults: Faults {
            net_latency: Duration::from_micros(5)..Duration::from_micros(20),
            disk_latency: Duration::from_micros(20)..Duration::from_micros(100),
            loss: 0.0001,
            net_spike: 0.0001,
            disk_spike: 0.0001,
            ..Faults::default()
        },
        hardware: None,
        steps: vec![
            step(at(0.2), Action::Crash(NodeRef::Storage(1))),
            step(at(0.35), Action::Restart(NodeRef::Storage(1))),
            step(
                at(0.5),
                Action::Flap {
                    node: NodeRef::Storage(3),
                    down: ms(300),
                    up: ms(700),
                    count: 3,
                },
            ),
            step(
                at(0.7),
                Action::SlowDisk {
                    node: NodeRef::Storage(4),
                    latency: ms(1)..ms(5),
                },
            ),
            step(at(0.8), Action::HealDisk(NodeRef::Storage(4))),
        ],
        expect: Expect::default(),
        bug: None,
    }
}

/// One simulator measurement.
#[derive(Clone, Debug)]
pub struct SimFigures {
    /// Seed run.
    pub seed: u64,
    /// Every verdict passed.
    pub passed: bool,
    /// Events processed.
    pub events: u64,
    /// Simulated seconds (safety and liveness phases).
    pub sim_secs: f64,
    /// Wall seconds.
    pub wall_secs: f64,
    /// Client operations completed.
    pub ops: usize,
    /// The run's trace hash (same seed, same hash: a speed-up must not change it unexplained).
    pub trace: u64,
}

impl SimFigures {
    /// Simulated seconds per wall second.
    pub fn speedup(&self) -> f64 {
        self.sim_secs / self.wall_secs
    }
    /// Events per wall second.
    pub fn events_per_sec(&self) -> f64 {
        self.events as f64 / self.wall_secs
    }
    /// Completed client operations per simulated second.
    pub fn ops_per_sim_sec(&self) -> f64 {
        self.ops as f64 / self.sim_secs
    }
}

/// Runs `sc` with `seed` and measures it.
pub fn measure_sim(sc: &Scenario, seed: u64) -> Result<SimFigures, String> {
    let start = WallClock::now();
    let o = crate::run::run(sc, seed, false)?;
    let wall_secs = start.elapsed().as_secs_f64();
    let ops = o.world.as_ref().map_or(0, |w| w.sim.history().completed());
    Ok(SimFigures {
        seed,
        passed: o.passed(),
        events: o.events,
        sim_secs: o.sim_ns as f64 / 1e9,
        wall_secs,
        ops,
        trace: o.trace,
    })
}

/// A register history that is linearizable by construction: `clients` clients each issue
/// operations back to back on one chunk (think time, then a call lasting 1..`max_len` ticks);
/// each operation takes effect at a random point inside its interval, and reads return what the
/// register held at that point. Times are unique. About half the operations are reads.
pub fn linearizable_history(
    rng: &mut Rng,
    clients: u32,
    ops: usize,
    max_len: u64,
) -> Vec<Interval> {
    let mut cursor = vec![0u64; clients as usize];
    let mut drafts: Vec<(u64, u64, u64, bool)> = Vec::with_capacity(ops); // call, ret, point, write
    for _ in 0..ops {
        let c = (rng.below(u64::from(clients))) as usize;
        let call = cursor[c] + 1 + rng.below(max_len / 2 + 1);
        let ret = call + 1 + rng.below(max_len);
        let point = call + rng.below(ret - call + 1);
        cursor[c] = ret;
        drafts.push((call, ret, point, rng.chance(0.5)));
    }
    // Unique times: scale and break ties by index (calls, returns and points never collide).
    let n = drafts.len() as u64;
    let mut by_point: Vec<usize> = (0..drafts.len()).collect();
    by_point.sort_by_key(|&i| (drafts[i].2, i));
    let mut value = None;
    let mut out = vec![
        Interval {
            op: RegOp::Read(None),
            call: 0,
            ret: 0,
            origin: 0,
        };
        drafts.len()
    ];
    for (next_id, &i) in by_point.iter().enumerate() {
        let (call, ret, _, write) = drafts[i];
        let op = if write {
            value = Some(next_id as u64 + 1);
            RegOp::Write(next_id as u64 + 1)
        } else {
            RegOp::Read(value)
        };
        out[i] = Interval {
            op,
            call: call * 3 * n + i as u64,
            ret: ret * 3 * n + n + i as u64,
            origin: i,
        };
    }
    out
}

/// Makes one read of `h` return a value overwritten before the read began (a stale read), so
/// the history is no longer linearizable. Returns false if no such read exists.
pub fn plant_stale_read(h: &mut [Interval]) -> bool {
    let reads: Vec<usize> = (0..h.len())
        .filter(|&i| matches!(h[i].op, RegOp::Read(Some(_))))
        .collect();
    for &r in reads.iter().rev() {
        // A write that returned before the read was called, followed by another write that
        // also returned before: the first one's value is stale for this read.
        let mut done: Vec<&Interval> = h
            .iter()
            .filter(|o| matches!(o.op, RegOp::Write(_)) && o.ret < h[r].call)
            .collect();
        done.sort_by_key(|o| o.ret);
        if done.len() >= 2 {
            let older = done[done.len() - 2];
            let newest = done[done.len() - 1];
            if older.ret < newest.call {
                if let RegOp::Write(v) = older.op {
                    h[r].op = RegOp::Read(Some(v));
                    return true;
                }
            }
        }
    }
    false
}

/// One checker measurement.
#[derive(Clone, Debug)]
pub struct CheckFigures {
    /// Operations checked.
    pub ops: usize,
    /// Chunks (independent registers).
    pub chunks: usize,
    /// Chunks found linearizable.
    pub ok: usize,
    /// Chunks with a violation.
    pub violations: usize,
    /// Chunks whose search ran out of budget.
    pub unknown: usize,
    /// Wall seconds of checking (history generation excluded).
    pub wall_secs: f64,
}

/// Checks `chunks` synthetic histories of `ops_per_chunk` operations by `clients` clients each;
/// with `stale`, one read per chunk is made stale first.
pub fn measure_checker(
    seed: u64,
    chunks: usize,
    ops_per_chunk: usize,
    clients: u32,
    stale: bool,
    mut progress: impl FnMut(usize),
) -> CheckFigures {
    let mut rng = Rng::new(seed);
    let mut f = CheckFigures {
        ops: 0,
        chunks,
        ok: 0,
        violations: 0,
        unknown: 0,
        wall_secs: 0.0,
    };
    for c in 0..chunks {
        let mut h = linearizable_history(&mut rng, clients, ops_per_chunk, 40);
        if stale {
            plant_stale_read(&mut h);
        }
        f.ops += h.len();
        let start = WallClock::now();
        let outcome = linearizability::check(&h, LIN_BUDGET);
        f.wall_secs += start.elapsed().as_secs_f64();
        match outcome {
            Outcome::Ok => f.ok += 1,
            Outcome::Violation(_) => f.violations += 1,
            Outcome::Unknown => f.unknown += 1,
        }
        progress(c + 1);
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_histories_are_linearizable_and_a_planted_stale_read_is_not() {
        let mut rng = Rng::new(7);
        for _ in 0..20 {
            let mut h = linearizable_history(&mut rng, 5, 200, 30);
            assert_eq!(linearizability::check(&h, LIN_BUDGET), Outcome::Ok);
            assert!(plant_stale_read(&mut h));
            assert!(matches!(
                linearizability::check(&h, LIN_BUDGET),
                Outcome::Violation(_)
            ));
        }
    }
}
