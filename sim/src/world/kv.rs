//! The simulated transactional KV (SimKv): the in-memory MVCC engine shared by every mgmtd, with
//! commit latency, spurious conflicts, CommitUnknown on commits that did (or did not) apply, and
//! unavailability.
//!
//! Invariant: a fault never violates the KV contract (a conflict is always allowed; an unknown
//! result is reported only as `CommitUnknown`), so a correct client of the contract survives
//! every fault here. Not here: which rows mgmtd writes (core's mgmtd::store).

use core::time::Duration;

use t3fs_core::kv::mem::{MemKv, MemKvFault};
use t3fs_core::kv::{self, KvDone, KvEngine, KvError, KvOp, Txn};
use t3fs_core::mgmtd::store;
use t3fs_core::routing::RoutingInfo;
use t3fs_scenario::{Faults, Rng};

/// Counters of the KV.
#[derive(Clone, Debug, Default)]
pub struct KvCounters {
    /// Operations executed.
    pub ops: u64,
    /// Commits attempted.
    pub commits: u64,
    /// Spurious conflicts injected.
    pub conflicts: u64,
    /// CommitUnknown injected on applied commits.
    pub unknown_applied: u64,
    /// CommitUnknown injected on dropped commits.
    pub unknown_dropped: u64,
    /// Operations refused while unavailable.
    pub unavailable: u64,
}

/// The simulated KV.
pub struct SimKv {
    /// The engine.
    pub kv: MemKv,
    /// Spurious conflict rate.
    pub conflict: f64,
    /// CommitUnknown rate.
    pub commit_unknown: f64,
    /// Refusing every operation.
    pub unavailable: bool,
    /// Counters.
    pub counters: KvCounters,
}

impl SimKv {
    /// A KV holding the deployed cluster of `routing`, with `f`'s fault rates.
    pub fn new(routing: &RoutingInfo, f: &Faults) -> Self {
        Self {
            kv: seeded_kv(routing),
            conflict: f.kv_conflict,
            commit_unknown: f.kv_commit_unknown,
            unavailable: false,
            counters: KvCounters::default(),
        }
    }

    /// Latency of one operation.
    pub fn latency(&self, rng: &mut Rng, f: &Faults) -> Duration {
        rng.duration(f.kv_latency.clone())
    }

    /// Executes `op` with injected faults.
    pub fn execute(&mut self, op: KvOp, rng: &mut Rng) -> Result<KvDone, KvError> {
        self.counters.ops += 1;
        self.kv.set_unavailable(self.unavailable);
        if self.unavailable {
            self.counters.unavailable += 1;
        }
        if matches!(op, KvOp::Commit(_)) {
            self.counters.commits += 1;
            if rng.chance(self.conflict) {
                self.counters.conflicts += 1;
                self.kv.inject(MemKvFault::SpuriousConflict);
            } else if rng.chance(self.commit_unknown) {
                if rng.chance(0.5) {
                    self.counters.unknown_applied += 1;
                    self.kv.inject(MemKvFault::CommitUnknownApplied);
                } else {
                    self.counters.unknown_dropped += 1;
                    self.kv.inject(MemKvFault::CommitUnknownDropped);
                }
            }
        }
        kv::execute(&mut self.kv as &mut dyn KvEngine, op)
    }
}

/// A KV holding the deployed cluster: every chain of `routing`, the target rows and the routing
/// version, as mgmtd would have written them when the cluster was set up.
pub fn seeded_kv(routing: &RoutingInfo) -> MemKv {
    let mut kv = MemKv::new(4096);
    let mut t = Txn::new(&mut kv);
    for c in routing.chains.values() {
        t.set(&store::chain_key(c.chain), &store::encode(c));
    }
    for (target, node) in &routing.targets {
        t.set(&store::target_key(*target), &store::encode(node));
    }
    t.set(
        store::ROUTING_VERSION_KEY,
        &store::encode(&routing.version.0),
    );
    t.commit().expect("seeding an empty KV");
    kv
}
