//! The storage-side lease (`storage/lease.rs`) at handler level: reads and updates are refused
//! until an accepted heartbeat grants a lease, served while it runs, refused once it lapses.

use super::*;
use crate::msg::{HeartbeatReply, MgmtdStatus, ReadReq};

/// Where replies come from (a node without mgmtd in its config takes them from anyone).
const MGMTD: NodeId = NodeId(0);

fn at(node: &mut StorageNode, secs_tenths: u64, msg: Msg) -> Vec<Action<StorageNode>> {
    let mut out = Outbox::new();
    let now = Instant(secs_tenths * 100_000_000);
    let from = match msg {
        Msg::HeartbeatReply(_) => MGMTD,
        _ => CLIENT,
    };
    node.handle(now, EventOf::Recv { from, msg }, &mut out);
    node.check_invariants();
    out.drain()
}

fn read() -> Msg {
    Msg::Read(ReadReq {
        read_id: RequestId(1),
        chain: VersionedChain {
            chain: C1,
            version: ChainVersion(1),
        },
        chunk: chunk(),
        offset: 0,
        len: 8,
        retry: 0,
    })
}

/// The status of the read or update reply in `acts`, `None` if the request went on to I/O.
fn answered(acts: &[Action<StorageNode>]) -> Option<Status> {
    acts.iter().find_map(|a| match a {
        ActionOf::Send {
            msg: Msg::ReadReply(r),
            ..
        } => Some(r.status),
        ActionOf::Send {
            msg: Msg::UpdateReply(r),
            ..
        } => Some(r.status),
        _ => None,
    })
}

fn accepted(sent_tenths: u64) -> Msg {
    Msg::HeartbeatReply(HeartbeatReply {
        status: MgmtdStatus::Accepted {
            hb_version: 1,
            timestamp: sent_tenths * 100_000_000,
            routing: RoutingVersion(1),
        },
    })
}

fn leased_node(bug: Option<PlantedBug>) -> StorageNode {
    let mut cfg = StorageConfig::new(NodeId(3), vec![(TargetId(3), ReadMode::Committed)]);
    cfg.lease = Some(Duration::from_secs(5));
    cfg.bug = bug;
    StorageNode::new(cfg, BTreeMap::new(), all_serving())
}

#[test]
fn a_node_serves_only_while_accepted_heartbeats_renew_its_lease() {
    let mut node = leased_node(None);
    // No accepted heartbeat yet: no lease.
    assert_eq!(answered(&at(&mut node, 0, read())), Some(Status::NoLease));
    // A heartbeat sent at 1.0 s is accepted (the reply arrives at 2.0 s): leased until 6.0 s.
    at(&mut node, 20, accepted(10));
    assert_eq!(
        answered(&at(&mut node, 59, read())),
        None,
        "served: a read I/O"
    );
    assert_eq!(answered(&at(&mut node, 60, read())), Some(Status::NoLease));
    // Updates are refused too once it lapsed (a forward from the predecessor).
    let fwd = Msg::Update(forwarded(1, 1, 1, b"x"));
    assert_eq!(answered(&at(&mut node, 61, fwd)), Some(Status::NoLease));
    // A late reply to an older heartbeat does not bring it back.
    at(&mut node, 62, accepted(5));
    assert_eq!(answered(&at(&mut node, 63, read())), Some(Status::NoLease));
}

#[test]
fn without_the_switch_there_is_no_lease_and_lease_ignored_serves_reads_anyway() {
    let mut cfg = StorageConfig::new(NodeId(3), vec![(TargetId(3), ReadMode::Committed)]);
    cfg.lease = None;
    let mut plain = StorageNode::new(cfg, BTreeMap::new(), all_serving());
    assert_eq!(
        answered(&at(&mut plain, 0, read())),
        None,
        "3FS: no lease to check"
    );
    let mut broken = leased_node(Some(PlantedBug::LeaseIgnored));
    assert_eq!(
        answered(&at(&mut broken, 0, read())),
        None,
        "the planted bug skips it"
    );
}
