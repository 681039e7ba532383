//! The meta server machine against the in-memory KV, driven by a minimal inline driver: reads
//! replay to an answer, and every KV failure the contract names (conflict, unknown commit
//! applied or dropped, unavailability) still ends in exactly one effect and one answer.

use super::request::{MetaAnswer, MetaOp, MetaResult};
use super::server::{MetaConfig, MetaServer, MetaTimer};
use super::{transact, MetaError, PathOp};
use crate::ids::{ClientId, NodeId, RequestId};
use crate::kv::mem::{MemKv, MemKvFault};
use crate::kv::{execute, KvOp};
use crate::machine::{ActionOf, EventOf, IoOp, IoResult, Machine, Outbox};
use crate::msg::meta::{MetaReply, MetaReq};
use crate::msg::Msg;
use crate::time::Instant;

const CLIENT: NodeId = NodeId(9);

/// Runs the server until it is idle; `fault(n)` may inject a fault before the n-th commit.
/// Returns the replies sent.
fn run(
    m: &mut MetaServer,
    kv: &mut MemKv,
    first: EventOf<Msg, MetaTimer, crate::machine::NoCall>,
    fault: impl FnMut(u32, &mut MemKv),
) -> Vec<MetaResult> {
    let replies = run_replies(m, kv, first, fault);
    replies.into_iter().map(|r| r.result).collect()
}

fn run_replies(
    m: &mut MetaServer,
    kv: &mut MemKv,
    first: EventOf<Msg, MetaTimer, crate::machine::NoCall>,
    mut fault: impl FnMut(u32, &mut MemKv),
) -> Vec<MetaReply> {
    let mut events = vec![first];
    let mut replies = Vec::new();
    let mut commits = 0;
    while let Some(ev) = events.pop() {
        let mut out = Outbox::new();
        m.handle(Instant(5_000_000_000), ev, &mut out);
        m.check_invariants();
        for a in out.drain() {
            match a {
                ActionOf::Io {
                    id,
                    op: IoOp::Kv(op),
                } => {
                    if matches!(op, KvOp::Commit(_)) {
                        commits += 1;
                        fault(commits, kv);
                    }
                    let result = IoResult::Kv(execute(kv, op));
                    events.push(EventOf::IoDone { id, result });
                }
                ActionOf::Send {
                    to,
                    msg: Msg::MetaReply(r),
                } => {
                    assert_eq!(to, CLIENT);
                    replies.push(r);
                }
                ActionOf::SetTimer { timer, .. } => {
                    kv.set_unavailable(false);
                    events.push(EventOf::Timer(timer));
                }
                other => panic!("unexpected action {other:?}"),
            }
        }
    }
    replies
}

fn request(request: u64, op: MetaOp) -> EventOf<Msg, MetaTimer, crate::machine::NoCall> {
    EventOf::Recv {
        from: CLIENT,
        msg: Msg::MetaReq(MetaReq {
            client: ClientId(3),
            request: RequestId(request),
            user: crate::meta::perm::ROOT_USER,
            op,
        }),
    }
}

fn setup() -> (MetaServer, MemKv) {
    let mut kv = MemKv::new(1000);
    transact(&mut kv, |ns| ns.init(0)).unwrap();
    (MetaServer::new(MetaConfig::new(NodeId(1)), 0), kv)
}

fn mkdir(path: &str) -> MetaOp {
    MetaOp::Mkdirs {
        path: path.into(),
        perm: 0o755,
        recursive: true,
    }
}

#[test]
fn a_request_replays_its_reads_then_commits_once() {
    let (mut m, mut kv) = setup();
    let r = run(&mut m, &mut kv, request(1, mkdir("/a/b/c")), |_, _| {});
    assert!(
        matches!(r.as_slice(), [Ok(MetaAnswer::Inode(i))] if i.is_dir()),
        "{r:?}"
    );
    let c = m.counters().clone();
    assert!(c.rows_fetched >= 6, "each level's rows were fetched: {c:?}");
    assert!(
        c.reads < c.rows_fetched,
        "some were fetched together: {c:?}"
    );
    let list = MetaOp::List {
        path: "/a/b".into(),
        after: Vec::new(),
        limit: 10,
    };
    let r = run(&mut m, &mut kv, request(2, list), |_, _| {});
    assert!(matches!(r.as_slice(), [Ok(MetaAnswer::Entries(e))] if e.len() == 1 && e[0].0 == b"c"));
    assert_eq!(m.running(), 0);
}

/// What the server saw of a path prefetches the next walk of it: a stat of a directory just
/// made, and of a name under it never seen, each take one KV round trip; the answers are the
/// KV's, not the hints' (a row changed behind the server's back is read as it is now).
#[test]
fn a_walk_the_server_has_seen_is_fetched_in_one_round_trip() {
    let (mut m, mut kv) = setup();
    run(&mut m, &mut kv, request(1, mkdir("/a/b/c")), |_, _| {});
    let stat = |path: &str| MetaOp::Stat {
        path: path.into(),
        follow: false,
    };
    for (i, path) in ["/a/b/c", "/a/b/none"].iter().enumerate() {
        let before = m.counters().reads;
        let r = run(
            &mut m,
            &mut kv,
            request(10 + i as u64, stat(path)),
            |_, _| {},
        );
        assert_eq!(m.counters().reads - before, 1, "{path}: {r:?}");
    }
    // Another server removes /a/b/c: this one's hints still name it, its answer does not.
    transact(&mut kv, |ns| {
        let op = PathOp {
            client: ClientId(9),
            request: RequestId(1),
            now: 0,
        };
        ns.remove("/a/b/c", false, op)
    })
    .unwrap();
    let r = run(&mut m, &mut kv, request(20, stat("/a/b/c")), |_, _| {});
    assert_eq!(r, vec![Err(MetaError::NotFound)]);
}

/// A reply carries the directories its commit changed, as the commit left them, with the
/// commit's version; a read-only request, and a retry answered from its record, carry none.
#[test]
fn a_reply_carries_the_directories_its_commit_changed() {
    let (mut m, mut kv) = setup();
    let made = run_replies(&mut m, &mut kv, request(1, mkdir("/a")), |_, _| {});
    let root = &made[0].dirs;
    let mut ids: Vec<_> = root.dirs.iter().map(|d| d.id).collect();
    ids.sort();
    assert_eq!(
        ids,
        [super::ROOT, a_id(&made[0])],
        "the parent and the new directory"
    );
    let create = MetaOp::Create {
        path: "/a/f".into(),
        perm: 0o644,
        exclusive: true,
        session: None,
    };
    let r = run_replies(&mut m, &mut kv, request(2, create.clone()), |_, _| {});
    let stat_a = || MetaOp::Stat {
        path: "/a".into(),
        follow: false,
    };
    let stat = run(&mut m, &mut kv, request(3, stat_a()), |_, _| {});
    let [Ok(MetaAnswer::Inode(a))] = stat.as_slice() else {
        panic!("{stat:?}")
    };
    assert_eq!(r[0].dirs.dirs, vec![a.clone()], "/a as the create left it");
    assert!(r[0].dirs.version > root.version);
    let again = run_replies(&mut m, &mut kv, request(2, create), |_, _| {});
    assert_eq!(again[0].result, r[0].result);
    assert!(again[0].dirs.dirs.is_empty(), "answered from the record");
    let read = run_replies(&mut m, &mut kv, request(4, stat_a()), |_, _| {});
    assert!(read[0].dirs.dirs.is_empty());
}

fn a_id(r: &MetaReply) -> crate::ids::InodeId {
    match &r.result {
        Ok(MetaAnswer::Inode(i)) => i.id,
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_kv_failure_still_gives_one_effect_and_one_answer() {
    let faults = [
        MemKvFault::SpuriousConflict,
        MemKvFault::CommitUnknownApplied,
        MemKvFault::CommitUnknownDropped,
    ];
    for fault in faults {
        let (mut m, mut kv) = setup();
        let create = MetaOp::Create {
            path: "/f".into(),
            perm: 0o644,
            exclusive: true,
            session: None,
        };
        let r = run(&mut m, &mut kv, request(1, create.clone()), |n, kv| {
            if n == 1 {
                kv.inject(fault);
            }
        });
        // O_EXCL would say EEXIST if the applied-but-unknown commit were applied again.
        assert!(
            matches!(r.as_slice(), [Ok(MetaAnswer::Inode(_))]),
            "{fault:?}: {r:?}"
        );
        // The client's own retry is answered the same, and nothing is created twice.
        let again = run(&mut m, &mut kv, request(1, create), |_, _| {});
        assert_eq!(again, r, "{fault:?}");
        let rows = transact(&mut kv, |ns| ns.list("/", b"", 10)).unwrap();
        assert_eq!(rows.len(), 1, "{fault:?}");
    }
}

#[test]
fn unavailability_backs_off_and_posix_errors_are_final() {
    let (mut m, mut kv) = setup();
    kv.set_unavailable(true);
    let r = run(&mut m, &mut kv, request(1, mkdir("/d")), |_, _| {});
    assert!(matches!(r.as_slice(), [Ok(MetaAnswer::Inode(_))]), "{r:?}");
    assert!(m.counters().retries >= 1);
    let rm = MetaOp::Remove {
        path: "/nope".into(),
        recursive: false,
    };
    let r = run(&mut m, &mut kv, request(2, rm), |_, _| {});
    assert_eq!(r, vec![Err(MetaError::NotFound)]);
}

/// Runs `first` with every KV commit refused for want of space (reads go on); the replies and
/// the commits tried. Any backoff or retry fails the test.
fn run_refusing(
    m: &mut MetaServer,
    kv: &mut MemKv,
    first: EventOf<Msg, MetaTimer, crate::machine::NoCall>,
) -> (Vec<MetaResult>, u32) {
    let mut events = vec![first];
    let (mut replies, mut commits) = (Vec::new(), 0);
    while let Some(ev) = events.pop() {
        let mut out = Outbox::new();
        m.handle(Instant(5_000_000_000), ev, &mut out);
        m.check_invariants();
        for a in out.drain() {
            match a {
                ActionOf::Io {
                    id,
                    op: IoOp::Kv(op),
                } => {
                    let result = if matches!(op, KvOp::Commit(_)) {
                        commits += 1;
                        Err(crate::kv::KvError::NoSpace)
                    } else {
                        execute(kv, op)
                    };
                    let result = IoResult::Kv(result);
                    events.push(EventOf::IoDone { id, result });
                }
                ActionOf::Send {
                    msg: Msg::MetaReply(r),
                    ..
                } => replies.push(r.result),
                other => panic!("no backoff, no retry: {other:?}"),
            }
        }
    }
    (replies, commits)
}

#[test]
fn a_kv_out_of_space_fails_the_request_at_once_without_retrying() {
    let no_space = Err(MetaError::Kv(crate::kv::KvError::NoSpace));
    let (mut m, mut kv) = setup();
    // A create waits for a block of inode ids, whose allocation is refused: the create fails
    // with it (allocating again at once would spin).
    let (r, commits) = run_refusing(&mut m, &mut kv, request(1, mkdir("/d")));
    assert_eq!(r, vec![no_space.clone()]);
    assert_eq!((commits, m.counters().retries, m.running()), (1, 0, 0));
    // Nothing was written; once there is room a new request succeeds.
    let r = run(&mut m, &mut kv, request(2, mkdir("/d")), |_, _| {});
    assert!(matches!(r.as_slice(), [Ok(MetaAnswer::Inode(_))]), "{r:?}");
    // A request needing no ids fails at its own commit, once.
    let rename = MetaOp::Rename {
        from: "/d".into(),
        to: "/e".into(),
    };
    let (r, commits) = run_refusing(&mut m, &mut kv, request(3, rename));
    assert_eq!(r, vec![no_space]);
    assert_eq!((commits, m.counters().retries, m.running()), (1, 0, 0));
    let rows = transact(&mut kv, |ns| ns.list("/", b"", 10)).unwrap();
    assert_eq!(rows[0].0, b"d", "the refused rename changed nothing");
}

#[test]
fn a_duplicate_request_while_running_is_not_started_twice() {
    let (mut m, _kv) = setup();
    let rm = MetaOp::Remove {
        path: "/x".into(),
        recursive: false,
    };
    let mut out = Outbox::new();
    m.handle(Instant::ZERO, request(1, rm.clone()), &mut out);
    let first = out.drain().len();
    m.handle(Instant::ZERO, request(1, rm), &mut out);
    assert_eq!(first, 1, "one KV read issued");
    assert!(out.drain().is_empty(), "the duplicate issued nothing");
    assert_eq!(m.running(), 1);
}

#[test]
fn a_late_duplicate_of_a_failed_request_stays_failed() {
    // Swarm seed 200: a remove answered ENOENT was delivered again (a duplicated frame) after
    // the name had been created, and removed it. The error is now recorded like any answer.
    let (mut m, mut kv) = setup();
    let rm = MetaOp::Remove {
        path: "/x".into(),
        recursive: false,
    };
    assert_eq!(
        run(&mut m, &mut kv, request(1, rm.clone()), |_, _| {}),
        vec![Err(MetaError::NotFound)]
    );
    let r = run(&mut m, &mut kv, request(2, mkdir("/x")), |_, _| {});
    assert!(matches!(r.as_slice(), [Ok(_)]));
    assert_eq!(
        run(&mut m, &mut kv, request(1, rm), |_, _| {}),
        vec![Err(MetaError::NotFound)],
        "the duplicate is answered from the record"
    );
    assert!(
        transact(&mut kv, |ns| ns.stat("/x", false)).is_ok(),
        "/x survives"
    );
}

#[test]
fn one_block_of_inode_ids_serves_many_creates() {
    let (mut m, mut kv) = setup();
    let mut ids = Vec::new();
    for i in 0..40 {
        let create = MetaOp::Create {
            path: format!("/f{i}"),
            perm: 0o644,
            exclusive: true,
            session: None,
        };
        match run(&mut m, &mut kv, request(i + 1, create), |_, _| {}).as_slice() {
            [Ok(MetaAnswer::Inode(inode))] => ids.push(inode.id.0),
            other => panic!("create {i}: {other:?}"),
        }
    }
    let r = run(&mut m, &mut kv, request(99, mkdir("/a/b/c")), |_, _| {});
    assert!(matches!(r.as_slice(), [Ok(_)]));
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 40, "ids are unique");
    assert!(
        ids.iter().all(|&id| id >= super::keys::ID_BLOCK),
        "block 0 stays reserved"
    );
    let counter = crate::kv::Txn::new(&mut kv)
        .get(super::keys::INODE_ALLOC)
        .unwrap();
    let blocks: u64 = crate::mgmtd::store::decode(&counter.unwrap()).unwrap();
    assert_eq!(
        blocks, 2,
        "one block (number 1) was allocated for 43 inodes"
    );
}

#[test]
fn statfs_sums_the_last_space_reports_of_nodes_the_routing_names() {
    use crate::msg::{SpaceInfoReply, TargetSpace};
    use crate::routing::PublicState::Serving;
    use crate::routing::RoutingInfo;
    let mut kv = MemKv::new(1000);
    transact(&mut kv, |ns| ns.init(0)).unwrap();
    let routing: RoutingInfo =
        crate::testing::one_chain_routing(1, 1, &[(1, Serving), (2, Serving)]);
    let mut cfg = MetaConfig::new(NodeId(1));
    let client = crate::client::ClientConfig::new(NodeId(1), ClientId(1 << 40));
    cfg.storage = Some((client, routing.clone()));
    cfg.layout = Some(super::server::LayoutPolicy {
        table: 1,
        table_version: 1,
        chains: vec![crate::ids::ChainId(1)],
        chunk_size: 4096,
        stripe: 1,
    });
    let mut m = MetaServer::new(cfg, 0);
    let report = |node: NodeId, target: u32, used: u64| EventOf::Recv {
        from: node,
        msg: Msg::SpaceInfoReply(SpaceInfoReply {
            node,
            targets: vec![TargetSpace {
                target: crate::ids::TargetId(target),
                capacity: 1000,
                used,
            }],
        }),
    };
    let node = |t: u32| routing.targets[&crate::ids::TargetId(t)];
    // Before any report: nothing known.
    let r = run(&mut m, &mut kv, request(1, MetaOp::StatFs), |_, _| {});
    assert_eq!(r, vec![Ok(MetaAnswer::StatFs(Default::default()))]);
    for ev in [
        report(node(1), 1, 100),
        report(node(2), 2, 50),
        report(node(2), 2, 70),     // a newer report replaces the older one
        report(NodeId(77), 9, 900), // a target the routing does not name
    ] {
        m.handle(Instant::ZERO, ev, &mut Outbox::new());
    }
    let r = run(&mut m, &mut kv, request(2, MetaOp::StatFs), |_, _| {});
    let want = super::request::FsStat {
        capacity: 2000,
        used: 170,
        free: 1830,
    };
    assert_eq!(r, vec![Ok(MetaAnswer::StatFs(want))]);
}

/// Delivers every request of `reqs` before any I/O completes, then runs the server idle;
/// the replies, by request id.
fn run_together(m: &mut MetaServer, kv: &mut MemKv, reqs: Vec<(u64, MetaOp)>) -> Vec<MetaReply> {
    let mut events = Vec::new();
    for (id, op) in reqs {
        let mut out = Outbox::new();
        m.handle(Instant::ZERO, request(id, op), &mut out);
        m.check_invariants();
        events.extend(out.drain());
    }
    let mut replies = Vec::new();
    while let Some(a) = events.pop() {
        let ev = match a {
            ActionOf::Io {
                id,
                op: IoOp::Kv(op),
            } => EventOf::IoDone {
                id,
                result: IoResult::Kv(execute(kv, op)),
            },
            ActionOf::Send {
                msg: Msg::MetaReply(r),
                ..
            } => {
                replies.push(r);
                continue;
            }
            other => panic!("unexpected action {other:?}"),
        };
        let mut out = Outbox::new();
        m.handle(Instant::ZERO, ev, &mut out);
        m.check_invariants();
        events.extend(out.drain());
    }
    replies.sort_by_key(|r| r.request);
    replies
}

#[test]
fn closes_of_one_file_queued_behind_a_running_one_commit_together() {
    use super::length::LengthHint;
    let (mut m, mut kv) = setup();
    let create = MetaOp::Create {
        path: "/f".into(),
        perm: 0o644,
        exclusive: true,
        session: None,
    };
    let Ok(MetaAnswer::Inode(f)) = run(&mut m, &mut kv, request(1, create), |_, _| {}).remove(0)
    else {
        panic!("create failed")
    };
    for s in 2..=5 {
        let open = MetaOp::Open {
            path: "/f".into(),
            write: true,
            session: s,
        };
        assert!(run(&mut m, &mut kv, request(s, open), |_, _| {})[0].is_ok());
    }
    let close = |session, length| MetaOp::Close {
        inode: f.id,
        session,
        length: Some(LengthHint {
            length,
            truncate_ver: 0,
        }),
    };
    // Four closes arrive together: the first starts, three queue behind it and then share
    // one transaction.
    let commits_before = kv.version();
    let closes = (2..=5u64)
        .map(|s| (10 + s, close(s, 100 * (s - 1))))
        .collect();
    let replies = run_together(&mut m, &mut kv, closes);
    let answered: Vec<RequestId> = replies.iter().map(|r| r.request).collect();
    assert_eq!(answered, (12..=15).map(RequestId).collect::<Vec<_>>());
    assert!(replies.iter().all(|r| r.result == Ok(MetaAnswer::Done)));
    assert_eq!(
        m.counters().batched,
        3,
        "three closes shared one transaction"
    );
    assert_eq!(
        kv.version().0 - commits_before.0,
        2,
        "two commits for four closes"
    );
    let f = transact(&mut kv, |ns| ns.inode(f.id)).unwrap();
    assert!(matches!(f.kind, super::InodeKind::File { length: 400, .. }));
    let sessions = transact(&mut kv, |ns| {
        Ok(ns.txn().range(&super::session_range(f.id), 8)?)
    })
    .unwrap();
    assert!(sessions.is_empty(), "every session closed");
}

#[test]
fn a_failing_member_leaves_its_batch_and_is_answered_alone() {
    let (mut m, mut kv) = setup();
    // Closes of a file that does not exist: each fails on its own, none takes the others'
    // writes or answers with it.
    let close = |session| MetaOp::Close {
        inode: crate::ids::InodeId(777_777),
        session,
        length: None,
    };
    let replies = run_together(&mut m, &mut kv, (1..=4).map(|s| (s, close(s))).collect());
    assert_eq!(replies.len(), 4);
    assert!(replies.iter().all(|r| r.result == Err(MetaError::NotFound)));
}
