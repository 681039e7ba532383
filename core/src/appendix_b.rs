//! 3FS's suspected weak spots (reference Appendix B) written as tests: each either reproduces
//! the documented 3FS behaviour with t3fs's machines (the behaviour is faithful, so the testbed
//! can study it) or shows the t3fs variant that prevents it. Meta-service items (#5 inode ids,
//! #6 length hints, #9 untracked read-only opens) belong to the meta issue.

use std::collections::BTreeMap;

use crate::chunk::{ChunkOp, UpdateKind};
use crate::ids::{
    ChainId, ChainVersion, ChannelId, ChunkId, ChunkVersion, ClientId, NodeId, RequestId, SeqNum,
    TargetId, VersionedChain,
};
use crate::machine::{Action, ActionOf, EventOf, IoOp, IoResult, Machine, Outbox};
use crate::mgmtd::chain_update::generate_new_chain;
use crate::msg::{MessageTag, Msg, ReadReq, Status, UpdateReq};
use crate::routing::{ChainTarget, LocalState, PublicState, RoutingInfo};
use crate::storage::{ReadMode, StorageConfig, StorageNode};
use crate::testing::{one_chain_routing, MemChunkStore};
use crate::time::Instant;

/// A storage node with its store; I/O completes synchronously.
struct Node {
    node: StorageNode,
    store: MemChunkStore,
}

impl Node {
    fn new(n: u32, mode: ReadMode, routing: RoutingInfo) -> Self {
        let cfg = StorageConfig::new(NodeId(n.into()), vec![(TargetId(n), mode)]);
        Self {
            node: StorageNode::new_in_service(cfg, BTreeMap::new(), routing),
            store: MemChunkStore::new(),
        }
    }

    /// Handles `msg` and runs every resulting I/O to completion; returns the sends.
    fn recv(&mut self, from: u32, msg: Msg) -> Vec<(NodeId, Msg)> {
        self.run(EventOf::Recv {
            from: NodeId(from.into()),
            msg,
        })
    }

    fn run(
        &mut self,
        event: EventOf<Msg, crate::storage::StorageTimer, crate::machine::NoCall>,
    ) -> Vec<(NodeId, Msg)> {
        let mut out = Outbox::new();
        self.node.handle(Instant::ZERO, event, &mut out);
        let mut sends = Vec::new();
        let mut pending: Vec<Action<StorageNode>> = out.drain();
        while let Some(a) = pending.pop() {
            match a {
                ActionOf::Io {
                    id,
                    op: IoOp::Chunk { op, .. },
                } => {
                    let result = IoResult::Chunk(self.store.apply(&op));
                    let mut o = Outbox::new();
                    self.node
                        .handle(Instant::ZERO, EventOf::IoDone { id, result }, &mut o);
                    pending.extend(o.drain());
                }
                ActionOf::Send { to, msg } => sends.push((to, msg)),
                _ => {}
            }
        }
        sends
    }
}

fn chunk() -> ChunkId {
    ChunkId::new(1, 0)
}

fn read(chain_version: u32) -> Msg {
    Msg::Read(ReadReq {
        read_id: RequestId(1),
        chain: VersionedChain {
            chain: ChainId(1),
            version: ChainVersion(chain_version),
        },
        chunk: chunk(),
        offset: 0,
        len: 1,
        retry: 0,
    })
}

fn read_data(sends: &[(NodeId, Msg)]) -> (Status, Vec<u8>) {
    match sends {
        [(_, Msg::ReadReply(r))] => (r.status, r.data.to_vec()),
        other => panic!("expected one read reply, got {other:?}"),
    }
}

/// Appendix B #1 and #4 (reproduced): no self-fencing. A replica cut off from mgmtd keeps its
/// old routing and keeps answering reads from clients whose routing is equally stale, although
/// the chain has moved on without it and newer writes were acknowledged elsewhere.
#[test]
fn b1_b4_partitioned_replica_serves_stale_reads_to_stale_clients() {
    use PublicState::Serving;
    let old = one_chain_routing(1, 1, &[(1, Serving), (2, Serving)]);
    let mut t2 = Node::new(2, ReadMode::Committed, old);
    // Version 1 of the chunk committed on t2 before the partition.
    t2.store
        .apply(&ChunkOp::Update {
            chunk: chunk(),
            version: ChunkVersion(1),
            kind: UpdateKind::Write {
                offset: 0,
                data: vec![1].into(),
            },
            tag: None,
        })
        .unwrap();
    t2.store
        .apply(&ChunkOp::Commit {
            chunk: chunk(),
            version: ChunkVersion(1),
            chain_version: ChainVersion(1),
        })
        .unwrap();
    let metas = BTreeMap::from([(TargetId(2), t2.store.metas())]);
    let cfg = StorageConfig::new(NodeId(2), vec![(TargetId(2), ReadMode::Committed)]);
    t2.node = StorageNode::new_in_service(
        cfg,
        metas,
        one_chain_routing(1, 1, &[(1, Serving), (2, Serving)]),
    );
    // Meanwhile mgmtd moved t2 out (chain v2) and t1 acknowledged version 2 = [9]; t2 never
    // hears of it. A client with the old routing reads at t2:
    let (status, data) = read_data(&t2.recv(10, read(1)));
    assert_eq!(
        (status, data),
        (Status::Ok, vec![1]),
        "3FS behaviour: the stale value is served"
    );
    // A client that has the new routing is refused (exact chain-version admission).
    let (status, _) = read_data(&t2.recv(11, read(2)));
    assert!(matches!(status, Status::StaleChainVersion { .. }));
}

/// Appendix B #3 (reproduced under `ReadMode::Committed`, prevented by `RejectDirty`): the new
/// chunk engine answers reads of a chunk with an update in flight with the committed version,
/// so a head that has not committed yet returns the old value after the tail returned the new
/// one (a new→old inversion across replicas). The legacy engine refuses dirty reads instead.
#[test]
fn b3_committed_reads_during_inflight_writes_can_invert() {
    use PublicState::Serving;
    for (mode, expect_inversion) in [(ReadMode::Committed, true), (ReadMode::RejectDirty, false)] {
        let routing = one_chain_routing(1, 1, &[(1, Serving), (2, Serving)]);
        let mut head = Node::new(1, mode, routing);
        // The head applied version 1 locally and forwarded it; the tail committed it (and would
        // answer [7]); the head's commit waits for the tail's reply.
        let w = UpdateReq {
            tag: MessageTag {
                client: ClientId(9),
                request: RequestId(1),
                channel: ChannelId(1),
                seqnum: SeqNum(1),
            },
            chain: VersionedChain {
                chain: ChainId(1),
                version: ChainVersion(1),
            },
            chunk: chunk(),
            kind: UpdateKind::Write {
                offset: 0,
                data: vec![7].into(),
            },
            chunk_size: 64,
            update_version: ChunkVersion(0),
            checksum: crate::crc32c::checksum(&[7]),
            retry: 0,
            is_syncing: false,
        };
        let sends = head.recv(9, Msg::Write(w));
        assert!(
            matches!(&sends[..], [(NodeId(2), Msg::Update(_))]),
            "{sends:?}"
        );
        let (status, data) = read_data(&head.recv(10, read(1)));
        if expect_inversion {
            assert_eq!(
                (status, data),
                (Status::Ok, vec![]),
                "old (empty) value served mid-write"
            );
        } else {
            assert_eq!(
                status,
                Status::NotCommitted,
                "legacy engine refuses the dirty read"
            );
        }
    }
}

fn chain(states: &[(u32, PublicState)]) -> Vec<ChainTarget> {
    states
        .iter()
        .map(|&(t, state)| ChainTarget {
            target: TargetId(t),
            state,
        })
        .collect()
}

/// Appendix B #7 (reproduced): only one SYNCING target per chain, so several returning replicas
/// recover one after another.
#[test]
fn b7_recovery_of_several_replicas_is_sequential() {
    use PublicState::*;
    let old = chain(&[(1, Serving), (2, Offline), (3, Offline)]);
    let (new, _) = generate_new_chain(&old, |_| LocalState::Online, None);
    let states: Vec<PublicState> = new.iter().map(|t| t.state).collect();
    assert_eq!(states, vec![Serving, Syncing, Waiting]);
}

/// Appendix B #8 (reproduced): a chain whose serving replicas all failed waits for its LASTSRV;
/// another replica coming back, even complete, only WAITs. The admin rotation (tested in the
/// mgmtd handler tests) is the way out, at the risk of losing the LASTSRV's newest writes.
#[test]
fn b8_all_failed_chain_waits_for_its_lastsrv() {
    use PublicState::*;
    let old = chain(&[(1, LastSrv), (2, Offline), (3, Offline)]);
    let local = |t: TargetId| {
        if t.0 == 1 {
            LocalState::Offline
        } else {
            LocalState::UpToDate
        }
    };
    let (new, _) = generate_new_chain(&old, local, None);
    let states: Vec<PublicState> = new.iter().map(|t| t.state).collect();
    assert_eq!(
        states,
        vec![LastSrv, Waiting, Waiting],
        "unavailable until t1 returns"
    );
}

/// §3.5 #8 (reproduced): a returning LASTSRV force-commits its pending versions with the new
/// chain version, so a write that was never acknowledged can become visible.
#[test]
fn lastsrv_return_makes_an_unacknowledged_write_visible() {
    use PublicState::*;
    let lastsrv = one_chain_routing(2, 2, &[(1, LastSrv), (2, Offline)]);
    let mut t1 = Node::new(1, ReadMode::Committed, lastsrv);
    // A pending version 1 (its write was never acknowledged: the chain died under it).
    t1.store
        .apply(&ChunkOp::Update {
            chunk: chunk(),
            version: ChunkVersion(1),
            kind: UpdateKind::Write {
                offset: 0,
                data: vec![5].into(),
            },
            tag: None,
        })
        .unwrap();
    let metas = BTreeMap::from([(TargetId(1), t1.store.metas())]);
    let cfg = StorageConfig::new(NodeId(1), vec![(TargetId(1), ReadMode::Committed)]);
    t1.node = StorageNode::new_in_service(
        cfg,
        metas,
        one_chain_routing(2, 2, &[(1, LastSrv), (2, Offline)]),
    );
    t1.recv(
        100,
        Msg::Routing(one_chain_routing(3, 3, &[(1, Serving), (2, Offline)])),
    );
    let (status, data) = read_data(&t1.recv(10, read(3)));
    assert_eq!(
        (status, data),
        (Status::Ok, vec![5]),
        "the unacknowledged write is now committed"
    );
    assert_eq!(t1.node.counters().force_commits, 1);
}
