//! The chunk store's fault layer: disk faults a real run injects into a storage node's targets,
//! obeyed by [`FaultyStore`], a [`ChunkStore`] wrapping the real one. Three modes, as the
//! simulator's disk has them: every operation failing with EIO (`fail_disk`: the storage
//! machine takes the target OFFLINE), updates refused with ENOSPC (`fill_disk`), and an added
//! latency drawn per operation (`slow_disk`). Set as a whole, [`DiskFaults`], through the node's
//! control endpoint (`PUT /disk?QUERY`, metrics.rs, authenticated by the cluster token).
//!
//! A fourth, one-shot: `rot=N` asks for N rots in all (`corrupt_chunk`); each flips one bit of
//! one committed chunk's bytes on disk (`rot.rs`) at the next operation of a target holding
//! one, and the store's read check must catch it.
//!
//! Invariants: with no fault set an operation costs one atomic load more (two with rots asked); a refused operation
//! never reaches the real store (nothing is written for it). A slow disk holds each operation
//! back before it reaches the store, as a device queue would: mutations reach the store in
//! submission order (never overtaking each other), while a read may overtake mutations
//! submitted before it and then sees the committed state they have not changed yet, as reads of
//! the simulator's slow disk do. A planted `tail-ack-before-commit` shows up exactly there. The modes end with the process, as a healed disk's do in the
//! simulator. Not here: which faults a scenario sets when (scenario_run), or torn writes (the
//! power-loss tests' `durable::fs::DurableFs` seam).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use t3fs_core::chunk::{ChunkDone, ChunkError, ChunkOp, ChunkStore};
use t3fs_core::ids::IoId;

use super::Rot;
use crate::fault_query::{flag, pairs, span, span_text};
use crate::jitter::Jitter;

/// One storage node's disk faults (every target of the node).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskFaults {
    /// Every operation fails with EIO.
    pub eio: bool,
    /// Updates and installs fail with ENOSPC.
    pub full: bool,
    /// Each operation is held back a uniform time in this range before it runs.
    pub latency: Option<(Duration, Duration)>,
    /// Rots asked of this process so far (`corrupt_chunk`): each flips one bit of one committed
    /// chunk's stored bytes, at the next operation of a target that holds one.
    pub rot: u32,
    /// Every operation is held, unanswered, until the fault is cleared: a hung disk or a dead
    /// controller. The node's chunk I/O deadline (`node::io_deadline`) must notice it.
    pub hang: bool,
}

impl DiskFaults {
    /// No fault at all.
    pub fn is_clear(&self) -> bool {
        *self == Self::default()
    }

    /// The control endpoint's query string (`eio=0&full=1&latency_us=50000-200000&rot=0`).
    pub fn to_query(&self) -> String {
        format!(
            "eio={}&full={}&latency_us={}&rot={}&hang={}",
            u8::from(self.eio),
            u8::from(self.full),
            span_text(self.latency.unwrap_or_default()),
            self.rot,
            u8::from(self.hang)
        )
    }

    /// Whether every mode that acts on each operation is off (rots are one-shot).
    fn modes_clear(&self) -> bool {
        !self.eio && !self.full && self.latency.is_none() && !self.hang
    }

    /// Parses [`to_query`](Self::to_query)'s text; every key must be known and every value valid.
    pub fn parse(query: &str) -> Result<Self, String> {
        let mut f = Self::default();
        for pair in pairs(query) {
            let (k, v) = pair?;
            match k {
                "eio" => f.eio = flag(k, v)?,
                "full" => f.full = flag(k, v)?,
                "latency_us" => {
                    let (a, b) = span(k, v)?;
                    f.latency = (b > Duration::ZERO).then_some((a, b));
                }
                "hang" => f.hang = flag(k, v)?,
                "rot" => {
                    f.rot = v
                        .parse()
                        .map_err(|_| format!("rot: `{v}` is not a count"))?;
                }
                _ => return Err(format!("unknown key `{k}`")),
            }
        }
        Ok(f)
    }
}

/// What the layer did, for the control endpoint's answer.
#[derive(Debug, Default)]
pub struct DiskFaultCounters {
    /// Operations answered EIO.
    pub eio: AtomicU64,
    /// Operations answered ENOSPC.
    pub nospace: AtomicU64,
    /// Operations held back.
    pub delayed: AtomicU64,
    /// Operations held by a hang.
    pub hung: AtomicU64,
}

/// Rots asked and carried out.
#[derive(Debug, Default)]
struct Rots {
    asked: AtomicU32,
    /// Taken by a target (carried out, or being).
    taken: AtomicU32,
}

/// The live disk faults of one storage node, shared by its targets' [`FaultyStore`]s.
#[derive(Debug, Default)]
pub struct DiskFaultLayer {
    on: AtomicBool,
    state: Mutex<DiskFaults>,
    rots: Rots,
    /// What the layer did.
    pub counters: DiskFaultCounters,
}

impl DiskFaultLayer {
    /// Replaces the faults.
    pub fn set(&self, f: DiskFaults) {
        let clear = f.modes_clear();
        self.rots.asked.store(f.rot, Ordering::SeqCst);
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = f;
        self.on.store(!clear, Ordering::SeqCst);
    }

    /// The faults now.
    pub fn get(&self) -> DiskFaults {
        if !self.on.load(Ordering::Relaxed) {
            return DiskFaults {
                rot: self.rots.asked.load(Ordering::Relaxed),
                ..DiskFaults::default()
            };
        }
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Takes one rot that was asked and not yet taken (two targets never take the same one).
    fn take_rot(&self) -> bool {
        let r = &self.rots;
        let mut taken = r.taken.load(Ordering::SeqCst);
        while taken < r.asked.load(Ordering::Relaxed) {
            match r
                .taken
                .compare_exchange(taken, taken + 1, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return true,
                Err(now) => taken = now,
            }
        }
        false
    }

    /// Returns a rot taken by a target with nothing to rot, for another target.
    fn give_back_rot(&self) {
        self.rots.taken.fetch_sub(1, Ordering::SeqCst);
    }

    /// The faults and counters as the control endpoint prints them.
    pub fn describe(&self) -> String {
        let c = &self.counters;
        format!(
            "{}\neio_answered={} nospace_answered={} delayed={} hung={} rots_taken={}",
            self.get().to_query(),
            c.eio.load(Ordering::Relaxed),
            c.nospace.load(Ordering::Relaxed),
            c.delayed.load(Ordering::Relaxed),
            c.hung.load(Ordering::Relaxed),
            self.rots.taken.load(Ordering::Relaxed)
        )
    }

    /// The error `op` is answered with instead of running, if any.
    fn refuse(&self, op: &ChunkOp) -> Option<ChunkError> {
        let f = self.get();
        if f.eio {
            self.counters.eio.fetch_add(1, Ordering::Relaxed);
            return Some(ChunkError::Failed);
        }
        let writes = matches!(op, ChunkOp::Update { .. } | ChunkOp::Install { .. });
        if f.full && writes {
            self.counters.nospace.fetch_add(1, Ordering::Relaxed);
            return Some(ChunkError::NoSpace);
        }
        None
    }
}

type Done = (IoId, Result<ChunkDone, ChunkError>);
type Queued = (Instant, IoId, ChunkOp);

/// A chunk store obeying a [`DiskFaultLayer`].
pub struct FaultyStore {
    inner: Box<dyn Rot>,
    layer: Arc<DiskFaultLayer>,
    refused: Vec<Done>,
    /// Mutations (and lists) held back, due in non-decreasing order.
    mutations: VecDeque<Queued>,
    /// Reads held back, each with its own due time.
    reads: Vec<Queued>,
    /// Operations held by a hang, in submission order, until it is cleared.
    hung: VecDeque<(IoId, ChunkOp)>,
    jitter: Jitter,
}

impl FaultyStore {
    /// Wraps `inner`.
    pub fn new(inner: Box<dyn Rot>, layer: Arc<DiskFaultLayer>) -> Self {
        Self {
            inner,
            layer,
            refused: Vec::new(),
            mutations: VecDeque::new(),
            reads: Vec::new(),
            hung: VecDeque::new(),
            jitter: Jitter::new(),
        }
    }

    /// Carries out a rot asked of the node, if this target can: its store flips a bit of a
    /// committed chunk (logged, so that the node's log says which).
    fn rot_if_asked(&mut self) {
        if !self.layer.take_rot() {
            return;
        }
        match self.inner.rot(self.jitter.bits()) {
            Ok(Some(chunk)) => tracing::warn!("disk fault: one bit of {chunk} flipped at rest"),
            Ok(None) => self.layer.give_back_rot(),
            Err(e) => tracing::error!("disk fault: the rot failed: {e}"),
        }
    }

    fn held(&self) -> usize {
        self.mutations.len() + self.reads.len() + self.hung.len()
    }

    /// The earliest time a held operation is due.
    fn next_due(&self) -> Option<Instant> {
        let m = self.mutations.front().map(|q| q.0);
        let r = self.reads.iter().map(|q| q.0).min();
        m.into_iter().chain(r).min()
    }

    /// Hands every operation that is due to the store: reads whenever due, mutations in order.
    fn release(&mut self) {
        if self.layer.get().hang {
            return;
        }
        while let Some((id, op)) = self.hung.pop_front() {
            self.inner.submit(id, op);
        }
        let now = Instant::now();
        let mut i = 0;
        while i < self.reads.len() {
            if self.reads[i].0 <= now {
                let (_, id, op) = self.reads.swap_remove(i);
                self.inner.submit(id, op);
            } else {
                i += 1;
            }
        }
        while self.mutations.front().is_some_and(|q| q.0 <= now) {
            if let Some((_, id, op)) = self.mutations.pop_front() {
                self.inner.submit(id, op);
            }
        }
    }
}

impl ChunkStore for FaultyStore {
    fn submit(&mut self, id: IoId, op: ChunkOp) {
        self.rot_if_asked();
        if let Some(e) = self.layer.refuse(&op) {
            return self.refused.push((id, Err(e)));
        }
        if self.layer.get().hang || !self.hung.is_empty() {
            self.layer.counters.hung.fetch_add(1, Ordering::Relaxed);
            return self.hung.push_back((id, op));
        }
        let read = matches!(op, ChunkOp::Read { .. });
        let latency = self.layer.get().latency;
        // Behind held mutations no mutation may run early, slow disk or not.
        let (lo, hi) = match latency {
            Some(range) => range,
            None if read || self.mutations.is_empty() => return self.inner.submit(id, op),
            None => (Duration::ZERO, Duration::ZERO),
        };
        self.layer.counters.delayed.fetch_add(1, Ordering::Relaxed);
        let due = Instant::now() + self.jitter.pick(lo..hi);
        if read {
            self.reads.push((due, id, op));
        } else {
            let due = self.mutations.back().map_or(due, |q| due.max(q.0));
            self.mutations.push_back((due, id, op));
        }
    }

    fn poll_completions(&mut self, done: &mut Vec<Done>) {
        done.append(&mut self.refused);
        self.release();
        self.inner.poll_completions(done);
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.refused.len() + self.held()
    }

    fn wait(&mut self, timeout: Duration) {
        if !self.refused.is_empty() {
            return;
        }
        match self.next_due() {
            _ if !self.hung.is_empty() && self.inner.in_flight() == 0 => {
                std::thread::sleep(timeout.min(Duration::from_millis(50)));
            }
            Some(due) if self.inner.in_flight() == 0 => {
                std::thread::sleep(due.saturating_duration_since(Instant::now()).min(timeout));
            }
            _ => self.inner.wait(timeout),
        }
    }
}

/// The disk faults at `/disk`.
impl crate::fault_query::FaultResource for crate::chunk_store::DiskFaultLayer {
    fn describe(&self) -> String {
        format!("{}\n", crate::chunk_store::DiskFaultLayer::describe(self))
    }
    fn put(&self, query: &str) -> Result<String, String> {
        let f = crate::chunk_store::DiskFaults::parse(query)?;
        tracing::warn!("disk faults set: {}", f.to_query());
        self.set(f);
        Ok(crate::fault_query::FaultResource::describe(self))
    }
}

#[cfg(test)]
mod tests {
    use t3fs_core::chunk::UpdateKind;
    use t3fs_core::ids::{ChunkId, ChunkVersion};
    use t3fs_core::testing::MemChunkStore;

    use super::*;

    fn update(v: u32) -> ChunkOp {
        ChunkOp::Update {
            chunk: ChunkId::new(1, 0),
            version: ChunkVersion(v),
            kind: UpdateKind::Write {
                offset: 0,
                data: vec![v as u8].into(),
            },
            tag: None,
        }
    }

    fn drain(s: &mut FaultyStore) -> Vec<Done> {
        let mut out = Vec::new();
        loop {
            s.poll_completions(&mut out);
            if s.in_flight() == 0 {
                return out;
            }
            s.wait(Duration::from_millis(5));
        }
    }

    #[test]
    fn query_round_trips_and_bad_input_is_refused() {
        let f = DiskFaults {
            eio: false,
            full: true,
            latency: Some((Duration::from_millis(50), Duration::from_millis(200))),
            rot: 3,
            hang: true,
        };
        assert_eq!(DiskFaults::parse(&f.to_query()), Ok(f));
        assert!(DiskFaults::parse("rot=-1").is_err());
        assert_eq!(
            DiskFaults::parse(&DiskFaults::default().to_query()),
            Ok(DiskFaults::default())
        );
        assert!(DiskFaults::parse("eio=yes").is_err());
        assert!(DiskFaults::parse("latency_us=9-1").is_err());
        assert!(DiskFaults::parse("loss=0.1").is_err());
    }

    #[test]
    fn eio_fails_everything_and_full_refuses_only_writes() {
        let layer = Arc::new(DiskFaultLayer::default());
        let mut s = FaultyStore::new(Box::new(MemChunkStore::new()), layer.clone());
        layer.set(DiskFaults {
            full: true,
            ..DiskFaults::default()
        });
        s.submit(IoId(1), update(1));
        s.submit(IoId(2), ChunkOp::List);
        let out = drain(&mut s);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0], (IoId(1), Err(ChunkError::NoSpace)));
        assert!(matches!(out[1], (IoId(2), Ok(ChunkDone::Listed(ref l))) if l.is_empty()));
        layer.set(DiskFaults {
            eio: true,
            ..DiskFaults::default()
        });
        s.submit(IoId(3), ChunkOp::List);
        assert_eq!(drain(&mut s), vec![(IoId(3), Err(ChunkError::Failed))]);
        layer.set(DiskFaults::default());
        s.submit(IoId(4), update(1));
        assert!(matches!(drain(&mut s)[..], [(IoId(4), Ok(_))]));
        assert!(layer
            .describe()
            .contains("eio_answered=1 nospace_answered=1"));
    }

    #[test]
    fn a_hang_holds_every_operation_unanswered_until_it_is_cleared() {
        let layer = Arc::new(DiskFaultLayer::default());
        let mut s = FaultyStore::new(Box::new(MemChunkStore::new()), layer.clone());
        layer.set(DiskFaults {
            hang: true,
            ..DiskFaults::default()
        });
        s.submit(IoId(1), update(1));
        s.submit(IoId(2), ChunkOp::List);
        let mut out = Vec::new();
        for _ in 0..5 {
            s.poll_completions(&mut out);
            s.wait(Duration::from_millis(5));
        }
        assert!(out.is_empty(), "a hung disk answers nothing: {out:?}");
        assert_eq!(s.in_flight(), 2);
        assert!(layer.describe().contains("hung=2"));
        // Cleared: the held operations run, in their order.
        layer.set(DiskFaults::default());
        let out = drain(&mut s);
        assert!(
            matches!(out[..], [(IoId(1), Ok(_)), (IoId(2), Ok(_))]),
            "{out:?}"
        );
    }

    #[test]
    fn a_slow_disk_holds_mutations_back_in_order() {
        let layer = Arc::new(DiskFaultLayer::default());
        let mut s = FaultyStore::new(Box::new(MemChunkStore::new()), layer.clone());
        let lat = Duration::from_millis(20);
        layer.set(DiskFaults {
            latency: Some((lat, lat * 2)),
            ..DiskFaults::default()
        });
        let start = Instant::now();
        for v in 1..=5 {
            s.submit(IoId(u64::from(v)), update(v));
        }
        let mut first = Vec::new();
        s.poll_completions(&mut first);
        assert!(first.is_empty(), "held back, not answered at once");
        let out = drain(&mut s);
        assert!(start.elapsed() >= lat, "waited out the added latency");
        let ids: Vec<u64> = out.iter().map(|(id, _)| id.0).collect();
        assert_eq!(ids, vec![1, 2, 3, 4, 5]);
        assert!(out.iter().all(|(_, r)| r.is_ok()));
    }

    #[test]
    fn a_read_overtakes_a_held_commit_and_sees_the_committed_state() {
        use t3fs_core::ids::ChainVersion;
        let layer = Arc::new(DiskFaultLayer::default());
        let mut s = FaultyStore::new(Box::new(MemChunkStore::new()), layer.clone());
        let commit = |v: u32| ChunkOp::Commit {
            chunk: ChunkId::new(1, 0),
            version: ChunkVersion(v),
            chain_version: ChainVersion(1),
        };
        s.submit(IoId(1), update(1));
        s.submit(IoId(2), commit(1));
        assert_eq!(drain(&mut s).len(), 2);
        let lat = Duration::from_millis(30);
        layer.set(DiskFaults {
            latency: Some((lat, lat)),
            ..DiskFaults::default()
        });
        s.submit(IoId(3), update(2));
        s.submit(IoId(4), commit(2));
        // The disk is fast again for what comes next, but the held commit keeps its place.
        layer.set(DiskFaults::default());
        s.submit(
            IoId(5),
            ChunkOp::Read {
                chunk: ChunkId::new(1, 0),
                offset: 0,
                len: 1,
                uncommitted: false,
                unverified: false,
            },
        );
        s.submit(IoId(6), update(3));
        let out = drain(&mut s);
        let ids: Vec<u64> = out.iter().map(|(id, _)| id.0).collect();
        assert_eq!(ids, vec![5, 3, 4, 6], "the read first, mutations in order");
        match &out[0].1 {
            Ok(ChunkDone::Read(Some(r))) => assert_eq!(r.version, ChunkVersion(1)),
            other => panic!("read answered {other:?}"),
        }
    }

    #[test]
    fn a_rot_flips_a_committed_byte_once_and_the_store_answers_corrupt() {
        rot_caught("file");
        #[cfg(feature = "uring")]
        rot_caught("uring");
    }

    fn rot_caught(kind: &str) {
        let dir = std::env::temp_dir().join(format!("t3fs-rot-{kind}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let layer = Arc::new(DiskFaultLayer::default());
        let open = |name: &str| {
            let f = crate::serve::open_store(kind, &dir.join(name)).expect("open");
            FaultyStore::new(f, layer.clone())
        };
        let (mut empty, mut full) = (open("empty"), open("full"));
        let chunk = ChunkId::new(1, 0);
        let read = ChunkOp::Read {
            chunk,
            offset: 0,
            len: 1,
            uncommitted: false,
            unverified: false,
        };
        full.submit(IoId(1), update(7));
        let commit = ChunkOp::Commit {
            chunk,
            version: ChunkVersion(7),
            chain_version: t3fs_core::ids::ChainVersion(1),
        };
        full.submit(IoId(2), commit);
        full.submit(IoId(3), read.clone());
        assert!(drain(&mut full).iter().all(|(_, r)| r.is_ok()), "healthy");
        layer.set(DiskFaults {
            rot: 1,
            ..DiskFaults::default()
        });
        assert_eq!(
            layer.get().rot,
            1,
            "a rot asked leaves the per-operation modes off"
        );
        empty.submit(IoId(4), ChunkOp::List);
        drain(&mut empty);
        assert_eq!(
            layer.rots.taken.load(Ordering::SeqCst),
            0,
            "nothing to rot: given back"
        );
        full.submit(IoId(5), read.clone());
        let r = drain(&mut full);
        assert!(
            matches!(r[..], [(IoId(5), Err(ChunkError::Corrupt))]),
            "{kind}: {r:?}"
        );
        assert_eq!(layer.rots.taken.load(Ordering::SeqCst), 1);
        full.submit(IoId(6), read);
        assert!(matches!(
            drain(&mut full)[..],
            [(_, Err(ChunkError::Corrupt))]
        ));
        assert_eq!(
            layer.rots.taken.load(Ordering::SeqCst),
            1,
            "one rot asked, one done"
        );
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
