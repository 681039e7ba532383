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
