//! One SSD served by processor sharing, for profiles with `ssd_concurrency`: every operation in
//! service progresses at once, each at `min(1, C / n)` of its lone speed when `n` are in
//! service (`C`, the profile's concurrency for its kind: the lone operations' worth of work the
//! device does at once). So an operation is slowed by every one that overlaps it, including
//! one that arrives after it, as durable writes on one virtual disk lengthen each other (two
//! writers beside a third double its 1 MiB write and fdatasync; CPU-bound neighbours do not),
//! where a FIFO queue would let the first finish at full speed and delay only the later ones.
//!
//! An operation's work is its lone service time: its transfer at its lone rate (with its drawn
//! spread) and, for a mutation, its durability point. It enters service after its access
//! latency, which holds nothing. A mutation's durability point is a device flush, and a flush
//! waits for the writes in flight when it is issued: once its own transfer is done, a mutation
//! is blocked (holding no share) until every other mutation then still transferring has
//! finished its transfer, and only then does its sync's work run. On the 2026-12-03 host a
//! 1 MiB O_DIRECT write's `fdatasync` took 55 us alone, 247 us beside one other writer's
//! writes in flight and 407 us beside two, and 53 to 79 us after another file's writes had
//! completed (`scripts/calibration/flush_waits.py`): a flush costs what is in flight, not what
//! was written before it. It moves what overlaps: on the 2026-12-03 calibrate run the mixed
//! job's write p99 went from 23% short to 1% over, the 8-stream write's IOPS error from +7.8%
//! to +7.4% (`scripts/calibration/model_ab.py`); at depth 1 the simulated head's update ends
//! before the middle's write starts, so nothing waits there.
//!
//! Because a later arrival can only postpone an operation, [`Sharing::admit`] gives the
//! earliest it can finish and [`Sharing::check`], asked when that time comes, says whether it
//! did or when it now will; the simulator re-arms its completion until then. Mutations of one
//! chunk finish in admission order (the `ChunkStore` contract).
//!
//! Invariants: work is never negative and never grows; the state only moves forward in time;
//! everything is a function of the admissions and the times asked (no clock, no randomness).
//! Not here: queue depth and IOPS pacing (resources.rs, unchanged), what a kind's concurrency
//! is (the profile's, from calibrate's probe).

use std::collections::BTreeMap;

/// Who an operation is: its node's index, the node's incarnation and its I/O id there (a
/// restarted node reuses ids).
pub type Key = (usize, u64, u64);

/// An operation waiting for its latency or in service.
#[derive(Clone, Debug)]
struct Job {
    /// When it enters service (ns).
    enters: u64,
    /// Lone work left of its transfer (ns of service at full speed).
    left: f64,
    /// Lone work left of its sync (a mutation's durability point), which runs after the
    /// transfer once nothing it waits for is still transferring.
    sync: f64,
    /// Once its transfer is done: the mutations that were transferring then, which its flush
    /// waits for (`None` while it transfers).
    waits: Option<Vec<Key>>,
    /// Its kind's concurrency.
    concurrency: f64,
    /// Time after its service until its node has it (the store's wake-up), holding nothing.
    tail: u64,
    /// Admission order, and the chunk whose mutations must finish in that order.
    seq: u64,
    order: Option<u128>,
}

/// A finished job: when its node has it, and its order.
type Finished = (u64, (u64, Option<u128>));

/// The operations of one SSD.
#[derive(Clone, Debug, Default)]
pub struct Sharing {
    at: u64,
    jobs: BTreeMap<Key, Job>,
    /// Finished and not yet asked about.
    finished: BTreeMap<Key, Finished>,
    seq: u64,
    /// Time with at least one operation in service (ns), for the report.
    pub busy_ns: u64,
}

impl Sharing {
    /// Admits operation `key` at `now`, entering service at `enters` with `work` ns of lone
    /// work (its transfer, and a mutation's sync) and `tail` ns after it, with its kind's
    /// concurrency and, for a mutation, its chunk (`kind`): the earliest its node can have it
    /// (ns).
    pub fn admit(
        &mut self,
        now: u64,
        key: Key,
        (enters, (work, sync), tail): (u64, (u64, u64), u64),
        kind: (f64, Option<u128>),
    ) -> u64 {
        self.advance(now);
        self.seq += 1;
        let job = Job {
            enters: enters.max(now),
            left: work as f64,
            sync: sync as f64,
            waits: None,
            tail,
            concurrency: kind.0.max(1e-9),
            seq: self.seq,
            order: kind.1,
        };
        self.jobs.insert(key, job);
        self.projected(key)
    }

    /// Asked at `now` whether its node has `key`: `Ok(())` if so (it is then forgotten, and an
    /// operation not admitted here is had at once), else `Err(later)`, the earliest it can.
    pub fn check(&mut self, now: u64, key: Key) -> Result<(), u64> {
        self.advance(now);
        if let Some(order) = self.jobs.get(&key).map(|j| (j.seq, j.order)) {
            return Err(self.projected(key).max(now + 1).max(self.before(order)));
        }
        let Some(&(had, order)) = self.finished.get(&key) else {
            return Ok(());
        };
        let later = had.max(self.before(order));
        if later > now {
            return Err(later);
        }
        self.finished.remove(&key);
        Ok(())
    }

    /// Forgets `key` (its node crashed: its completion will never be asked for).
    pub fn forget(&mut self, key: Key) {
        self.jobs.remove(&key);
        self.finished.remove(&key);
    }

    /// Operations in service or waiting for their latency.
    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.jobs.len()
    }

    /// The latest its node can have a mutation of the same chunk admitted before, not yet had.
    fn before(&self, (seq, order): (u64, Option<u128>)) -> u64 {
        let Some(o) = order else { return 0 };
        let pending = self
            .jobs
            .iter()
            .filter(|(_, j)| j.order == Some(o) && j.seq < seq)
            .map(|(k, _)| self.projected(*k));
        let finished = self
            .finished
            .values()
            .filter(|(_, (s, or))| *or == Some(o) && *s < seq)
            .map(|(had, _)| *had);
        pending.chain(finished).max().unwrap_or(0)
    }

    /// When its node has `key` if nothing more arrives.
    fn projected(&self, key: Key) -> u64 {
        let mut future = self.clone();
        loop {
            if let Some(&(f, _)) = future.finished.get(&key) {
                return f;
            }
            let Some(next) = future.next_event() else {
                return future.at;
            };
            future.advance(next);
        }
    }

    /// The next time something changes: an entry into service, the end of a transfer or a
    /// finish. (A flush's wait ends with a transfer, so it is never an event of its own.)
    fn next_event(&self) -> Option<u64> {
        let entry = self
            .jobs
            .values()
            .filter(|j| j.enters > self.at)
            .map(|j| j.enters)
            .min();
        let n = self.serving() as f64;
        let step = self
            .jobs
            .values()
            .filter(|j| self.runs(j))
            .map(|j| {
                let work = if j.waits.is_none() { j.left } else { j.sync };
                self.at + (work / rate(j.concurrency, n) - 1e-6).ceil().max(1.0) as u64
            })
            .min();
        match (entry, step) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether `j` is transferring now.
    fn transferring(&self, j: &Job) -> bool {
        j.enters <= self.at && j.waits.is_none()
    }

    /// Whether `j` holds a share now: it transfers, or it syncs with nothing it waits for
    /// still transferring.
    fn runs(&self, j: &Job) -> bool {
        match &j.waits {
            None => j.enters <= self.at,
            Some(keys) => !keys
                .iter()
                .any(|k| self.jobs.get(k).is_some_and(|o| self.transferring(o))),
        }
    }

    fn serving(&self) -> usize {
        self.jobs.values().filter(|j| self.runs(j)).count()
    }

    /// Moves the state to `t`, event by event.
    fn advance(&mut self, t: u64) {
        while self.at < t {
            let step_to = self.next_event().map_or(t, |e| e.min(t)).max(self.at + 1);
            let dt = (step_to - self.at) as f64;
            let n = self.serving() as f64;
            if n > 0.0 {
                self.busy_ns += step_to - self.at;
            }
            let running: Vec<Key> = self
                .jobs
                .iter()
                .filter(|(_, j)| self.runs(j))
                .map(|(k, _)| *k)
                .collect();
            let mut synced = Vec::new();
            for k in &running {
                let j = self.jobs.get_mut(k).expect("running");
                let work = if j.waits.is_none() {
                    &mut j.left
                } else {
                    &mut j.sync
                };
                *work -= dt * rate(j.concurrency, n);
                if *work <= 0.5 {
                    synced.push(*k);
                }
            }
            self.at = step_to;
            // Transfers that ended: a mutation's flush now waits for the mutations still
            // transferring (judged after every transfer of this step has ended).
            let ended: Vec<Key> = synced
                .iter()
                .copied()
                .filter(|k| self.jobs[k].waits.is_none() && self.jobs[k].sync > 0.5)
                .collect();
            for k in &ended {
                self.jobs.get_mut(k).expect("ended").waits = Some(Vec::new());
            }
            for k in &ended {
                let waits: Vec<Key> = self
                    .jobs
                    .iter()
                    .filter(|(o, j)| *o != k && j.order.is_some() && self.transferring(j))
                    .map(|(o, _)| *o)
                    .collect();
                self.jobs.get_mut(k).expect("ended").waits = Some(waits);
            }
            for k in synced.into_iter().filter(|k| !ended.contains(k)) {
                if let Some(j) = self.jobs.remove(&k) {
                    self.finished
                        .insert(k, (step_to + j.tail, (j.seq, j.order)));
                }
            }
        }
    }
}

/// A job's speed with `n` in service: its share of the device's concurrency, at most 1.
fn rate(concurrency: f64, n: f64) -> f64 {
    (concurrency / n.max(1.0)).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: (f64, Option<u128>) = (1.0, None);

    #[test]
    fn a_lone_operation_takes_its_work() {
        let mut s = Sharing::default();
        assert_eq!(s.admit(0, (0, 0, 1), (10, (100, 0), 0), ONE), 110);
        assert_eq!(s.check(109, (0, 0, 1)), Err(110));
        assert_eq!(s.check(110, (0, 0, 1)), Ok(()));
        assert_eq!(s.in_flight(), 0);
    }

    #[test]
    fn a_later_arrival_slows_the_first_too() {
        let mut s = Sharing::default();
        assert_eq!(s.admit(0, (0, 0, 1), (0, (100, 0), 0), ONE), 100);
        // Arrives half way: both share the device from 50 on.
        assert_eq!(s.admit(50, (0, 0, 2), (50, (100, 0), 0), ONE), 200);
        // The first is not done when it first expected to be: 50 left at half speed.
        assert_eq!(s.check(100, (0, 0, 1)), Err(150));
        assert_eq!(s.check(150, (0, 0, 1)), Ok(()));
        assert_eq!(s.check(200, (0, 0, 2)), Ok(()));
    }

    #[test]
    fn concurrency_lets_operations_overlap_without_slowing() {
        let mut s = Sharing::default();
        let kind = (2.0, None);
        assert_eq!(s.admit(0, (0, 0, 1), (0, (100, 0), 0), kind), 100);
        assert_eq!(s.admit(0, (0, 0, 2), (0, (100, 0), 0), kind), 100);
        // A third shares two operations' worth: each at 2/3 speed.
        assert_eq!(s.admit(0, (0, 0, 3), (0, (100, 0), 0), kind), 150);
        assert_eq!(s.check(100, (0, 0, 1)), Err(150));
    }

    #[test]
    fn the_tail_follows_the_service_and_holds_nothing() {
        let mut s = Sharing::default();
        assert_eq!(s.admit(0, (0, 0, 1), (0, (100, 0), 30), ONE), 130);
        // Its tail does not slow the next one.
        assert_eq!(s.admit(100, (0, 0, 2), (100, (100, 0), 0), ONE), 200);
        assert_eq!(s.check(120, (0, 0, 1)), Err(130));
        assert_eq!(s.check(130, (0, 0, 1)), Ok(()));
    }

    #[test]
    fn latency_holds_nothing() {
        let mut s = Sharing::default();
        s.admit(0, (0, 0, 1), (0, (100, 0), 0), ONE);
        // In its latency until 100: the first runs alone.
        assert_eq!(s.admit(0, (0, 0, 2), (100, (100, 0), 0), ONE), 200);
        assert_eq!(s.check(100, (0, 0, 1)), Ok(()));
    }

    #[test]
    fn mutations_of_one_chunk_finish_in_admission_order() {
        let mut s = Sharing::default();
        s.admit(0, (0, 0, 1), (0, (1_000, 0), 0), (1.0, Some(7)));
        s.admit(0, (1, 0, 1), (0, (10, 0), 0), (1.0, Some(7)));
        // The small one would be done at 20; it waits for the first of its chunk.
        let first = s.projected((0, 0, 1));
        assert_eq!(s.check(20, (1, 0, 1)), Err(first));
    }

    #[test]
    fn an_unknown_operation_completes_when_asked_and_a_forgotten_one_frees_the_device() {
        let mut s = Sharing::default();
        assert_eq!(s.check(5, (3, 0, 3)), Ok(()));
        s.admit(5, (0, 0, 1), (5, (100, 0), 0), ONE);
        s.admit(5, (0, 0, 2), (5, (100, 0), 0), ONE);
        s.forget((0, 0, 1));
        assert_eq!(s.check(105, (0, 0, 2)), Ok(()));
    }

    /// Two operations on a device of concurrency 2 (neither slows the other): a mutation
    /// transferring until 100 with a sync of 50, and a second operation admitted at 0.
    fn beside(second: (u64, (u64, u64), u64), order: Option<u128>) -> (Sharing, u64) {
        let mut s = Sharing::default();
        let alone = s.admit(0, (0, 0, 1), (0, (100, 50), 0), (2.0, Some(1)));
        assert_eq!(alone, 150, "alone: its transfer, then its sync");
        let had = s.admit(0, (0, 0, 2), second, (2.0, order));
        (s, had)
    }

    #[test]
    fn a_flush_waits_for_the_writes_in_flight() {
        // The second, a mutation of another chunk, transfers from 60 to 260: the first's
        // flush, issued at 100, waits for it, then syncs.
        let (mut s, second) = beside((60, (200, 10), 0), Some(2));
        assert_eq!(s.projected((0, 0, 1)), 310);
        assert_eq!(s.check(150, (0, 0, 1)), Err(310));
        // The second's own flush waits for nothing still transferring.
        assert_eq!(second, 270);
        assert_eq!(s.check(270, (0, 0, 2)), Ok(()));
        assert_eq!(s.check(310, (0, 0, 1)), Ok(()));
    }

    #[test]
    fn a_flush_waits_for_no_read_and_no_write_yet_to_start() {
        // A read transferring across the flush, and a write still in its latency then.
        for (second, order) in [((60, (200, 0), 0), None), ((120, (200, 10), 0), Some(2))] {
            let (mut s, _) = beside(second, order);
            assert_eq!(s.check(150, (0, 0, 1)), Ok(()), "{second:?}");
        }
    }

    #[test]
    fn a_waiting_flush_holds_no_share() {
        // Concurrency 1: while the first waits for the second's transfer, the second runs
        // at full speed (the first holds no share), then the first syncs alone.
        let mut s = Sharing::default();
        let kind = |c| (1.0, Some(c));
        s.admit(0, (0, 0, 1), (0, (100, 50), 0), kind(1));
        s.admit(50, (0, 0, 2), (50, (100, 0), 0), kind(2));
        // Both transfer at half speed from 50: the first's ends at 150, the second's has 50
        // left, alone at full speed until 200; then the first's sync, 200 to 250.
        assert_eq!(s.check(200, (0, 0, 2)), Ok(()));
        assert_eq!(s.projected((0, 0, 1)), 250);
    }
}
