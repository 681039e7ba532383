//! A full disk at handler level (issue 37): a replica whose store answers `NoSpace` refuses the
//! update with `Status::NoSpace`, its predecessors give the update up and pass the refusal on to
//! the client, a late copy of the refused update is refused again, the version is reused by the
//! chunk's next update, a refused commit waits for space instead of being given up, and the
//! target keeps serving reads throughout.

use super::*;
use crate::msg::ReadReq;

/// The target is SERVING-ready, holds no lock on the chunk and no disk error.
fn assert_still_serving(h: &Harness, target: u32) {
    let t = h.node.target(TargetId(target)).unwrap();
    assert_eq!(t.local_state, crate::routing::LocalState::UpToDate);
    assert!(!t.disk_error, "a full disk is not a failed disk");
    assert!(t.locks.running(chunk()).is_none(), "lock released");
}

fn read_req() -> ReadReq {
    ReadReq {
        read_id: RequestId(40),
        chain: VersionedChain {
            chain: C1,
            version: ChainVersion(1),
        },
        chunk: chunk(),
        offset: 0,
        len: 16,
        retry: 0,
    }
}

/// Reads the chunk at the harness's target: (status, bytes, version).
fn read(h: &mut Harness) -> (Status, Vec<u8>, ChunkVersion) {
    let acts = h.recv(CLIENT, Msg::Read(read_req()));
    assert!(matches!(acts[..], [ActionOf::Io { .. }]), "{acts:?}");
    let acts = h.complete(&acts[0]);
    match &acts[..] {
        [ActionOf::Send {
            msg: Msg::ReadReply(r),
            ..
        }] => (r.status, r.data.to_vec(), r.version),
        _ => panic!("{acts:?}"),
    }
}

#[test]
fn a_full_head_answers_the_client_no_space_keeps_serving_and_writes_again_later() {
    let mut h = Harness::new(1, ReadMode::Committed, 3);
    // Version 1 commits normally.
    let first = write(1, 1, b"ab");
    let acts = h.recv(CLIENT, Msg::Write(first.clone()));
    h.complete(&acts[0]);
    let fwd = forwarded(1, 1, 1, b"ab");
    let ack = UpdateReply::answering(&fwd, Status::Ok, Some(result(1, 1, b"ab")));
    let acts = h.recv(NodeId(2), Msg::UpdateReply(ack));
    h.complete(&acts[1]);
    // The disk is full: the next write is refused with NoSpace, nothing forwarded.
    let second = write(2, 1, b"cd");
    let acts = h.recv(CLIENT, Msg::Write(second.clone()));
    assert_eq!(acts, vec![update_io(3, 1, 2, b"cd", tag(2))]);
    let acts = fail(&mut h, &acts[0], ChunkError::NoSpace);
    assert_eq!(
        acts,
        vec![
            ActionOf::CancelTimer(retry_timer(1)),
            reply(CLIENT, &second, Status::NoSpace, None)
        ]
    );
    assert_eq!(h.node.counters().no_space, 1);
    assert_still_serving(&h, 1);
    // Reads go on, with the committed bytes.
    assert_eq!(read(&mut h), (Status::Ok, b"ab".to_vec(), ChunkVersion(1)));
    // Space is freed: a new write gets version 2 and goes down the chain.
    let third = write(3, 1, b"ef");
    let acts = h.recv(CLIENT, Msg::Write(third));
    assert_eq!(acts, vec![update_io(5, 1, 2, b"ef", tag(3))]);
    let acts = h.complete(&acts[0]);
    assert_eq!(acts[0], send(NodeId(2), &forwarded(3, 1, 2, b"ef")));
}

#[test]
fn a_full_replica_refuses_the_update_and_every_later_copy_of_it() {
    let mut h = Harness::new(3, ReadMode::Committed, 3);
    let req = forwarded(1, 1, 1, b"xy");
    let acts = h.recv(NodeId(2), Msg::Update(req.clone()));
    assert_eq!(acts, vec![update_io(1, 3, 1, b"xy", tag(1))]);
    let acts = fail(&mut h, &acts[0], ChunkError::NoSpace);
    assert_eq!(
        acts,
        vec![
            ActionOf::CancelTimer(retry_timer(3)),
            reply(NodeId(2), &req, Status::NoSpace, None)
        ]
    );
    assert_still_serving(&h, 3);
    // A copy of the same update (a predecessor's earlier attempt, a duplicated frame) is refused
    // without I/O, space or not: the chain gave this update up.
    h.assert_answered(NodeId(2), &req, Status::NoSpace);
    let retried = UpdateReq {
        retry: 3,
        ..req.clone()
    };
    h.assert_answered(NodeId(2), &retried, Status::NoSpace);
    // The chunk's next update reuses the version and commits.
    let next = forwarded(2, 1, 1, b"zz");
    let acts = h.recv(NodeId(2), Msg::Update(next.clone()));
    assert_eq!(acts, vec![update_io(2, 3, 1, b"zz", tag(2))]);
    let acts = h.complete(&acts[0]);
    let acts = h.complete(&acts[1]);
    assert_eq!(
        acts,
        vec![reply(
            NodeId(2),
            &next,
            Status::Ok,
            Some(result(1, 1, b"zz"))
        )]
    );
    // Once committed, a copy of the refused update is still refused, never applied.
    h.assert_answered(NodeId(2), &req, Status::NoSpace);
    assert_eq!(read(&mut h), (Status::Ok, b"zz".to_vec(), ChunkVersion(1)));
}

#[test]
fn a_middle_gives_up_on_its_successors_no_space_and_passes_it_upstream() {
    let mut h = Harness::new(2, ReadMode::Committed, 3);
    let req = forwarded(1, 1, 1, b"ab");
    let acts = h.recv(NodeId(1), Msg::Update(req.clone()));
    let acts = h.complete(&acts[0]);
    assert_eq!(acts, vec![send(NodeId(3), &req), forward_timer(&h, 2)]);
    // The tail had no room.
    let refused = UpdateReply::answering(&req, Status::NoSpace, None);
    let acts = h.recv(NodeId(3), Msg::UpdateReply(refused));
    assert_eq!(
        acts,
        vec![
            ActionOf::CancelTimer(retry_timer(2)),
            reply(NodeId(1), &req, Status::NoSpace, None)
        ]
    );
    assert_still_serving(&h, 2);
    // The pending version this replica wrote stays, uncommitted, until the next update of the
    // chunk overwrites it (as after any given-up forward); reads serve the committed state.
    let meta = &h.node.target(TargetId(2)).unwrap().chunks[&chunk()];
    assert_eq!(
        (meta.committed, meta.pending.as_ref().map(|p| p.version)),
        (ChunkVersion(0), Some(ChunkVersion(1)))
    );
    assert_eq!(read(&mut h), (Status::Ok, Vec::new(), ChunkVersion(0)));
    // A late copy from the predecessor is refused here too.
    h.assert_answered(NodeId(1), &req, Status::NoSpace);
    // The next update reuses version 1 with other bytes and commits down the chain.
    let next = forwarded(2, 1, 1, b"cd");
    let acts = h.recv(NodeId(1), Msg::Update(next.clone()));
    assert_eq!(acts, vec![update_io(3, 2, 1, b"cd", tag(2))]);
    let acts = h.complete(&acts[0]);
    assert_eq!(acts[0], send(NodeId(3), &next));
    let ack = UpdateReply::answering(&next, Status::Ok, Some(result(1, 1, b"cd")));
    let acts = h.recv(NodeId(3), Msg::UpdateReply(ack));
    let acts = h.complete(&acts[1]);
    assert_eq!(
        acts,
        vec![reply(
            NodeId(1),
            &next,
            Status::Ok,
            Some(result(1, 1, b"cd"))
        )]
    );
}

#[test]
fn a_no_space_answer_to_an_attempt_under_an_older_chain_version_is_ignored() {
    use PublicState::Serving;
    let mut h = Harness::new(2, ReadMode::Committed, 3);
    let req = forwarded(1, 1, 1, b"ab");
    let acts = h.recv(NodeId(1), Msg::Update(req.clone()));
    h.complete(&acts[0]);
    // The chain moves to version 2 (same members): the update is re-sent under it at once.
    let acts = h.recv(
        NodeId(0),
        Msg::Routing(routing(2, 2, &[(1, Serving), (2, Serving), (3, Serving)])),
    );
    let again = UpdateReq {
        chain: VersionedChain {
            chain: C1,
            version: ChainVersion(2),
        },
        ..req.clone()
    };
    assert!(acts.contains(&send(NodeId(3), &again)), "{acts:?}");
    // The refusal of the version-1 attempt says nothing of the current successor's answer.
    let late = UpdateReply::answering(&req, Status::NoSpace, None);
    assert_eq!(h.recv(NodeId(3), Msg::UpdateReply(late)), vec![]);
    assert!(h
        .node
        .target(TargetId(2))
        .unwrap()
        .locks
        .running(chunk())
        .is_some());
    // The current attempt's refusal counts.
    let refused = UpdateReply::answering(&again, Status::NoSpace, None);
    let acts = h.recv(NodeId(3), Msg::UpdateReply(refused));
    assert_eq!(
        acts,
        vec![
            ActionOf::CancelTimer(retry_timer(2)),
            reply(NodeId(1), &req, Status::NoSpace, None)
        ]
    );
}

#[test]
fn a_commit_refused_for_want_of_space_waits_and_is_retried_never_given_up() {
    let mut h = Harness::new(3, ReadMode::Committed, 3);
    let req = forwarded(1, 1, 1, b"xy");
    let acts = h.recv(NodeId(2), Msg::Update(req.clone()));
    let acts = h.complete(&acts[0]);
    assert_eq!(acts[1], commit_io(2, 3, 1, 1));
    let acts = fail(&mut h, &acts[1], ChunkError::NoSpace);
    let wait = h.node.cfg.forward_retry_wait.clone();
    assert_eq!(
        acts,
        vec![ActionOf::SetTimer {
            timer: retry_timer(3),
            after: wait
        }]
    );
    assert_eq!(h.node.counters().commits_refused, 1);
    // Still holding the lock: a copy of the update finds its channel running.
    h.assert_answered(NodeId(2), &req, Status::ChannelLocked);
    // The timer retries the same commit, which now fits.
    let acts = h.handle(EventOf::Timer(retry_timer(3)));
    assert_eq!(acts, vec![commit_io(3, 3, 1, 1)]);
    let acts = h.complete(&acts[0]);
    assert_eq!(
        acts,
        vec![reply(
            NodeId(2),
            &req,
            Status::Ok,
            Some(result(1, 1, b"xy"))
        )]
    );
    assert_still_serving(&h, 3);
}

#[test]
fn other_store_failures_still_answer_disk_error() {
    let mut h = Harness::new(3, ReadMode::Committed, 3);
    let req = forwarded(1, 1, 1, b"xy");
    let acts = h.recv(NodeId(2), Msg::Update(req.clone()));
    let acts = fail(&mut h, &acts[0], ChunkError::VersionConflict);
    assert_eq!(
        acts,
        vec![
            ActionOf::CancelTimer(retry_timer(3)),
            reply(NodeId(2), &req, Status::DiskError, None)
        ]
    );
    // Not remembered as a refusal: a copy runs again.
    let acts = h.recv(NodeId(2), Msg::Update(req));
    assert!(matches!(acts[..], [ActionOf::Io { .. }]), "{acts:?}");
}
