//! Messages whose sender the protocol fixes: a forwarded update only from the node hosting the
//! target's predecessor in the chain version both route by, a heartbeat reply only from an
//! mgmtd. Anything else is refused (updates) or ignored (replies) and
//! counted, whatever role the transport let through.

use super::*;
use crate::msg::{HeartbeatReply, MgmtdStatus};

#[test]
fn a_forwarded_update_is_taken_only_from_the_predecessors_node() {
    // Node 3 hosts the tail t3 of c1 = [t1, t2, t3]: its predecessor is t2 on node 2.
    let mut h = Harness::new(3, ReadMode::Committed, 3);
    for stranger in [NodeId(1), CLIENT] {
        h.assert_answered(stranger, &forwarded(1, 1, 1, b"x"), Status::InvalidRequest);
    }
    assert_eq!(h.node.counters().updates_from_stranger, 2);
    let acts = h.recv(NodeId(2), Msg::Update(forwarded(1, 1, 1, b"x")));
    assert_eq!(
        acts,
        vec![update_io(1, 3, 1, b"x", tag(1))],
        "the predecessor's goes to I/O"
    );
    // Once t2 is OFFLINE the head t1 forwards to t3 directly: node 1 is then the predecessor.
    use PublicState::{Offline, Serving};
    let moved = routing(2, 2, &[(1, Serving), (2, Offline), (3, Serving)]);
    h.recv(NodeId(0), Msg::Routing(moved));
    h.assert_answered(NodeId(2), &forwarded(2, 2, 2, b"y"), Status::InvalidRequest);
    assert_eq!(h.node.counters().updates_from_stranger, 3);
}

#[test]
fn a_heartbeat_reply_counts_only_from_an_mgmtd() {
    let mut cfg = StorageConfig::new(NodeId(3), vec![(TargetId(3), ReadMode::Committed)]);
    cfg.lease = Some(Duration::from_secs(5));
    cfg.mgmtd = vec![NodeId(0)];
    let mut node = StorageNode::new(cfg, BTreeMap::new(), all_serving());
    let renew = Msg::HeartbeatReply(HeartbeatReply {
        status: MgmtdStatus::Accepted {
            hb_version: 1,
            timestamp: 0,
            routing: RoutingVersion(1),
        },
    });
    let mut out = Outbox::new();
    for from in [NodeId(1), CLIENT] {
        let ev = EventOf::Recv {
            from,
            msg: renew.clone(),
        };
        node.handle(Instant::ZERO, ev, &mut out);
    }
    assert_eq!(node.counters().replies_from_stranger, 2);
    assert!(!node.lease_holds(), "a stranger's reply renews nothing");
    let ev = EventOf::Recv {
        from: NodeId(0),
        msg: renew,
    };
    node.handle(Instant::ZERO, ev, &mut out);
    assert!(node.lease_holds(), "the mgmtd's reply renews the lease");
}
