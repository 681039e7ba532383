//! Resources with service times, for scenarios with `[hardware]`: every node's NIC (one queue per
//! direction), every target's SSD (queue depth, IOPS, bandwidth, a log-normal access latency)
//! and, when set, every node's CPU cores. A message or an I/O waits for its resource, holds it
//! for its service time and frees it, so latency grows with size and load, and throughput stops
//! at the binding resource.
//!
//! The model, per message of `b` bytes from `a` to `z` sent at `t` with propagation `p` (the
//! fault model's drawn latency): `a`'s transmit queue serves it in `message + b / nic` from when
//! it is free (`message` drawn log-normal between the profile's median and p99 where it gives
//! a spread); it arrives `p + latency` later (`latency`, the profile's `nic_latency`, drawn the
//! same way, or its share of the profile's measured round trip, `nic_latency_trip`, holds no
//! resource: concurrent messages overlap it); `z`'s receive side is a second queue of the same rate (so
//! many senders to one node share its line rate; one sender alone pays the bytes once); then the
//! earliest free core of `z` spends `request + b × byte` on it, and the machine gets it; the
//! earliest free core then also spends `overlap` (the profile's CPU beside the path), which the
//! machine does not wait for but later work queues behind. A chunk store operation of `b`
//! bytes costs its node `b × overlap_read_byte` (or `overlap_write_byte`) beside its path, and
//! first waits for a free core for its own CPU (the profile's `cpu_store`: a store thread
//! that finds every core busy starts late), which then holds that core. With
//! `shared_host` (a loopback cluster) all nodes share one NIC pair and one set of cores, and all
//! targets one SSD.
//!
//! Per SSD operation: it waits for one of `queue_depth` slots, starts no sooner than `1 / iops`
//! after the previous start, its bytes take `b / bandwidth` (the write bandwidth for mutations) on
//! the SSD's one transfer queue, and it completes at the latest of its start plus the drawn access
//! latency, the end of its queued transfer and its start plus its own transfer time (`b / lone
//! rate`, the bandwidth unless the profile gives one alone sees) times a drawn factor (the
//! profile's transfer spread, or its write spread for a mutation; the queue keeps the median, so
//! the spread lengthens a lone operation without lowering the bandwidth bound), plus the sync time
//! for a mutation (drawn between its median and p99); its node has it a drawn wake-up later (the
//! profile's `ssd_wake`), which holds no slot.
//!
//! A spread the profile does not give draws nothing, so profiles without spreads run exactly as
//! before spreads existed. Everything is a function of the seed (draws come from the world's
//! generator in event order) and of simulated time, nothing of the wall clock.
//!
//! Not here: the fault model's spikes, slow disks and loss (they apply on top, unchanged), the
//! KV's latency (not a modelled resource), congestion control (a queue is FIFO and work
//! conserving) and the flow-level model for large clusters (perf/).

use std::collections::BTreeMap;

use core::time::Duration;

use t3fs_core::ids::{NodeId, TargetId};
use t3fs_core::time::Instant;
use t3fs_scenario::{Hardware, Rng};

/// The standard normal's 99th percentile: with the median, it fixes the log-normal's spread.
const Z99: f64 = 2.326_347_874;

/// One FIFO server: free from `free` on; `busy` sums its service times.
#[derive(Clone, Copy, Debug, Default)]
struct Server {
    free: Instant,
    busy_ns: u64,
}

impl Server {
    /// Serves work arriving at `at` for `ns`; returns when it ends.
    fn serve(&mut self, at: Instant, ns: u64) -> Instant {
        let start = at.max(self.free);
        self.free = Instant(start.0 + ns);
        self.busy_ns += ns;
        self.free
    }
}

/// One SSD: queue slots, the IOPS pacing and the transfer queue.
#[derive(Clone, Debug)]
struct Ssd {
    slots: Vec<Instant>,
    next_start: Instant,
    transfer: Server,
    ops: u64,
}

/// The resources of every node and target.
pub struct Resources {
    hw: Hardware,
    tx: Vec<Server>,
    rx: Vec<Server>,
    cpu: Vec<Vec<Server>>,
    ssds: BTreeMap<TargetId, Ssd>,
    /// Each node's chunk store operations' durations (what a real node's metrics measure).
    pub store_ops: super::store_ops::StoreOps,
}

fn ns(d: Duration) -> u64 {
    d.as_nanos() as u64
}

/// A log-normal factor of median 1 whose 99th percentile is `p99_ratio` (two uniform draws).
fn factor(rng: &mut Rng, p99_ratio: f64) -> f64 {
    let sigma = p99_ratio.ln() / Z99;
    // Box-Muller from two uniform draws; 1 - u keeps the logarithm finite.
    let (u1, u2) = (1.0 - rng.unit(), rng.unit());
    let z = (-2.0 * u1.ln()).sqrt() * (core::f64::consts::TAU * u2).cos();
    (sigma * z).exp()
}

/// [`factor`] where the profile gives a spread; 1 without drawing where it gives none, so a
/// profile without spreads draws exactly what it drew before they existed.
fn spread(rng: &mut Rng, p99_ratio: f64) -> f64 {
    if p99_ratio > 1.0 {
        factor(rng, p99_ratio)
    } else {
        1.0
    }
}

/// A time of median `p50` and 99th percentile `p99`, log-normal (`p50` itself when they are
/// equal, drawing nothing).
fn lognormal(rng: &mut Rng, p50: Duration, p99: Duration) -> Duration {
    if p50.is_zero() {
        return p50;
    }
    p50.mul_f64(spread(rng, p99.as_secs_f64() / p50.as_secs_f64()))
}

/// Nanoseconds to move `bytes` at `rate` bytes per second (at least 1 for any bytes).
fn bytes_ns(bytes: usize, rate: f64) -> u64 {
    if bytes == 0 {
        return 0;
    }
    ((bytes as f64 / rate) * 1e9).ceil().max(1.0) as u64
}

impl Resources {
    /// Idle resources for `nodes` nodes.
    pub fn new(hw: Hardware, nodes: usize) -> Self {
        let cores = hw.cpu_cores as usize;
        Self {
            tx: vec![Server::default(); nodes],
            rx: vec![Server::default(); nodes],
            cpu: vec![vec![Server::default(); cores]; nodes],
            ssds: BTreeMap::new(),
            store_ops: Default::default(),
            hw,
        }
    }

    /// The hardware modelled.
    pub fn hardware(&self) -> &Hardware {
        &self.hw
    }

    /// When a message of `bytes` sent from `from` at `now`, `propagation` on the wire, reaches
    /// the machine of `to`.
    pub fn message(
        &mut self,
        now: Instant,
        (from, to): (NodeId, NodeId),
        bytes: usize,
        propagation: Duration,
        rng: &mut Rng,
    ) -> Instant {
        let (a, z) = (self.node(from), self.node(to));
        let wire = bytes_ns(bytes, self.hw.nic_bytes);
        let fixed = lognormal(rng, self.hw.nic_message, self.hw.nic_message_p99);
        let sent = self.tx[a].serve(now, ns(fixed) + wire);
        // Latency that holds nothing: concurrent messages overlap it. A measured round trip
        // gives each message its share (one draw); else the median and p99 (`lognormal` draws
        // nothing for a zero median, so profiles without either draw as before).
        let waited = match &self.hw.nic_latency_trip {
            Some(trip) => ns(trip.message(rng.unit())),
            None => ns(lognormal(rng, self.hw.nic_latency, self.hw.nic_latency_p99)),
        };
        let arrived = Instant(sent.0 + ns(propagation) + waited);
        // The receive queue ends the message no sooner than its arrival: alone, it adds nothing
        // (the bytes were paid at the sender); behind others, it waits for the line.
        let received = self.rx[z].serve(Instant(arrived.0.saturating_sub(wire)), wire);
        let received = received.max(arrived);
        let work = ns(self.hw.cpu_request) + (bytes as f64 * self.hw.cpu_byte_ns).ceil() as u64;
        let done = match self.cpu[z].iter_mut().min_by_key(|c| c.free) {
            Some(core) => core.serve(received, work),
            None => received,
        };
        self.beside(z, received, ns(self.hw.cpu_overlap));
        done
    }

    /// Work beside a path on host `h`'s cores from `at`: it holds the earliest free core, but
    /// nothing waits for it; a lone operation pays nothing, a busy host queues behind it.
    fn beside(&mut self, h: usize, at: Instant, work: u64) {
        if work > 0 {
            if let Some(core) = self.cpu[h].iter_mut().min_by_key(|c| c.free) {
                core.serve(at, work);
            }
        }
    }

    /// A chunk store operation of `bytes` (a write when `write`) submitted on `node` at `now`:
    /// when it starts. Its own CPU (the profile's `cpu_store`) waits for the earliest free core
    /// and holds it from then, so the operation starts when that core takes it; its latency
    /// runs from there, and already contains that CPU, so nothing is added beyond the wait.
    /// Then the CPU it costs beside its path, per byte, which it does not wait for.
    pub fn store_cpu(
        &mut self,
        (node, now): (NodeId, Instant),
        bytes: usize,
        write: bool,
    ) -> Instant {
        let h = self.node(node);
        let own = ns(self.hw.cpu_store.of(bytes, write));
        let start = match self.cpu[h].iter_mut().min_by_key(|c| c.free) {
            Some(core) if own > 0 => Instant(core.serve(now, own).0 - own),
            _ => now,
        };
        let byte_ns = if write {
            self.hw.cpu_overlap_write_byte_ns
        } else {
            self.hw.cpu_overlap_read_byte_ns
        };
        self.beside(h, now, (bytes as f64 * byte_ns).ceil() as u64);
        start
    }

    /// The index of `n`'s NIC and CPU: its own, or the one host's.
    fn node(&self, n: NodeId) -> usize {
        if self.hw.shared_host {
            0
        } else {
            n.0 as usize
        }
    }

    /// When an SSD operation of `bytes` on `target` (a write when `write`), submitted at `now`
    /// with access latency `latency`, completes. `rng` draws the spreads of its transfer and
    /// its durability point, where the profile gives them.
    pub fn ssd(
        &mut self,
        (target, now): (TargetId, Instant),
        bytes: usize,
        write: bool,
        latency: Duration,
        rng: &mut Rng,
    ) -> Instant {
        let hw = &self.hw;
        // On one host every target is a directory of the same disk.
        let target = if hw.shared_host { TargetId(0) } else { target };
        let rate = if write {
            hw.ssd_write_bytes
        } else {
            hw.ssd_bytes
        };
        let ssd = self.ssds.entry(target).or_insert_with(|| Ssd {
            slots: vec![Instant::ZERO; hw.ssd_queue_depth as usize],
            next_start: Instant::ZERO,
            transfer: Server::default(),
            ops: 0,
        });
        let (slot, free) = ssd
            .slots
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(_, t)| t)
            .expect("at least one slot");
        let start = now.max(free).max(ssd.next_start);
        ssd.next_start = Instant(start.0 + (1e9 / hw.ssd_iops).ceil() as u64);
        let transfer = bytes_ns(bytes, rate);
        // The transfer queue holds the bandwidth's time (the bound under load); alone, an
        // operation's own transfer takes its lone rate's time, longer by its drawn factor.
        let moved = ssd.transfer.serve(start, transfer);
        let lone = if write {
            hw.ssd_write_lone_bytes
        } else {
            hw.ssd_lone_bytes
        };
        let spread_of = if write {
            hw.ssd_write_spread
        } else {
            hw.ssd_transfer_spread
        };
        let own = bytes_ns(bytes, lone) as f64;
        let slow = Instant(start.0 + (own * spread(rng, spread_of)) as u64);
        // A mutation is done at its durability point, a sync after its bytes.
        let sync = if write {
            ns(lognormal(rng, hw.ssd_sync, hw.ssd_sync_p99))
        } else {
            0
        };
        let done = Instant(Instant(start.0 + ns(latency)).max(moved).max(slow).0 + sync);
        ssd.slots[slot] = done;
        // The node has it after the store's wake-up, which holds no slot (`lognormal` draws
        // nothing for a zero median, so profiles without it draw as before).
        let done = Instant(done.0 + ns(lognormal(rng, hw.ssd_wake, hw.ssd_wake_p99)));
        ssd.ops += 1;
        done
    }

    /// An SSD access latency drawn from the profile's log-normal distribution.
    pub fn ssd_latency(&self, rng: &mut Rng) -> Duration {
        let p50 = self.hw.ssd_p50.as_secs_f64();
        Duration::from_secs_f64(p50 * factor(rng, self.hw.ssd_p99.as_secs_f64() / p50))
    }

    /// How busy the busiest resource of each kind was over `elapsed`: one line per kind.
    pub fn summary(&self, elapsed: Duration, name: &dyn Fn(usize) -> String) -> Vec<String> {
        let total = ns(elapsed).max(1) as f64;
        // One host's NIC and cores sit at index 0, whatever node that names.
        let name = |i: usize| {
            if self.hw.shared_host {
                "the host".to_string()
            } else {
                name(i)
            }
        };
        let busiest = |servers: &[Server]| {
            servers
                .iter()
                .enumerate()
                .max_by_key(|(_, s)| s.busy_ns)
                .map(|(i, s)| (i, s.busy_ns as f64 / total))
        };
        let mut out = Vec::new();
        for (what, servers) in [("NIC transmit", &self.tx), ("NIC receive", &self.rx)] {
            if let Some((i, u)) = busiest(servers) {
                out.push(format!("busiest {what}: {} {:.1}%", name(i), u * 100.0));
            }
        }
        if self.hw.cpu_cores > 0 {
            // A node's CPU as one server: the mean of its cores.
            let cpu: Vec<Server> = self
                .cpu
                .iter()
                .map(|cores| Server {
                    free: Instant::ZERO,
                    busy_ns: cores.iter().map(|c| c.busy_ns).sum::<u64>() / cores.len() as u64,
                })
                .collect();
            if let Some((i, u)) = busiest(&cpu) {
                out.push(format!(
                    "busiest CPU: {} {:.1}% of its cores",
                    name(i),
                    u * 100.0
                ));
            }
        }
        if let Some((t, s)) = self.ssds.iter().max_by_key(|(_, s)| s.transfer.busy_ns) {
            out.push(format!(
                "busiest SSD transfer: {t} {:.1}% ({} operations)",
                s.transfer.busy_ns as f64 / total * 100.0,
                s.ops
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hw() -> Hardware {
        let mut h = Hardware::profile("gbe-sata").expect("profile");
        h.cpu_cores = 0;
        h
    }

    #[test]
    fn a_message_costs_its_bytes_once_and_grows_with_size() {
        let mut r = Resources::new(hw(), 2);
        let p = Duration::from_micros(10);
        let small = r.message(
            Instant::ZERO,
            (NodeId(0), NodeId(1)),
            4096,
            p,
            &mut Rng::new(1),
        );
        let mut r = Resources::new(hw(), 2);
        let big = r.message(
            Instant::ZERO,
            (NodeId(0), NodeId(1)),
            1 << 20,
            p,
            &mut Rng::new(1),
        );
        let wire = |b: usize| bytes_ns(b, hw().nic_bytes);
        assert_eq!(small.0, 5_000 + wire(4096) + 10_000);
        assert_eq!(big.0, 5_000 + wire(1 << 20) + 10_000);
        assert!(
            big.0 > 100 * (small.0 - 15_000),
            "1 MiB takes ~256x the wire time of 4 KiB"
        );
    }

    #[test]
    fn a_messages_latency_overlaps_where_its_nic_cost_queues() {
        // Eight empty messages sent at once on one host: 40 us each on the NIC queue serialize
        // (the last arrives after 8 x 40 us); 40 us of latency that holds nothing overlaps
        // (every one arrives at 40 us).
        let send_all = |h: Hardware| {
            let mut r = Resources::new(h, 2);
            (0..8)
                .map(|_| {
                    let at = r.message(
                        Instant::ZERO,
                        (NodeId(0), NodeId(1)),
                        0,
                        Duration::ZERO,
                        &mut Rng::new(1),
                    );
                    at.0
                })
                .max()
                .unwrap()
        };
        let mut queued = hw();
        queued.nic_message = Duration::from_micros(40);
        queued.nic_message_p99 = queued.nic_message;
        let mut overlapped = hw();
        overlapped.nic_message = Duration::ZERO;
        overlapped.nic_message_p99 = Duration::ZERO;
        overlapped.nic_latency = Duration::from_micros(40);
        overlapped.nic_latency_p99 = overlapped.nic_latency;
        assert_eq!(send_all(queued), 8 * 40_000);
        assert_eq!(send_all(overlapped), 40_000);
    }

    #[test]
    fn a_measured_round_trip_is_what_a_request_and_its_reply_take() {
        // A trip of median 200 us, 3% of it stalled up to 2 ms: a request and its reply, drawn
        // message by message, take what the trip says at its median and in its tail.
        let us = Duration::from_micros;
        let body = [
            (0.0, us(150)),
            (0.5, us(200)),
            (0.9, us(240)),
            (0.97, us(250)),
        ];
        let tail = [(0.99, us(700)), (0.999, us(1500)), (1.0, us(2000))];
        let points = [&body[..], &tail[..]].concat();
        let trip = t3fs_scenario::trip::Trip::new(points).unwrap();
        let mut h = hw();
        h.nic_message = Duration::ZERO;
        h.nic_message_p99 = Duration::ZERO;
        h.nic_latency_trip = Some(trip);
        let mut rng = Rng::new(3);
        let mut trips: Vec<u64> = (0..20_000)
            .map(|_| {
                let mut r = Resources::new(h.clone(), 2);
                let pair = (NodeId(0), NodeId(1));
                let there = r.message(Instant::ZERO, pair, 0, Duration::ZERO, &mut rng);
                r.message(there, (pair.1, pair.0), 0, Duration::ZERO, &mut rng)
                    .0
            })
            .collect();
        trips.sort();
        let at = |p: f64| trips[(p * trips.len() as f64) as usize] as f64 / 1e3;
        // Within 10% at the median and the 90th percentile; within 15% at the 99th, where the
        // trip's quantile climbs 450 us in 2 points of probability and the other message's
        // share, added to the slower one's, shifts it most.
        for (p, want, within) in [(0.5, 200.0, 0.1), (0.9, 240.0, 0.1), (0.99, 700.0, 0.15)] {
            assert!((at(p) / want - 1.0).abs() < within, "p{p}: {} us", at(p));
        }
    }

    #[test]
    fn many_senders_share_one_receivers_line_rate() {
        let mut r = Resources::new(hw(), 9);
        let mut last = Instant::ZERO;
        for s in 1..9 {
            last = last.max(r.message(
                Instant::ZERO,
                (NodeId(s), NodeId(0)),
                1 << 20,
                Duration::ZERO,
                &mut Rng::new(1),
            ));
        }
        let one = bytes_ns(1 << 20, hw().nic_bytes);
        // Eight senders in parallel, one receive line: eight wire times, not one.
        assert!(last.0 >= 8 * one, "{} < {}", last.0, 8 * one);
        assert!(last.0 <= 8 * one + 5_000 + 8, "work conserving");
    }

    #[test]
    fn one_host_shares_its_nic_and_disk_between_all_nodes_and_targets() {
        let mut h = hw();
        h.shared_host = true;
        let mut r = Resources::new(h, 4);
        let one = bytes_ns(1 << 20, hw().nic_bytes) + 5_000;
        // Two independent pairs of nodes, one loopback: the second message waits for the first.
        let a = r.message(
            Instant::ZERO,
            (NodeId(0), NodeId(1)),
            1 << 20,
            Duration::ZERO,
            &mut Rng::new(1),
        );
        let b = r.message(
            Instant::ZERO,
            (NodeId(2), NodeId(3)),
            1 << 20,
            Duration::ZERO,
            &mut Rng::new(1),
        );
        assert_eq!((a.0, b.0), (one, 2 * one));
        let lat = Duration::ZERO;
        let x = r.ssd(
            (TargetId(1), Instant::ZERO),
            1 << 20,
            true,
            lat,
            &mut Rng::new(1),
        );
        let y = r.ssd(
            (TargetId(2), Instant::ZERO),
            1 << 20,
            true,
            lat,
            &mut Rng::new(1),
        );
        let w = bytes_ns(1 << 20, hw().ssd_write_bytes);
        let s = ns(hw().ssd_sync);
        assert_eq!(
            (x.0, y.0),
            (w + s, 2 * w + s),
            "two targets, one disk, its write bandwidth"
        );
    }

    #[test]
    fn cpu_cores_serve_in_parallel_up_to_their_count() {
        let mut h = hw();
        h.cpu_cores = 2;
        h.cpu_request = Duration::from_micros(100);
        h.cpu_byte_ns = 0.0;
        let mut r = Resources::new(h, 4);
        let at: Vec<u64> = (1..4)
            .map(|s| {
                r.message(
                    Instant::ZERO,
                    (NodeId(s), NodeId(0)),
                    0,
                    Duration::ZERO,
                    &mut Rng::new(1),
                )
                .0
            })
            .collect();
        assert_eq!(
            at,
            [105_000, 105_000, 205_000],
            "two at once, the third waits"
        );
    }

    #[test]
    fn cpu_beside_a_path_delays_no_lone_message_but_bounds_a_busy_host() {
        let mut h = hw();
        h.cpu_cores = 2;
        h.cpu_request = Duration::from_micros(100);
        h.cpu_byte_ns = 0.0;
        h.cpu_overlap = Duration::from_micros(300);
        let arrivals = |h: Hardware, n: u16| {
            let mut r = Resources::new(h, 4);
            let mut rng = Rng::new(1);
            (1..=n)
                .map(|s| {
                    let pair = (NodeId(s.into()), NodeId(0));
                    r.message(Instant::ZERO, pair, 0, Duration::ZERO, &mut rng)
                        .0
                })
                .collect::<Vec<u64>>()
        };
        assert_eq!(arrivals(h.clone(), 1), [105_000], "alone, as without it");
        // The first message's work beside its path holds the second core until 305 us; the
        // second's holds the first from 205 us, so the third waits for the second core.
        assert_eq!(arrivals(h.clone(), 3), [105_000, 205_000, 405_000]);
        // A store's work beside its path is per byte, a write's at its own rate.
        h.cpu_overlap = Duration::ZERO;
        h.cpu_overlap_write_byte_ns = 0.5;
        let mut r = Resources::new(h, 4);
        let at = (NodeId(0), Instant::ZERO);
        r.store_cpu(at, 200_000, false);
        r.store_cpu(at, 200_000, true);
        r.store_cpu(at, 400_000, true);
        let m = r.message(
            Instant::ZERO,
            (NodeId(1), NodeId(0)),
            0,
            Duration::ZERO,
            &mut Rng::new(1),
        );
        // Reads cost nothing here; the writes hold the cores for 100 and 200 us, so the
        // message's 100 us start when the first is free.
        assert_eq!(m.0, 200_000);
    }

    #[test]
    fn a_stores_own_cpu_waits_for_a_free_core_and_then_holds_it() {
        let mut h = hw();
        h.cpu_cores = 2;
        h.cpu_store = t3fs_scenario::hardware::StoreCpu {
            read: Duration::from_micros(30),
            read_byte_ns: 0.0,
            write: Duration::from_micros(50),
            write_byte_ns: 0.25,
        };
        let mut r = Resources::new(h.clone(), 1);
        let at = (NodeId(0), Instant::ZERO);
        // Alone, each starts at once: two cores, two operations (a write of 200 us, a read).
        assert_eq!(r.store_cpu(at, 600_000, true), Instant::ZERO);
        assert_eq!(r.store_cpu(at, 4096, false), Instant::ZERO);
        // The third waits for the first core free: the read's, at 30 us.
        assert_eq!(r.store_cpu(at, 4096, false).0, 30_000);
        // Without it, nothing waits, however busy the cores.
        h.cpu_store = Default::default();
        let mut r = Resources::new(h, 1);
        for _ in 0..4 {
            assert_eq!(r.store_cpu(at, 1 << 20, true), Instant::ZERO);
        }
    }

    #[test]
    fn ssds_bind_on_iops_for_small_and_bandwidth_for_large_operations() {
        let t = TargetId(1);
        let lat = Duration::from_micros(100);
        let mut r = Resources::new(hw(), 1);
        let small: Vec<Instant> = (0..1000)
            .map(|_| r.ssd((t, Instant::ZERO), 4096, false, lat, &mut Rng::new(1)))
            .collect();
        // 80k IOPS: 1000 operations start 12.5 us apart.
        let last = small.iter().max().expect("some").0;
        assert!((12_400_000..12_700_000).contains(&last), "{last}");
        let mut r = Resources::new(hw(), 1);
        let big = (0..10)
            .map(|_| r.ssd((t, Instant::ZERO), 1 << 20, false, lat, &mut Rng::new(1)))
            .max()
            .expect("some");
        // 500 MB/s: ten MiB in ~21 ms.
        let want = 10 * bytes_ns(1 << 20, 500e6);
        assert!(
            big.0 >= want && big.0 < want + 200_000,
            "{} vs {want}",
            big.0
        );
        // Queue depth 1: operations run one after another.
        let mut h = hw();
        h.ssd_queue_depth = 1;
        let mut r = Resources::new(h, 1);
        let done: Vec<u64> = (0..3)
            .map(|_| r.ssd((t, Instant::ZERO), 0, false, lat, &mut Rng::new(1)).0)
            .collect();
        assert_eq!(done, [100_000, 200_000, 300_000]);
    }

    #[test]
    fn spreads_follow_their_median_and_tail_and_draw_nothing_when_absent() {
        let quantiles = |mut v: Vec<u64>| {
            v.sort();
            (v[v.len() / 2] as f64, v[v.len() * 99 / 100] as f64)
        };
        let mut h = hw();
        h.nic_message_p99 = h.nic_message * 3;
        h.ssd_sync_p99 = h.ssd_sync * 2;
        h.ssd_transfer_spread = 1.1; // Reads only: the write below draws its own.
        h.ssd_write_spread = 1.5;
        let mut rng = Rng::new(5);
        let (mut msg, mut write) = (Vec::new(), Vec::new());
        for _ in 0..20_000 {
            let mut r = Resources::new(h.clone(), 2);
            let z = Duration::ZERO;
            msg.push(
                r.message(Instant::ZERO, (NodeId(0), NodeId(1)), 0, z, &mut rng)
                    .0,
            );
            write.push(
                r.ssd((TargetId(1), Instant::ZERO), 1 << 20, true, z, &mut rng)
                    .0,
            );
        }
        let (p50, p99) = quantiles(msg);
        assert!((p50 / 5_000.0 - 1.0).abs() < 0.05, "message p50 {p50}");
        assert!((p99 / 15_000.0 - 1.0).abs() < 0.15, "message p99 {p99}");
        // A write: its transfer (spread 1.5) then its sync (200 us, 400 us at the p99).
        let transfer = bytes_ns(1 << 20, h.ssd_write_bytes) as f64;
        let (p50, p99) = quantiles(write);
        assert!(
            (p50 / (transfer + 200_000.0) - 1.0).abs() < 0.05,
            "write p50 {p50}"
        );
        assert!(p99 > transfer * 1.3 + 300_000.0, "write p99 {p99}");
        // No spread given: nothing drawn, the generator untouched.
        let (mut a, b) = (Rng::new(9), Rng::new(9));
        let mut r = Resources::new(hw(), 2);
        r.message(
            Instant::ZERO,
            (NodeId(0), NodeId(1)),
            9,
            Duration::ZERO,
            &mut a,
        );
        r.ssd(
            (TargetId(1), Instant::ZERO),
            9,
            true,
            Duration::ZERO,
            &mut a,
        );
        assert_eq!(a.clone().unit(), b.clone().unit());
    }

    #[test]
    fn ssd_latencies_follow_the_profiles_median_and_tail() {
        let r = Resources::new(hw(), 1);
        let mut rng = Rng::new(3);
        let mut v: Vec<Duration> = (0..20_000).map(|_| r.ssd_latency(&mut rng)).collect();
        v.sort();
        let (p50, p99) = (v[10_000].as_secs_f64(), v[19_800].as_secs_f64());
        assert!((p50 / 150e-6 - 1.0).abs() < 0.05, "p50 {p50}");
        assert!((p99 / 1500e-6 - 1.0).abs() < 0.15, "p99 {p99}");
    }
}
