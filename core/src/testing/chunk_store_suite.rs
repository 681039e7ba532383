//! The chunk store conformance suite: the contract of `crate::chunk` as executable checks.
//!
//! Every implementation (in-memory, simulated, file, io_uring) must pass it. It drives the store
//! only through `submit`/`poll_completions`, so it tests the completion contract too. It does
//! not test crash behaviour (the simulator's and real stores' own crash tests do).

use crate::chunk::{ChunkDone, ChunkError, ChunkOp, ChunkRead, ChunkStore, UpdateKind};
use crate::crc32c;
use crate::ids::{ChainVersion, ChunkId, ChunkVersion, IoId};

struct Driver<S> {
    store: S,
    next: u64,
}

impl<S: ChunkStore> Driver<S> {
    fn run(&mut self, op: ChunkOp) -> Result<ChunkDone, ChunkError> {
        self.next += 1;
        let id = IoId(self.next);
        self.store.submit(id, op);
        let mut done = Vec::new();
        // A store may need several polls (real I/O); bound them so a broken store fails loudly.
        // `wait` lets a real store block on its device rather than spend the budget spinning
        // (an fdatasync on a busy disk can outlast many thousand yields).
        for _ in 0..100_000 {
            self.store.poll_completions(&mut done);
            if !done.is_empty() {
                break;
            }
            self.store.wait(std::time::Duration::from_millis(1));
            std::thread::yield_now();
        }
        assert_eq!(done.len(), 1, "exactly one completion per op");
        let (got, result) = done.pop().expect("one completion");
        assert_eq!(got, id, "completion for another op");
        result
    }

    fn update(
        &mut self,
        chunk: ChunkId,
        v: u32,
        kind: UpdateKind,
    ) -> Result<ChunkDone, ChunkError> {
        self.run(ChunkOp::Update {
            chunk,
            version: ChunkVersion(v),
            kind,
            tag: None,
        })
    }

    fn commit(&mut self, chunk: ChunkId, v: u32, cv: u32) -> Result<ChunkDone, ChunkError> {
        self.run(ChunkOp::Commit {
            chunk,
            version: ChunkVersion(v),
            chain_version: ChainVersion(cv),
        })
    }

    fn read(
        &mut self,
        chunk: ChunkId,
        offset: u32,
        len: u32,
        uncommitted: bool,
    ) -> Option<ChunkRead> {
        match self.run(ChunkOp::Read {
            chunk,
            offset,
            len,
            uncommitted,
            unverified: false,
        }) {
            Ok(ChunkDone::Read(r)) => r,
            other => panic!("read answered {other:?}"),
        }
    }

    fn write(&mut self, chunk: ChunkId, v: u32, offset: u32, data: &[u8]) {
        let r = self.update(
            chunk,
            v,
            UpdateKind::Write {
                offset,
                data: data.to_vec().into(),
            },
        );
        assert!(matches!(r, Ok(ChunkDone::Updated(_))), "update v{v}: {r:?}");
        let r = self.commit(chunk, v, 1);
        assert!(
            matches!(r, Ok(ChunkDone::Committed(_))),
            "commit v{v}: {r:?}"
        );
    }
}

/// Runs the whole suite against stores made by `make` (one fresh store per check).
pub fn chunk_store_suite<S: ChunkStore>(mut make: impl FnMut() -> S) {
    hole(&mut make);
    update_then_commit(&mut make);
    newer_pending_replaces(&mut make);
    truncate_extend_write(&mut make);
    remove(&mut make);
    order(&mut make);
    tags(&mut make);
    install(&mut make);
}

/// A driver over a fresh store from `make`.
fn fresh<S: ChunkStore>(make: &mut impl FnMut() -> S) -> Driver<S> {
    Driver {
        store: make(),
        next: 0,
    }
}

/// The chunks the cases use: two of one file.
const A: ChunkId = ChunkId::new(1, 0);
const B: ChunkId = ChunkId::new(1, 1);

/// A chunk never written reads as a hole and lists as nothing.
fn hole<S: ChunkStore>(make: &mut impl FnMut() -> S) {
    let a = A;
    // A chunk never written reads as a hole and lists as nothing.
    let mut d = fresh(make);
    assert_eq!(d.read(a, 0, 10, false), None);
    assert!(matches!(d.run(ChunkOp::List), Ok(ChunkDone::Listed(v)) if v.is_empty()));
}

/// Updates stay pending until their commit publishes them; replays are no-ops or conflicts.
fn update_then_commit<S: ChunkStore>(make: &mut impl FnMut() -> S) {
    let (a, b) = (A, B);
    // An update is pending: committed content stays readable and unchanged until commit.
    let mut d = fresh(make);
    d.write(a, 1, 0, b"hello");
    let r = d.update(
        a,
        2,
        UpdateKind::Write {
            offset: 0,
            data: b"HE".to_vec().into(),
        },
    );
    match r {
        Ok(ChunkDone::Updated(m)) => {
            assert_eq!(m.committed, ChunkVersion(1));
            let p = m.pending.expect("pending after update");
            assert_eq!(p.version, ChunkVersion(2));
            assert_eq!(p.checksum, crc32c::checksum(b"HEllo"));
        }
        other => panic!("update: {other:?}"),
    }
    let r = d.read(a, 0, 5, false).expect("committed data");
    assert_eq!((&r.data[..], r.version), (&b"hello"[..], ChunkVersion(1)));
    let r = d.read(a, 0, 5, true).expect("pending data");
    assert_eq!((&r.data[..], r.version), (&b"HEllo"[..], ChunkVersion(2)));
    // Commit publishes atomically and records the chain version.
    match d.commit(a, 2, 7) {
        Ok(ChunkDone::Committed(m)) => {
            assert_eq!(
                (m.committed, m.chain_version, m.len),
                (ChunkVersion(2), ChainVersion(7), 5)
            );
            assert_eq!(m.checksum, crc32c::checksum(b"HEllo"));
            assert!(m.pending.is_none());
        }
        other => panic!("commit: {other:?}"),
    }
    let r = d.read(a, 1, 3, false).expect("data");
    assert_eq!(r.data, b"Ell".to_vec());
    assert_eq!(r.checksum, crc32c::checksum(b"Ell"));
    // Reads are trimmed at the chunk length.
    assert_eq!(d.read(a, 3, 100, false).expect("data").data, b"lo".to_vec());
    assert_eq!(
        d.read(a, 50, 10, false).expect("data").data,
        Vec::<u8>::new()
    );

    // Replays: a commit at or below the committed version is a successful no-op; an update at or
    // below it is a conflict; a commit without a matching pending version is a conflict.
    assert!(
        matches!(d.commit(a, 2, 7), Ok(ChunkDone::Committed(m)) if m.committed == ChunkVersion(2))
    );
    assert!(
        matches!(d.commit(a, 1, 7), Ok(ChunkDone::Committed(m)) if m.committed == ChunkVersion(2))
    );
    assert_eq!(
        d.update(a, 2, UpdateKind::Remove),
        Err(ChunkError::VersionConflict)
    );
    assert_eq!(d.commit(a, 3, 7), Err(ChunkError::VersionConflict));
    assert_eq!(d.commit(b, 1, 7), Err(ChunkError::VersionConflict));
}

/// A newer pending version of the same number replaces the old one.
fn newer_pending_replaces<S: ChunkStore>(make: &mut impl FnMut() -> S) {
    let a = A;
    // A newer pending version of the same number replaces the old one (the head decides).
    let mut d = fresh(make);
    d.write(a, 1, 0, b"aaaa");
    d.update(
        a,
        2,
        UpdateKind::Write {
            offset: 0,
            data: b"bb".to_vec().into(),
        },
    )
    .expect("update");
    d.update(
        a,
        2,
        UpdateKind::Write {
            offset: 2,
            data: b"cc".to_vec().into(),
        },
    )
    .expect("update");
    d.commit(a, 2, 1).expect("commit");
    assert_eq!(d.read(a, 0, 4, false).expect("data").data, b"aacc".to_vec());
}

/// Truncate, extend and writes past the end.
fn truncate_extend_write<S: ChunkStore>(make: &mut impl FnMut() -> S) {
    let a = A;
    // Truncate shrinks or zero-extends; extend never shrinks; writes past the end zero-fill.
    let mut d = fresh(make);
    d.write(a, 1, 2, b"xy");
    assert_eq!(
        d.read(a, 0, 10, false).expect("data").data,
        vec![0, 0, b'x', b'y']
    );
    d.update(a, 2, UpdateKind::Truncate { len: 3 })
        .expect("truncate");
    d.commit(a, 2, 1).expect("commit");
    assert_eq!(
        d.read(a, 0, 10, false).expect("data").data,
        vec![0, 0, b'x']
    );
    d.update(a, 3, UpdateKind::Extend { len: 2 })
        .expect("extend");
    d.commit(a, 3, 1).expect("commit");
    assert_eq!(d.read(a, 0, 10, false).expect("data").data.len(), 3);
    d.update(a, 4, UpdateKind::Extend { len: 5 })
        .expect("extend");
    d.commit(a, 4, 1).expect("commit");
    assert_eq!(
        d.read(a, 0, 10, false).expect("data").data,
        vec![0, 0, b'x', 0, 0]
    );
    d.update(
        a,
        5,
        UpdateKind::Replace {
            data: b"new".to_vec().into(),
        },
    )
    .expect("replace");
    d.commit(a, 5, 1).expect("commit");
    assert_eq!(d.read(a, 0, 10, false).expect("data").data, b"new".to_vec());
}

/// Remove deletes at commit and is idempotent on an absent chunk.
fn remove<S: ChunkStore>(make: &mut impl FnMut() -> S) {
    let (a, b) = (A, B);
    // Remove deletes at commit and is idempotent on an absent chunk.
    let mut d = fresh(make);
    d.write(a, 1, 0, b"gone");
    d.write(b, 1, 0, b"kept");
    d.update(a, 2, UpdateKind::Remove).expect("remove");
    assert_eq!(
        d.read(a, 0, 4, false).expect("still committed").data,
        b"gone".to_vec()
    );
    assert!(
        matches!(d.commit(a, 2, 1), Ok(ChunkDone::Committed(m)) if m.committed == ChunkVersion(0))
    );
    assert_eq!(d.read(a, 0, 4, false), None);
    d.update(a, 1, UpdateKind::Remove)
        .expect("remove of an absent chunk");
    d.commit(a, 1, 1)
        .expect("commit of a remove of an absent chunk");
    assert_eq!(d.read(a, 0, 4, false), None);
    match d.run(ChunkOp::List) {
        Ok(ChunkDone::Listed(metas)) => {
            let ids: Vec<ChunkId> = metas.iter().map(|m| m.chunk).collect();
            assert_eq!(ids, vec![b]);
            assert_eq!(metas[0].checksum, crc32c::checksum(b"kept"));
        }
        other => panic!("list: {other:?}"),
    }
}

/// Ops on one chunk complete in submission order, each exactly once.
fn order<S: ChunkStore>(make: &mut impl FnMut() -> S) {
    let a = A;
    // Ops on one chunk complete in submission order, each exactly once.
    let mut d = fresh(make);
    let ops = [
        ChunkOp::Update {
            chunk: a,
            version: ChunkVersion(1),
            kind: UpdateKind::Write {
                offset: 0,
                data: b"1".to_vec().into(),
            },
            tag: None,
        },
        ChunkOp::Commit {
            chunk: a,
            version: ChunkVersion(1),
            chain_version: ChainVersion(1),
        },
        ChunkOp::Update {
            chunk: a,
            version: ChunkVersion(2),
            kind: UpdateKind::Write {
                offset: 0,
                data: b"2".to_vec().into(),
            },
            tag: None,
        },
        ChunkOp::Commit {
            chunk: a,
            version: ChunkVersion(2),
            chain_version: ChainVersion(1),
        },
    ];
    for (i, op) in ops.iter().enumerate() {
        d.store.submit(IoId(100 + i as u64), op.clone());
    }
    let mut done = Vec::new();
    for _ in 0..100_000 {
        d.store.poll_completions(&mut done);
        if done.len() >= ops.len() {
            break;
        }
        d.store.wait(std::time::Duration::from_millis(1));
        std::thread::yield_now();
    }
    let ids: Vec<u64> = done.iter().map(|(id, _)| id.0).collect();
    assert_eq!(
        ids,
        vec![100, 101, 102, 103],
        "same-chunk completions in submission order"
    );
    assert!(done.iter().all(|(_, r)| r.is_ok()), "{done:?}");
    assert_eq!(d.read(a, 0, 1, false).expect("data").data, b"2".to_vec());
}

/// An update's client tag is kept with its pending version and among the committed records.
fn tags<S: ChunkStore>(make: &mut impl FnMut() -> S) {
    let a = A;
    // An update's client tag is kept with its pending version and, once committed, among the
    // chunk's exactly-once records, so a restarted target still knows what it applied.
    let mut d = fresh(make);
    let tag = crate::chunk::UpdateTag {
        client: crate::ids::ClientId(3),
        channel: crate::ids::ChannelId(2),
        seqnum: crate::ids::SeqNum(9),
    };
    let pending = d.run(ChunkOp::Update {
        chunk: a,
        version: ChunkVersion(1),
        kind: UpdateKind::Write {
            offset: 0,
            data: b"t".to_vec().into(),
        },
        tag: Some(tag),
    });
    match pending {
        Ok(ChunkDone::Updated(m)) => assert_eq!(m.pending.and_then(|p| p.tag), Some(tag)),
        other => panic!("tagged update: {other:?}"),
    }
    match d.commit(a, 1, 2) {
        Ok(ChunkDone::Committed(m)) => assert_eq!(
            m.applied,
            vec![crate::chunk::Applied {
                tag,
                version: ChunkVersion(1),
                chain_version: ChainVersion(2),
                len: 1,
                checksum: crc32c::checksum(b"t"),
            }]
        ),
        other => panic!("commit: {other:?}"),
    }
    assert!(
        matches!(d.run(ChunkOp::List), Ok(ChunkDone::Listed(v)) if v[0].applied.len() == 1),
        "records are listed with the chunk"
    );
}

/// Install sets committed content and version outright and removes with `None`.
fn install<S: ChunkStore>(make: &mut impl FnMut() -> S) {
    let b = B;
    // Install sets committed content and version outright (even below the current version),
    // drops a pending version, and removes with `None`.
    let mut d = fresh(make);
    d.write(b, 5, 0, b"newer");
    d.update(b, 6, UpdateKind::Remove).expect("pending remove");
    let installed = d.run(ChunkOp::Install {
        chunk: b,
        version: ChunkVersion(3),
        chain_version: ChainVersion(4),
        data: Some(b"synced".to_vec().into()),
    });
    match installed {
        Ok(ChunkDone::Committed(m)) => {
            assert_eq!(
                (m.committed, m.chain_version),
                (ChunkVersion(3), ChainVersion(4))
            );
            assert_eq!(m.checksum, crc32c::checksum(b"synced"));
            assert_eq!(m.pending, None, "install drops the pending version");
        }
        other => panic!("install: {other:?}"),
    }
    assert_eq!(
        d.read(b, 0, 10, false).expect("installed").data,
        b"synced".to_vec()
    );
    let removed = d.run(ChunkOp::Install {
        chunk: b,
        version: ChunkVersion(3),
        chain_version: ChainVersion(4),
        data: None,
    });
    assert!(matches!(removed, Ok(ChunkDone::Committed(m)) if m.committed == ChunkVersion(0)));
    assert_eq!(d.read(b, 0, 10, false), None, "install None removes");
    assert!(matches!(d.run(ChunkOp::List), Ok(ChunkDone::Listed(v)) if v.is_empty()));
}

#[cfg(test)]
mod tests {
    #[test]
    fn mem_chunk_store_conforms() {
        super::chunk_store_suite(super::super::MemChunkStore::new);
    }
}
