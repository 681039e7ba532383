//! Answers a target gives from its cached chunk metadata, without I/O: `queryLastChunk` (meta's
//! length queries, truncate, GC) and `spaceInfo` (statfs).

use super::*;

#[test]
fn query_last_chunk_answers_from_committed_metadata_at_the_head_only() {
    let mut h = Harness::new(1, ReadMode::Committed, 0);
    let meta = |inode, index, committed, len| crate::chunk::ChunkMeta {
        chunk: ChunkId::new(inode, index),
        committed: ChunkVersion(committed),
        len,
        ..Default::default()
    };
    let chunks = &mut h.node.targets.get_mut(&TargetId(1)).unwrap().chunks;
    for m in [
        meta(1, 0, 3, 100),
        meta(1, 2, 2, 0),  // emptied by a truncate
        meta(1, 5, 0, 0),  // never committed (a write in flight)
        meta(2, 9, 1, 50), // another file
    ] {
        chunks.insert(m.chunk, m);
    }
    let query = |empty, end| crate::msg::QueryLastChunkReq {
        query_id: RequestId(5),
        chain: VersionedChain {
            chain: C1,
            version: ChainVersion(1),
        },
        inode: crate::ids::InodeId(1),
        begin: 0,
        end,
        empty,
        retry: 0,
    };
    let answer = |status, last: Option<(u32, u32)>| {
        vec![ActionOf::Send {
            to: CLIENT,
            msg: Msg::QueryLastChunkReply(crate::msg::QueryLastChunkReply {
                query_id: RequestId(5),
                status,
                last: last.map(|(index, len)| crate::msg::LastChunk { index, len }),
            }),
        }]
    };
    let ask = |h: &mut Harness, empty, end| h.recv(CLIENT, Msg::QueryLastChunk(query(empty, end)));
    // Data only: chunk 0; with empty chunks: chunk 2; never the uncommitted one or another file's.
    assert_eq!(
        ask(&mut h, false, u32::MAX),
        answer(Status::Ok, Some((0, 100)))
    );
    assert_eq!(
        ask(&mut h, true, u32::MAX),
        answer(Status::Ok, Some((2, 0)))
    );
    assert_eq!(ask(&mut h, true, 2), answer(Status::Ok, Some((0, 100))));
    assert_eq!(ask(&mut h, true, 0), answer(Status::Ok, None));
    // A successor may lag behind the head: it refuses.
    let mut tail = Harness::new(3, ReadMode::Committed, 0);
    assert_eq!(
        ask(&mut tail, false, u32::MAX),
        answer(Status::NotHead, None)
    );
}

#[test]
fn space_info_reports_committed_bytes_per_target() {
    let mut h = Harness::new(1, ReadMode::Committed, 0);
    let chunks = &mut h.node.targets.get_mut(&TargetId(1)).unwrap().chunks;
    for (index, len) in [(0, 100), (1, 4096)] {
        let m = crate::chunk::ChunkMeta {
            chunk: ChunkId::new(1, index),
            committed: ChunkVersion(1),
            len,
            ..Default::default()
        };
        chunks.insert(m.chunk, m);
    }
    let acts = h.recv(CLIENT, Msg::SpaceInfo);
    let want = crate::msg::SpaceInfoReply {
        node: NodeId(1),
        targets: vec![crate::msg::TargetSpace {
            target: TargetId(1),
            capacity: crate::storage::TARGET_CAPACITY,
            used: 4196,
        }],
    };
    assert_eq!(
        acts,
        vec![ActionOf::Send {
            to: CLIENT,
            msg: Msg::SpaceInfoReply(want)
        }]
    );
}
