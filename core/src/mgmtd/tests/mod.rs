//! Handler tests of mgmtd driven against the in-memory KV: election and load, heartbeats and
//! their refusals, failure detection and chain re-ordering, fencing of a deposed primary (and
//! the planted bug that removes it), routing-version monotonicity across failover, the
//! `CommitUnknown` reaction; `admin.rs` holds admin operations and sessions.

use core::time::Duration;

use super::*;
use crate::ids::{ChainVersion, RequestId, TargetId};
use crate::kv::mem::{MemKv, MemKvFault};
use crate::kv::{self, KvEngine};
use crate::machine::{Action, ActionOf, IoOp, IoResult};
use crate::msg::{Heartbeat, LocalTargetInfo, MgmtdStatus};
use crate::routing::PublicState;

const SEC: u64 = 1_000_000_000;

fn at(s: u64) -> Instant {
    Instant(s * SEC)
}

/// Runs one event and executes every KV I/O it (transitively) submits against `kv` at once.
fn run(m: &mut Mgmtd, kv: &mut MemKv, now: Instant, event: Option<Event>) -> Vec<Action<Mgmtd>> {
    let mut out = Outbox::new();
    match event {
        Some(e) => m.handle(now, e, &mut out),
        None => m.start(now, &mut out),
    }
    let mut rest = Vec::new();
    let mut pending: Vec<Action<Mgmtd>> = out.drain();
    while !pending.is_empty() {
        let mut next = Vec::new();
        for a in pending {
            match a {
                ActionOf::Io {
                    id,
                    op: IoOp::Kv(op),
                } => {
                    let result = IoResult::Kv(kv::execute(kv, op));
                    let mut o = Outbox::new();
                    m.handle(now, EventOf::IoDone { id, result }, &mut o);
                    m.check_invariants();
                    next.extend(o.drain());
                }
                other => rest.push(other),
            }
        }
        pending = next;
    }
    rest
}

type Event = EventOf<Msg, MgmtdTimer, AdminCall>;

/// Fires `timer` at `now`.
fn fire(m: &mut Mgmtd, kv: &mut MemKv, now: Instant, timer: MgmtdTimer) -> Vec<Action<Mgmtd>> {
    run(m, kv, now, Some(EventOf::Timer(timer)))
}

fn mgmtd(node: u32) -> Mgmtd {
    let mut cfg = MgmtdConfig::new(NodeId(node.into()));
    cfg.push_routing_to = vec![NodeId(50)];
    // Long enough that tests spanning heartbeat deadlines need no lease extensions.
    cfg.lease_length = Duration::from_secs(1000);
    Mgmtd::new(cfg)
}

fn admin(m: &mut Mgmtd, kv: &mut MemKv, now: Instant, call: AdminCall) -> AdminRet {
    let acts = run(
        m,
        kv,
        now,
        Some(EventOf::Call {
            req: RequestId(9),
            call,
        }),
    );
    acts.into_iter()
        .find_map(|a| match a {
            ActionOf::Return { ret, .. } => Some(ret),
            _ => None,
        })
        .expect("admin call answered")
}

fn heartbeat(node: u32, v: u64, now: Instant, targets: &[(u32, LocalState)]) -> Event {
    EventOf::Recv {
        from: NodeId(node.into()),
        msg: Msg::Heartbeat(Heartbeat {
            node: NodeId(node.into()),
            hb_version: v,
            timestamp: now.0,
            targets: targets
                .iter()
                .map(|&(t, state)| LocalTargetInfo {
                    fresh: false,
                    target: TargetId(t),
                    state,
                    chain_version: ChainVersion(0),
                })
                .collect(),
        }),
    }
}

fn hb_status(acts: &[Action<Mgmtd>]) -> Option<MgmtdStatus> {
    // Accepted heartbeats get no reply.
    let reply = acts.iter().find_map(|a| match a {
        ActionOf::Send {
            msg: Msg::HeartbeatReply(r),
            ..
        } => Some(r.status),
        _ => None,
    });
    Some(reply.unwrap_or(MgmtdStatus::Ok))
}

fn chain_states(m: &Mgmtd) -> Vec<(u32, PublicState)> {
    m.routing().unwrap().chains[&ChainId(1)]
        .targets
        .iter()
        .map(|t| (t.target.0, t.state))
        .collect()
}

/// A primary with chain c1 = [t1, t2, t3] on nodes n1..n3, all reported UPTODATE.
fn cluster() -> (Mgmtd, MemKv) {
    let (mut m, mut kv) = (mgmtd(100), MemKv::new(1000));
    run(&mut m, &mut kv, at(0), None);
    assert!(m.is_primary(at(0)));
    let call = AdminCall::SetChains(vec![(
        ChainId(1),
        vec![TargetId(1), TargetId(2), TargetId(3)],
    )]);
    assert!(matches!(
        admin(&mut m, &mut kv, at(1), call),
        AdminRet::Ok(_)
    ));
    for n in 1..=3 {
        let acts = run(
            &mut m,
            &mut kv,
            at(2),
            Some(heartbeat(n, 1, at(2), &[(n, LocalState::UpToDate)])),
        );
        assert_eq!(hb_status(&acts), Some(MgmtdStatus::Ok));
    }
    (m, kv)
}

#[test]
fn first_mgmtd_takes_the_lease_and_loads() {
    let (mut m, mut kv) = (mgmtd(100), MemKv::new(1000));
    run(&mut m, &mut kv, at(0), None);
    assert!(m.is_primary(at(0)));
    assert_eq!(
        m.routing().unwrap().version,
        RoutingVersion(1),
        "a new tenure bumps the version"
    );
    assert_eq!(m.lease().unwrap().primary, NodeId(100));
    // Trust ends 20 s before the lease does.
    assert!(m.is_primary(at(979)) && !m.is_primary(at(980)));
    // Extension keeps the tenure (same start) and moves the end.
    fire(&mut m, &mut kv, at(30), MgmtdTimer::ExtendLease);
    assert!(m.is_primary(at(1000)));
    assert_eq!(m.lease().unwrap().start, 0);
    assert_eq!(m.counters().tenures, 1);
}

#[test]
fn failed_node_is_detected_and_its_target_moves_behind_the_alive_ones() {
    let (mut m, mut kv) = cluster();
    let v0 = m.routing().unwrap().version;
    // Heartbeats persisted where the targets live.
    assert_eq!(m.routing().unwrap().node_of(TargetId(2)), Some(NodeId(2)));
    fire(&mut m, &mut kv, at(3), MgmtdTimer::UpdateChains);
    assert_eq!(
        chain_states(&m),
        vec![
            (1, PublicState::Serving),
            (2, PublicState::Serving),
            (3, PublicState::Serving)
        ]
    );
    fire(
        &mut m,
        &mut kv,
        at(62),
        MgmtdTimer::HeartbeatDeadline(NodeId(2)),
    );
    let acts = fire(&mut m, &mut kv, at(63), MgmtdTimer::UpdateChains);
    assert_eq!(
        chain_states(&m),
        vec![
            (1, PublicState::Serving),
            (3, PublicState::Serving),
            (2, PublicState::Offline)
        ]
    );
    let r = m.routing().unwrap();
    assert_eq!(r.chains[&ChainId(1)].version, ChainVersion(2));
    assert!(r.version > v0);
    assert!(acts.iter().any(|a| matches!(a, ActionOf::Send { to: NodeId(50), msg: Msg::Routing(r) } if r.version == m.routing().unwrap().version)));
    // The KV holds exactly what mgmtd serves.
    let v = kv.read_version().unwrap();
    let row = kv.get(v, &store::chain_key(ChainId(1))).unwrap().unwrap();
    assert_eq!(store::decode_chain(&row).unwrap(), r.chains[&ChainId(1)]);
    // It comes back ONLINE: straight to SYNCING behind the serving prefix.
    run(
        &mut m,
        &mut kv,
        at(70),
        Some(heartbeat(2, 5, at(70), &[(2, LocalState::Online)])),
    );
    fire(&mut m, &mut kv, at(71), MgmtdTimer::UpdateChains);
    assert_eq!(
        chain_states(&m),
        vec![
            (1, PublicState::Serving),
            (3, PublicState::Serving),
            (2, PublicState::Syncing)
        ]
    );
    // Sync done: UPTODATE promotes it to the tail.
    run(
        &mut m,
        &mut kv,
        at(72),
        Some(heartbeat(2, 6, at(72), &[(2, LocalState::UpToDate)])),
    );
    fire(&mut m, &mut kv, at(73), MgmtdTimer::UpdateChains);
    assert_eq!(
        chain_states(&m),
        vec![
            (1, PublicState::Serving),
            (3, PublicState::Serving),
            (2, PublicState::Serving)
        ]
    );
    assert_eq!(
        m.routing().unwrap().chains[&ChainId(1)].version,
        ChainVersion(4)
    );
}

#[test]
fn heartbeats_are_validated() {
    let (mut m, mut kv) = cluster();
    let stale = run(
        &mut m,
        &mut kv,
        at(3),
        Some(heartbeat(1, 1, at(3), &[(1, LocalState::UpToDate)])),
    );
    assert_eq!(
        hb_status(&stale),
        Some(MgmtdStatus::StaleHeartbeat { last: 1 })
    );
    let skewed = run(
        &mut m,
        &mut kv,
        at(3),
        Some(heartbeat(1, 2, at(40), &[(1, LocalState::UpToDate)])),
    );
    assert_eq!(hb_status(&skewed), Some(MgmtdStatus::BadTimestamp));
    let dup = run(
        &mut m,
        &mut kv,
        at(3),
        Some(heartbeat(
            1,
            2,
            at(3),
            &[(1, LocalState::UpToDate), (1, LocalState::Online)],
        )),
    );
    assert_eq!(hb_status(&dup), Some(MgmtdStatus::Invalid));
    let call = AdminCall::SetNodeDisabled {
        node: NodeId(3),
        disabled: true,
    };
    assert!(matches!(
        admin(&mut m, &mut kv, at(4), call),
        AdminRet::Ok(_)
    ));
    let disabled = run(
        &mut m,
        &mut kv,
        at(4),
        Some(heartbeat(3, 2, at(4), &[(3, LocalState::UpToDate)])),
    );
    assert_eq!(hb_status(&disabled), Some(MgmtdStatus::Disabled));
    // A stale report (older chain version) does not override mgmtd's view.
    fire(
        &mut m,
        &mut kv,
        at(62),
        MgmtdTimer::HeartbeatDeadline(NodeId(2)),
    );
    fire(&mut m, &mut kv, at(63), MgmtdTimer::UpdateChains);
    let mut old = heartbeat(2, 9, at(63), &[(2, LocalState::UpToDate)]);
    if let EventOf::Recv {
        msg: Msg::Heartbeat(hb),
        ..
    } = &mut old
    {
        hb.targets[0].chain_version = ChainVersion(1);
    }
    run(&mut m, &mut kv, at(63), Some(old));
    assert_eq!(
        m.primary().unwrap().local[&TargetId(2)],
        LocalState::Offline
    );
    // A secondary redirects.
    let (mut s, _) = (mgmtd(101), ());
    let acts = run(&mut s, &mut kv, at(5), None);
    assert!(acts.is_empty() || !s.is_primary(at(5)));
    let acts = run(
        &mut s,
        &mut kv,
        at(5),
        Some(heartbeat(1, 3, at(5), &[(1, LocalState::UpToDate)])),
    );
    assert_eq!(
        hb_status(&acts),
        Some(MgmtdStatus::NotPrimary {
            primary: Some(NodeId(100))
        })
    );
}

/// Two mgmtds, one KV. m1's clock is 100 s behind m2's, so m1 still trusts its lease after m2
/// took the expired row over: only the lease re-check inside m1's transaction stops it.
fn takeover(bug: Option<MgmtdBug>) -> (Mgmtd, Mgmtd, MemKv, AdminRet) {
    let mut kv = MemKv::new(1000);
    let mut m1 = mgmtd(100);
    Arc::make_mut(&mut m1.cfg).bug = bug;
    run(&mut m1, &mut kv, at(0), None);
    let mut m2 = mgmtd(101);
    run(&mut m2, &mut kv, at(2000), None);
    assert!(m2.is_primary(at(2000)), "m2 takes over the expired lease");
    assert!(m1.is_primary(at(10)), "m1's clock says its lease is fine");
    let call = AdminCall::SetChains(vec![(ChainId(7), vec![TargetId(1)])]);
    let ret = admin(&mut m1, &mut kv, at(10), call);
    (m1, m2, kv, ret)
}

#[test]
fn a_deposed_primary_cannot_commit() {
    let (m1, m2, mut kv, ret) = takeover(None);
    assert_eq!(
        ret,
        AdminRet::Failed(AdminError::NotPrimary(Some(NodeId(101))))
    );
    assert!(!m1.is_primary(at(10)), "m1 stepped down");
    let v = kv.read_version().unwrap();
    assert_eq!(kv.get(v, &store::chain_key(ChainId(7))).unwrap(), None);
    assert!(
        m2.routing().unwrap().version > RoutingVersion(1),
        "versions grow across tenures"
    );
}

#[test]
fn unfenced_writes_let_a_deposed_primary_commit() {
    let (_, m2, mut kv, ret) = takeover(Some(MgmtdBug::UnfencedWrites));
    assert!(
        matches!(ret, AdminRet::Ok(_)),
        "the planted bug must let the write through: {ret:?}"
    );
    let v = kv.read_version().unwrap();
    assert!(kv.get(v, &store::chain_key(ChainId(7))).unwrap().is_some());
    // And the routing version in the KV no longer matches what the real primary serves.
    let stored: u64 =
        store::decode(&kv.get(v, store::ROUTING_VERSION_KEY).unwrap().unwrap()).unwrap();
    assert!(
        stored <= m2.routing().unwrap().version.0,
        "version regressed or collided: {stored}"
    );
}

#[test]
fn commit_unknown_reloads_before_writing_again() {
    let (mut m, mut kv) = cluster();
    fire(&mut m, &mut kv, at(3), MgmtdTimer::UpdateChains);
    fire(
        &mut m,
        &mut kv,
        at(62),
        MgmtdTimer::HeartbeatDeadline(NodeId(3)),
    );
    kv.inject(MemKvFault::CommitUnknownApplied);
    let acts = fire(&mut m, &mut kv, at(63), MgmtdTimer::UpdateChains);
    assert!(acts.iter().any(|a| matches!(
        a,
        ActionOf::SetTimer {
            timer: MgmtdTimer::WriterRetry,
            ..
        }
    )));
    fire(&mut m, &mut kv, at(64), MgmtdTimer::WriterRetry);
    // The reload found the applied chain change; nothing was applied twice.
    assert_eq!(
        chain_states(&m),
        vec![
            (1, PublicState::Serving),
            (2, PublicState::Serving),
            (3, PublicState::Offline)
        ]
    );
    assert_eq!(
        m.routing().unwrap().chains[&ChainId(1)].version,
        ChainVersion(2)
    );
    let v = kv.read_version().unwrap();
    let stored: u64 =
        store::decode(&kv.get(v, store::ROUTING_VERSION_KEY).unwrap().unwrap()).unwrap();
    assert_eq!(
        stored,
        m.routing().unwrap().version.0,
        "memory and KV agree after the reload"
    );
}

#[test]
fn new_tenure_freezes_chains_until_targets_report() {
    let (mut m, mut kv) = cluster();
    fire(&mut m, &mut kv, at(3), MgmtdTimer::UpdateChains);
    // m2 takes over after m's lease expired; local states start OFFLINE at m2.
    let mut m2 = mgmtd(101);
    run(&mut m2, &mut kv, at(2000), None);
    fire(&mut m2, &mut kv, at(2001), MgmtdTimer::UpdateChains);
    assert_eq!(
        chain_states(&m2),
        vec![
            (1, PublicState::Serving),
            (2, PublicState::Serving),
            (3, PublicState::Serving)
        ],
        "frozen chain must not be rewritten from unreported states"
    );
    for n in 1..=3 {
        run(
            &mut m2,
            &mut kv,
            at(2002),
            Some(heartbeat(n, 1, at(2002), &[(n, LocalState::UpToDate)])),
        );
    }
    fire(&mut m2, &mut kv, at(2003), MgmtdTimer::UpdateChains);
    assert_eq!(
        m2.routing().unwrap().chains[&ChainId(1)].version,
        ChainVersion(1),
        "nothing changed"
    );
    // Past the freeze, an unreported target is treated as OFFLINE (3FS Appendix B #10 window).
    let mut m3 = mgmtd(102);
    run(&mut m3, &mut kv, at(4000), None);
    run(
        &mut m3,
        &mut kv,
        at(4001),
        Some(heartbeat(1, 1, at(4001), &[(1, LocalState::UpToDate)])),
    );
    fire(&mut m3, &mut kv, at(4130), MgmtdTimer::UpdateChains);
    assert_eq!(
        chain_states(&m3),
        vec![
            (1, PublicState::Serving),
            (2, PublicState::Offline),
            (3, PublicState::Offline)
        ]
    );
}

mod admin;
mod lease;
#[cfg(debug_assertions)]
mod publish;
mod swarm;
