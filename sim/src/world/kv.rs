//! The simulated transactional KV (SimKv): the in-memory MVCC engine shared by every mgmtd, with
//! commit latency, spurious conflicts, CommitUnknown on commits that did (or did not) apply, and
//! unavailability.
//!
//! Invariant: a fault never violates the KV contract (a conflict is always allowed; an unknown
//! result is reported only as `CommitUnknown`), so a correct client of the contract survives
//! every fault here. Not here: which rows mgmtd writes (core's mgmtd::store).
//!
//! The KV also audits mgmtd's rows after every commit (§2.2's fencing made observable): the
//! stored routing version only grows, and a chain row's version never goes back nor is rewritten
//! with other members. A deposed primary whose write slips past the lease check breaks one of
//! these even when no storage node ever sees its routing.

use core::time::Duration;

use t3fs_core::kv::mem::{MemKv, MemKvFault};
use t3fs_core::kv::{self, KvDone, KvEngine, KvError, KvOp};
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
    /// The rows as of the last commit, and the first violation of their monotonicity.
    rows: Rows,
}

/// What the row audit remembers.
#[derive(Default)]
struct Rows {
    routing_version: u64,
    chains: std::collections::BTreeMap<t3fs_core::ids::ChainId, t3fs_core::routing::ChainInfo>,
    violation: Option<String>,
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
            rows: Rows {
                routing_version: routing.version.0,
                chains: routing.chains.clone(),
                violation: None,
            },
        }
    }

    /// The first violation of the row audit (module doc), if any.
    pub fn violation(&self) -> Option<&str> {
        self.rows.violation.as_deref()
    }

    /// Re-reads mgmtd's rows after a commit and checks they only moved forward.
    fn audit_rows(&mut self) {
        let Ok(v) = self.kv.read_version() else {
            return;
        };
        let rv = match self.kv.get(v, store::ROUTING_VERSION_KEY) {
            Ok(Some(b)) => store::decode::<u64>(&b).unwrap_or(0),
            _ => return,
        };
        let rows = &mut self.rows;
        let mut bad = Vec::new();
        if rv < rows.routing_version {
            bad.push(format!(
                "stored routing version went back from {} to {rv}",
                rows.routing_version
            ));
        }
        rows.routing_version = rows.routing_version.max(rv);
        if let Ok(found) = self.kv.range(v, &store::chains_range(), usize::MAX) {
            for (_, b) in found {
                let Ok(c) = store::decode_chain(&b) else {
                    continue;
                };
                match rows.chains.get(&c.chain) {
                    Some(old) if c.version < old.version => bad.push(format!(
                        "stored chain {} went back from {} to {}",
                        c.chain, old.version, c.version
                    )),
                    Some(old) if c.version == old.version && c.targets != old.targets => {
                        bad.push(format!(
                            "stored chain {} rewritten at {} with other members: {} vs {}",
                            c.chain,
                            c.version,
                            t3fs_core::mgmtd::chain_update::render(&old.targets),
                            t3fs_core::mgmtd::chain_update::render(&c.targets)
                        ))
                    }
                    Some(old) if c.version <= old.version => {}
                    _ => {
                        rows.chains.insert(c.chain, c);
                    }
                }
            }
        }
        if let Some(first) = bad.into_iter().next() {
            rows.violation.get_or_insert(first);
        }
    }

    /// GC must never free an inode a write session still holds (§4.5): checked on every
    /// commit that deletes inode rows, so a premature free is caught even if the session is
    /// pruned later.
    fn audit_freed(&mut self, freed: &[t3fs_core::ids::InodeId]) {
        let Ok(v) = self.kv.read_version() else {
            return;
        };
        for id in freed {
            let held = self
                .kv
                .range(v, &t3fs_core::meta::session_range(*id), 1)
                .is_ok_and(|rows| !rows.is_empty());
            if held {
                self.rows.violation.get_or_insert(format!(
                    "GC freed inode {} while a write session held it",
                    id.0
                ));
            }
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
        let commit = matches!(op, KvOp::Commit(_));
        // Inode rows this commit deletes (GC freeing them), for the session audit below.
        let freed: Vec<t3fs_core::ids::InodeId> = match &op {
            KvOp::Commit(c) => c
                .mutations
                .iter()
                .filter_map(|m| match m {
                    t3fs_core::kv::Mutation::Clear(k) => t3fs_core::meta::parse_inode_key(k),
                    _ => None,
                })
                .collect(),
            KvOp::Read { .. } => Vec::new(),
        };
        let result = kv::execute(&mut self.kv as &mut dyn KvEngine, op);
        if commit {
            self.audit_rows();
            if result.is_ok() {
                self.audit_freed(&freed);
            }
        }
        result
    }
}

/// A KV holding the deployed cluster: every chain of `routing`, the target rows and the routing
/// version, as mgmtd would have written them when the cluster was set up (the plan's seeding).
pub fn seeded_kv(routing: &RoutingInfo) -> MemKv {
    let mut kv = MemKv::new(4096);
    t3fs_scenario::plan::seed_mgmtd(&mut kv, routing).expect("seeding an empty KV");
    kv
}
