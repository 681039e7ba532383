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
//! With `ssd_read_concurrency` and `ssd_write_concurrency` (a profile measured by calibrate)
//! the SSD is shared instead of queued (`sharing.rs`): an operation's work, its own transfer
//! at its lone rate with its drawn factor plus a mutation's sync, is served beside every other
//! operation in service, each at `min(1, C / n)` of its lone speed with `n` in service, so a
//! later operation slows an earlier one too, as concurrent durable writes on one virtual disk
//! lengthen each other; the time returned is the earliest, and the world asks
//! [`Resources::ssd_check`] when it comes (re-arming the completion until the operation is
//! done). A mutation's sync is a flush that first waits for the other mutations' transfers in
//! flight when its own ends (the flush barrier). The transfer queue and bandwidths are then not
//! used; queue depth and IOPS pacing are.
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
    /// The operations in service, with `ssd_*_concurrency` (`sharing.rs`).
    sharing: sharing::Sharing,
    ops: u64,
}

/// The resources of every node and target.
pub struct Resources {
    hw: Hardware,
    tx: Vec<Server>,
    rx: Vec<Server>,
    cpu: Vec<Vec<Server>>,
    ssds: BTreeMap<TargetId, Ssd>,
    /// The SSD of each operation a shared SSD serves, until its node has it.
    shared: BTreeMap<sharing::Key, TargetId>,
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
            shared: BTreeMap::new(),
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
    /// its durability point, where the profile gives them. `who` names the operation and, for a
    /// mutation, its chunk: on an SSD the operations share (`ssd_*_concurrency`), the time
    /// returned is the earliest, and [`Resources::ssd_check`] says when it comes whether it is.
    pub fn ssd(
        &mut self,
        (target, now): (TargetId, Instant),
        (bytes, write): (usize, bool),
        latency: Duration,
        who: (sharing::Key, Option<u128>),
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
            sharing: Default::default(),
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
        // A shared SSD has no transfer queue: its sharing serves the bytes.
        let shared = hw.ssd_read_concurrency > 0.0;
        let moved = if shared {
            start
        } else {
            ssd.transfer.serve(start, transfer)
        };
        let (lone, spread_of, concurrency) = if write {
            let c = hw.ssd_write_concurrency;
            (hw.ssd_write_lone_bytes, hw.ssd_write_spread, c)
        } else {
            (
                hw.ssd_lone_bytes,
                hw.ssd_transfer_spread,
                hw.ssd_read_concurrency,
            )
        };
        let own = bytes_ns(bytes, lone) as f64 * spread(rng, spread_of);
        let slow = Instant(start.0 + own as u64);
        // A mutation is done at its durability point, a sync after its bytes.
        let sync = if write {
            ns(lognormal(rng, hw.ssd_sync, hw.ssd_sync_p99))
        } else {
            0
        };
        if shared {
            // Shared: its own transfer and sync are its work, served beside every other's.
            let wake = ns(lognormal(rng, hw.ssd_wake, hw.ssd_wake_p99));
            let work = (Instant(start.0 + ns(latency)).0, (own as u64, sync), wake);
            let had = ssd.sharing.admit(now.0, who.0, work, (concurrency, who.1));
            ssd.slots[slot] = Instant(had - wake);
            ssd.ops += 1;
            self.shared.insert(who.0, target);
            return Instant(had);
        }
        let done = Instant(Instant(start.0 + ns(latency)).max(moved).max(slow).0 + sync);
        ssd.slots[slot] = done;
        // The node has it after the store's wake-up, which holds no slot (`lognormal` draws
        // nothing for a zero median, so profiles without it draw as before).
        let done = Instant(done.0 + ns(lognormal(rng, hw.ssd_wake, hw.ssd_wake_p99)));
        ssd.ops += 1;
        done
    }

    /// Asked when operation `key` was to complete, at `now`: `None` if its node has it (or it
    /// is not on a shared SSD), else when it now will.
    pub fn ssd_check(&mut self, key: sharing::Key, now: Instant) -> Option<Instant> {
        let target = *self.shared.get(&key)?;
        let ssd = self.ssds.get_mut(&target)?;
        match ssd.sharing.check(now.0, key) {
            Ok(()) => {
                self.shared.remove(&key);
                None
            }
            Err(later) => Some(Instant(later)),
        }
    }

    /// Forgets operation `key` (its node went down before it completed).
    pub fn ssd_forget(&mut self, key: sharing::Key) {
        if let Some(t) = self.shared.remove(&key) {
            if let Some(ssd) = self.ssds.get_mut(&t) {
                ssd.sharing.forget(key);
            }
        }
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
        // A shared SSD is busy while anything is in service; a queued one while it transfers.
        let busy = |s: &Ssd| s.transfer.busy_ns + s.sharing.busy_ns;
        if let Some((t, s)) = self.ssds.iter().max_by_key(|(_, s)| busy(s)) {
            let what = if self.hw.ssd_read_concurrency > 0.0 {
                "in service"
            } else {
                "transfer"
            };
            out.push(format!(
                "busiest SSD {what}: {t} {:.1}% ({} operations)",
                busy(s) as f64 / total * 100.0,
                s.ops
            ));
        }
        out
    }
}

pub mod sharing;
#[cfg(test)]
mod tests;
