//! The simulated disk of one target: the reference chunk store plus storage faults — latency
//! with spikes, EIO (the medium fails and stays failed), ENOSPC, silent corruption at rest
//! (caught by CRC32C: reads and read-modify-writes of the chunk fail with `Corrupt`), misdirected
//! writes (another chunk's bytes are clobbered), and crash effects on unsynced operations (each
//! in-flight operation either happened or not, and may be torn).
//!
//! Invariants: mutations of one chunk complete in submission order, and a read may complete
//! before a mutation submitted earlier (it then sees the state before it) — the `ChunkStore`
//! contract as amended here;
//! destructive faults (EIO, corruption, misdirection, torn writes) happen only when the world's
//! fault atlas allows them (`may_damage`); a disk that returned `Failed` or `Corrupt` is
//! `damaged` and is replaced (emptied) when its node restarts, since a version-based resync
//! cannot repair bytes that rotted under an unchanged version. Not here: the atlas itself
//! (mod.rs) and queueing or bandwidth (a later performance model).

use std::collections::{BTreeMap, BTreeSet};

use core::ops::Range;
use core::time::Duration;

use t3fs_core::chunk::{ChunkDone, ChunkError, ChunkOp};
use t3fs_core::ids::ChunkId;
use t3fs_core::testing::MemChunkStore;
use t3fs_core::time::Instant;
use t3fs_scenario::{Faults, Rng};

/// Counters of one disk.
#[derive(Clone, Debug, Default)]
pub struct DiskCounters {
    /// Operations completed.
    pub ops: u64,
    /// Operations that took a latency spike.
    pub spikes: u64,
    /// EIO returned.
    pub eio: u64,
    /// Reads or updates that hit corrupted bytes.
    pub corrupt: u64,
    /// ENOSPC returned.
    pub nospace: u64,
    /// Misdirected writes.
    pub misdirected: u64,
    /// In-flight operations lost by a crash.
    pub lost_on_crash: u64,
    /// In-flight operations that reached the medium before a crash.
    pub applied_on_crash: u64,
    /// In-flight operations torn by a crash.
    pub torn: u64,
    /// Reads that completed before a mutation of the same chunk submitted earlier.
    pub overtaken: u64,
}

/// One target's disk.
#[derive(Clone, Debug, Default)]
pub struct Disk {
    /// The durable contents.
    pub store: MemChunkStore,
    /// Chunks whose stored bytes no longer match their checksum.
    pub corrupt: BTreeSet<ChunkId>,
    /// Every operation fails with EIO.
    pub eio: bool,
    /// Updates fail with ENOSPC.
    pub full: bool,
    /// Latency override (a slow disk).
    pub slow: Option<Range<Duration>>,
    /// The disk returned `Failed` or `Corrupt` and must be replaced.
    pub damaged: bool,
    last_done: BTreeMap<ChunkId, Instant>,
    /// Counters.
    pub counters: DiskCounters,
}

fn chunk_of(op: &ChunkOp) -> Option<ChunkId> {
    match op {
        ChunkOp::Commit { chunk, .. }
        | ChunkOp::Install { chunk, .. }
        | ChunkOp::Read { chunk, .. }
        | ChunkOp::Update { chunk, .. } => Some(*chunk),
        ChunkOp::List => None,
    }
}

impl Disk {
    /// When an operation submitted now completes: drawn latency (or a spike), but never before
    /// an earlier operation on the same chunk.
    pub fn completion_time(
        &mut self,
        now: Instant,
        op: &ChunkOp,
        rng: &mut Rng,
        f: &Faults,
    ) -> Instant {
        let latency = match &self.slow {
            Some(r) => rng.duration(r.clone()),
            None if rng.chance(f.disk_spike) => {
                self.counters.spikes += 1;
                rng.duration(Duration::from_millis(50)..Duration::from_secs(2))
            }
            None => rng.duration(f.disk_latency.clone()),
        };
        let mut at = Instant(now.0 + latency.as_nanos() as u64);
        let mutation = !matches!(op, ChunkOp::Read { .. } | ChunkOp::List);
        match chunk_of(op) {
            Some(c) if mutation => {
                let last = self.last_done.entry(c).or_insert(Instant::ZERO);
                at = at.max(*last);
                *last = at;
            }
            // A read is served from the committed state when it completes, which may be before
            // a commit submitted earlier completes (as in an engine that reads its committed
            // metadata while the commit's write is in flight): mutations of one chunk stay in
            // submission order, reads may overtake them.
            Some(c) if self.last_done.get(&c).is_some_and(|last| *last > at) => {
                self.counters.overtaken += 1;
            }
            _ => {}
        }
        at
    }

    /// Executes `op` at its completion.
    pub fn execute(
        &mut self,
        op: &ChunkOp,
        rng: &mut Rng,
        f: &Faults,
        may_damage: bool,
    ) -> Result<ChunkDone, ChunkError> {
        self.counters.ops += 1;
        if !self.eio && may_damage && rng.chance(f.disk_eio) {
            self.eio = true;
        }
        if self.eio {
            self.counters.eio += 1;
            self.damaged = true;
            return Err(ChunkError::Failed);
        }
        let chunk = chunk_of(op);
        match op {
            ChunkOp::Read { chunk, .. } => {
                let exists = self.store.chunks().contains_key(chunk);
                if exists && may_damage && rng.chance(f.disk_corrupt) {
                    self.corrupt.insert(*chunk);
                }
                if self.corrupt.contains(chunk) {
                    self.counters.corrupt += 1;
                    self.damaged = true;
                    return Err(ChunkError::Corrupt);
                }
            }
            ChunkOp::Update { chunk, .. } => {
                if self.full {
                    self.counters.nospace += 1;
                    return Err(ChunkError::NoSpace);
                }
                if self.corrupt.contains(chunk) {
                    self.counters.corrupt += 1;
                    self.damaged = true;
                    return Err(ChunkError::Corrupt);
                }
                if may_damage && rng.chance(f.disk_corrupt / 4.0) {
                    // Misdirected: the bytes land on another chunk of this target.
                    let others: Vec<ChunkId> = self
                        .store
                        .chunks()
                        .keys()
                        .filter(|c| *c != chunk)
                        .copied()
                        .collect();
                    if let Some(victim) = rng.pick(&others) {
                        self.counters.misdirected += 1;
                        self.corrupt.insert(*victim);
                    }
                }
            }
            ChunkOp::Install { chunk, .. } => {
                self.corrupt.remove(chunk);
            }
            ChunkOp::Commit { .. } | ChunkOp::List => {}
        }
        let result = self.store.apply(op);
        if let (Some(c), Ok(ChunkDone::Committed(meta))) = (chunk, &result) {
            if meta.committed.0 == 0 {
                self.corrupt.remove(&c); // Removed: nothing left to be corrupt.
            }
        }
        result
    }

    /// A crash: each unsynced in-flight operation (in submission order) reached the medium or
    /// not; one that did may be torn (its chunk fails its checksum afterwards) when allowed.
    pub fn crash(&mut self, inflight: &[ChunkOp], rng: &mut Rng, f: &Faults, may_damage: bool) {
        for op in inflight {
            if matches!(op, ChunkOp::Read { .. } | ChunkOp::List) {
                continue;
            }
            if rng.chance(0.5) {
                self.counters.applied_on_crash += 1;
                let _ = self.store.apply(op);
                if may_damage && rng.chance(f.torn_write) {
                    if let Some(c) = chunk_of(op) {
                        self.counters.torn += 1;
                        self.corrupt.insert(c);
                    }
                }
            } else {
                self.counters.lost_on_crash += 1;
            }
        }
        self.last_done.clear();
    }
}
