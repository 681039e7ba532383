//! Phased jobs in the flow model: smallpond GraySort's shuffle then sort, a checkpoint's save
//! then load. A phase is a number of equal tasks run on task slots, a slot being `task_cores`
//! of one client's cores; a scheduler hands each free slot the next task (slots interleaved
//! over clients, so tasks spread evenly), and the next phase starts when the last task of this
//! one ends, as smallpond's stages do. A task moves its bytes in units; each unit is one flow
//! over, as the phase says:
//!
//! - reading: SSD → storage NIC → (fabric core) → client NIC, from a random replica of a random
//!   chain (CRAQ reads any serving replica);
//! - processing: the slot's CPU, a resource of the phase's per-core rate (bytes of the phase's
//!   data per second) times what the task's cores are worth together (the scenario's Amdahl
//!   speedup, `pipeline_run.rs`);
//! - writing: client NIC → head → … → tail down a random chain, every replica writing its SSD.
//!
//! A unit's one rate stands for a task that reads, transforms and writes at the same pace
//! (reads and writes equal the phase's data): the slowest of the three binds it, as a pipelined
//! task's throughput is its slowest stage's. Deterministic: chains and replicas from the seeded
//! stream, tasks in slot order.
//!
//! A task may hold its slot for a start-up time before its first unit moves (the framework's
//! own cost of starting a task, `task_startup_s`), during which it uses nothing.
//!
//! Not here: a task's stages one after another (a task here reads,
//! computes and writes at one pace; smallpond's load, then sort, then dump), memory and
//! spilling, and a resource crossed twice by one unit (a
//! read served by a node that also forwards the write counts once: a path lists a resource
//! once); the scenario files say where each rate comes from.

use t3fs_scenario::rng::Rng;

use super::engine::{Request, Source};
use super::layout::Layout;

/// One phase as the source runs it.
#[derive(Clone, Debug)]
pub struct Phase {
    /// Its name (shuffle, sort, save, load).
    pub name: String,
    /// Tasks in the phase.
    pub tasks: u32,
    /// Bytes each task moves.
    pub task_bytes: f64,
    /// Whether a task reads its bytes from storage.
    pub read: bool,
    /// Whether a task writes its bytes to storage (replicated down a chain).
    pub write: bool,
    /// Each client's slots: the CPU resource of each (`None`: the phase has no CPU bound).
    pub slots: Vec<Vec<Option<u32>>>,
    /// Bytes per flow.
    pub unit: f64,
    /// Seconds a task holds its slot before its first unit's bytes move (start-up).
    pub startup: f64,
}

/// A task slot of the running phase.
struct Slot {
    client: u32,
    cpu: Option<u32>,
    /// Bytes of its task not yet issued.
    left: f64,
    /// Whether its next unit is its task's first (which waits out the start-up).
    first: bool,
}

/// The phases, run one after another.
pub struct Pipeline<'a> {
    layout: &'a Layout,
    phases: Vec<Phase>,
    rng: Rng,
    latency: f64,
    /// The phase running.
    current: usize,
    /// Its tasks not yet started.
    queued: u32,
    /// Its slots in scheduling order.
    slots: Vec<Slot>,
    /// Its slots holding a task.
    busy: usize,
    /// When each phase ended, seconds.
    pub ended: Vec<f64>,
}

impl<'a> Pipeline<'a> {
    /// `phases` on `layout` (whose resources include the slots' CPUs), drawing from `seed`;
    /// every flow waits `latency` before its bytes move.
    pub fn new(layout: &'a Layout, phases: Vec<Phase>, seed: u64, latency: f64) -> Self {
        Self {
            layout,
            phases,
            rng: Rng::new(seed),
            latency,
            current: 0,
            queued: 0,
            slots: Vec::new(),
            busy: 0,
            ended: Vec::new(),
        }
    }

    /// Lays out phase `i`'s slots and gives each a task while tasks remain.
    fn begin(&mut self, i: usize, out: &mut Vec<Request>) {
        self.current = i;
        let ph = &self.phases[i];
        let per_client = ph.slots.iter().map(Vec::len).max().unwrap_or(0);
        self.slots = (0..per_client)
            .flat_map(|s| {
                ph.slots.iter().enumerate().filter_map(move |(c, v)| {
                    v.get(s).map(|&cpu| Slot {
                        client: c as u32,
                        cpu,
                        left: 0.0,
                        first: false,
                    })
                })
            })
            .collect();
        self.queued = ph.tasks;
        self.busy = 0;
        for k in 0..self.slots.len() {
            if self.queued == 0 {
                break;
            }
            self.busy += 1;
            self.take_task(k, out);
        }
    }

    /// Slot `k` takes the next task and issues its first unit.
    fn take_task(&mut self, k: usize, out: &mut Vec<Request>) {
        self.queued -= 1;
        self.slots[k].left = self.phases[self.current].task_bytes;
        self.slots[k].first = true;
        self.unit(k, out);
    }

    /// Slot `k`'s next unit.
    fn unit(&mut self, k: usize, out: &mut Vec<Request>) {
        let ph = &self.phases[self.current];
        let bytes = ph.unit.min(self.slots[k].left);
        self.slots[k].left -= bytes;
        let startup = if std::mem::take(&mut self.slots[k].first) {
            ph.startup
        } else {
            0.0
        };
        let (read, write) = (ph.read, ph.write);
        let Slot { client, cpu, .. } = self.slots[k];
        let l = self.layout;
        let mut path = Vec::new();
        if read {
            let (node, disk) = l.random_replica(&mut self.rng, None);
            path.extend(l.read_path(node, disk, client));
        }
        path.extend(cpu);
        if write {
            let chain = self.rng.below(u64::from(l.chains())) as u32;
            for x in l.write_path(client, chain) {
                if !path.contains(&x) {
                    path.push(x);
                }
            }
        }
        out.push(Request {
            path,
            bytes,
            delay: self.latency + startup,
            tag: k as u64,
        });
    }
}

impl Source for Pipeline<'_> {
    fn start(&mut self, out: &mut Vec<Request>) {
        if !self.phases.is_empty() {
            self.begin(0, out);
        }
    }

    fn done(&mut self, tag: u64, now: f64, out: &mut Vec<Request>) {
        let k = tag as usize;
        if self.slots[k].left > 0.0 {
            return self.unit(k, out);
        }
        if self.queued > 0 {
            return self.take_task(k, out);
        }
        self.busy -= 1;
        if self.busy == 0 {
            self.ended.push(now);
            if self.current + 1 < self.phases.len() {
                self.begin(self.current + 1, out);
            }
        }
    }

    fn finished(&self) -> bool {
        self.ended.len() == self.phases.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::engine;
    use crate::perf::hardware::Hardware;
    use t3fs_scenario::chain_table::ChainTable;

    /// A 3-node cluster with one client and SSDs, NICs as the profile has them.
    fn cluster() -> Layout {
        let hw = Hardware::threefs_2025();
        let table = ChainTable::balanced(3, 1, 3).expect("table");
        Layout::new(&hw, 3, 1, table, 0.0)
    }

    fn phase(l: &mut Layout, tasks: u32, slots: u32, cpu: Option<f64>) -> Phase {
        let slots = vec![(0..slots).map(|_| cpu.map(|c| l.add(c))).collect()];
        Phase {
            name: "p".into(),
            tasks,
            task_bytes: 1e9,
            read: true,
            write: true,
            slots,
            unit: 1e8,
            startup: 0.0,
        }
    }

    #[test]
    fn cpu_binds_a_phase_and_tasks_run_in_waves_over_the_slots() {
        // 4 tasks of 1 GB on 2 slots of 0.5 GB/s each: two waves of 2 s, whatever the NICs.
        let mut l = cluster();
        let ph = phase(&mut l, 4, 2, Some(0.5e9));
        let mut src = Pipeline::new(&l, vec![ph], 1, 0.0);
        engine::run(&l.caps, &mut src, 100.0, 1.0, 0.0, |_| {});
        assert!(src.finished());
        assert!((src.ended[0] - 4.0).abs() < 1e-6, "{:?}", src.ended);
    }

    #[test]
    fn a_tasks_start_up_holds_its_slot_once_per_task() {
        // The same two waves, each task first holding its slot for 0.5 s: 2 x (0.5 + 2) s.
        let mut l = cluster();
        let ph = Phase {
            startup: 0.5,
            ..phase(&mut l, 4, 2, Some(0.5e9))
        };
        let mut src = Pipeline::new(&l, vec![ph], 1, 0.0);
        engine::run(&l.caps, &mut src, 100.0, 1.0, 0.0, |_| {});
        assert!((src.ended[0] - 5.0).abs() < 1e-6, "{:?}", src.ended);
    }

    #[test]
    fn a_write_crosses_every_replica_and_phases_run_one_after_another() {
        let mut l = cluster();
        let a = Phase {
            read: false,
            ..phase(&mut l, 1, 1, None)
        };
        let b = Phase {
            write: false,
            ..phase(&mut l, 1, 1, None)
        };
        let mut src = Pipeline::new(&l, vec![a, b], 1, 0.0);
        let mut ssd = 0.0;
        let ssds: Vec<u32> = (0..3)
            .flat_map(|n| (0..16).map(move |d| (n, d)))
            .map(|(n, d)| l.ssd(n, d))
            .collect();
        engine::run(&l.caps, &mut src, 100.0, 0.5, 0.0, |s| {
            ssd += ssds.iter().map(|&x| s.bytes[x as usize]).sum::<f64>();
        });
        assert_eq!(src.ended.len(), 2);
        assert!(src.ended[0] < src.ended[1]);
        // Phase a writes 1 GB to three replicas, phase b reads it from one.
        assert!((ssd - 4e9).abs() < 1e3, "{ssd}");
    }
}
