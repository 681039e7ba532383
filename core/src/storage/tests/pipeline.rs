//! Pipelined forwarding at handler level (`pipeline.rs`): the update goes to a SERVING
//! successor with the local update, a successor's answer or a retry that comes first waits for
//! the local update to land, a commit needs both, and a store that refuses the update for space
//! gives it up only if the successor did too.

use super::*;

/// A write admitted at the head (or an update at a middle): the local update and the forward
/// to `next` go out together, with the forward's retry timer.
fn admitted(h: &mut Harness, from: NodeId, req: &UpdateReq, next: u32) -> Vec<Action<StorageNode>> {
    let me = h.node.cfg.node.0 as u32;
    let msg = match from {
        CLIENT => Msg::Write(req.clone()),
        _ => Msg::Update(req.clone()),
    };
    let acts = h.recv(from, msg);
    assert_eq!(
        acts,
        vec![
            update_io(1, me, 1, b"ab", req.tag),
            send(NodeId(next.into()), &forwarded(1, 1, 1, b"ab")),
            forward_timer(h, me),
        ]
    );
    acts
}

fn ack() -> Msg {
    let fwd = forwarded(1, 1, 1, b"ab");
    Msg::UpdateReply(UpdateReply::answering(
        &fwd,
        Status::Ok,
        Some(result(1, 1, b"ab")),
    ))
}

#[test]
fn a_head_forwards_with_its_local_update_and_commits_only_once_both_are_done() {
    let mut h = Harness::pipelined(1, ReadMode::Committed, 3);
    let req = write(1, 1, b"ab");
    let acts = admitted(&mut h, CLIENT, &req, 2);
    // The successor commits before this store has the update: held, nothing committed.
    assert_eq!(h.recv(NodeId(2), ack()), vec![]);
    let t = h.node.target(TargetId(1)).unwrap();
    assert!(t.locks.running(chunk()).unwrap().ahead_of_local());
    let acts = h.complete(&acts[0]);
    assert_eq!(
        acts,
        vec![ActionOf::CancelTimer(retry_timer(1)), commit_io(2, 1, 1, 1)]
    );
    let acts = h.complete(&acts[1]);
    assert_eq!(
        acts,
        vec![reply(CLIENT, &req, Status::Ok, Some(result(1, 1, b"ab")))]
    );
}

#[test]
fn a_middle_forwards_at_once_and_the_answer_after_the_update_commits_as_before() {
    let mut h = Harness::pipelined(2, ReadMode::Committed, 3);
    let req = forwarded(1, 1, 1, b"ab");
    let acts = admitted(&mut h, NodeId(1), &req, 3);
    assert_eq!(h.complete(&acts[0]), vec![], "waits for the tail's answer");
    let acts = h.recv(NodeId(3), ack());
    assert_eq!(
        acts,
        vec![ActionOf::CancelTimer(retry_timer(2)), commit_io(2, 2, 1, 1)]
    );
    let acts = h.complete(&acts[1]);
    assert_eq!(
        acts,
        vec![reply(
            NodeId(1),
            &req,
            Status::Ok,
            Some(result(1, 1, b"ab"))
        )]
    );
}

#[test]
fn the_tail_is_not_pipelined() {
    let mut h = Harness::pipelined(3, ReadMode::Committed, 3);
    let req = forwarded(1, 1, 1, b"ab");
    let acts = h.recv(NodeId(2), Msg::Update(req));
    assert_eq!(acts, vec![update_io(1, 3, 1, b"ab", tag(1))]);
}

#[test]
fn a_retry_that_fires_before_the_local_update_lands_is_sent_after_it() {
    let mut h = Harness::pipelined(1, ReadMode::Committed, 3);
    let req = write(1, 1, b"ab");
    let acts = admitted(&mut h, CLIENT, &req, 2);
    // Nothing is re-sent while the store still has the update (a SYNCING successor or a new
    // tail would need the landed version), and the wait does not count against the budget.
    assert_eq!(h.handle(EventOf::Timer(retry_timer(1))), vec![]);
    let again = forwarded(1, 1, 1, b"ab");
    assert_eq!(
        h.complete(&acts[0]),
        vec![send(NodeId(2), &again), forward_timer(&h, 1)]
    );
}

#[test]
fn a_reject_dirty_read_treats_an_update_ahead_of_the_store_as_pending() {
    let mut h = Harness::pipelined(1, ReadMode::RejectDirty, 3);
    admitted(&mut h, CLIENT, &write(1, 1, b"ab"), 2);
    let read = crate::msg::ReadReq {
        read_id: RequestId(40),
        chain: VersionedChain {
            chain: C1,
            version: ChainVersion(1),
        },
        chunk: chunk(),
        offset: 0,
        len: 16,
        retry: 0,
    };
    let acts = h.recv(CLIENT, Msg::Read(read));
    let [ActionOf::Send {
        msg: Msg::ReadReply(r),
        ..
    }] = &acts[..]
    else {
        panic!("{acts:?}")
    };
    assert_eq!(r.status, Status::NotCommitted);
}

#[test]
fn a_full_head_whose_successor_refused_too_gives_the_update_up() {
    let mut h = Harness::pipelined(1, ReadMode::Committed, 3);
    let req = write(1, 1, b"ab");
    let acts = admitted(&mut h, CLIENT, &req, 2);
    assert_eq!(fail(&mut h, &acts[0], ChunkError::NoSpace), vec![]);
    let fwd = forwarded(1, 1, 1, b"ab");
    let refused = UpdateReply::answering(&fwd, Status::NoSpace, None);
    assert_eq!(
        h.recv(NodeId(2), Msg::UpdateReply(refused)),
        vec![
            ActionOf::CancelTimer(retry_timer(1)),
            reply(CLIENT, &req, Status::NoSpace, None)
        ]
    );
    let t = h.node.target(TargetId(1)).unwrap();
    assert!(t.locks.running(chunk()).is_none(), "lock released");
    assert!(!t.disk_error, "a full disk is not a failed disk");
}

#[test]
fn a_full_head_whose_successor_committed_waits_for_space_and_then_commits() {
    let mut h = Harness::pipelined(1, ReadMode::Committed, 3);
    let req = write(1, 1, b"ab");
    let acts = admitted(&mut h, CLIENT, &req, 2);
    assert_eq!(h.recv(NodeId(2), ack()), vec![]);
    let wait = ActionOf::SetTimer {
        timer: retry_timer(1),
        after: h.node.cfg.forward_retry_wait.clone(),
    };
    // Refused for space after the successor committed: never given up, retried on the timer.
    assert_eq!(
        fail(&mut h, &acts[0], ChunkError::NoSpace),
        vec![wait.clone()]
    );
    let again = h.handle(EventOf::Timer(retry_timer(1)));
    assert_eq!(again, vec![update_io(2, 1, 1, b"ab", tag(1))]);
    assert_eq!(fail(&mut h, &again[0], ChunkError::NoSpace), vec![wait]);
    let again = h.handle(EventOf::Timer(retry_timer(1)));
    assert_eq!(again, vec![update_io(3, 1, 1, b"ab", tag(1))]);
    let acts = h.complete(&again[0]);
    assert_eq!(
        acts,
        vec![ActionOf::CancelTimer(retry_timer(1)), commit_io(4, 1, 1, 1)]
    );
    assert_eq!(
        h.complete(&acts[1]),
        vec![reply(CLIENT, &req, Status::Ok, Some(result(1, 1, b"ab")))]
    );
}

#[test]
fn a_transient_refusal_after_forwarding_is_retried_once_the_successor_committed() {
    let mut h = Harness::pipelined(1, ReadMode::Committed, 3);
    let req = write(1, 1, b"ab");
    let acts = admitted(&mut h, CLIENT, &req, 2);
    // The store refuses without a medium failure (the simulator's buggify site): the target
    // stays up, and the update waits for the successor's answer instead of failing upstream.
    assert_eq!(fail(&mut h, &acts[0], ChunkError::VersionConflict), vec![]);
    assert!(!h.node.target(TargetId(1)).unwrap().disk_error);
    let wait = ActionOf::SetTimer {
        timer: retry_timer(1),
        after: h.node.cfg.forward_retry_wait.clone(),
    };
    assert_eq!(h.recv(NodeId(2), ack()), vec![wait]);
    let again = h.handle(EventOf::Timer(retry_timer(1)));
    assert_eq!(again, vec![update_io(2, 1, 1, b"ab", tag(1))]);
    let acts = h.complete(&again[0]);
    assert_eq!(
        acts,
        vec![ActionOf::CancelTimer(retry_timer(1)), commit_io(3, 1, 1, 1)]
    );
    assert_eq!(
        h.complete(&acts[1]),
        vec![reply(CLIENT, &req, Status::Ok, Some(result(1, 1, b"ab")))]
    );
}

#[test]
fn a_refused_update_whose_successor_left_without_answering_is_retried_and_committed() {
    for refusal in [ChunkError::NoSpace, ChunkError::VersionConflict] {
        let mut h = Harness::pipelined(1, ReadMode::Committed, 3);
        let req = write(1, 1, b"ab");
        let acts = admitted(&mut h, CLIENT, &req, 2);
        assert_eq!(fail(&mut h, &acts[0], refusal), vec![]);
        // The successor leaves the chain before answering: it may have committed the update
        // (and served it to readers), so giving it up would retract a visible write. This
        // target, now the tail, retries its local update until the store takes it.
        use PublicState::{Offline, Serving};
        let routing = routing(2, 2, &[(1, Serving), (2, Offline), (3, Offline)]);
        let wait = ActionOf::SetTimer {
            timer: retry_timer(1),
            after: h.node.cfg.forward_retry_wait.clone(),
        };
        let acts = h.recv(NodeId(0), Msg::Routing(routing));
        assert!(acts.contains(&wait), "{refusal:?}: {acts:?}");
        assert!(
            !acts
                .iter()
                .any(|a| matches!(a, ActionOf::Send { to, .. } if *to == CLIENT)),
            "{refusal:?}: not answered yet: {acts:?}"
        );
        let again = h.handle(EventOf::Timer(retry_timer(1)));
        assert_eq!(again, vec![update_io(2, 1, 1, b"ab", tag(1))]);
        let acts = h.complete(&again[0]);
        assert_eq!(
            acts,
            vec![ActionOf::CancelTimer(retry_timer(1)), commit_io(3, 1, 1, 2)],
            "{refusal:?}: committed as the tail under the new chain version"
        );
        assert_eq!(
            h.complete(&acts[1]),
            vec![reply(CLIENT, &req, Status::Ok, Some(result(1, 2, b"ab")))]
        );
    }
}
