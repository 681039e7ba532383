//! Handler unit tests of the storage machine: feed one event, assert the exact action list.
//!
//! Method: a node hosting one target of chain c1 = [t1 n1, t2 n2, t3 n3] is built with a
//! reference store; I/O completions are produced by applying the emitted op to that store, so
//! each test walks the protocol one step at a time.

mod harness;

use super::*;
use harness::*;

#[test]
fn head_write_updates_forwards_commits_after_successor_ack_and_replies() {
    let mut h = Harness::new(1, ReadMode::Committed, 3);
    let req = write(1, 1, b"ab");
    let acts = h.recv(CLIENT, Msg::Write(req.clone()));
    assert_eq!(acts, vec![update_io(1, 1, 1, b"ab", tag(1))]);
    let acts = h.complete(&acts[0]);
    let fwd = forwarded(1, 1, 1, b"ab");
    let wait = h
        .node
        .cfg
        .forward_timeout
        .clone()
        .expect("timeout configured");
    assert_eq!(
        acts,
        vec![
            ActionOf::Send {
                to: NodeId(2),
                msg: Msg::Update(fwd.clone())
            },
            ActionOf::SetTimer {
                timer: retry_timer(1),
                after: wait
            },
        ]
    );
    // The chunk stays locked and uncommitted until the successor answers.
    assert_eq!(
        h.node.target(TargetId(1)).unwrap().chunks[&chunk()].committed,
        ChunkVersion(0)
    );
    let ack = UpdateReply::answering(&fwd, Status::Ok, Some(result(1, 1, b"ab")));
    let acts = h.recv(NodeId(2), Msg::UpdateReply(ack));
    assert_eq!(
        acts,
        vec![ActionOf::CancelTimer(retry_timer(1)), commit_io(2, 1, 1, 1)]
    );
    let acts = h.complete(&acts[1]);
    assert_eq!(
        acts,
        vec![reply(CLIENT, &req, Status::Ok, Some(result(1, 1, b"ab")))]
    );
    // A retry with the same channel and seqnum is answered from the exactly-once cache.
    let acts = h.recv(
        CLIENT,
        Msg::Write(UpdateReq {
            retry: 1,
            ..req.clone()
        }),
    );
    let retried = UpdateReq { retry: 1, ..req };
    assert_eq!(
        acts,
        vec![reply(
            CLIENT,
            &retried,
            Status::Ok,
            Some(result(1, 1, b"ab"))
        )]
    );
}

#[test]
fn tail_commits_locally_and_replies_to_predecessor() {
    let mut h = Harness::new(3, ReadMode::Committed, 3);
    let req = forwarded(1, 1, 1, b"xy");
    let acts = h.recv(NodeId(2), Msg::Update(req.clone()));
    assert_eq!(acts, vec![update_io(1, 3, 1, b"xy", tag(1))]);
    let acts = h.complete(&acts[0]);
    let timer = retry_timer(3);
    assert_eq!(
        acts,
        vec![ActionOf::CancelTimer(timer), commit_io(2, 3, 1, 1)]
    );
    let acts = h.complete(&acts[1]);
    assert_eq!(
        acts,
        vec![reply(
            NodeId(2),
            &req,
            Status::Ok,
            Some(result(1, 1, b"xy"))
        )]
    );
    // A replay of an update already committed here is a success without I/O (§3.5 #4).
    let acts = h.recv(
        NodeId(2),
        Msg::Update(UpdateReq {
            tag: tag(5),
            ..req.clone()
        }),
    );
    let replay = UpdateReq { tag: tag(5), ..req };
    assert_eq!(
        acts,
        vec![reply(
            NodeId(2),
            &replay,
            Status::Ok,
            Some(result(1, 1, b"xy"))
        )]
    );
    // An update that skips a version is rejected.
    h.assert_answered(NodeId(2), &forwarded(6, 1, 3, b"zz"), Status::MissingUpdate);
}

#[test]
fn admission_rejects_stale_chain_version_non_head_and_bad_checksum() {
    let mut h = Harness::new(2, ReadMode::Committed, 3);
    let current = ChainVersion(1);
    h.assert_answered(
        NodeId(1),
        &forwarded(1, 0, 1, b"a"),
        Status::StaleChainVersion { current },
    );
    h.assert_answered(CLIENT, &write(1, 1, b"a"), Status::NotHead);
    let bad = UpdateReq {
        checksum: 1,
        ..forwarded(2, 1, 1, b"a")
    };
    h.assert_answered(NodeId(1), &bad, Status::ChecksumMismatch);
    let big = UpdateReq {
        chunk_size: 1,
        ..forwarded(3, 1, 1, b"ab")
    };
    h.assert_answered(NodeId(1), &big, Status::InvalidRequest);
}

#[test]
fn second_write_waits_for_the_chunk_lock_and_gets_the_next_version() {
    let mut h = Harness::new(1, ReadMode::Committed, 0);
    let first = write(1, 1, b"1");
    let second = MessageTag {
        channel: ChannelId(2),
        ..tag(1)
    };
    let second = UpdateReq {
        tag: second,
        ..write(1, 1, b"2")
    };
    let acts = h.recv(CLIENT, Msg::Write(first.clone()));
    assert_eq!(acts, vec![update_io(1, 1, 1, b"1", tag(1))]);
    assert_eq!(
        h.recv(CLIENT, Msg::Write(second.clone())),
        vec![],
        "queued behind the lock"
    );
    let fwd = h.complete(&acts[0]);
    // forward_retries_max = 0: no retry timer, the update waits for a reply or a routing change.
    assert_eq!(
        fwd,
        vec![ActionOf::Send {
            to: NodeId(2),
            msg: Msg::Update(forwarded(1, 1, 1, b"1"))
        }]
    );
    let ack = UpdateReply::answering(
        &forwarded(1, 1, 1, b"1"),
        Status::Ok,
        Some(result(1, 1, b"1")),
    );
    let acts = h.recv(NodeId(2), Msg::UpdateReply(ack));
    let acts = h.complete(&acts[1]);
    // The commit answers the first writer and starts the second at version 2.
    assert_eq!(
        acts,
        vec![
            reply(CLIENT, &first, Status::Ok, Some(result(1, 1, b"1"))),
            update_io(3, 1, 2, b"2", second.tag)
        ]
    );
}

#[test]
fn predecessor_left_without_successor_commits_as_tail_under_new_chain_version() {
    use PublicState::{Offline, Serving};
    let mut h = Harness::new(2, ReadMode::Committed, 0);
    let req = forwarded(1, 1, 1, b"q");
    let acts = h.recv(NodeId(1), Msg::Update(req.clone()));
    let acts = h.complete(&acts[0]);
    assert_eq!(
        acts,
        vec![ActionOf::Send {
            to: NodeId(3),
            msg: Msg::Update(req.clone())
        }]
    );
    // t3 fails: mgmtd moves it to the end as OFFLINE and bumps the chain version.
    let acts = h.recv(
        NodeId(0),
        Msg::Routing(routing(2, 2, &[(1, Serving), (2, Serving), (3, Offline)])),
    );
    let timer = retry_timer(2);
    assert_eq!(
        acts,
        vec![ActionOf::CancelTimer(timer), commit_io(2, 2, 1, 2)]
    );
    let acts = h.complete(&acts[1]);
    assert_eq!(
        acts,
        vec![reply(NodeId(1), &req, Status::Ok, Some(result(1, 2, b"q")))]
    );
    // Older routing is ignored.
    assert_eq!(h.recv(NodeId(0), Msg::Routing(all_serving())), vec![]);
    assert_eq!(h.node.routing().version, RoutingVersion(2));
}

#[test]
fn forward_retry_resolves_new_successor_and_answers_the_caller_after_budget() {
    let mut h = Harness::new(1, ReadMode::Committed, 1);
    let req = write(1, 1, b"r");
    let acts = h.recv(CLIENT, Msg::Write(req.clone()));
    h.complete(&acts[0]);
    // The successor answers "stale chain version": wait for the timer, which re-sends.
    let fwd = forwarded(1, 1, 1, b"r");
    let stale = Status::StaleChainVersion {
        current: ChainVersion(2),
    };
    let nack = UpdateReply::answering(&fwd, stale, None);
    assert_eq!(h.recv(NodeId(2), Msg::UpdateReply(nack)), vec![]);
    let wait = h
        .node
        .cfg
        .forward_timeout
        .clone()
        .expect("timeout configured");
    let acts = h.handle(EventOf::Timer(retry_timer(1)));
    let again = UpdateReq {
        retry: 1,
        ..fwd.clone()
    };
    assert_eq!(
        acts,
        vec![
            ActionOf::Send {
                to: NodeId(2),
                msg: Msg::Update(again)
            },
            ActionOf::SetTimer {
                timer: retry_timer(1),
                after: wait
            }
        ]
    );
    // Budget exhausted: the caller hears ForwardFailed once, but the update keeps going (the
    // successor may already have committed this version), with the lock held.
    let acts = h.handle(EventOf::Timer(retry_timer(1)));
    let again2 = UpdateReq {
        retry: 2,
        ..fwd.clone()
    };
    assert_eq!(
        acts,
        vec![
            reply(CLIENT, &req, Status::ForwardFailed, None),
            ActionOf::Send {
                to: NodeId(2),
                msg: Msg::Update(again2)
            },
            ActionOf::SetTimer {
                timer: retry_timer(1),
                after: h
                    .node
                    .cfg
                    .forward_timeout
                    .clone()
                    .expect("timeout configured")
            }
        ]
    );
    // The client's retry with the same tag finds the channel still running.
    let acts = h.recv(
        CLIENT,
        Msg::Write(UpdateReq {
            retry: 1,
            ..req.clone()
        }),
    );
    assert_eq!(acts, vec![reply(CLIENT, &req, Status::ChannelLocked, None)]);
    // A ForwardFailed from the successor is transient too: back off and re-send.
    let ff = UpdateReply::answering(&fwd, Status::ForwardFailed, None);
    let acts = h.recv(NodeId(2), Msg::UpdateReply(ff));
    assert!(
        matches!(acts.as_slice(), [ActionOf::SetTimer { .. }]),
        "{acts:?}"
    );
    assert!(h
        .node
        .target(TargetId(1))
        .unwrap()
        .locks
        .running(chunk())
        .is_some());
}

#[test]
fn reads_return_committed_data_or_not_committed_when_dirty_in_legacy_mode() {
    for mode in [ReadMode::Committed, ReadMode::RejectDirty] {
        let mut h = Harness::new(1, mode, 0);
        let acts = h.recv(CLIENT, Msg::Write(write(1, 1, b"v1")));
        h.complete(&acts[0]); // pending v1, forwarded, not committed
        let read = crate::msg::ReadReq {
            read_id: RequestId(4),
            chain: VersionedChain {
                chain: C1,
                version: ChainVersion(1),
            },
            chunk: chunk(),
            offset: 0,
            len: 2,
            retry: 0,
        };
        let acts = h.recv(CLIENT, Msg::Read(read.clone()));
        match mode {
            ReadMode::RejectDirty => assert_eq!(
                acts,
                vec![ActionOf::Send {
                    to: CLIENT,
                    msg: Msg::ReadReply(ReadReply {
                        read_id: RequestId(4),
                        chunk: chunk(),
                        status: Status::NotCommitted,
                        data: crate::payload::Payload::default(),
                        version: ChunkVersion(0),
                        checksum: 0
                    })
                }]
            ),
            ReadMode::Committed => {
                let op = ChunkOp::Read {
                    chunk: chunk(),
                    offset: 0,
                    len: 2,
                    uncommitted: false,
                    unverified: false,
                };
                assert_eq!(
                    acts,
                    vec![ActionOf::Io {
                        id: IoId(2),
                        op: IoOp::Chunk {
                            target: TargetId(1),
                            op
                        }
                    }]
                );
                // The committed version is a hole: version 0, no bytes.
                let acts = h.complete(&acts[0]);
                assert_eq!(
                    acts,
                    vec![ActionOf::Send {
                        to: CLIENT,
                        msg: Msg::ReadReply(ReadReply {
                            read_id: RequestId(4),
                            chunk: chunk(),
                            status: Status::Ok,
                            data: crate::payload::Payload::default(),
                            version: ChunkVersion(0),
                            checksum: 0
                        })
                    }]
                );
            }
        }
    }
}

#[test]
fn transient_rejection_backs_off_and_resends_even_without_a_forward_timeout() {
    // Goal: with no forward timeout (the model checker's setting) an update rejected by a
    // successor that is behind or still busy with the same update must not wait forever: it
    // backs off and re-sends; after its retry budget the caller is answered ForwardFailed while
    // the update keeps going. Found by the model's liveness property ("every client finishes
    // or gives up").
    let mut h = Harness::new(1, ReadMode::Committed, 0);
    Arc::make_mut(&mut h.node.cfg).forward_retries_max = 1;
    let req = write(1, 1, b"s");
    let acts = h.recv(CLIENT, Msg::Write(req.clone()));
    let fwd = forwarded(1, 1, 1, b"s");
    assert_eq!(
        h.complete(&acts[0]),
        vec![ActionOf::Send {
            to: NodeId(2),
            msg: Msg::Update(fwd.clone())
        }]
    );
    let backoff = h.node.cfg.forward_retry_wait.clone();
    for status in [
        Status::ChannelLocked,
        Status::StaleChainVersion {
            current: ChainVersion(0),
        },
    ] {
        let acts = h.recv(
            NodeId(2),
            Msg::UpdateReply(UpdateReply::answering(&fwd, status, None)),
        );
        assert_eq!(
            acts,
            vec![ActionOf::SetTimer {
                timer: retry_timer(1),
                after: backoff.clone()
            }]
        );
    }
    let acts = h.handle(EventOf::Timer(retry_timer(1)));
    let again = UpdateReq {
        retry: 1,
        ..fwd.clone()
    };
    assert_eq!(
        acts,
        vec![ActionOf::Send {
            to: NodeId(2),
            msg: Msg::Update(again)
        }]
    );
    let busy = UpdateReply::answering(&fwd, Status::Busy, None);
    assert_eq!(h.recv(NodeId(2), Msg::UpdateReply(busy)).len(), 1);
    // Out of budget: the client hears ForwardFailed once and the update re-sends on.
    let acts = h.handle(EventOf::Timer(retry_timer(1)));
    assert_eq!(
        acts,
        vec![
            reply(CLIENT, &req, Status::ForwardFailed, None),
            ActionOf::Send {
                to: NodeId(2),
                msg: Msg::Update(UpdateReq {
                    retry: 2,
                    ..fwd.clone()
                })
            }
        ]
    );
}

#[test]
fn an_already_committed_answer_is_not_cached_and_must_match_the_version_sent() {
    // Goal: the "already committed" shortcut describes the chunk, not the update, so (1) a
    // successor does not cache it for the update's tag, and (2) a predecessor accepts a
    // successor's Ok only for exactly the version (and bytes) it sent. Together they stop a
    // cached answer for one version from acknowledging a later version the successor never
    // applied (the divergence the model found behind `skip-chain-version-check`).
    let mut tail = Harness::new(3, ReadMode::Committed, 0);
    let first = forwarded(1, 1, 1, b"a");
    let acts = tail.recv(NodeId(2), Msg::Update(first));
    let acts = tail.complete(&acts[0]);
    tail.complete(&acts[1]);
    // Another update (tag 7) replayed at the committed version: Ok, not cached...
    let replay = UpdateReq {
        tag: tag(7),
        ..forwarded(7, 1, 1, b"b")
    };
    let acts = tail.recv(NodeId(2), Msg::Update(replay.clone()));
    assert_eq!(
        acts,
        vec![reply(
            NodeId(2),
            &replay,
            Status::Ok,
            Some(result(1, 1, b"a"))
        )]
    );
    // ...so the same tag at the next version is applied, not answered from a cache.
    let next = UpdateReq {
        update_version: ChunkVersion(2),
        ..replay
    };
    assert_eq!(
        tail.recv(NodeId(2), Msg::Update(next)),
        vec![update_io(3, 3, 2, b"b", tag(7))]
    );

    let mut head = Harness::new(1, ReadMode::Committed, 0);
    let req = write(1, 1, b"c");
    let acts = head.recv(CLIENT, Msg::Write(req.clone()));
    head.complete(&acts[0]);
    let fwd = forwarded(1, 1, 1, b"c");
    let other_version = UpdateReply::answering(&fwd, Status::Ok, Some(result(2, 1, b"c")));
    assert_eq!(
        head.recv(NodeId(2), Msg::UpdateReply(other_version)),
        vec![
            ActionOf::CancelTimer(retry_timer(1)),
            reply(CLIENT, &req, Status::ChecksumMismatch, None)
        ]
    );
}

mod displaced;
mod lease;
mod metadata;
mod no_space;
mod pages;
mod pipeline;
mod senders;
mod swarm;
