//! Regression tests of mgmtd rules the simulator's swarm found missing (each names its seed): a
//! stalled primary, a load during a KV outage, a skewed clock, and a reload after CommitUnknown.

use super::*;

/// Swarm seed 260: a primary stalled past its lease woke up, fired every heartbeat deadline at
/// once and made an emptied head LASTSRV. A stalled primary must not blame the nodes for its own
/// silence.
#[test]
fn a_stalled_primary_does_not_blame_nodes_for_its_own_silence() {
    let (mut m, mut kv) = cluster();
    fire(&mut m, &mut kv, at(3), MgmtdTimer::UpdateChains);
    let before = chain_states(&m);
    // Woken inside the suspicious interval: the deadline is re-armed, the node stays up.
    let acts = fire(
        &mut m,
        &mut kv,
        at(990),
        MgmtdTimer::HeartbeatDeadline(NodeId(2)),
    );
    assert!(acts.iter().any(|a| matches!(
        a,
        ActionOf::SetTimer {
            timer: MgmtdTimer::HeartbeatDeadline(NodeId(2)),
            ..
        }
    )));
    assert_eq!(
        m.primary().unwrap().local[&TargetId(2)],
        LocalState::UpToDate
    );
    // Woken past the lease's end: the extension starts a new tenure that learns states afresh.
    fire(&mut m, &mut kv, at(1010), MgmtdTimer::ExtendLease);
    assert_eq!(m.counters().tenures, 2);
    assert_eq!(m.lease().unwrap().start, 1010 * SEC);
    let p = m.primary().unwrap();
    assert!(p.nodes.is_empty() && p.reported.is_empty());
    // The old tenure's deadline is void; the chain waits (frozen) for its targets' reports.
    fire(
        &mut m,
        &mut kv,
        at(1011),
        MgmtdTimer::HeartbeatDeadline(NodeId(2)),
    );
    fire(&mut m, &mut kv, at(1012), MgmtdTimer::UpdateChains);
    assert_eq!(chain_states(&m), before);
}

/// Swarm seed 663: the KV went away during a new tenure's load; the load was dropped after
/// three attempts and the primary stayed unloaded (answering nothing) for good.
#[test]
fn a_new_tenure_keeps_loading_through_a_long_kv_outage() {
    let (mut m, mut kv) = (mgmtd(100), MemKv::new(1000));
    let mut out = Outbox::new();
    m.start(at(0), &mut out);
    let mut pending: Vec<Action<Mgmtd>> = out.drain();
    let mut failed_loads = 0;
    for second in 1..30 {
        let mut retry = false;
        while let Some(a) = pending.pop() {
            let ActionOf::Io {
                id,
                op: IoOp::Kv(op),
            } = a
            else {
                retry |= matches!(
                    a,
                    ActionOf::SetTimer {
                        timer: MgmtdTimer::WriterRetry,
                        ..
                    }
                );
                continue;
            };
            let is_load = matches!(&op, kv::KvOp::Read { ranges, .. } if !ranges.is_empty());
            let result = if is_load && failed_loads < 8 {
                failed_loads += 1;
                Err(KvError::Unavailable)
            } else {
                kv::execute(&mut kv, op)
            };
            let mut o = Outbox::new();
            m.handle(
                at(second),
                EventOf::IoDone {
                    id,
                    result: IoResult::Kv(result),
                },
                &mut o,
            );
            pending.extend(o.drain());
        }
        if !retry {
            break;
        }
        let mut o = Outbox::new();
        m.handle(at(second), EventOf::Timer(MgmtdTimer::WriterRetry), &mut o);
        pending.extend(o.drain());
    }
    assert_eq!(
        failed_loads, 8,
        "the load was retried past the old three-attempt budget"
    );
    assert!(m.is_primary(at(30)), "loaded once the KV answered");
    assert_eq!(m.counters().tenures, 1);
}

/// Swarm seed 2849: a primary whose clock stepped past the timestamp window refused every
/// heartbeat and declared the whole cluster dead. Skewed heartbeats still prove their node
/// alive, and their OFFLINE reports still count.
#[test]
fn skewed_heartbeats_keep_nodes_alive_and_offline_reports_count() {
    let (mut m, mut kv) = cluster();
    let rearms = |acts: &[Action<Mgmtd>], n: u32| {
        acts.iter().any(|a| {
            matches!(a, ActionOf::SetTimer { timer: MgmtdTimer::HeartbeatDeadline(x), .. } if *x == NodeId(n.into()))
        })
    };
    let skewed = run(
        &mut m,
        &mut kv,
        at(3),
        Some(heartbeat(1, 2, at(40), &[(1, LocalState::UpToDate)])),
    );
    assert_eq!(hb_status(&skewed), Some(MgmtdStatus::BadTimestamp));
    assert!(
        rearms(&skewed, 1),
        "a fresh heartbeat re-arms the deadline even when refused"
    );
    let down = run(
        &mut m,
        &mut kv,
        at(3),
        Some(heartbeat(2, 2, at(40), &[(2, LocalState::Offline)])),
    );
    assert_eq!(hb_status(&down), Some(MgmtdStatus::BadTimestamp));
    let p = m.primary().unwrap();
    assert_eq!(
        p.local[&TargetId(1)],
        LocalState::UpToDate,
        "refused states are not applied"
    );
    assert_eq!(
        p.local[&TargetId(2)],
        LocalState::Offline,
        "an OFFLINE report counts"
    );
    // A replay of the same heartbeat is stale, as for accepted ones.
    let again = run(
        &mut m,
        &mut kv,
        at(3),
        Some(heartbeat(2, 2, at(40), &[(2, LocalState::Offline)])),
    );
    assert_eq!(
        hb_status(&again),
        Some(MgmtdStatus::StaleHeartbeat { last: 2 })
    );
}

/// Swarm seed 3098: a reload after a dropped CommitUnknown reset every local state to OFFLINE
/// while the targets still counted as reported, so the next update saw every replica down at
/// once and made the (emptied) head LASTSRV.
#[test]
fn a_reload_within_the_tenure_keeps_what_heartbeats_said() {
    let (mut m, mut kv) = cluster();
    fire(&mut m, &mut kv, at(3), MgmtdTimer::UpdateChains);
    fire(
        &mut m,
        &mut kv,
        at(62),
        MgmtdTimer::HeartbeatDeadline(NodeId(3)),
    );
    for n in 1..=2 {
        run(
            &mut m,
            &mut kv,
            at(62),
            Some(heartbeat(n, 2, at(62), &[(n, LocalState::UpToDate)])),
        );
    }
    kv.inject(MemKvFault::CommitUnknownDropped);
    fire(&mut m, &mut kv, at(63), MgmtdTimer::UpdateChains);
    fire(&mut m, &mut kv, at(64), MgmtdTimer::WriterRetry);
    fire(&mut m, &mut kv, at(65), MgmtdTimer::UpdateChains);
    assert_eq!(
        chain_states(&m),
        vec![
            (1, PublicState::Serving),
            (2, PublicState::Serving),
            (3, PublicState::Offline)
        ]
    );
}
