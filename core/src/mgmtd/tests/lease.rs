//! mgmtd's side of the storage-side lease: accepted heartbeats are answered with `Accepted`
//! (echoing the sender's timestamp, carrying the routing version) only with the switch on; 3FS
//! answers them with nothing.

use super::*;

fn accepted_reply(acts: &[Action<Mgmtd>]) -> Option<MgmtdStatus> {
    acts.iter().find_map(|a| match a {
        ActionOf::Send {
            msg: Msg::HeartbeatReply(r),
            ..
        } if matches!(r.status, MgmtdStatus::Accepted { .. }) => Some(r.status),
        _ => None,
    })
}

#[test]
fn accepted_heartbeats_renew_the_lease_only_with_the_switch_on() {
    let (mut m, mut kv) = cluster();
    let hb = heartbeat(1, 2, at(3), &[(1, LocalState::UpToDate)]);
    let acts = run(&mut m, &mut kv, at(3), Some(hb));
    assert_eq!(
        accepted_reply(&acts),
        None,
        "3FS: no reply to an accepted heartbeat"
    );

    Arc::make_mut(&mut m.cfg).storage_lease = true;
    let routing = m.routing().expect("primary").version;
    let hb = heartbeat(1, 3, at(4), &[(1, LocalState::UpToDate)]);
    let acts = run(&mut m, &mut kv, at(4), Some(hb));
    assert_eq!(
        accepted_reply(&acts),
        Some(MgmtdStatus::Accepted {
            hb_version: 3,
            timestamp: at(4).0,
            routing,
        })
    );
    // A refused heartbeat (stale version) grants nothing.
    let hb = heartbeat(1, 3, at(5), &[(1, LocalState::UpToDate)]);
    let acts = run(&mut m, &mut kv, at(5), Some(hb));
    assert_eq!(accepted_reply(&acts), None);
    assert!(matches!(
        hb_status(&acts),
        Some(MgmtdStatus::StaleHeartbeat { .. })
    ));
}

/// Executes the KV I/Os in `acts` (and those their completions submit) against `kv`.
fn complete(m: &mut Mgmtd, kv: &mut MemKv, now: Instant, acts: Vec<Action<Mgmtd>>) {
    let mut pending = acts;
    while !pending.is_empty() {
        let mut next = Vec::new();
        for a in pending {
            if let ActionOf::Io {
                id,
                op: IoOp::Kv(op),
            } = a
            {
                let result = IoResult::Kv(kv::execute(kv, op));
                let mut o = Outbox::new();
                m.handle(now, EventOf::IoDone { id, result }, &mut o);
                next.extend(o.drain());
            }
        }
        pending = next;
    }
}

/// Seed 4000194's race at mgmtd: n2's deadline fired, the chain update that moves t2 out of
/// SERVING is being committed, and n2's heartbeat arrives. A lease granted now would outlive
/// the exclusion published a moment later; none is granted until the commit is done, and the
/// next grant carries the routing version that excludes t2. The planted bug grants it.
#[test]
fn no_lease_is_granted_while_the_nodes_demotion_is_being_committed() {
    for bug in [None, Some(MgmtdBug::LeaseDuringDemotion)] {
        let (mut m, mut kv) = cluster();
        Arc::make_mut(&mut m.cfg).storage_lease = true;
        Arc::make_mut(&mut m.cfg).bug = bug;
        fire(&mut m, &mut kv, at(3), MgmtdTimer::UpdateChains);
        let before = m.routing().expect("primary").version;
        fire(
            &mut m,
            &mut kv,
            at(62),
            MgmtdTimer::HeartbeatDeadline(NodeId(2)),
        );
        // The chain update starts; its KV transaction stays in flight.
        let mut out = Outbox::new();
        m.handle(at(63), EventOf::Timer(MgmtdTimer::UpdateChains), &mut out);
        let in_flight = out.drain();
        assert!(
            in_flight.iter().any(|a| matches!(
                a,
                ActionOf::Io {
                    op: IoOp::Kv(_),
                    ..
                }
            )),
            "the chain update's transaction is submitted"
        );
        let hb = |n: u32, v: u64, s: u64| heartbeat(n, v, at(s), &[(n, LocalState::UpToDate)]);
        let mut out = Outbox::new();
        m.handle(at(63), hb(2, 5, 63), &mut out);
        let granted = accepted_reply(&out.drain());
        // n1 keeps its lease: its target stays SERVING.
        let mut out = Outbox::new();
        m.handle(at(63), hb(1, 5, 63), &mut out);
        assert!(accepted_reply(&out.drain()).is_some(), "n1 is not demoted");
        match bug {
            None => {
                assert_eq!(granted, None, "no lease while n2's demotion is in flight");
                assert_eq!(m.counters.leases_withheld, 1);
            }
            Some(_) => assert!(granted.is_some(), "the planted bug grants it"),
        }
        complete(&mut m, &mut kv, at(63), in_flight);
        let after = m.routing().expect("primary").version;
        assert!(after > before, "the exclusion is published");
        assert_eq!(
            m.routing().unwrap().chains[&ChainId(1)].state_of(TargetId(2)),
            Some(PublicState::Offline)
        );
        // Once committed, a grant is bound to the routing that excludes t2.
        let acts = run(&mut m, &mut kv, at(64), Some(hb(2, 6, 64)));
        assert!(matches!(
            accepted_reply(&acts),
            Some(MgmtdStatus::Accepted { routing, .. }) if routing == after
        ));
    }
}
