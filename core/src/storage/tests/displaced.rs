//! Updates that outlive their target's place in the chain (issue 37, found by the mgmtd model
//! with lapses at the head): a head whose local write lands after mgmtd took it out of SERVING
//! must neither forward nor commit it, even once it is back as SYNCING or SERVING; and a resync
//! item queued behind a running update is dropped if its round ended meanwhile (the node
//! panicked there).

use super::*;
use crate::msg::{UpdateReply, UpdateReq};
use crate::routing::LocalState;

/// Completes every I/O in `acts` (and the I/O they lead to); returns the messages sent.
fn settle(h: &mut Harness, acts: Vec<Action<StorageNode>>) -> Vec<Action<StorageNode>> {
    let mut rest = Vec::new();
    let mut queue = acts;
    while let Some(a) = queue.pop() {
        match a {
            ActionOf::Io { .. } => queue.extend(h.complete(&a)),
            ActionOf::Send { .. } => rest.push(a),
            _ => {} // Timers.
        }
    }
    rest
}

fn sends_update(acts: &[Action<StorageNode>]) -> bool {
    acts.iter().any(|a| {
        matches!(
            a,
            ActionOf::Send {
                msg: Msg::Update(_),
                ..
            }
        )
    })
}

/// The head t1 takes a client write whose disk I/O is still running when routing takes t1
/// OFFLINE and then brings it back as `back`; returns the actions once the I/O ends, and the
/// request.
fn late_write_at_head(back: PublicState) -> (Harness, Vec<Action<StorageNode>>, UpdateReq) {
    use PublicState::{Offline, Serving};
    let mut h = Harness::new(1, ReadMode::Committed, 0);
    let req = write(1, 1, b"late");
    let io = h.recv(CLIENT, Msg::Write(req.clone()));
    assert!(matches!(io[..], [ActionOf::Io { .. }]), "{io:?}");
    let out = routing(2, 2, &[(2, Serving), (3, Serving), (1, Offline)]);
    h.recv(NodeId(0), Msg::Routing(out));
    assert_eq!(h.node.targets[&TargetId(1)].local_state, LocalState::Online);
    let back = routing(3, 3, &[(2, Serving), (3, Serving), (1, back)]);
    h.recv(NodeId(0), Msg::Routing(back));
    let acts = h.complete(&io[0]);
    (h, acts, req)
}

#[test]
fn a_head_back_as_syncing_fails_its_late_write_instead_of_committing_it() {
    let (h, acts, req) = late_write_at_head(PublicState::Syncing);
    assert_eq!(
        acts,
        vec![
            ActionOf::CancelTimer(retry_timer(1)),
            reply(CLIENT, &req, Status::TargetNotServing, None)
        ],
        "no commit as tail, no forward: the client retries at the new head"
    );
    let t = &h.node.targets[&TargetId(1)];
    assert!(t.locks.running(chunk()).is_none(), "lock released");
    assert_eq!(h.node.counters().commits, 0);
}

#[test]
fn a_head_back_as_serving_still_fails_a_write_admitted_before_it_left() {
    let (h, acts, req) = late_write_at_head(PublicState::Serving);
    assert!(!sends_update(&acts), "{acts:?}");
    assert!(
        !acts.iter().any(|a| matches!(a, ActionOf::Io { .. })),
        "no commit: {acts:?}"
    );
    assert!(acts.contains(&reply(CLIENT, &req, Status::TargetNotServing, None)));
    assert_eq!(h.node.counters().commits, 0);
}

#[test]
fn a_write_at_a_head_that_stayed_serving_still_commits_as_tail() {
    // The rule is about leaving SERVING, not about chain changes: a head whose successors all
    // left commits as the tail (§3.5 #1), as before.
    use PublicState::{Offline, Serving};
    let mut h = Harness::new(1, ReadMode::Committed, 0);
    let req = write(1, 1, b"kept");
    let io = h.recv(CLIENT, Msg::Write(req.clone()));
    let alone = routing(2, 2, &[(1, Serving), (2, Offline), (3, Offline)]);
    h.recv(NodeId(0), Msg::Routing(alone));
    let done = h.complete(&io[0]);
    let acts = settle(&mut h, done);
    assert_eq!(
        acts,
        vec![reply(CLIENT, &req, Status::Ok, Some(result(1, 2, b"kept")))]
    );
}

/// A resync item (remove a chunk the SYNCING successor holds and the predecessor does not)
/// queues behind a client write of that chunk; the successor leaves before the write ends, so
/// the round ends; the write commits and the queued item must be dropped, not run.
#[test]
fn a_resync_item_queued_behind_a_write_is_dropped_when_its_round_ended() {
    use PublicState::{Offline, Serving, Syncing};
    let cfg = StorageConfig::new(NodeId(2), vec![(TargetId(2), ReadMode::Committed)]);
    let mut pred = Harness {
        node: StorageNode::new_in_service(cfg, BTreeMap::new(), all_serving()),
        store: MemChunkStore::new(),
    };
    let syncing = routing(2, 2, &[(2, Serving), (3, Syncing)]);
    let acts = pred.recv(NodeId(0), Msg::Routing(syncing));
    let ask = acts
        .iter()
        .find_map(|a| match a {
            ActionOf::Send {
                msg: Msg::SyncStart(r),
                ..
            } => Some(r.clone()),
            _ => None,
        })
        .expect("the round asks the successor");
    let req = write(1, 2, b"w");
    let io = pred.recv(CLIENT, Msg::Write(req.clone()));
    assert!(matches!(io[..], [ActionOf::Io { .. }]), "{io:?}");
    // The successor holds the chunk: the round decides to remove it there.
    let held = ChunkMeta {
        chunk: chunk(),
        committed: ChunkVersion(1),
        chain_version: ChainVersion(1),
        ..ChunkMeta::default()
    };
    let answer = crate::msg::SyncStartReply {
        req: ask.req,
        status: Status::Ok,
        metas: vec![held],
        after: ask.after,
        more: false,
    };
    let acts = pred.recv(NodeId(3), Msg::SyncStartReply(answer));
    assert!(
        acts.is_empty(),
        "the item waits for the chunk lock: {acts:?}"
    );
    // The successor is taken OFFLINE: the round ends with the item still queued.
    let gone = routing(3, 3, &[(2, Serving), (3, Offline)]);
    pred.recv(NodeId(0), Msg::Routing(gone));
    let done = pred.complete(&io[0]);
    let acts = settle(&mut pred, done);
    assert_eq!(
        acts,
        vec![reply(CLIENT, &req, Status::Ok, Some(result(1, 3, b"w")))]
    );
    assert!(pred.node.targets[&TargetId(2)].locks.is_empty());
}

/// The head forwarded a write and the middle committed it; the head fails before it hears
/// back. The middle, now the head, answers the client's retry (same tag) from its exactly-once
/// record: failing the old head's update (`forward`) loses nothing the chain committed.
#[test]
fn a_retry_of_a_write_committed_downstream_is_answered_from_the_new_heads_record() {
    use PublicState::{Offline, Serving};
    let mut h = Harness::new(2, ReadMode::Committed, 0);
    let fwd = forwarded(1, 1, 1, b"q");
    let io = h.recv(NodeId(1), Msg::Update(fwd.clone()));
    let sent = h.complete(&io[0]);
    assert!(sends_update(&sent), "forwarded to t3: {sent:?}");
    let ack = UpdateReply::answering(&fwd, Status::Ok, Some(result(1, 1, b"q")));
    let acts = h.recv(NodeId(3), Msg::UpdateReply(ack));
    let done = settle(&mut h, acts);
    assert_eq!(
        done,
        vec![reply(NodeId(1), &fwd, Status::Ok, Some(result(1, 1, b"q")))]
    );
    let t1_out = routing(2, 2, &[(2, Serving), (3, Serving), (1, Offline)]);
    h.recv(NodeId(0), Msg::Routing(t1_out));
    let retry = write(1, 2, b"q");
    assert_eq!(
        h.recv(CLIENT, Msg::Write(retry.clone())),
        vec![reply(CLIENT, &retry, Status::Ok, Some(result(1, 1, b"q")))],
        "answered from the record, not applied again"
    );
    assert_eq!(h.node.counters().commits, 1);
}

/// The only SERVING target goes LASTSRV (its lease lapsed) with a client write on its disk and
/// comes back SERVING: §3.5 #8 makes it the chain's authority again, so the write commits.
#[test]
fn a_write_running_when_the_last_serving_target_returns_from_lastsrv_commits() {
    use PublicState::{LastSrv, Offline, Serving};
    let mut h = Harness::new(1, ReadMode::Committed, 0);
    h.recv(
        NodeId(0),
        Msg::Routing(routing(2, 2, &[(1, Serving), (2, Offline), (3, Offline)])),
    );
    let req = write(1, 2, b"kept");
    let io = h.recv(CLIENT, Msg::Write(req.clone()));
    assert!(matches!(io[..], [ActionOf::Io { .. }]), "{io:?}");
    let last = routing(3, 3, &[(1, LastSrv), (2, Offline), (3, Offline)]);
    h.recv(NodeId(0), Msg::Routing(last));
    let back = routing(4, 4, &[(1, Serving), (2, Offline), (3, Offline)]);
    h.recv(NodeId(0), Msg::Routing(back));
    let done = h.complete(&io[0]);
    let acts = settle(&mut h, done);
    assert_eq!(
        acts,
        vec![reply(CLIENT, &req, Status::Ok, Some(result(1, 4, b"kept")))]
    );
}
