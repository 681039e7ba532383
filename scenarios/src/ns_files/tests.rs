//! A session's steps against a hand-made chunk store: truncates walked range by range or
//! chunk by chunk, cuts repeated when their outcome is unknown, writes near the maximum offset.

use super::*;
use std::collections::BTreeMap;
use t3fs_core::meta::placement::ChainRange;
use t3fs_core::msg::Status;

const TABLE: [ChainId; 3] = [ChainId(1), ChainId(2), ChainId(3)];

/// A write session of a file of `chunk_size` chunks striped over `stripe` chains of
/// [`TABLE`], with `plan`.
fn session(chunk_size: u32, stripe: u32, plan: Vec<FileAction>) -> Session {
    let range = ChainRange {
        table: 1,
        table_version: 1,
        base: 1,
        stripe,
        seed: 0,
    };
    Session {
        inode: InodeId(42),
        session: 1,
        layout: Some(Layout::new(chunk_size, range)),
        truncate_ver: 0,
        plan: plan.into(),
        trunc: None,
        written: 0,
        writing: 0,
        uncertain: false,
        reading: None,
        cutting: None,
        recut: None,
    }
}

/// What one storage call did, as the tests compare it.
#[derive(Debug, PartialEq)]
enum Did {
    Query(u32),
    Cut(u32, u32),
    Sync,
    Other,
}

/// Runs the session's steps against `chunks` (index → committed length; chunk updates
/// listed in `refuse` fail) until it has none left; what it did, in order. Stops after
/// `limit` steps, so that a walk that never ends fails instead of hanging.
fn run(s: &mut Session, chunks: &mut BTreeMap<u32, u32>, refuse: &[u32], limit: usize) -> Vec<Did> {
    let fl = s.layout.unwrap().file_layout(&TABLE).unwrap();
    let mut did = Vec::new();
    while s.busy(false) {
        assert!(
            did.len() < limit,
            "no end in sight: {:?}",
            &did[..20.min(limit)]
        );
        let Some(step) = s.step(&TABLE, RequestId(did.len() as u64)) else {
            break;
        };
        let ret = match step {
            Step::Sync(_) => {
                did.push(Did::Sync);
                s.synced(&Err(t3fs_core::meta::MetaError::Corrupt));
                continue;
            }
            Step::Data(ClientCall::QueryLastChunk { chains, end, .. }) => {
                did.push(Did::Query(end));
                let mut chains = chains;
                chains.sort();
                chains.dedup();
                let last = |c: ChainId| {
                    let held = chunks.range(..end).rev();
                    let mut held = held.filter(|(k, l)| **l > 0 && fl.chain_of(**k) == c);
                    held.next().map(|(&index, &len)| LastChunk { index, len })
                };
                ClientRet::LastChunks(chains.into_iter().map(|c| (c, last(c))).collect())
            }
            Step::Data(ClientCall::UpdateChunk {
                chunk,
                chain,
                kind: UpdateKind::Truncate { len },
                ..
            }) => {
                assert_eq!(chain, fl.chain_of(chunk.index));
                did.push(Did::Cut(chunk.index, len));
                if refuse.contains(&chunk.index) {
                    ClientRet::Failed {
                        chunk,
                        status: Status::ForwardFailed,
                    }
                } else {
                    chunks.insert(chunk.index, len);
                    ClientRet::Updated {
                        results: Vec::new(),
                    }
                }
            }
            Step::Data(_) => {
                did.push(Did::Other);
                ClientRet::Updated {
                    results: Vec::new(),
                }
            }
        };
        s.data_returned(&ret);
    }
    did
}

#[test]
fn a_dense_range_is_emptied_index_by_index_from_the_last_down_then_the_tail_is_cut() {
    // What the simulator's files always take: the same calls as before ranges.
    let mut s = session(4096, 3, vec![FileAction::Truncate(5000)]);
    let mut chunks: BTreeMap<u32, u32> = (0..5).map(|k| (k, 4096)).collect();
    let did = run(&mut s, &mut chunks, &[], 100);
    use Did::*;
    assert_eq!(
        did,
        [
            Query(u32::MAX),
            Cut(4, 0),
            Cut(3, 0),
            Cut(2, 0),
            Cut(1, 904),
            Sync
        ]
    );
    // A truncate to 0 of a file with a hole empties the hole's index too, and ends at
    // chunk 0 (no tail to cut).
    let mut s = session(4096, 1, vec![FileAction::Truncate(0)]);
    let mut chunks = BTreeMap::from([(0, 10), (2, 10)]);
    let did = run(&mut s, &mut chunks, &[], 100);
    assert_eq!(
        did,
        [Query(u32::MAX), Cut(2, 0), Cut(1, 0), Cut(0, 0), Sync]
    );
}

#[test]
fn a_truncate_past_the_largest_file_is_not_run_and_never_cuts_chunk_zero() {
    // 2^52 + 5 at 1 MiB chunks needs chunk index 2^32: once it wrapped to chunk 0, cut to
    // 5 bytes.
    let far = (1u64 << 52) + 5;
    let mut s = session(1 << 20, 3, vec![FileAction::Truncate(far)]);
    let mut chunks = BTreeMap::from([(0, 1 << 20)]);
    assert!(run(&mut s, &mut chunks, &[], 10).is_empty());
    assert_eq!(chunks, BTreeMap::from([(0, 1 << 20)]));
    assert!(s.trunc.is_none() && !s.uncertain);
    // The plan goes on past it.
    let mut s = session(
        1 << 20,
        3,
        vec![FileAction::Truncate(far), FileAction::Write(0)],
    );
    assert_eq!(run(&mut s, &mut chunks, &[], 10), [Did::Other]);
    // One past the maximum is refused, the maximum itself cuts (extends) the last chunk.
    let max = t3fs_core::layout::file_size_max(1 << 20);
    let mut s = session(1 << 20, 3, vec![FileAction::Truncate(max + 1)]);
    assert!(run(&mut s, &mut chunks, &[], 10).is_empty());
    let mut s = session(1 << 20, 3, vec![FileAction::Truncate(max)]);
    let did = run(&mut s, &mut chunks, &[], 10);
    use Did::*;
    assert_eq!(did, [Query(u32::MAX), Cut(u32::MAX - 1, 1 << 20), Sync]);
    // With 64 MiB chunks 2^52 + 5 is in range: chunk 2^26 is cut to 5 bytes.
    let mut s = session(64 << 20, 3, vec![FileAction::Truncate(far)]);
    let did = run(&mut s, &mut BTreeMap::new(), &[], 10);
    assert_eq!(did, [Query(u32::MAX), Cut(1 << 26, 5), Sync]);
}

#[test]
fn a_sparse_far_chunk_then_truncate_to_zero_touches_only_the_chunks_that_exist() {
    // A far chunk (the last index a file may use) and chunk 0: the range between them is
    // 2^32 - 1 indexes; the walk asks the heads instead of listing it.
    let mut s = session(1 << 20, 3, vec![FileAction::Truncate(0)]);
    let far = u32::MAX - 1;
    let mut chunks = BTreeMap::from([(0, 100), (far, 7)]);
    let did = run(&mut s, &mut chunks, &[], 20);
    use Did::*;
    assert_eq!(
        did,
        [Query(u32::MAX), Cut(far, 0), Cut(0, 0), Query(far), Sync]
    );
    assert!(chunks.values().all(|&l| l == 0));
    // Truncating to a length inside the file keeps what is below and cuts the tail.
    let mut s = session(1 << 20, 1, vec![FileAction::Truncate(3 << 20)]);
    let mut chunks = BTreeMap::from([(0, 1 << 20), (1, 1 << 20), (2, 1 << 20), (far, 7)]);
    let did = run(&mut s, &mut chunks, &[], 20);
    assert_eq!(
        did,
        [
            Query(u32::MAX),
            Cut(far, 0),
            Query(far),
            Cut(2, 1 << 20),
            Sync
        ]
    );
    assert_eq!(chunks[&far], 0);
    assert_eq!(chunks[&1], 1 << 20);
}

#[test]
fn a_long_range_is_walked_by_queries_then_emptied_index_by_index() {
    let n = 3000u32;
    let mut s = session(4096, 3, vec![FileAction::Truncate(4096)]);
    let mut chunks: BTreeMap<u32, u32> = (0..n).map(|k| (k, 4096)).collect();
    let did = run(&mut s, &mut chunks, &[], 10_000);
    assert!(chunks.iter().all(|(&k, &l)| (k == 0) == (l == 4096)));
    // Every chunk past the tail emptied exactly once, the last ones by queries (one per
    // round of one chunk per chain), the last 1024 index by index.
    let cuts: Vec<u32> = did
        .iter()
        .filter_map(|d| match d {
            Did::Cut(k, 0) => Some(*k),
            _ => None,
        })
        .collect();
    assert_eq!(cuts, (1..n).rev().collect::<Vec<_>>());
    let queries = did.iter().filter(|d| matches!(d, Did::Query(_))).count();
    let walked = u64::from(n - 1) - TRUNCATE_EMPTY_EVERY_MAX;
    assert_eq!(queries as u64, 1 + walked.div_ceil(3));
    assert_eq!(did.last(), Some(&Did::Sync));
    assert_eq!(did[did.len() - 2], Did::Cut(0, 4096));
}

#[test]
fn a_walk_ends_even_when_chunks_refuse_to_be_emptied() {
    // A step that keeps failing is sent again a bounded number of times, then does not
    // stop the truncate, and the next query looks below it.
    let mut s = session(4096, 1, vec![FileAction::Truncate(0)]);
    let mut chunks = BTreeMap::from([(0, 1), (5000, 1), (10_000, 1)]);
    let did = run(&mut s, &mut chunks, &[5000], 40);
    use Did::*;
    let mut want = vec![Query(u32::MAX), Cut(10_000, 0), Query(10_000)];
    want.extend((0..=RECUT_TRIES_MAX).map(|_| Cut(5000, 0)));
    want.extend([Query(5000), Cut(0, 0), Sync]);
    assert_eq!(did, want);
    assert_eq!(chunks[&5000], 1);
}

#[test]
fn a_cut_with_an_unknown_outcome_is_sent_again_before_the_sync() {
    // The cut may still be running at the head; the sync must not ask storage for the
    // length before it ended (swarm seed 7001054: meta kept a length past the data).
    let mut s = session(4096, 1, vec![FileAction::Truncate(0)]);
    let fl = s.layout.unwrap().file_layout(&TABLE).unwrap();
    let chain = fl.chain_of(0);
    let cut0 = |step: Option<Step>| {
        matches!(
            step,
            Some(Step::Data(ClientCall::UpdateChunk {
                chunk: ChunkId { index: 0, .. },
                kind: UpdateKind::Truncate { len: 0 },
                ..
            }))
        )
    };
    assert!(matches!(
        s.step(&TABLE, RequestId(1)),
        Some(Step::Data(ClientCall::QueryLastChunk { .. }))
    ));
    let last = Some(LastChunk { index: 0, len: 9 });
    s.data_returned(&ClientRet::LastChunks(vec![(chain, last)]));
    assert!(cut0(s.step(&TABLE, RequestId(2))));
    let unknown = ClientRet::Failed {
        chunk: ChunkId::new(42, 0),
        status: Status::ForwardFailed,
    };
    s.data_returned(&unknown);
    assert!(
        cut0(s.step(&TABLE, RequestId(3))),
        "the cut again, not the sync"
    );
    s.data_returned(&ClientRet::Updated {
        results: Vec::new(),
    });
    assert!(matches!(s.step(&TABLE, RequestId(4)), Some(Step::Sync(_))));
}

#[test]
fn a_write_near_the_maximum_offset_does_not_overflow_the_session() {
    let mut s = session(1 << 20, 3, vec![FileAction::Write(u64::MAX - 10)]);
    let Some(Step::Data(ClientCall::Write { layout, offset, .. })) = s.step(&TABLE, RequestId(1))
    else {
        panic!("a write");
    };
    assert_eq!(s.writing, u64::MAX);
    // The client refuses it: the range has no chunk index.
    assert!(layout.split(InodeId(42), offset, 64).is_none());
    s.data_returned(&ClientRet::Rejected(Status::InvalidRequest));
    assert!(s.uncertain);
}
