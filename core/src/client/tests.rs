//! Handler unit tests of the client machine: chunk split, head for writes, rotation of reads
//! over serving replicas, and retries that keep the exactly-once channel and seqnum.

use super::*;
use crate::ids::ChainVersion;
use crate::machine::{Action, ActionOf};
use crate::msg::{ReadReply, ReadReq, UpdateReply};
use crate::routing::PublicState;

const C1: ChainId = ChainId(1);

fn routing(version: u64, targets: &[(u32, PublicState)]) -> RoutingInfo {
    crate::testing::one_chain_routing(version, version as u32, targets)
}

fn client() -> Client {
    use PublicState::Serving;
    let mut cfg = ClientConfig::new(NodeId(9), ClientId(9));
    cfg.io_timeout = None;
    cfg.retries_max = 2;
    Client::new(cfg, routing(1, &[(1, Serving), (2, Serving), (3, Serving)]))
}

fn handle(c: &mut Client, e: EventOf<Msg, ClientTimer, ClientCall>) -> Vec<Action<Client>> {
    let mut out = Outbox::new();
    c.handle(Instant::ZERO, e, &mut out);
    c.check_invariants();
    out.drain()
}

fn layout() -> FileLayout {
    FileLayout {
        chunk_size: 4,
        chains: vec![C1],
    }
}

#[test]
fn write_splits_into_chunk_writes_to_the_head_with_distinct_channels() {
    let mut c = client();
    let call = ClientCall::Write {
        inode: InodeId(5),
        layout: layout(),
        offset: 2,
        data: b"abcd".to_vec(),
    };
    let acts = handle(
        &mut c,
        EventOf::Call {
            req: RequestId(1),
            call,
        },
    );
    let writes: Vec<(NodeId, u32, crate::payload::Payload, ChannelId)> = acts
        .iter()
        .filter_map(|a| match a {
            ActionOf::Send {
                to,
                msg: Msg::Write(w),
            } => match &w.kind {
                UpdateKind::Write { offset, data } => Some((
                    *to,
                    *offset + w.chunk.index * 100,
                    data.clone(),
                    w.tag.channel,
                )),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(
        writes,
        vec![
            (NodeId(1), 2, b"ab".to_vec().into(), ChannelId(1)),
            (NodeId(1), 100, b"cd".to_vec().into(), ChannelId(2))
        ]
    );
    assert_eq!(
        acts.len(),
        4,
        "two sends and two timer cancellations: {acts:?}"
    );
}

#[test]
fn retry_after_head_failure_keeps_channel_and_seqnum_and_goes_to_new_head() {
    use PublicState::{Offline, Serving};
    let mut c = client();
    let call = ClientCall::Write {
        inode: InodeId(5),
        layout: layout(),
        offset: 0,
        data: b"x".to_vec(),
    };
    let acts = handle(
        &mut c,
        EventOf::Call {
            req: RequestId(1),
            call,
        },
    );
    let ActionOf::Send {
        to: NodeId(1),
        msg: Msg::Write(first),
    } = &acts[0]
    else {
        panic!("{acts:?}")
    };
    // The head fails; the new routing makes t2 the head: the write is re-sent there at once.
    let acts = handle(
        &mut c,
        EventOf::Recv {
            from: NodeId(0),
            msg: Msg::Routing(routing(2, &[(2, Serving), (3, Serving), (1, Offline)])),
        },
    );
    let ActionOf::Send {
        to: NodeId(2),
        msg: Msg::Write(second),
    } = &acts[0]
    else {
        panic!("{acts:?}")
    };
    assert_eq!(
        (second.tag, second.retry, second.chain.version),
        (first.tag, 1, ChainVersion(2))
    );
    // The new head answers from its exactly-once cache: the call returns once.
    let result = UpdateResult {
        commit_version: ChunkVersion(1),
        commit_chain_version: ChainVersion(1),
        len: 1,
        checksum: 0,
    };
    let reply = UpdateReply::answering(second, Status::Ok, Some(result));
    let acts = handle(
        &mut c,
        EventOf::Recv {
            from: NodeId(2),
            msg: Msg::UpdateReply(reply.clone()),
        },
    );
    assert!(acts.contains(&ActionOf::Return {
        req: RequestId(1),
        ret: ClientRet::Updated {
            results: vec![(second.chunk, result)]
        }
    }));
    // A duplicate reply is ignored.
    assert_eq!(
        handle(
            &mut c,
            EventOf::Recv {
                from: NodeId(2),
                msg: Msg::UpdateReply(reply)
            }
        ),
        vec![]
    );
}

#[test]
fn a_write_refused_for_want_of_space_fails_at_once_and_frees_its_channel() {
    let mut c = client();
    let write = |c: &mut Client, req: u64| {
        let call = ClientCall::Write {
            inode: InodeId(5),
            layout: layout(),
            offset: 0,
            data: b"x".to_vec(),
        };
        let acts = handle(
            c,
            EventOf::Call {
                req: RequestId(req),
                call,
            },
        );
        match acts[0].clone() {
            ActionOf::Send {
                to: NodeId(1),
                msg: Msg::Write(w),
            } => w,
            _ => panic!("{acts:?}"),
        }
    };
    let first = write(&mut c, 1);
    let refused = UpdateReply::answering(&first, Status::NoSpace, None);
    let acts = recv(&mut c, NodeId(1), Msg::UpdateReply(refused));
    // No backoff, no re-send, no routing refresh: the call fails with the status itself.
    assert!(acts.contains(&ActionOf::Return {
        req: RequestId(1),
        ret: ClientRet::Failed {
            chunk: first.chunk,
            status: Status::NoSpace
        }
    }));
    assert!(
        acts.iter()
            .all(|a| matches!(a, ActionOf::CancelTimer(_) | ActionOf::Return { .. })),
        "{acts:?}"
    );
    assert_eq!(c.counters().retries, 0);
    // The channel is free again: the next write takes it with the next seqnum.
    let second = write(&mut c, 2);
    assert_eq!(second.tag.channel, first.tag.channel);
    assert_eq!(second.tag.seqnum.0, first.tag.seqnum.0 + 1);
}

/// Starts a read call of `len` bytes at offset 0 and returns where its chunk read went.
fn start_read(c: &mut Client, len: u64) -> (NodeId, ReadReq) {
    let call = ClientCall::Read {
        inode: InodeId(5),
        layout: layout(),
        offset: 0,
        len,
    };
    let acts = handle(
        c,
        EventOf::Call {
            req: RequestId(1),
            call,
        },
    );
    match acts[0].clone() {
        ActionOf::Send {
            to,
            msg: Msg::Read(read),
        } => (to, read),
        _ => panic!("{acts:?}"),
    }
}

fn read_reply(read: &ReadReq, status: Status, data: &[u8], checksum: u32) -> Msg {
    let version = ChunkVersion(u32::from(!data.is_empty()));
    Msg::ReadReply(ReadReply {
        read_id: read.read_id,
        chunk: read.chunk,
        status,
        data: data.to_vec().into(),
        version,
        checksum,
    })
}

fn recv(c: &mut Client, from: NodeId, msg: Msg) -> Vec<Action<Client>> {
    handle(c, EventOf::Recv { from, msg })
}

#[test]
fn reads_rotate_over_serving_replicas_and_fail_after_the_retry_budget() {
    let mut c = client();
    let (first, read) = start_read(&mut c, 3);
    let acts = recv(
        &mut c,
        first,
        read_reply(&read, Status::NotCommitted, b"", 0),
    );
    assert!(
        matches!(
            acts[..],
            [ActionOf::SetTimer {
                timer: ClientTimer::Retry(_),
                ..
            }]
        ),
        "{acts:?}"
    );
    let acts = handle(&mut c, EventOf::Timer(ClientTimer::Retry(read.read_id)));
    let ActionOf::Send {
        to: second,
        msg: Msg::Read(_),
    } = acts[0].clone()
    else {
        panic!("{acts:?}")
    };
    assert_ne!(first, second, "a retry goes to another serving replica");
    handle(&mut c, EventOf::Timer(ClientTimer::Retry(read.read_id)));
    let acts = handle(&mut c, EventOf::Timer(ClientTimer::Retry(read.read_id)));
    assert!(acts.contains(&ActionOf::Return {
        req: RequestId(1),
        ret: ClientRet::Failed {
            chunk: read.chunk,
            status: Status::ForwardFailed
        }
    }));
}

#[test]
fn read_with_bad_checksum_is_retried_never_returned() {
    let mut c = client();
    let (to, read) = start_read(&mut c, 2);
    let acts = recv(&mut c, to, read_reply(&read, Status::Ok, b"zz", 7));
    assert!(
        acts.iter().all(|a| !matches!(a, ActionOf::Return { .. })),
        "{acts:?}"
    );
    let good = read_reply(&read, Status::Ok, b"z", crate::crc32c::checksum(b"z"));
    let acts = recv(&mut c, to, good);
    // One byte was stored; the second is past the chunk's end and reads as zero.
    let ret = acts.iter().find_map(|a| match a {
        ActionOf::Return {
            req: RequestId(1),
            ret:
                ClientRet::Read {
                    data,
                    versions,
                    served,
                },
        } => Some((data.clone(), versions.clone(), served.clone())),
        _ => None,
    });
    let (data, versions, served) = ret.expect("the read returns");
    assert_eq!(data, vec![b'z', 0]);
    assert_eq!(versions, vec![(read.chunk, ChunkVersion(1))]);
    // The answer is attributed to the replica it came from, under the version it was sent.
    assert_eq!(served.len(), 1, "{served:?}");
    assert_eq!(served[0].chunk, read.chunk);
    assert_eq!(served[0].chain_version, read.chain.version);
}

/// The bytes a call returned.
fn returned_data(acts: &[Action<Client>]) -> crate::payload::Payload {
    acts.iter()
        .find_map(|a| match a {
            ActionOf::Return {
                ret: ClientRet::Read { data, .. },
                ..
            } => Some(data.clone()),
            _ => None,
        })
        .expect("the read returns")
}

/// A read one reply covers returns that reply's buffer itself (no copy); a read over two
/// chunks is assembled from replies in either order, a short chunk's tail as zeros.
#[test]
fn a_whole_reply_is_returned_as_is_and_parts_are_assembled_in_any_order() {
    let mut c = client();
    let (to, read) = start_read(&mut c, 4);
    let bytes = crate::payload::Payload::from(b"abcd".to_vec());
    let reply = Msg::ReadReply(ReadReply {
        read_id: read.read_id,
        chunk: read.chunk,
        status: Status::Ok,
        data: bytes.clone(),
        version: ChunkVersion(1),
        checksum: bytes.checksum(),
    });
    let data = returned_data(&recv(&mut c, to, reply));
    assert_eq!(data, b"abcd".to_vec());
    assert!(core::ptr::eq(data.as_ptr(), bytes.as_ptr()), "not a copy");

    let mut c = client();
    let call = ClientCall::Read {
        inode: InodeId(5),
        layout: layout(),
        offset: 0,
        len: 7,
    };
    let reads: Vec<(NodeId, ReadReq)> = handle(
        &mut c,
        EventOf::Call {
            req: RequestId(1),
            call,
        },
    )
    .into_iter()
    .filter_map(|a| match a {
        ActionOf::Send {
            to,
            msg: Msg::Read(r),
        } => Some((to, r)),
        _ => None,
    })
    .collect();
    assert_eq!(reads.len(), 2, "{reads:?}");
    let (second, first) = (&reads[1], &reads[0]);
    assert_eq!((first.1.len, second.1.len), (4, 3));
    let acts = recv(
        &mut c,
        second.0,
        read_reply(&second.1, Status::Ok, b"xy", crate::crc32c::checksum(b"xy")),
    );
    assert!(!acts.iter().any(|a| matches!(a, ActionOf::Return { .. })));
    let acts = recv(
        &mut c,
        first.0,
        read_reply(
            &first.1,
            Status::Ok,
            b"abcd",
            crate::crc32c::checksum(b"abcd"),
        ),
    );
    assert_eq!(returned_data(&acts), b"abcdxy\0".to_vec());
}

/// Swarm seed 3272: a replica said the chain had moved on, and the retry went to another
/// replica still at the old version (frozen, cut off from mgmtd), which served a stale value.
/// Once told, the client sends nothing under the old chain version.
#[test]
fn after_a_stale_chain_version_answer_no_attempt_uses_the_old_version() {
    use PublicState::{Offline, Serving};
    let mut c = client();
    let (first, read) = start_read(&mut c, 3);
    recv(
        &mut c,
        first,
        read_reply(
            &read,
            Status::StaleChainVersion {
                current: ChainVersion(2),
            },
            b"",
            0,
        ),
    );
    let acts = handle(&mut c, EventOf::Timer(ClientTimer::Retry(read.read_id)));
    assert!(
        !acts.iter().any(|a| matches!(
            a,
            ActionOf::Send {
                msg: Msg::Read(_),
                ..
            }
        )),
        "no read under chain version 1: {acts:?}"
    );
    // The new routing arrives: the retry goes out under version 2.
    recv(
        &mut c,
        NodeId(100),
        Msg::Routing(routing(2, &[(1, Serving), (3, Serving), (2, Offline)])),
    );
    let acts = handle(&mut c, EventOf::Timer(ClientTimer::Retry(read.read_id)));
    let sent = acts.iter().find_map(|a| match a {
        ActionOf::Send {
            msg: Msg::Read(r), ..
        } => Some(r.chain.version),
        _ => None,
    });
    assert_eq!(sent, Some(ChainVersion(2)));
}

#[test]
fn owners_are_stable_and_spread_over_meta_servers() {
    use crate::ids::{InodeId, NodeId};
    let servers: Vec<NodeId> = (10..13).map(NodeId).collect();
    let mut per_server = [0u32; 3];
    for i in 0..3000u64 {
        let o = super::meta::owner_index(InodeId(4096 + i), &servers);
        assert_eq!(o, super::meta::owner_index(InodeId(4096 + i), &servers));
        per_server[o] += 1;
    }
    assert!(per_server.iter().all(|&n| n > 800), "{per_server:?}");
    // Rendezvous: dropping a server moves only the inodes it owned.
    let fewer = &servers[..2];
    for i in 0..3000u64 {
        let id = InodeId(4096 + i);
        let o = super::meta::owner_index(id, &servers);
        if o < 2 {
            assert_eq!(super::meta::owner_index(id, fewer), o);
        }
    }
}

/// Where each refresh's GetRouting went, and what it asked.
fn routing_asks(acts: &[Action<Client>]) -> Vec<(NodeId, u64)> {
    acts.iter()
        .filter_map(|a| match a {
            ActionOf::Send {
                to,
                msg: Msg::GetRouting { known },
            } => Some((*to, known.0)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_silent_mgmtd_is_left_for_the_next_one_and_an_answering_one_kept() {
    use PublicState::Serving;
    let mut cfg = ClientConfig::new(NodeId(9), ClientId(9));
    cfg.mgmtd = Some(NodeId(1));
    cfg.mgmtds = vec![NodeId(0), NodeId(1)];
    let mut c = Client::new(cfg, routing(1, &[(2, Serving)]));
    let tick = |c: &mut Client| routing_asks(&handle(c, EventOf::Timer(ClientTimer::Refresh)));
    assert_eq!(
        tick(&mut c),
        vec![(NodeId(1), 0)],
        "asks for the whole routing"
    );
    assert_eq!(
        tick(&mut c),
        vec![(NodeId(0), 0)],
        "no answer: the next mgmtd"
    );
    recv(&mut c, NodeId(0), Msg::Routing(routing(2, &[(2, Serving)])));
    assert_eq!(tick(&mut c), vec![(NodeId(0), 0)], "it answered: stay");
    assert_eq!(tick(&mut c), vec![(NodeId(1), 0)], "wraps around the list");
    // Without the list, a refresh asks the same mgmtd for newer routing only, forever.
    let mut c = client();
    c.mgmtd = Some(NodeId(1));
    assert_eq!(tick(&mut c), vec![(NodeId(1), 1)]);
    assert_eq!(tick(&mut c), vec![(NodeId(1), 1)]);
}
