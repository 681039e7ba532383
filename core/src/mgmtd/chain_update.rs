//! The chain update algorithm of 3FS mgmtd (§2.6.1, `updateChain.cc::generateNewChain`) as a
//! pure function: old ordered (target, public state) list + current local states → new list.
//!
//! Rules, exactly as the reference gives them: targets are processed grouped by *old* public
//! state in the order SERVING, LASTSRV, SYNCING, WAITING, OFFLINE (chain order within a group);
//! "a serving/syncing target exists" refers to what was already placed in the new chain; after
//! the pass, any LASTSRV is turned OFFLINE if a SERVING exists; the new order is SERVING…,
//! LASTSRV…, SYNCING…, WAITING…, OFFLINE… (stable within groups). The caller bumps the chain
//! version when the result differs.
//!
//! Invariants of the output for any valid input (see [`check_chain`]; tested exhaustively):
//! SERVING and LASTSRV never coexist, SYNCING and LASTSRV never coexist, at most one SYNCING and
//! one LASTSRV, SYNCING implies a SERVING, group order, serving order preserved, and a target only
//! becomes SERVING from SERVING, from SYNCING with its sync done (UPTODATE), or as the first
//! returning LASTSRV when nothing serves.
//!
//! Not here: the optional rotation toward `preferredTargetOrder` (3FS default off), persistence
//! and routing-version bumps (the mgmtd machine).

use crate::bugs::MgmtdBug;
use crate::ids::TargetId;
use crate::routing::{ChainTarget, LocalState, PublicState};

/// A row of the net transition table of §2.6.1, for reachability counters and tests.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum Row {
    /// SERVING, alive → SERVING.
    ServingStays,
    /// SERVING, down, another serving survives → OFFLINE.
    ServingDownOthersServe,
    /// SERVING, down, none survives, first in order (t3fs: first not fresh) → LASTSRV.
    ServingDownBecomesLastSrv,
    /// SERVING, down, none survives, not the pick → OFFLINE.
    ServingDownNotFirst,
    /// LASTSRV, back, nothing serves yet → SERVING.
    LastSrvReturns,
    /// LASTSRV, still down, nothing serves → LASTSRV.
    LastSrvWaits,
    /// LASTSRV while something serves → OFFLINE.
    LastSrvDeposed,
    /// SYNCING, sync done (UPTODATE) → SERVING.
    SyncDone,
    /// SYNCING, ONLINE, something serves → SYNCING.
    SyncingContinues,
    /// SYNCING, ONLINE, nothing serves → WAITING.
    SyncingLostSource,
    /// SYNCING, down → OFFLINE.
    SyncingDown,
    /// WAITING/OFFLINE, ONLINE, something serves, no other SYNCING → SYNCING.
    StartSync,
    /// WAITING/OFFLINE, alive otherwise → WAITING.
    Wait,
    /// WAITING/OFFLINE, down → OFFLINE.
    StaysDown,
}

impl Row {
    /// Every row, in table order.
    pub const ALL: [Row; 14] = [
        Row::ServingStays,
        Row::ServingDownOthersServe,
        Row::ServingDownBecomesLastSrv,
        Row::ServingDownNotFirst,
        Row::LastSrvReturns,
        Row::LastSrvWaits,
        Row::LastSrvDeposed,
        Row::SyncDone,
        Row::SyncingContinues,
        Row::SyncingLostSource,
        Row::SyncingDown,
        Row::StartSync,
        Row::Wait,
        Row::StaysDown,
    ];
}

/// What happened to one target in one update.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct Transition {
    /// The target.
    pub target: TargetId,
    /// Its local state as input.
    pub local: LocalState,
    /// Old public state.
    pub old: PublicState,
    /// New public state.
    pub new: PublicState,
    /// The table row that decided it.
    pub row: Row,
}

/// Position of a public state in the chain order of §2.6.1 step 7.
pub fn rank(state: PublicState) -> u8 {
    match state {
        PublicState::Serving => 0,
        PublicState::LastSrv => 1,
        PublicState::Syncing => 2,
        PublicState::Waiting => 3,
        PublicState::Offline => 4,
    }
}

fn alive(local: LocalState) -> bool {
    local != LocalState::Offline
}

/// Computes the new chain from `old` and each target's local state; `bug` plants a broken
/// variant (`None` is 3FS's algorithm). Returns the new ordered list and one transition per
/// target, in the new order.
pub fn generate_new_chain(
    old: &[ChainTarget],
    local: impl Fn(TargetId) -> LocalState,
    bug: Option<MgmtdBug>,
) -> (Vec<ChainTarget>, Vec<Transition>) {
    generate_new_chain_avoiding(old, local, |_| false, bug)
}

/// [`generate_new_chain`] with one t3fs change: when every SERVING target is down, LASTSRV goes
/// to the first in chain order that is not `fresh` (came up on an empty store and was never
/// synced since: maybe a replaced disk), and to the first in chain order only if all are
/// fresh. 3FS picks the first in chain order, and the swarm found it making an emptied head
/// LASTSRV, which then returned as SERVING with nothing and synced the intact replica empty.
pub fn generate_new_chain_avoiding(
    old: &[ChainTarget],
    local: impl Fn(TargetId) -> LocalState,
    fresh: impl Fn(TargetId) -> bool,
    bug: Option<MgmtdBug>,
) -> (Vec<ChainTarget>, Vec<Transition>) {
    use PublicState::*;
    let down_serving = || {
        old.iter()
            .filter(|t| t.state == Serving && !alive(local(t.target)))
            .map(|t| t.target)
    };
    let last_srv_pick = down_serving()
        .find(|t| !fresh(*t))
        .or_else(|| down_serving().next());
    let mut placed: Vec<Transition> = Vec::with_capacity(old.len());
    for group in [Serving, LastSrv, Syncing, Waiting, Offline] {
        for t in old.iter().filter(|t| t.state == group) {
            let l = local(t.target);
            let pick = Some(t.target) == last_srv_pick;
            let (new, row) = next_state(group, l, pick, &placed, bug);
            placed.push(Transition {
                target: t.target,
                local: l,
                old: group,
                new,
                row,
            });
        }
    }
    depose_when_serving(&mut placed);
    placed.sort_by_key(|t| rank(t.new)); // Stable: chain order kept within each group.
    let new: Vec<ChainTarget> = placed
        .iter()
        .map(|t| ChainTarget {
            target: t.target,
            state: t.new,
        })
        .collect();
    // The module's invariants, at the step that makes the chain (planted bugs break them on
    // purpose, and an invalid input has no promise to keep).
    if cfg!(debug_assertions) && bug.is_none() && check_chain(old).is_ok() {
        if let Err(e) = check_update(old, &new, &placed) {
            panic!("§2.6.1 broken: {} -> {}: {e}", render(old), render(&new));
        }
    }
    (new, placed)
}

/// Whether a target placed so far has public state `s`.
fn has(placed: &[Transition], s: PublicState) -> bool {
    placed.iter().any(|t| t.new == s)
}

/// The §2.6.1 table: the next public state of a target in `group` whose local state is `l`,
/// given the targets `placed` before it (`pick`: it is the failed SERVING target chosen to
/// become LASTSRV).
fn next_state(
    group: PublicState,
    l: LocalState,
    pick: bool,
    placed: &[Transition],
    bug: Option<MgmtdBug>,
) -> (PublicState, Row) {
    use PublicState::*;
    match group {
        Serving if alive(l) || bug == Some(MgmtdBug::KeepFailedTarget) => {
            (Serving, Row::ServingStays)
        }
        Serving if pick => (LastSrv, Row::ServingDownBecomesLastSrv),
        Serving => (Offline, Row::ServingDownNotFirst),
        LastSrv if has(placed, Serving) => (Offline, Row::LastSrvDeposed),
        LastSrv if alive(l) => (Serving, Row::LastSrvReturns),
        LastSrv => (LastSrv, Row::LastSrvWaits),
        Syncing => match l {
            LocalState::UpToDate => (Serving, Row::SyncDone),
            LocalState::Online if bug == Some(MgmtdBug::PromoteBeforeSyncDone) => {
                (Serving, Row::SyncDone)
            }
            LocalState::Online if has(placed, Serving) => (Syncing, Row::SyncingContinues),
            LocalState::Online => (Waiting, Row::SyncingLostSource),
            LocalState::Offline => (Offline, Row::SyncingDown),
        },
        Waiting | Offline => match l {
            LocalState::Online
                if has(placed, Serving)
                    && (!has(placed, Syncing) || bug == Some(MgmtdBug::TwoSyncing)) =>
            {
                (Syncing, Row::StartSync)
            }
            LocalState::Online | LocalState::UpToDate => (Waiting, Row::Wait),
            LocalState::Offline => (Offline, Row::StaysDown),
        },
    }
}

/// Post-pass: a LASTSRV placed before a serving target was found (the serving one came from a
/// later group) loses its status. Rows of failed SERVING targets are decided only now, when
/// it is known whether another target serves.
fn depose_when_serving(placed: &mut [Transition]) {
    use PublicState::*;
    if !has(placed, Serving) {
        return;
    }
    for t in placed.iter_mut() {
        match (t.old, t.new) {
            (Serving, LastSrv | Offline) => {
                t.new = Offline;
                t.row = Row::ServingDownOthersServe;
            }
            (_, LastSrv) => {
                t.new = Offline;
                t.row = Row::LastSrvDeposed;
            }
            _ => {}
        }
    }
}

/// Checks the §2.6.1 invariants of one chain's public states: SERVING and LASTSRV never
/// coexist, SYNCING and LASTSRV never coexist, at most one SYNCING and one LASTSRV, SYNCING
/// implies SERVING, and group order. Returns the first violation.
pub fn check_chain(chain: &[ChainTarget]) -> Result<(), String> {
    use PublicState::*;
    let count = |s: PublicState| chain.iter().filter(|t| t.state == s).count();
    let (serving, lastsrv, syncing) = (count(Serving), count(LastSrv), count(Syncing));
    let fail = |what: &str| Err(format!("{what}: {}", render(chain)));
    if serving > 0 && lastsrv > 0 {
        return fail("SERVING and LASTSRV coexist");
    }
    if syncing > 0 && lastsrv > 0 {
        return fail("SYNCING and LASTSRV coexist");
    }
    if syncing > 1 {
        return fail("more than one SYNCING");
    }
    if lastsrv > 1 {
        return fail("more than one LASTSRV");
    }
    if syncing > 0 && serving == 0 {
        return fail("SYNCING without a SERVING source");
    }
    if chain
        .windows(2)
        .any(|w| rank(w[0].state) > rank(w[1].state))
    {
        return fail("targets out of group order");
    }
    Ok(())
}

/// Checks one update `old → new` (given the transitions): the new chain's invariants, the same
/// targets, serving order preserved, and every new SERVING target legitimately sourced (was
/// SERVING; or SYNCING with sync done; or the first returning LASTSRV while nothing served).
pub fn check_update(
    old: &[ChainTarget],
    new: &[ChainTarget],
    tr: &[Transition],
) -> Result<(), String> {
    use PublicState::*;
    check_chain(new)?;
    let mut a: Vec<TargetId> = old.iter().map(|t| t.target).collect();
    let mut b: Vec<TargetId> = new.iter().map(|t| t.target).collect();
    a.sort();
    b.sort();
    if a != b {
        return Err("the update changed the set of targets".into());
    }
    let still: Vec<TargetId> = new
        .iter()
        .filter(|t| t.state == Serving)
        .map(|t| t.target)
        .filter(|id| old.iter().any(|o| o.target == *id && o.state == Serving))
        .collect();
    let before: Vec<TargetId> = old
        .iter()
        .filter(|o| o.state == Serving && still.contains(&o.target))
        .map(|o| o.target)
        .collect();
    if still != before {
        return Err(format!(
            "serving order changed: {} -> {}",
            render(old),
            render(new)
        ));
    }
    let old_serving = old.iter().any(|o| o.state == Serving);
    for t in tr.iter().filter(|t| t.new == Serving) {
        let ok = match t.old {
            Serving => true,
            Syncing => t.local == LocalState::UpToDate,
            LastSrv => !old_serving,
            Waiting | Offline => false,
        };
        if !ok {
            return Err(format!(
                "{} became SERVING from {:?} with local {:?}: {} -> {}",
                t.target,
                t.old,
                t.local,
                render(old),
                render(new)
            ));
        }
    }
    Ok(())
}

/// `[t1:SERVING t2:OFFLINE]`-style rendering for messages.
pub fn render(chain: &[ChainTarget]) -> String {
    let parts: Vec<String> = chain
        .iter()
        .map(|t| format!("{}:{}", t.target, state_name(t.state)))
        .collect();
    format!("[{}]", parts.join(" "))
}

/// 3FS's upper-case name of a public state.
pub fn state_name(s: PublicState) -> &'static str {
    match s {
        PublicState::Serving => "SERVING",
        PublicState::LastSrv => "LASTSRV",
        PublicState::Syncing => "SYNCING",
        PublicState::Waiting => "WAITING",
        PublicState::Offline => "OFFLINE",
    }
}

#[cfg(test)]
#[path = "chain_update_tests.rs"]
mod tests;
