//! Tests of the io_uring store beyond the conformance suite (the SIGKILL test is in
//! `crash_tests.rs`).

use super::*;

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("t3fs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn uring_store_conforms() {
    let root = tmp("uring-suite");
    let mut n = 0;
    t3fs_core::testing::chunk_store_suite(|| {
        n += 1;
        UringChunkStore::open(&root.join(n.to_string())).expect("open")
    });
    std::fs::remove_dir_all(&root).expect("cleanup");
}

#[test]
fn uring_store_lists_pending_and_applied_after_reopen() {
    let dir = tmp("uring-reopen");
    let c = ChunkId::new(7, 0);
    let tag = UpdateTag::default();
    let update = |v: u32, data: Vec<u8>, tag| ChunkOp::Update {
        chunk: c,
        version: ChunkVersion(v),
        kind: UpdateKind::Replace { data: data.into() },
        tag,
    };
    let ops = [
        update(1, vec![1; 3000], Some(tag)),
        ChunkOp::Commit {
            chunk: c,
            version: ChunkVersion(1),
            chain_version: ChainVersion(1),
        },
        update(2, vec![2; 5000], None),
    ];
    let mut s = UringChunkStore::open(&dir).expect("open");
    let mut done = Vec::new();
    for (i, op) in ops.into_iter().enumerate() {
        s.submit(IoId(i as u64), op);
    }
    while s.in_flight() > 0 {
        s.poll_completions(&mut done);
        s.wait(Duration::from_millis(10));
    }
    let before = match &done[2].1 {
        Ok(ChunkDone::Updated(m)) => m.clone(),
        other => panic!("{other:?}"),
    };
    drop(s);
    let mut s = UringChunkStore::open(&dir).expect("reopen");
    s.submit(IoId(9), ChunkOp::List);
    done.clear();
    while done.is_empty() {
        s.poll_completions(&mut done);
    }
    assert_eq!(done[0].1, Ok(ChunkDone::Listed(vec![before.clone()])));
    assert_eq!(before.applied.len(), 1);
    assert_eq!(before.pending.map(|p| p.version), Some(ChunkVersion(2)));
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn uring_store_reads_what_the_file_store_wrote_and_keeps_many_in_flight() {
    use crate::chunk_store::FileChunkStore;
    let dir = tmp("uring-many");
    let chunks = 200u32; // More than DEPTH: the rest wait in the queue.
    let mut file = FileChunkStore::open(&dir).expect("open");
    let mut done = Vec::new();
    for i in 0..chunks {
        let chunk = ChunkId::new(3, i);
        let data = vec![i as u8; 5000 + i as usize];
        file.submit(
            IoId(0),
            ChunkOp::Install {
                chunk,
                version: ChunkVersion(1),
                chain_version: ChainVersion(1),
                data: Some(data.into()),
            },
        );
    }
    file.poll_completions(&mut done);
    assert!(done.iter().all(|(_, r)| r.is_ok()));
    drop(file);
    let mut s = UringChunkStore::open(&dir).expect("open");
    for i in 0..chunks {
        let chunk = ChunkId::new(3, i);
        s.submit(
            IoId(i as u64),
            ChunkOp::Update {
                chunk,
                version: ChunkVersion(2),
                kind: UpdateKind::Write {
                    offset: 1,
                    data: vec![7].into(),
                },
                tag: None,
            },
        );
        s.submit(
            IoId(1000 + i as u64),
            ChunkOp::Commit {
                chunk,
                version: ChunkVersion(2),
                chain_version: ChainVersion(1),
            },
        );
    }
    done.clear();
    while s.in_flight() > 0 {
        s.poll_completions(&mut done);
        s.wait(Duration::from_millis(10));
    }
    assert_eq!(done.len(), 2 * chunks as usize);
    assert!(
        done.iter().all(|(_, r)| r.is_ok()),
        "{:?}",
        done.iter().find(|(_, r)| r.is_err())
    );
    drop(s);
    let mut file = FileChunkStore::open(&dir).expect("reopen");
    for i in 0..chunks {
        let chunk = ChunkId::new(3, i);
        file.submit(
            IoId(i as u64),
            ChunkOp::Read {
                chunk,
                offset: 0,
                len: 3,
                uncommitted: false,
                unverified: false,
            },
        );
    }
    done.clear();
    file.poll_completions(&mut done);
    for (id, r) in &done {
        let i = id.0 as u8;
        match r {
            Ok(ChunkDone::Read(Some(r))) => {
                assert_eq!((&r.data[..], r.version), (&[i, 7, i][..], ChunkVersion(2)))
            }
            other => panic!("{other:?}"),
        }
    }
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
