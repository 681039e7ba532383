//! The purger (GC's chunk removal, `purge.rs`) driven message by message: a file whose
//! removes all commit is purged; a failed remove drops it from the round; and a later round
//! whose query finds no chunk of the file left is purged at once, without removes.

use super::placement::{ChainRange, Layout};
use super::purge::{Purger, StorageDone};
use super::server::{MetaServer, MetaTimer};
use super::{Inode, InodeKind};
use crate::chunk::UpdateKind;
use crate::client::{ClientConfig, ClientTimer};
use crate::ids::{ChainId, ChainVersion, ChunkVersion, ClientId, InodeId, NodeId};
use crate::machine::{ActionOf, Outbox};
use crate::msg::{
    LastChunk, Msg, QueryLastChunkReply, Status, UpdateReply, UpdateReq, UpdateResult,
};
use crate::routing::PublicState::Serving;
use crate::time::Instant;

const HEAD: NodeId = NodeId(1);
const ENTRY: &[u8] = b"f-0000000000001000";

fn purger() -> Purger {
    let routing = crate::testing::one_chain_routing(1, 1, &[(1, Serving), (2, Serving)]);
    let mut cfg = ClientConfig::new(NodeId(50), ClientId(1 << 40));
    // One send per client call: a `Busy` answer and the retry timer fail the call.
    cfg.io_timeout = None;
    cfg.retries_max = 0;
    Purger::new(cfg, routing, vec![ChainId(1)])
}

/// A two-chunk file on chain 1.
fn file() -> Inode {
    let range = ChainRange {
        table: 1,
        table_version: 1,
        base: 1,
        stripe: 1,
        seed: 0,
    };
    Inode {
        id: InodeId(4096),
        kind: InodeKind::File {
            length: 8,
            truncate_ver: 0,
            layout: Some(Layout::new(4, range)),
        },
        uid: 0,
        gid: 0,
        perm: 0o644,
        nlink: 0,
        ctime: 0,
        mtime: 0,
        atime: 0,
        atime_ns: 0,
        mtime_ns: 0,
    }
}

/// What the purger sent, and the retry timers it set, since the last drain.
fn sent(out: &mut Outbox<MetaServer>) -> (Vec<Msg>, Vec<ClientTimer>) {
    let (mut msgs, mut timers) = (Vec::new(), Vec::new());
    for a in out.drain() {
        match a {
            ActionOf::Send { to, msg } => {
                assert_eq!(to, HEAD, "everything goes to the chain's head");
                msgs.push(msg);
            }
            ActionOf::SetTimer {
                timer: MetaTimer::Storage(t @ ClientTimer::Retry(_)),
                ..
            } => timers.push(t),
            _ => {}
        }
    }
    (msgs, timers)
}

/// The chunk removes among `msgs`, by chunk index.
fn removes(msgs: &[Msg]) -> Vec<(u32, UpdateReq)> {
    msgs.iter()
        .filter_map(|m| match m {
            Msg::Write(w) if w.kind == UpdateKind::Remove => Some((w.chunk.index, w.clone())),
            _ => None,
        })
        .collect()
}

fn ok(req: &UpdateReq) -> Msg {
    let result = UpdateResult {
        commit_version: ChunkVersion(1),
        commit_chain_version: ChainVersion(1),
        len: 0,
        checksum: 0,
    };
    Msg::UpdateReply(UpdateReply::answering(req, Status::Ok, Some(result)))
}

/// Fails the remove `req`: the head answers `Busy`, and the client's one retry is spent.
fn fail(p: &mut Purger, req: &UpdateReq, out: &mut Outbox<MetaServer>) -> Vec<StorageDone> {
    let busy = Msg::UpdateReply(UpdateReply::answering(req, Status::Busy, None));
    let mut done = p.on_msg(HEAD, busy, Instant::ZERO, out);
    let (msgs, timers) = sent(out);
    assert!(msgs.is_empty(), "{msgs:?}");
    assert_eq!(timers.len(), 1, "one retry timer");
    for t in timers {
        done.extend(p.on_timer(t, Instant::ZERO, out));
    }
    done
}

/// Starts purging `file()` and answers its query with `last` (the chain's last chunk).
fn start(p: &mut Purger, last: Option<u32>, out: &mut Outbox<MetaServer>) -> Vec<StorageDone> {
    let f = file();
    assert!(p.purge(ENTRY.to_vec(), &f, Instant::ZERO, out).is_empty());
    let (msgs, _) = sent(out);
    let [Msg::QueryLastChunk(q)] = msgs.as_slice() else {
        panic!("one query: {msgs:?}")
    };
    assert!(q.empty, "GC's query counts empty chunks too");
    let reply = Msg::QueryLastChunkReply(QueryLastChunkReply {
        query_id: q.query_id,
        status: Status::Ok,
        last: last.map(|index| LastChunk { index, len: 4 }),
    });
    p.on_msg(HEAD, reply, Instant::ZERO, out)
}

fn purged(ok: bool) -> Vec<StorageDone> {
    vec![StorageDone::Purged(InodeId(4096), ENTRY.to_vec(), ok)]
}

#[test]
fn a_file_is_purged_once_every_remove_committed() {
    let mut p = purger();
    let mut out = Outbox::new();
    assert!(start(&mut p, Some(1), &mut out).is_empty());
    let (msgs, _) = sent(&mut out);
    let rm = removes(&msgs);
    assert_eq!(rm.iter().map(|r| r.0).collect::<Vec<_>>(), vec![0, 1]);
    assert!(p.busy(InodeId(4096)));
    assert!(p
        .on_msg(HEAD, ok(&rm[0].1), Instant::ZERO, &mut out)
        .is_empty());
    assert_eq!(
        p.on_msg(HEAD, ok(&rm[1].1), Instant::ZERO, &mut out),
        purged(true)
    );
    assert!(!p.busy(InodeId(4096)));
    p.check_invariants();
}

#[test]
fn a_round_that_finds_no_chunk_left_purges_the_file_without_removes() {
    // Swarm seed 4002183: two meta servers purged one file over a slow chain. In every round
    // some remove ran out of client retries (each server's removes of a chunk queued behind
    // the other's), so the round failed; the removes still committed on storage later, yet
    // each next round removed every chunk again, up to the file's length, and failed the same
    // way: the file stayed under GC for good.
    let mut p = purger();
    let mut out = Outbox::new();
    assert!(start(&mut p, Some(1), &mut out).is_empty());
    let (msgs, _) = sent(&mut out);
    let rm = removes(&msgs);
    assert!(p
        .on_msg(HEAD, ok(&rm[0].1), Instant::ZERO, &mut out)
        .is_empty());
    assert_eq!(fail(&mut p, &rm[1].1, &mut out), purged(false));
    assert!(!p.busy(InodeId(4096)), "GC's next round starts it over");
    // The failed remove committed on storage after all: the next round's query finds no
    // chunk, and nothing is left to remove (the length, 8 bytes, still names two chunks).
    assert_eq!(start(&mut p, None, &mut out), purged(true));
    let (msgs, _) = sent(&mut out);
    assert!(removes(&msgs).is_empty(), "{msgs:?}");
    assert!(!p.busy(InodeId(4096)));
    p.check_invariants();
}
