//! Admin operations and client sessions of mgmtd, on the harness of `tests/mod.rs`.

use super::*;

#[test]
fn admin_operations() {
    let (mut m, mut kv) = cluster();
    let ok = |r: AdminRet| matches!(r, AdminRet::Ok(_));
    let bad = |r: AdminRet| matches!(r, AdminRet::Failed(AdminError::Invalid(_)));
    // Re-submitting the same chain is fine; other targets are not.
    assert!(ok(admin(
        &mut m,
        &mut kv,
        at(3),
        AdminCall::SetChains(vec![(
            ChainId(1),
            vec![TargetId(3), TargetId(2), TargetId(1)]
        )])
    )));
    assert!(bad(admin(
        &mut m,
        &mut kv,
        at(3),
        AdminCall::SetChains(vec![(ChainId(1), vec![TargetId(1)])])
    )));
    assert!(ok(admin(
        &mut m,
        &mut kv,
        at(3),
        AdminCall::SetChains(vec![(
            ChainId(2),
            vec![TargetId(4), TargetId(5), TargetId(6)]
        )])
    )));
    // Chain tables: a different list makes the next version; all versions stay.
    let table = |chains: Vec<u32>| AdminCall::SetChainTable {
        table: 1,
        chains: chains.into_iter().map(ChainId).collect(),
    };
    assert!(ok(admin(&mut m, &mut kv, at(3), table(vec![1]))));
    assert!(ok(admin(&mut m, &mut kv, at(3), table(vec![1, 2]))));
    assert!(ok(admin(&mut m, &mut kv, at(3), table(vec![1, 2]))));
    assert!(bad(admin(&mut m, &mut kv, at(3), table(vec![9]))));
    let r = m.routing().unwrap();
    assert_eq!(r.latest_table(1).map(|(v, l)| (v, l.len())), Some((2, 2)));
    assert!(r.chain_tables.contains_key(&(1, 1)));
    // Add a target (OFFLINE at the end), refuse removing a serving one, remove an offline one.
    assert!(ok(admin(
        &mut m,
        &mut kv,
        at(3),
        AdminCall::AddTarget {
            chain: ChainId(1),
            target: TargetId(9)
        }
    )));
    assert_eq!(chain_states(&m).last(), Some(&(9, PublicState::Offline)));
    assert!(bad(admin(
        &mut m,
        &mut kv,
        at(3),
        AdminCall::RemoveTarget {
            chain: ChainId(1),
            target: TargetId(1)
        }
    )));
    assert!(ok(admin(
        &mut m,
        &mut kv,
        at(3),
        AdminCall::RemoveTarget {
            chain: ChainId(1),
            target: TargetId(9)
        }
    )));
    assert_eq!(chain_states(&m).len(), 3);
    // Offline target: its reports are overridden until it is put back online.
    fire(&mut m, &mut kv, at(3), MgmtdTimer::UpdateChains);
    assert!(ok(admin(
        &mut m,
        &mut kv,
        at(4),
        AdminCall::OfflineTarget(TargetId(1))
    )));
    run(
        &mut m,
        &mut kv,
        at(4),
        Some(heartbeat(1, 2, at(4), &[(1, LocalState::UpToDate)])),
    );
    fire(&mut m, &mut kv, at(5), MgmtdTimer::UpdateChains);
    assert_eq!(chain_states(&m)[2], (1, PublicState::Offline));
    // Everything else fails: the head-most becomes LASTSRV; rotation hands LASTSRV on.
    for n in [2, 3] {
        fire(
            &mut m,
            &mut kv,
            at(70),
            MgmtdTimer::HeartbeatDeadline(NodeId(n)),
        );
    }
    fire(&mut m, &mut kv, at(71), MgmtdTimer::UpdateChains);
    assert_eq!(
        chain_states(&m),
        vec![
            (2, PublicState::LastSrv),
            (3, PublicState::Offline),
            (1, PublicState::Offline)
        ]
    );
    assert!(ok(admin(
        &mut m,
        &mut kv,
        at(72),
        AdminCall::RotateLastSrv(ChainId(1))
    )));
    assert_eq!(
        chain_states(&m),
        vec![
            (3, PublicState::LastSrv),
            (1, PublicState::Offline),
            (2, PublicState::Offline)
        ]
    );
    assert!(bad(admin(
        &mut m,
        &mut kv,
        at(72),
        AdminCall::RotateLastSrv(ChainId(2))
    )));
}

#[test]
fn sessions_expire_and_secondaries_redirect_routing_requests() {
    let (mut m, mut kv) = cluster();
    run(
        &mut m,
        &mut kv,
        at(3),
        Some(EventOf::Recv {
            from: NodeId(60),
            msg: Msg::ExtendSession(crate::msg::ExtendSession {
                client: ClientId(60),
            }),
        }),
    );
    assert_eq!(m.primary().unwrap().sessions.len(), 1);
    fire(
        &mut m,
        &mut kv,
        at(3 + 20 * 60 + 1),
        MgmtdTimer::CheckSessions,
    );
    assert!(m.primary().is_none_or(|p| p.sessions.is_empty()));
    let acts = run(
        &mut m,
        &mut kv,
        at(3),
        Some(EventOf::Recv {
            from: NodeId(60),
            msg: Msg::GetRouting {
                known: RoutingVersion(0),
            },
        }),
    );
    assert!(matches!(
        &acts[..],
        [ActionOf::Send {
            msg: Msg::Routing(_),
            ..
        }]
    ));
    let known = m.routing().unwrap().version;
    let acts = run(
        &mut m,
        &mut kv,
        at(3),
        Some(EventOf::Recv {
            from: NodeId(60),
            msg: Msg::GetRouting { known },
        }),
    );
    assert!(acts.is_empty(), "nothing newer to send");
}
