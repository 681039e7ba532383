//! The simulated disk of one target: the reference chunk store (each operation applied at its
//! completion, as its `ChunkStore` completions apply it), plus storage faults — latency with
//! spikes, EIO (the medium fails and stays failed), ENOSPC, and damage to the stored bytes:
//! bits rotting at rest, misdirected writes (the bytes land on another chunk, the intended one
//! keeps its old bytes), writes torn by a crash (a prefix persists), and lost writes (the
//! device acknowledged, then the bytes were gone after a crash).
//!
//! Damage is real: rot, misdirection and tears change bytes and never the checksums kept with
//! them, so it is the store's own verification that answers `Corrupt` (and a planted bug that
//! skips it serves the rotten bytes). A lost write leaves an earlier, self-consistent state
//! that no checksum flags: only the protocol (a restarted target resyncs) repairs it.
//!
//! Invariants: mutations of one chunk complete in submission order, and a read may complete
//! before a mutation submitted earlier (it then sees the state before it) — the `ChunkStore`
//! contract; destructive faults happen only when the world's fault atlas allows them
//! (`may_damage`); `corrupt` is the simulator's own record of the chunks it damaged (what the
//! atlas consults), never what detects damage; a disk that answered `Failed` or `Corrupt` is
//! `damaged` and is replaced (emptied) when its node restarts if another intact copy exists,
//! since a version-based resync cannot repair bytes that rotted under an unchanged version.
//! Not here: the atlas itself (atlas.rs) and the SSD's queueing and bandwidth (resources.rs).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use core::ops::Range;
use core::time::Duration;

use t3fs_core::chunk::{ChunkDone, ChunkError, ChunkOp, UpdateKind};
use t3fs_core::ids::{ChunkId, TargetId};
use t3fs_core::testing::{MemChunk, MemChunkStore};
use t3fs_core::time::Instant;
use t3fs_scenario::{Faults, Rng};

use super::resources::Resources;

/// Completed mutations whose prior state a disk keeps for lost-write faults (since its last
/// crash): the device's volatile write cache, in effect.
const RECENT_WRITES: usize = 16;

/// Counters of one disk.
#[derive(Clone, Debug, Default)]
pub struct DiskCounters {
    /// Operations completed.
    pub ops: u64,
    /// Operations that took a latency spike.
    pub spikes: u64,
    /// EIO returned.
    pub eio: u64,
    /// Reads or updates the store answered `Corrupt` (its checksum check caught damage).
    pub corrupt: u64,
    /// Bits flipped at rest.
    pub rotted: u64,
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
    /// Completed (acknowledged) writes lost by a crash.
    pub lost_writes: u64,
    /// Reads that completed before a mutation of the same chunk submitted earlier.
    pub overtaken: u64,
}

/// One target's disk.
#[derive(Clone, Debug, Default)]
pub struct Disk {
    /// The durable contents.
    pub store: MemChunkStore,
    /// Chunks whose stored bytes this simulator damaged and that no rewrite has healed yet.
    pub corrupt: BTreeSet<ChunkId>,
    /// Every operation fails with EIO.
    pub eio: bool,
    /// Updates fail with ENOSPC.
    pub full: bool,
    /// Latency override (a slow disk).
    pub slow: Option<Range<Duration>>,
    /// The disk returned `Failed` or `Corrupt` and must be replaced.
    pub damaged: bool,
    /// A crash lost an acknowledged write here and the target has not been resynced since:
    /// its data may be older than its chain's (the atlas protects the chain meanwhile).
    pub regressed: bool,
    last_done: BTreeMap<ChunkId, Instant>,
    /// Prior states of the latest completed mutations (only kept when lost writes are on).
    recent: VecDeque<(ChunkId, Option<MemChunk>)>,
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

/// Bytes an operation moves through the SSD: a read's length (at most; it may be trimmed), an
/// update's or install's data; a commit or a list moves metadata only.
pub(crate) fn op_bytes(op: &ChunkOp) -> usize {
    match op {
        ChunkOp::Read { len, .. } => *len as usize,
        _ => op_span(op).1,
    }
}

pub(crate) fn is_mutation(op: &ChunkOp) -> bool {
    !matches!(op, ChunkOp::Read { .. } | ChunkOp::List)
}

impl Disk {
    /// Runs `op` on the store: `MemChunkStore::apply`, which its `ChunkStore` completions run for
    /// each submitted operation. Called directly, since a submit and a poll per operation only
    /// moved it and its result through two queues (a twentieth of the disk model's time).
    fn run(&mut self, op: &ChunkOp) -> Result<ChunkDone, ChunkError> {
        self.store.apply(op)
    }

    /// Every chunk's metadata, as a booting node lists it.
    pub fn list(&mut self) -> Vec<t3fs_core::chunk::ChunkMeta> {
        match self.run(&ChunkOp::List) {
            Ok(ChunkDone::Listed(metas)) => metas,
            other => panic!("list answered {other:?}"),
        }
    }

    /// When an operation submitted now completes: drawn latency (or a spike), but never before
    /// an earlier operation on the same chunk. With `[hardware]` (`ssd`: the resources and this
    /// disk's target), the latency is the SSD's access latency, and the operation also queues
    /// for the SSD's slots, IOPS and bandwidth.
    pub fn completion_time(
        &mut self,
        now: Instant,
        op: &ChunkOp,
        rng: &mut Rng,
        f: &Faults,
        ssd: Option<(&mut Resources, TargetId, super::resources::sharing::Key)>,
    ) -> Instant {
        let latency = match (&self.slow, &ssd) {
            (Some(r), _) => rng.duration(r.clone()),
            (None, _) if rng.chance(f.disk_spike) => {
                self.counters.spikes += 1;
                rng.duration(Duration::from_millis(50)..Duration::from_secs(2))
            }
            (None, Some((r, _, _))) => r.ssd_latency(rng),
            (None, None) => rng.duration(f.disk_latency.clone()),
        };
        let mut at = match ssd {
            Some((r, target, key)) => {
                let write = is_mutation(op);
                // A mutation's chunk on its target: mutations of one chunk finish in order.
                let order = chunk_of(op).filter(|_| write).map(|c| {
                    (u128::from(target.0) << 96)
                        | (u128::from(c.inode.0) << 32)
                        | u128::from(c.index)
                });
                r.ssd(
                    (target, now),
                    (op_bytes(op), write),
                    latency,
                    (key, order),
                    rng,
                )
            }
            None => Instant(now.0 + latency.as_nanos() as u64),
        };
        match chunk_of(op) {
            Some(c) if is_mutation(op) => {
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
        let mut misdirect_to = None;
        match op {
            ChunkOp::Read { chunk, .. } => {
                let exists = self.store.chunks().contains_key(chunk);
                if exists && may_damage && rng.chance(f.disk_corrupt) {
                    self.rot(*chunk, rng);
                }
            }
            ChunkOp::Update { chunk, .. } => {
                if self.full {
                    self.counters.nospace += 1;
                    return Err(ChunkError::NoSpace);
                }
                if may_damage && rng.chance(f.disk_corrupt / 4.0) {
                    let others: Vec<ChunkId> = self
                        .store
                        .chunks()
                        .keys()
                        .filter(|c| *c != chunk)
                        .copied()
                        .collect();
                    misdirect_to = rng.pick(&others).copied();
                }
            }
            _ => {}
        }
        let keep_before = misdirect_to.is_some() || (f.lost_write > 0.0 && is_mutation(op));
        let before = match chunk {
            Some(c) if keep_before => Some(self.store.chunks().get(&c).cloned()),
            _ => None,
        };
        let result = self.run(op);
        match &result {
            Err(ChunkError::Corrupt) => {
                self.counters.corrupt += 1;
                self.damaged = true;
            }
            Err(_) => {}
            Ok(_) => {
                if let (Some(victim), Some(before)) = (misdirect_to, &before) {
                    self.misdirect(op, before.as_ref(), victim);
                }
                if let (Some(c), Some(before)) = (chunk, before) {
                    if f.lost_write > 0.0 && is_mutation(op) {
                        if self.recent.len() == RECENT_WRITES {
                            self.recent.pop_front();
                        }
                        self.recent.push_back((c, before));
                    }
                }
                // A full rewrite (resync install, replace, remove) heals a damaged chunk.
                if let Some(c) = chunk.filter(|c| self.corrupt.contains(c)) {
                    if self.store.intact(c) {
                        self.corrupt.remove(&c);
                    }
                }
            }
        }
        result
    }

    /// Rot at rest: one bit of `chunk`'s committed bytes flips. False if it holds none.
    pub fn rot(&mut self, chunk: ChunkId, rng: &mut Rng) -> bool {
        let flipped = self.store.flip_bit(chunk, rng.next_u64());
        if flipped {
            self.counters.rotted += 1;
            self.corrupt.insert(chunk);
        }
        flipped
    }

    /// The update `op` just applied went to the wrong place: its bytes land on `victim`, and
    /// its own chunk keeps what it held there before (under the new checksum).
    fn misdirect(&mut self, op: &ChunkOp, before: Option<&MemChunk>, victim: ChunkId) {
        let ChunkOp::Update {
            chunk,
            kind: UpdateKind::Write { offset, data },
            ..
        } = op
        else {
            return;
        };
        self.counters.misdirected += 1;
        let start = *offset as usize;
        if self.store.revert(op, before, start..start + data.len()) {
            self.corrupt.insert(*chunk);
        }
        if self.store.scribble(victim, *offset, data) {
            self.corrupt.insert(victim);
        }
    }

    /// A crash: each unsynced in-flight operation (in submission order) reached the medium or
    /// not; one that did may be torn (a prefix persisted) when allowed. With lost writes on,
    /// one recently acknowledged mutation may be gone too (its chunk back to its prior state).
    pub fn crash(&mut self, inflight: &[ChunkOp], rng: &mut Rng, f: &Faults, may_damage: bool) {
        for op in inflight.iter().filter(|op| is_mutation(op)) {
            if !rng.chance(0.5) {
                self.counters.lost_on_crash += 1;
                continue;
            }
            self.counters.applied_on_crash += 1;
            let c = chunk_of(op).expect("mutations name a chunk");
            let before = self.store.chunks().get(&c).cloned();
            let applied = self.run(op).is_ok();
            if applied && may_damage && rng.chance(f.torn_write) {
                let (at, len) = op_span(op);
                let keep = rng.below(len.max(1) as u64) as usize;
                if self
                    .store
                    .revert(op, before.as_ref(), at + keep..usize::MAX)
                {
                    self.counters.torn += 1;
                    self.corrupt.insert(c);
                }
            }
        }
        if may_damage && !self.recent.is_empty() && rng.chance(f.lost_write) {
            let k = rng.below(self.recent.len() as u64) as usize;
            let (c, before) = self.recent[k].clone();
            self.store.restore(c, before);
            self.counters.lost_writes += 1;
            self.regressed = true;
            if self.store.intact(c) {
                self.corrupt.remove(&c);
            } else {
                self.corrupt.insert(c);
            }
        }
        self.recent.clear();
        self.last_done.clear();
    }
}

/// Where in its chunk an update or install writes, and how many bytes (0 for others).
fn op_span(op: &ChunkOp) -> (usize, usize) {
    match op {
        ChunkOp::Update {
            kind: UpdateKind::Write { offset, data },
            ..
        } => (*offset as usize, data.len()),
        ChunkOp::Update {
            kind: UpdateKind::Replace { data },
            ..
        }
        | ChunkOp::Install {
            data: Some(data), ..
        } => (0, data.len()),
        _ => (0, 0),
    }
}
