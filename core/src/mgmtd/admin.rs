//! Admin operations of mgmtd (3FS admin_cli: set chains / chain table, update chain add/remove,
//! offline target, rotate LASTSRV, enable/disable node) as plans over the primary's state.
//!
//! A plan is validated against the persisted state the writer just confirmed is current, and
//! yields the next routing info plus the KV rows to write; `Err(None)` means "already so"
//! (answered as success without a write). Volatile operations (offline/online target) need no
//! transaction and are applied by `Mgmtd::on_admin` directly. Not here: the transaction itself.

use std::collections::BTreeSet;

use super::store::{self, NodeRow};
use super::{AdminCall, AdminError, Primary};
use crate::ids::{ChainId, ChainVersion, NodeId, TargetId};
use crate::kv::Mutation;
use crate::limits::CHAIN_TARGETS_MAX;
use crate::routing::{ChainInfo, ChainTarget, PublicState, RoutingInfo};

/// What an admin call writes.
pub(super) struct AdminPlan {
    pub next: RoutingInfo,
    pub rows: Vec<Mutation>,
    pub disabled: Option<BTreeSet<NodeId>>,
    pub new_chains: Vec<ChainId>,
}

fn invalid<T>(msg: String) -> Result<T, Option<AdminError>> {
    Err(Some(AdminError::Invalid(msg)))
}

fn bump(chain: &mut ChainInfo) {
    chain.version = ChainVersion(chain.version.0 + 1);
}

/// Plans a persisted admin call. `Err(None)`: nothing to change.
pub(super) fn plan(p: &Primary, call: &AdminCall) -> Result<AdminPlan, Option<AdminError>> {
    let mut next = (*p.routing).clone();
    let mut rows = Vec::new();
    let mut new_chains = Vec::new();
    let mut disabled = None;
    match call {
        AdminCall::SetChains(list) => {
            let mut seen = BTreeSet::new();
            for (chain, targets) in list {
                if targets.is_empty() || targets.len() > CHAIN_TARGETS_MAX {
                    return invalid(format!(
                        "{chain}: {} targets (1..={CHAIN_TARGETS_MAX})",
                        targets.len()
                    ));
                }
                for t in targets {
                    if !seen.insert(*t) {
                        return invalid(format!("{t} listed twice"));
                    }
                    if let Some(other) = next.chain_of_target(*t).filter(|c| c.chain != *chain) {
                        return invalid(format!("{t} already belongs to {}", other.chain));
                    }
                }
                match next.chains.get(chain) {
                    Some(existing) => {
                        let mut a: Vec<TargetId> =
                            existing.targets.iter().map(|t| t.target).collect();
                        let mut b = targets.clone();
                        a.sort();
                        b.sort();
                        if a != b {
                            return invalid(format!("{chain} exists with other targets"));
                        }
                    }
                    None => {
                        let c = ChainInfo::all_serving(*chain, ChainVersion(1), targets);
                        rows.push(Mutation::Set(store::chain_key(*chain), store::encode(&c)));
                        next.chains.insert(*chain, c);
                        new_chains.push(*chain);
                    }
                }
            }
            if rows.is_empty() {
                return Err(None);
            }
        }
        AdminCall::SetChainTable { table, chains } => {
            if chains.is_empty() {
                return invalid(format!("table {table}: no chains"));
            }
            let mut len = None;
            for c in chains {
                let Some(info) = next.chains.get(c) else {
                    return invalid(format!("table {table}: no chain {c}"));
                };
                if *len.get_or_insert(info.targets.len()) != info.targets.len() {
                    return invalid(format!("table {table}: chains of unequal length"));
                }
            }
            let version = match next.latest_table(*table) {
                Some((_, list)) if list == chains.as_slice() => return Err(None),
                Some((v, _)) => v + 1,
                None => 1,
            };
            rows.push(Mutation::Set(
                store::table_key(*table, version),
                store::encode_table(chains),
            ));
            next.chain_tables.insert((*table, version), chains.clone());
        }
        AdminCall::AddTarget { chain, target } => {
            if let Some(other) = next.chain_of_target(*target) {
                return invalid(format!("{target} already belongs to {}", other.chain));
            }
            let Some(c) = next.chains.get_mut(chain) else {
                return invalid(format!("no chain {chain}"));
            };
            if c.targets.len() >= CHAIN_TARGETS_MAX {
                return invalid(format!("{chain} is full"));
            }
            c.targets.push(ChainTarget {
                target: *target,
                state: PublicState::Offline,
            });
            bump(c);
            rows.push(Mutation::Set(store::chain_key(*chain), store::encode(&*c)));
        }
        AdminCall::RemoveTarget { chain, target } => {
            let Some(c) = next.chains.get_mut(chain) else {
                return invalid(format!("no chain {chain}"));
            };
            match c.state_of(*target) {
                Some(PublicState::Offline) if c.targets.len() > 1 => {}
                Some(s) if s != PublicState::Offline => {
                    return invalid(format!("{target} is {s:?}, not OFFLINE"))
                }
                Some(_) => return invalid(format!("{target} is the last target of {chain}")),
                None => return invalid(format!("{target} is not in {chain}")),
            }
            c.targets.retain(|t| t.target != *target);
            bump(c);
            rows.push(Mutation::Set(store::chain_key(*chain), store::encode(&*c)));
            rows.push(Mutation::Clear(store::target_key(*target)));
            next.targets.remove(target);
        }
        AdminCall::RotateLastSrv(chain) => {
            let Some(c) = next.chains.get_mut(chain) else {
                return invalid(format!("no chain {chain}"));
            };
            if c.targets.first().map(|t| t.state) != Some(PublicState::LastSrv)
                || c.targets.len() < 2
            {
                return invalid(format!("{chain} has no LASTSRV to rotate"));
            }
            let mut last = c.targets.remove(0);
            last.state = PublicState::Offline;
            c.targets[0].state = PublicState::LastSrv;
            c.targets.push(last);
            bump(c);
            rows.push(Mutation::Set(store::chain_key(*chain), store::encode(&*c)));
        }
        AdminCall::SetNodeDisabled { node, disabled: d } => {
            if p.disabled.contains(node) == *d {
                return Err(None);
            }
            let mut set = p.disabled.clone();
            if *d {
                set.insert(*node);
            } else {
                set.remove(node);
            }
            rows.push(Mutation::Set(
                store::node_key(*node),
                store::encode(&NodeRow { disabled: *d }),
            ));
            disabled = Some(set);
        }
        AdminCall::OfflineTarget(_) | AdminCall::OnlineTarget(_) => {
            unreachable!("volatile admin calls are applied without a transaction")
        }
    }
    Ok(AdminPlan {
        next,
        rows,
        disabled,
        new_chains,
    })
}
