//! Paged chunk metadata (issue 37): a SYNCING successor answers `SyncStart` a page of at most
//! `CHUNK_META_PAGE_MAX` chunks at a time and the predecessor walks every page before it
//! decides; a `DumpChunkMeta` reply is capped the same way and names where the next page
//! starts. Every message here crosses the codec, as on the wire.

use std::collections::VecDeque;

use super::*;
use crate::limits::CHUNK_META_PAGE_MAX as PAGE;
use crate::msg::{ChunkMetaDump, DumpCursor, SyncReq, SyncStartReply, SyncStartReq};
use crate::routing::LocalState;

const INODE: u64 = 7;

fn id(index: u32) -> ChunkId {
    ChunkId::new(INODE, index)
}

/// Stores chunk `index` committed at `version` with bytes naming both.
fn put(store: &mut MemChunkStore, index: u32, version: u32) {
    let data = format!("chunk {index} v{version}").into_bytes();
    store
        .apply(&ChunkOp::Install {
            chunk: id(index),
            version: ChunkVersion(version),
            chain_version: ChainVersion(1),
            data: Some(data.into()),
        })
        .expect("install");
}

/// A SYNCING, ONLINE successor t3 on n3 booted from `store` (chain c1 = t1, t2, t3).
fn successor(store: MemChunkStore) -> Harness {
    use PublicState::{Serving, Syncing};
    let cfg = StorageConfig::new(NodeId(3), vec![(TargetId(3), ReadMode::Committed)]);
    let metas = BTreeMap::from([(TargetId(3), store.metas())]);
    let syncing = routing(2, 2, &[(1, Serving), (2, Serving), (3, Syncing)]);
    let mut h = Harness {
        node: StorageNode::new(cfg, metas, syncing),
        store,
    };
    h.node.targets.get_mut(&TargetId(3)).unwrap().local_state = LocalState::Online;
    h
}

fn round() -> SyncReq {
    SyncReq {
        chain: VersionedChain {
            chain: C1,
            version: ChainVersion(2),
        },
        target: TargetId(3),
    }
}

/// Sends `msg` through the codec: the frame must decode to it.
fn wire(msg: Msg) -> Msg {
    let frame = msg.encode();
    let got = Msg::decode(&frame).unwrap_or_else(|e| panic!("{e}: {msg:?}"));
    assert_eq!(got, msg);
    got
}

/// Asks the successor for the page after `after`; returns its one reply and the frame's kind.
fn page(h: &mut Harness, after: Option<ChunkId>) -> (SyncStartReply, u8) {
    let ask = wire(Msg::SyncStart(SyncStartReq {
        req: round(),
        after,
    }));
    let acts = h.recv(NodeId(2), ask);
    let [ActionOf::Send {
        to: NodeId(2),
        msg: Msg::SyncStartReply(rep),
    }] = &acts[..]
    else {
        panic!("one reply: {acts:?}")
    };
    let kind = Msg::SyncStartReply(rep.clone()).encode()[3];
    match wire(Msg::SyncStartReply(rep.clone())) {
        Msg::SyncStartReply(rep) => (rep, kind),
        _ => unreachable!(),
    }
}

#[test]
fn a_successor_answers_sync_start_a_page_at_a_time() {
    // Exactly one page: one whole answer, the frame of an unpaged round (kind 13).
    let mut store = MemChunkStore::new();
    for i in 0..PAGE as u32 {
        put(&mut store, i, 1);
    }
    let mut h = successor(store.clone());
    let (rep, kind) = page(&mut h, None);
    assert_eq!((rep.metas.len(), rep.more, kind), (PAGE, false, 13));
    // Two pages and a bit: every chunk once, in order, no page over the limit.
    for i in PAGE as u32..2 * PAGE as u32 + 3 {
        put(&mut store, i, 1);
    }
    let mut h = successor(store.clone());
    let mut after = None;
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let (rep, kind) = page(&mut h, after);
        pages += 1;
        assert_eq!(rep.status, Status::Ok);
        assert_eq!(rep.after, after, "the cursor is echoed");
        assert!(rep.metas.len() <= PAGE);
        assert_eq!(kind, 30, "a paged round's replies carry their cursor");
        seen.extend(rep.metas.iter().map(|m| m.chunk));
        if !rep.more {
            break;
        }
        after = rep.metas.last().map(|m| m.chunk);
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, store.chunks().keys().copied().collect::<Vec<_>>());
}

/// Runs the predecessor's round against the successor, every message through the codec and
/// every I/O against the node's own store, until nothing is left to deliver; every reply page
/// arrives twice (the copy after the original was taken), as a duplicating network may
/// deliver it. Returns the `SyncStart` requests sent.
fn run_round(pred: &mut Harness, succ: &mut Harness, first: Vec<Action<StorageNode>>) -> usize {
    // (node the action is from or for, the action, whether it is a copy).
    let mut queue: VecDeque<(u32, Action<StorageNode>, bool)> =
        first.into_iter().map(|a| (2, a, false)).collect();
    let mut asks = 0;
    while let Some((at, a, copy)) = queue.pop_front() {
        let (h, other) = if at == 2 {
            (&mut *pred, &mut *succ)
        } else {
            (&mut *succ, &mut *pred)
        };
        let (next_at, acts) = match a {
            ActionOf::Io { .. } => (at, h.complete(&a)),
            ActionOf::Send { to, msg } if to == NodeId((5 - at).into()) => {
                if let Msg::SyncStart(_) = msg {
                    asks += 1;
                }
                if let Msg::SyncStartReply(r) = &msg {
                    assert!(r.metas.len() <= PAGE, "a reply over a page");
                    if !copy {
                        let again = ActionOf::Send {
                            to,
                            msg: msg.clone(),
                        };
                        queue.push_back((at, again, true));
                    }
                }
                (5 - at, other.recv(NodeId(at.into()), wire(msg)))
            }
            _ => continue, // Timers; heartbeats (no mgmtd here).
        };
        queue.extend(acts.into_iter().map(|a| (next_at, a, false)));
    }
    asks
}

/// The predecessor walks all pages before deciding: chunks the successor lacks or holds older
/// are shipped, chunks only it holds are removed, on both sides of every page boundary.
#[test]
fn a_round_over_several_pages_repairs_every_chunk() {
    use PublicState::{Serving, Syncing};
    let n = 2 * PAGE as u32 + 30;
    let (mut mine, mut theirs) = (MemChunkStore::new(), MemChunkStore::new());
    for i in 0..n {
        // Newer here every 1,000th chunk; missing there every 1,500th (and at the boundaries).
        put(&mut mine, i, if i % 1000 == 1 { 2 } else { 1 });
        let boundary = i == PAGE as u32 - 1 || i == PAGE as u32;
        if i % 1500 != 7 && !boundary {
            put(&mut theirs, i, 1);
        }
    }
    for i in n..n + 5 {
        put(&mut theirs, i, 3); // Only there: removed.
    }
    let cfg = StorageConfig::new(NodeId(2), vec![(TargetId(2), ReadMode::Committed)]);
    let metas = BTreeMap::from([(TargetId(2), mine.metas())]);
    let mut pred = Harness {
        node: StorageNode::new_in_service(cfg, metas, all_serving()),
        store: mine,
    };
    let pages = theirs.chunks().len().div_ceil(PAGE);
    assert_eq!(pages, 3);
    let mut succ = successor(theirs);
    let syncing = routing(2, 2, &[(1, Serving), (2, Serving), (3, Syncing)]);
    let first = pred.recv(NodeId(0), Msg::Routing(syncing));
    let asks = run_round(&mut pred, &mut succ, first);
    assert_eq!(asks, pages, "one request a page");
    assert_eq!(pred.node.counters().resyncs_done, 1);
    assert_eq!(
        succ.node.targets[&TargetId(3)].local_state,
        LocalState::UpToDate
    );
    let content = |s: &MemChunkStore| -> Vec<(ChunkId, ChunkVersion, Vec<u8>)> {
        s.chunks()
            .iter()
            .map(|(c, m)| (*c, m.committed, m.data.to_vec()))
            .collect()
    };
    assert_eq!(content(&succ.store), content(&pred.store));
    assert_eq!(succ.store.chunks().len(), n as usize);
}

fn dump_page(h: &mut Harness, cursor: Option<DumpCursor>) -> ChunkMetaDump {
    let acts = h.recv(NodeId(9), wire(Msg::DumpChunkMeta { cursor }));
    let [ActionOf::Send {
        msg: Msg::ChunkMetaDump(d),
        ..
    }] = &acts[..]
    else {
        panic!("one dump: {acts:?}")
    };
    match wire(Msg::ChunkMetaDump(d.clone())) {
        Msg::ChunkMetaDump(d) => d,
        _ => unreachable!(),
    }
}

/// Dumps every page; returns each page's chunk count and the chunks per target.
fn dump_all(h: &mut Harness) -> (Vec<usize>, BTreeMap<TargetId, Vec<ChunkId>>) {
    let (mut sizes, mut all) = (Vec::new(), BTreeMap::<TargetId, Vec<ChunkId>>::new());
    let mut cursor = None;
    loop {
        let d = dump_page(h, cursor);
        sizes.push(d.targets.iter().map(|t| t.chunks.len()).sum());
        for t in d.targets {
            all.entry(t.target)
                .or_default()
                .extend(t.chunks.iter().map(|c| c.chunk));
        }
        match d.next {
            Some(c) => cursor = Some(c),
            None => return (sizes, all),
        }
    }
}

#[test]
fn a_chunk_meta_dump_goes_a_page_at_a_time() {
    let cfg = StorageConfig::new(
        NodeId(1),
        vec![
            (TargetId(1), ReadMode::Committed),
            (TargetId(4), ReadMode::Committed),
        ],
    );
    let committed = |range: std::ops::Range<u32>| -> Vec<ChunkMeta> {
        range
            .map(|i| ChunkMeta {
                chunk: id(i),
                committed: ChunkVersion(1),
                ..ChunkMeta::default()
            })
            .collect()
    };
    let node = |t1: u32| {
        // Never-committed chunks are left out of the dump (and of the page's count).
        let mut first = committed(0..t1);
        first.push(ChunkMeta {
            chunk: id(t1 + 1),
            pending: Some(crate::chunk::PendingMeta {
                version: ChunkVersion(1),
                ..Default::default()
            }),
            ..ChunkMeta::default()
        });
        let metas = BTreeMap::from([(TargetId(1), first), (TargetId(4), committed(0..10))]);
        Harness {
            node: StorageNode::new_in_service(cfg.clone(), metas, all_serving()),
            store: MemChunkStore::new(),
        }
    };
    let ids = |r: std::ops::Range<u32>| r.map(id).collect::<Vec<_>>();
    // t1 over a page: cut after its PAGE-th chunk, the rest and t4 in the second page.
    let (sizes, all) = dump_all(&mut node(PAGE as u32 + 3));
    assert_eq!(sizes, vec![PAGE, 13]);
    assert_eq!(all[&TargetId(1)], ids(0..PAGE as u32 + 3));
    assert_eq!(all[&TargetId(4)], ids(0..10));
    // t1 exactly a page: the next page starts at t4.
    let mut h = node(PAGE as u32);
    let d = dump_page(&mut h, None);
    assert_eq!(
        d.next,
        Some(DumpCursor {
            target: TargetId(4),
            after: None
        })
    );
    let (sizes, all) = dump_all(&mut h);
    assert_eq!(sizes, vec![PAGE, 10]);
    assert_eq!(all[&TargetId(1)], ids(0..PAGE as u32));
    // Small: one page, complete.
    let (sizes, all) = dump_all(&mut node(5));
    assert_eq!((sizes, all.len()), (vec![15], 2));
}
