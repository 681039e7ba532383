//! The CRAQ model's assembly: actors, network, properties, the canonicalizer and the boundary
//! (configuration, messages and actors live in `mod.rs` and `actor.rs`).
//!
//! Properties read the interned model state through the model (`CraqModel::actor_states`,
//! `CraqModel::history`). Not here: the actors' behaviour.

use stateright::Expectation;

use super::actor::{CraqActor, CraqNode, CraqState, StorageState};
use super::history::{self, CraqHistory};
use super::mgmtd_actor::MgmtdState;
use t3fs_core::msg::Msg;

use super::{CraqConfig, CraqMsg, CraqTimer, CHAIN, CHUNK};
use crate::model::system::{ActorSystem, Draft, Links, SystemState};

/// The state type of the CRAQ model.
pub type CraqModelState = SystemState;
/// The CRAQ model.
pub type CraqModel = ActorSystem<CraqNode, CraqConfig, CraqHistory>;

fn storage(a: &CraqState) -> Option<&StorageState> {
    match a {
        CraqState::Storage(s) => Some(s.as_ref()),
        _ => None,
    }
}

pub(super) fn storages<'a>(
    m: &'a CraqModel,
    s: &'a CraqModelState,
) -> impl Iterator<Item = &'a StorageState> {
    m.actor_states(s).filter_map(storage)
}

/// The facts of one actor state that the properties, the boundary and the canonicalizer read
/// (computed once per distinct actor state, see `ActorSystem::facts`): flag bits, crash,
/// restart and lease lapse counts in bits 8.., 16.. and 24.., and in bits 32.. the chunk's
/// committed version plus one (0: no chunk).
mod fact {
    pub const STORAGE: u64 = 1;
    pub const HALTED: u64 = 1 << 1;
    pub const PENDING_NOT_NEXT: u64 = 1 << 2;
    pub const REGRESSION: u64 = 1 << 3;
    pub const APPLIED_TWICE: u64 = 1 << 4;
    pub const CLIENT_RUNNING: u64 = 1 << 5;

    pub fn crashes(f: u64) -> usize {
        (f >> 8 & 0xff) as usize
    }
    pub fn restarts(f: u64) -> usize {
        (f >> 16 & 0xff) as usize
    }
    pub fn lapses(f: u64) -> usize {
        (f >> 24 & 0xff) as usize
    }
    /// The committed version of the chunk, if the replica has it.
    pub fn committed(f: u64) -> Option<u32> {
        (f >> 32).checked_sub(1).map(|v| v as u32)
    }
}

fn facts(_: &CraqConfig, a: &CraqState) -> u64 {
    match a {
        CraqState::Storage(st) => {
            let bad_pending = st.store.chunks().values().any(|c| {
                c.pending
                    .as_ref()
                    .is_some_and(|(v, _)| *v != c.committed.next())
            });
            let committed = st
                .store
                .chunks()
                .get(&CHUNK)
                .map_or(0, |c| u64::from(c.committed.0) + 1);
            fact::STORAGE
                | if st.halted { fact::HALTED } else { 0 }
                | if bad_pending {
                    fact::PENDING_NOT_NEXT
                } else {
                    0
                }
                | if st.regression.is_some() {
                    fact::REGRESSION
                } else {
                    0
                }
                | if st.applied_twice.is_some() {
                    fact::APPLIED_TWICE
                } else {
                    0
                }
                | u64::from(st.crashes) << 8
                | u64::from(st.restarts) << 16
                | u64::from(st.lapses) << 24
                | committed << 32
        }
        CraqState::Client(c) if c.running.is_some() => fact::CLIENT_RUNNING,
        _ => 0,
    }
}

/// Whether any replica's facts have `flag`.
fn any_replica(m: &CraqModel, s: &CraqModelState, flag: u64) -> bool {
    (1..=m.cfg.replicas).any(|i| m.fact(s, i) & flag != 0)
}

/// Whether any client's facts have `flag`.
fn any_client(m: &CraqModel, s: &CraqModelState, flag: u64) -> bool {
    let first = m.cfg.replicas + 1;
    (first..first + m.cfg.clients).any(|i| m.fact(s, i) & flag != 0)
}

/// Fail-stops and restarts so far.
fn faults(f: impl Iterator<Item = u64>) -> (usize, usize) {
    f.fold((0, 0), |(c, r), f| {
        (c + fact::crashes(f), r + fact::restarts(f))
    })
}

pub(super) fn mgmtd_of<'a>(m: &'a CraqModel, s: &'a CraqModelState) -> Option<&'a MgmtdState> {
    m.actor_states(s).find_map(|a| match a {
        CraqState::Mgmtd(m) => Some(m.as_ref()),
        _ => None,
    })
}

/// The canonicalizer: a node that halted for good (no restart left) can receive nothing and
/// fire nothing, so messages addressed to it are dropped as they are sent and its timers are
/// disarmed; fail-stop, restart and lease lapse timers past their budgets are disarmed too.
/// Together with `actor::fail_stop` forgetting the node's memory, states that differ only in
/// what a dead node knew, or in what was on its way to it, are one state.
fn forget_the_dead(d: &mut Draft<'_, '_, CraqNode, CraqConfig, CraqHistory>) {
    let cfg = d.cfg();
    let n = cfg.replicas + 1;
    // What the rules below depend on: the dead nodes and the fault budgets left.
    let rules = |fact: &dyn Fn(usize) -> u64| {
        let (crashes, restarts) = faults((1..n).map(fact));
        let mut dead = 0u64;
        if restarts >= cfg.recoveries {
            for i in (1..n).filter(|&i| fact(i) & fact::HALTED != 0) {
                dead |= 1 << i;
            }
        }
        let lapses: usize = (1..n).map(|i| fact::lapses(fact(i))).sum();
        (
            dead,
            crashes < cfg.failures,
            restarts < cfg.recoveries,
            lapses < cfg.lease_lapses,
        )
    };
    let now = rules(&|i| d.fact(i));
    let (dead, fail_left, restart_left, lapse_left) = now;
    // The parent was canonicalized by the same rules unless the step changed a replica's facts
    // (a step changes one actor at most): then only what this step added can break them.
    let only_added = !matches!(d.changed(),
        Some((i, before, after)) if (1..n).contains(&i) && before != after);
    if dead != 0 {
        d.retain_messages(only_added, |e| dead & 1 << usize::from(e.dst) == 0);
    }
    // Without the lease no lapse timer is ever armed: the rule changes nothing there.
    let lapse_rule = cfg.storage_lease && !lapse_left;
    if dead != 0 || !fail_left || !restart_left || lapse_rule {
        d.retain_timers(only_added, |id, t| {
            dead & 1 << usize::from(id) == 0
                && match t {
                    CraqTimer::FailStop => fail_left,
                    CraqTimer::Restart => restart_left,
                    CraqTimer::LeaseLapse => lapse_left,
                    _ => true,
                }
        });
    }
}

/// The canonicalizer: [`forget_the_dead`], and under the storage lease a routing poll or a
/// routing info that repeats one still in flight on its link is dropped. A node refused for
/// want of a lease polls mgmtd each time (and mgmtd answers a node behind with its routing),
/// and a predecessor retrying its forward there can be refused any number of times before the
/// first poll or answer is read. A second poll can only bring routing that mgmtd pushes to
/// every node anyway, and a second copy of a routing info is ignored (routing only moves
/// forward), so without this rule states would differ only in how many identical messages wait
/// on a link, without bound.
fn canonicalize(d: &mut Draft<'_, '_, CraqNode, CraqConfig, CraqHistory>) {
    forget_the_dead(d);
    if d.cfg().storage_lease {
        d.drop_repeats(|e| {
            matches!(
                e.msg,
                CraqMsg::Wire(Msg::GetRouting { .. } | Msg::Routing(_))
            )
        });
    }
}

/// Properties of the model with the real mgmtd: the §2.6.1 invariants of every published chain,
/// CRAQ's write-all rule for every replica mgmtd and the replica agree is SERVING, and recovery
/// back to an all-SERVING chain once everything is quiet. Under the lease with lapses, a live
/// replica must sometimes be suspected and taken out (else the race the lease guards against
/// was never exercised); the lease's own safety is the read-consistency property: a node that
/// serves under a lease renewed while its exclusion was being committed returns a value older
/// than a write acknowledged through the new chain.
fn mgmtd_properties(model: CraqModel) -> CraqModel {
    let recovers = model.cfg.recoveries >= model.cfg.failures;
    let heals = model.cfg.failures > 0 && recovers;
    let model = model
        .property(
            Expectation::Always,
            "chain invariants (§2.6.1) hold",
            |m, s| mgmtd_of(m, s).is_none_or(|m| m.audit.is_none()),
        )
        .property(
            Expectation::Always,
            "serving replicas hold every acknowledged write",
            |m, s| {
                let Some(current) = mgmtd_of(m, s).and_then(|m| m.machine.routing()) else {
                    return true;
                };
                let Some(chain) = current.chain(CHAIN) else {
                    return true;
                };
                let acked = m.history(s).acked.unwrap_or_default();
                storages(m, s).filter(|st| !st.halted).all(|st| {
                    let own = st.node.routing().chain(CHAIN);
                    st.node.targets().all(|t| {
                        let serving = own.is_some_and(|c| {
                            c.version == chain.version
                                && c.state_of(t.id)
                                    == Some(t3fs_core::routing::PublicState::Serving)
                        });
                        let committed = st.store.chunks().get(&CHUNK).map(|c| c.committed);
                        !serving
                            || t.local_state != t3fs_core::routing::LocalState::UpToDate
                            || committed.unwrap_or_default() >= acked
                    })
                })
            },
        );
    let model = if recovers {
        model.property(
            Expectation::Eventually,
            "the chain returns to all-SERVING",
            |m, s| {
                mgmtd_of(m, s)
                    .and_then(|m| m.machine.routing())
                    .and_then(|r| r.chain(CHAIN))
                    .is_some_and(|c| {
                        c.targets
                            .iter()
                            .all(|t| t.state == t3fs_core::routing::PublicState::Serving)
                    })
            },
        )
    } else {
        model
    };
    let model = if heals {
        model.property(
            Expectation::Sometimes,
            "a restarted replica is resynced and promoted",
            |m, s| mgmtd_of(m, s).is_some_and(|m| m.promoted),
        )
    } else {
        model
    };
    // With lease lapses, the false suspicion that the lease must make safe has to happen.
    if model.cfg.storage_lease && model.cfg.lease_lapses > 0 {
        model.property(
            Expectation::Sometimes,
            "a live replica is suspected and taken out of SERVING",
            |m, s| mgmtd_of(m, s).is_some_and(|m| m.demoted_live),
        )
    } else {
        model
    }
}

/// Builds the CRAQ model for `cfg`.
pub fn build(cfg: CraqConfig) -> CraqModel {
    // Written values are bits of 16-bit sets (history summaries, committed values) and clients
    // slots of the summaries; node ids are bits of 64-bit masks.
    assert!(
        cfg.clients <= super::consistency::MAX_CLIENTS && cfg.clients * cfg.writes < 16,
        "at most {} clients and 15 writes in all",
        super::consistency::MAX_CLIENTS
    );
    assert!(1 + cfg.replicas + cfg.clients <= 64, "at most 64 nodes");
    let actors = actors(&cfg);
    let writes_expected = cfg.clients > 0 && cfg.writes > 0;
    let failover_expected = cfg.failures > 0 && writes_expected;
    let cfg_mgmtd = cfg.mgmtd;
    let retry_expected = cfg.failures > 0 && cfg.client_retries > 0 && writes_expected;
    // The mgmtd model delivers each link in order (TCP between live processes): its many
    // concurrent control messages would otherwise multiply interleavings that the protocol
    // treats alike (a stale push after a newer one is ignored by version), and the state
    // space would not fit in memory. The CRAQ model keeps full reordering.
    let links = if cfg_mgmtd {
        Links::Fifo
    } else {
        Links::Unordered
    };
    let history = CraqHistory::new(&cfg);
    let consistency = history.register.name();
    let model = ActorSystem::new(cfg, history, actors, links);
    let model = wire(replica_properties(model, consistency));
    let model = if model.cfg.mgmtd {
        mgmtd_properties(model)
    } else {
        model
    };
    // Reachability goals that only make sense when the configuration allows them: a model with
    // failures must reach a failover, and one with client retries must reach a retried write.
    reachability_goals(model, writes_expected, failover_expected, retry_expected)
}

/// The actors of `cfg`: mgmtd (or the oracle) as node 0, then the replicas, then the clients.
fn actors(cfg: &CraqConfig) -> Vec<CraqNode> {
    let mut actors = vec![CraqNode {
        role: if cfg.mgmtd {
            CraqActor::Mgmtd
        } else {
            CraqActor::Oracle
        },
        cfg: cfg.clone(),
    }];
    actors.extend((0..cfg.replicas).map(|_| CraqNode {
        role: CraqActor::Storage,
        cfg: cfg.clone(),
    }));
    actors.extend((0..cfg.clients).map(|k| CraqNode {
        role: CraqActor::Client(cfg.script(k)),
        cfg: cfg.clone(),
    }));
    actors
}

/// The properties of every CRAQ model: read `consistency`, the replicas' versions, liveness.
fn replica_properties(model: CraqModel, consistency: &'static str) -> CraqModel {
    model
        .property(Expectation::Always, consistency, |m, s| {
            m.history(s).violation.is_none()
        })
        .property(Expectation::Always, "no acknowledged write lost", |m, s| {
            let Some(acked) = m.history(s).acked else {
                return true;
            };
            let live = (1..=m.cfg.replicas)
                .map(|i| m.fact(s, i))
                .filter(|f| f & fact::HALTED == 0);
            let mut any = false;
            for f in live {
                any = true;
                if fact::committed(f).is_some_and(|v| v >= acked.0) {
                    return true;
                }
            }
            !any
        })
        .property(Expectation::Always, "pending = committed + 1", |m, s| {
            !any_replica(m, s, fact::PENDING_NOT_NEXT)
        })
        .property(Expectation::Always, "versions never decrease", |m, s| {
            !any_replica(m, s, fact::REGRESSION)
        })
        .property(Expectation::Always, "no write applied twice", |m, s| {
            !any_replica(m, s, fact::APPLIED_TWICE)
        })
        // Liveness, checked on terminal states: no client is left waiting forever (it finishes
        // its script, or gives up after its retry budget). A breadth-first search can miss
        // violations that are reached only through already-visited states; it cannot report
        // false ones.
        .property(
            Expectation::Eventually,
            "every client finishes or gives up",
            |m, s| !any_client(m, s, fact::CLIENT_RUNNING),
        )
}

/// The model's hooks: facts, history records and steps, the canonicalizer, the boundary.
fn wire(model: CraqModel) -> CraqModel {
    model
        .facts(facts)
        .records(|e| {
            matches!(
                e.msg,
                CraqMsg::History { .. } | CraqMsg::Wire(Msg::Write(_))
            )
        })
        .record_msg_out(history::record_out)
        .begin_step(CraqHistory::begin_step)
        .canonicalize(canonicalize)
        // No boundary: the canonicalizer disarms fail-stop and restart timers once their budget
        // is spent, so no state exceeds it (debug builds check).
        .boundary(|m, s| {
            debug_assert!({
                let (crashes, restarts) = faults((1..=m.cfg.replicas).map(|i| m.fact(s, i)));
                crashes <= m.cfg.failures && restarts <= m.cfg.recoveries
            });
            true
        })
}

/// The `Sometimes` goals: an acknowledged write, one after a failover, a retried one.
fn reachability_goals(
    model: CraqModel,
    writes_expected: bool,
    failover_expected: bool,
    retry_expected: bool,
) -> CraqModel {
    let model = if writes_expected {
        model.property(Expectation::Sometimes, "a write is acknowledged", |m, s| {
            m.history(s).acked.is_some()
        })
    } else {
        model
    };
    let model = if failover_expected {
        model.property(
            Expectation::Sometimes,
            "a write is acknowledged after a failover",
            |m, s| m.history(s).acked_after_failover,
        )
    } else {
        model
    };
    if retry_expected {
        model.property(
            Expectation::Sometimes,
            "a retried write is acknowledged",
            |m, s| m.history(s).retried_write_acked,
        )
    } else {
        model
    }
}
