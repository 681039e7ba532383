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

/// What planning one call yields: `Err(None)` when there is nothing to change.
type Planned = Result<(), Option<AdminError>>;

/// Plans a persisted admin call. `Err(None)`: nothing to change.
pub(super) fn plan(p: &Primary, call: &AdminCall) -> Result<AdminPlan, Option<AdminError>> {
    let mut plan = AdminPlan {
        next: (*p.routing).clone(),
        rows: Vec::new(),
        disabled: None,
        new_chains: Vec::new(),
    };
    match call {
        AdminCall::SetChains(list) => set_chains(&mut plan, list)?,
        AdminCall::SetChainTable { table, chains } => set_chain_table(&mut plan, *table, chains)?,
        AdminCall::AddTarget { chain, target } => add_target(&mut plan, *chain, *target)?,
        AdminCall::RemoveTarget { chain, target } => remove_target(&mut plan, *chain, *target)?,
        AdminCall::RotateLastSrv(chain) => rotate_last_srv(&mut plan, *chain)?,
        AdminCall::SetNodeDisabled { node, disabled } => {
            set_node_disabled(&mut plan, p, *node, *disabled)?
        }
        AdminCall::OfflineTarget(_) | AdminCall::OnlineTarget(_) => {
            unreachable!("volatile admin calls are applied without a transaction")
        }
    }
    Ok(plan)
}

/// Creates the listed chains that do not exist; an existing one must have the same targets.
fn set_chains(plan: &mut AdminPlan, list: &[(ChainId, Vec<TargetId>)]) -> Planned {
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
            if let Some(other) = plan.next.chain_of_target(*t).filter(|c| c.chain != *chain) {
                return invalid(format!("{t} already belongs to {}", other.chain));
            }
        }
        match plan.next.chains.get(chain) {
            Some(existing) => {
                let mut a: Vec<TargetId> = existing.targets.iter().map(|t| t.target).collect();
                let mut b = targets.clone();
                a.sort();
                b.sort();
                if a != b {
                    return invalid(format!("{chain} exists with other targets"));
                }
            }
            None => {
                let c = ChainInfo::all_serving(*chain, ChainVersion(1), targets);
                let row = Mutation::Set(store::chain_key(*chain), store::encode(&c));
                plan.rows.push(row);
                plan.next.chains.insert(*chain, c);
                plan.new_chains.push(*chain);
            }
        }
    }
    if plan.rows.is_empty() {
        return Err(None);
    }
    Ok(())
}

/// Publishes a new version of chain table `table`, unless its latest already lists `chains`.
fn set_chain_table(plan: &mut AdminPlan, table: u32, chains: &[ChainId]) -> Planned {
    if chains.is_empty() {
        return invalid(format!("table {table}: no chains"));
    }
    let mut len = None;
    for c in chains {
        let Some(info) = plan.next.chains.get(c) else {
            return invalid(format!("table {table}: no chain {c}"));
        };
        if *len.get_or_insert(info.targets.len()) != info.targets.len() {
            return invalid(format!("table {table}: chains of unequal length"));
        }
    }
    let version = match plan.next.latest_table(table) {
        Some((_, list)) if list == chains => return Err(None),
        Some((v, _)) => v + 1,
        None => 1,
    };
    plan.rows.push(Mutation::Set(
        store::table_key(table, version),
        store::encode_table(chains),
    ));
    plan.next
        .chain_tables
        .insert((table, version), chains.to_vec());
    Ok(())
}

/// Appends `target` to `chain` as OFFLINE (it joins through a resync).
fn add_target(plan: &mut AdminPlan, chain: ChainId, target: TargetId) -> Planned {
    if let Some(other) = plan.next.chain_of_target(target) {
        return invalid(format!("{target} already belongs to {}", other.chain));
    }
    let Some(c) = plan.next.chains.get_mut(&chain) else {
        return invalid(format!("no chain {chain}"));
    };
    if c.targets.len() >= CHAIN_TARGETS_MAX {
        return invalid(format!("{chain} is full"));
    }
    c.targets.push(ChainTarget {
        target,
        state: PublicState::Offline,
    });
    bump(c);
    plan.rows
        .push(Mutation::Set(store::chain_key(chain), store::encode(&*c)));
    Ok(())
}

/// Removes an OFFLINE `target` from `chain` (never its last target).
fn remove_target(plan: &mut AdminPlan, chain: ChainId, target: TargetId) -> Planned {
    let Some(c) = plan.next.chains.get_mut(&chain) else {
        return invalid(format!("no chain {chain}"));
    };
    match c.state_of(target) {
        Some(PublicState::Offline) if c.targets.len() > 1 => {}
        Some(s) if s != PublicState::Offline => {
            return invalid(format!("{target} is {s:?}, not OFFLINE"))
        }
        Some(_) => return invalid(format!("{target} is the last target of {chain}")),
        None => return invalid(format!("{target} is not in {chain}")),
    }
    c.targets.retain(|t| t.target != target);
    bump(c);
    plan.rows
        .push(Mutation::Set(store::chain_key(chain), store::encode(&*c)));
    plan.rows.push(Mutation::Clear(store::target_key(target)));
    plan.next.targets.remove(&target);
    Ok(())
}

/// Moves `chain`'s LASTSRV head to the end as OFFLINE and makes the next target LASTSRV.
fn rotate_last_srv(plan: &mut AdminPlan, chain: ChainId) -> Planned {
    let Some(c) = plan.next.chains.get_mut(&chain) else {
        return invalid(format!("no chain {chain}"));
    };
    if c.targets.first().map(|t| t.state) != Some(PublicState::LastSrv) || c.targets.len() < 2 {
        return invalid(format!("{chain} has no LASTSRV to rotate"));
    }
    let mut last = c.targets.remove(0);
    last.state = PublicState::Offline;
    c.targets[0].state = PublicState::LastSrv;
    c.targets.push(last);
    bump(c);
    plan.rows
        .push(Mutation::Set(store::chain_key(chain), store::encode(&*c)));
    Ok(())
}

/// Disables or enables `node` (a disabled node's heartbeats are refused).
fn set_node_disabled(plan: &mut AdminPlan, p: &Primary, node: NodeId, d: bool) -> Planned {
    if p.disabled.contains(&node) == d {
        return Err(None);
    }
    let mut set = p.disabled.clone();
    if d {
        set.insert(node);
    } else {
        set.remove(&node);
    }
    plan.rows.push(Mutation::Set(
        store::node_key(node),
        store::encode(&NodeRow { disabled: d }),
    ));
    plan.disabled = Some(set);
    Ok(())
}
