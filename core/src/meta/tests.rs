//! Namespace operations against the in-memory MVCC KV: POSIX results and errors, GC of unlinked
//! inodes, idempotent retries, and serializable conflicts between concurrent transactions.

use super::*;
use crate::ids::{ClientId, RequestId};
use crate::kv::mem::MemKv;
use crate::kv::Txn;
use request::{execute, MetaAnswer, MetaOp, MetaResult};

pub(super) fn op(request: u64) -> PathOp {
    PathOp {
        client: ClientId(7),
        request: RequestId(request),
        now: 100 + request,
    }
}

/// One operation in its own committed transaction.
pub(super) fn tx<T>(
    kv: &mut MemKv,
    f: impl FnOnce(&mut Namespace<'_, '_, MemKv>) -> Result<T, MetaError>,
) -> Result<T, MetaError> {
    transact(kv, f)
}

pub(super) fn fresh() -> MemKv {
    let mut kv = MemKv::new(1000);
    tx(&mut kv, |ns| ns.init(1)).unwrap();
    kv
}

fn names(kv: &mut MemKv, dir: &str) -> Vec<String> {
    tx(kv, |ns| ns.list(dir, b"", 100))
        .unwrap()
        .into_iter()
        .map(|(n, _)| String::from_utf8(n).unwrap())
        .collect()
}

/// The entries under the GC root (which no path reaches).
fn gc(kv: &mut MemKv) -> Vec<String> {
    tx(kv, |ns| ns.list_dir(GC_ROOT, b"", 100))
        .unwrap()
        .into_iter()
        .map(|(n, _)| String::from_utf8(n).unwrap())
        .collect()
}

#[test]
fn create_mkdirs_stat_and_list() {
    let mut kv = fresh();
    let d = tx(&mut kv, |ns| ns.mkdirs("/a/b/c", 0o755, true, op(1))).unwrap();
    assert!(d.is_dir());
    tx(&mut kv, |ns| {
        ns.create("/a/b/f2", 0o644, false, None, op(2))
    })
    .unwrap();
    tx(&mut kv, |ns| {
        ns.create("/a/b/f1", 0o644, false, None, op(3))
    })
    .unwrap();
    assert_eq!(names(&mut kv, "/a/b"), ["c", "f1", "f2"], "name order");
    let f = tx(&mut kv, |ns| ns.stat("/a/./b/../b/f1", true)).unwrap();
    assert!(matches!(f.kind, InodeKind::File { length: 0, .. }) && f.nlink == 1);
    // Paging: after "c".
    let page = tx(&mut kv, |ns| ns.list("/a/b", b"c", 1)).unwrap();
    assert_eq!(page[0].0, b"f1");
    // Errors.
    let e = |kv: &mut MemKv, r: Result<Inode, MetaError>| {
        let _ = kv;
        r.unwrap_err()
    };
    let r = tx(&mut kv, |ns| ns.mkdirs("/a/b", 0o755, false, op(4)));
    assert_eq!(e(&mut kv, r), MetaError::Exists);
    let r = tx(&mut kv, |ns| ns.mkdirs("/x/y", 0o755, false, op(5)));
    assert_eq!(e(&mut kv, r), MetaError::NotFound);
    let r = tx(&mut kv, |ns| {
        ns.create("/a/b/f1/z", 0o644, false, None, op(6))
    });
    assert_eq!(e(&mut kv, r), MetaError::NotDir);
    let r = tx(&mut kv, |ns| ns.create("/a/b", 0o644, false, None, op(7)));
    assert_eq!(e(&mut kv, r), MetaError::IsDir);
    let r = tx(&mut kv, |ns| ns.create("/a/b/f1", 0o644, true, None, op(8)));
    assert_eq!(e(&mut kv, r), MetaError::Exists);
    let long = format!("/{}", "n".repeat(NAME_MAX + 1));
    let r = tx(&mut kv, |ns| ns.create(&long, 0o644, false, None, op(9)));
    assert_eq!(e(&mut kv, r), MetaError::NameTooLong);
    // Open of an existing file without O_EXCL is the file.
    let again = tx(&mut kv, |ns| {
        ns.create("/a/b/f1", 0o644, false, None, op(10))
    })
    .unwrap();
    assert_eq!(again.id, f.id);
}

/// One request through `request::execute` in its own committed transaction.
pub(super) fn req(kv: &mut MemKv, client: u64, request: u64, op: MetaOp) -> MetaResult {
    let p = PathOp {
        client: ClientId(client),
        request: RequestId(request),
        now: 100 + request,
    };
    transact(kv, |ns| execute(ns, &op, p))
}

#[test]
fn retries_are_answered_from_the_idempotency_record() {
    let mut kv = fresh();
    let create = MetaOp::Create {
        path: "/f".into(),
        perm: 0o644,
        exclusive: true,
        session: None,
    };
    let Ok(MetaAnswer::Inode(f)) = req(&mut kv, 7, 1, create.clone()) else {
        panic!("create failed");
    };
    // The same request again (its commit's outcome was unknown): the file, even with O_EXCL.
    assert_eq!(
        req(&mut kv, 7, 1, create.clone()),
        Ok(MetaAnswer::Inode(f.clone()))
    );
    // Another client's request with the same number is judged afresh.
    assert_eq!(req(&mut kv, 8, 1, create.clone()), Err(MetaError::Exists));
    let rename = MetaOp::Rename {
        from: "/f".into(),
        to: "/g".into(),
    };
    assert_eq!(req(&mut kv, 7, 2, rename.clone()), Ok(MetaAnswer::Done));
    // Someone renames it on; the retry is still answered as done and moves nothing.
    let on = MetaOp::Rename {
        from: "/g".into(),
        to: "/h".into(),
    };
    assert_eq!(req(&mut kv, 8, 2, on), Ok(MetaAnswer::Done));
    assert_eq!(req(&mut kv, 7, 2, rename), Ok(MetaAnswer::Done));
    let remove = MetaOp::Remove {
        path: "/h".into(),
        recursive: false,
    };
    assert_eq!(req(&mut kv, 7, 3, remove.clone()), Ok(MetaAnswer::Done));
    assert_eq!(req(&mut kv, 7, 3, remove.clone()), Ok(MetaAnswer::Done));
    assert_eq!(
        req(&mut kv, 7, 4, remove),
        Err(MetaError::NotFound),
        "a new request"
    );
    // A create retried after its file was removed does not create it again.
    assert_eq!(req(&mut kv, 7, 1, create), Ok(MetaAnswer::Inode(f)));
    assert_eq!(
        tx(&mut kv, |ns| ns.stat("/f", false)),
        Err(MetaError::NotFound)
    );
}

#[test]
fn remove_links_and_gc() {
    let mut kv = fresh();
    tx(&mut kv, |ns| ns.mkdirs("/d/e", 0o755, true, op(1))).unwrap();
    let f = tx(&mut kv, |ns| ns.create("/d/f", 0o644, false, None, op(2))).unwrap();
    let l = tx(&mut kv, |ns| ns.hardlink("/d/f", "/d/g", op(3))).unwrap();
    assert_eq!(l.nlink, 2);
    assert_eq!(
        tx(&mut kv, |ns| ns.hardlink("/d", "/h", op(4))),
        Err(MetaError::NotPermitted)
    );
    assert_eq!(
        tx(&mut kv, |ns| ns.remove("/d", false, op(5))),
        Err(MetaError::NotEmpty)
    );
    assert_eq!(
        tx(&mut kv, |ns| ns.remove("/", false, op(6))),
        Err(MetaError::Invalid("the root has no parent"))
    );
    tx(&mut kv, |ns| ns.remove("/d/f", false, op(7))).unwrap();
    let still = tx(&mut kv, |ns| ns.stat("/d/g", true)).unwrap();
    assert_eq!((still.id, still.nlink), (f.id, 1), "one name left");
    assert!(gc(&mut kv).is_empty());
    tx(&mut kv, |ns| ns.remove("/d/g", false, op(8))).unwrap();
    assert_eq!(gc(&mut kv), [format!("f-{:016x}", f.id.0)]);
    let gone = tx(&mut kv, |ns| ns.inode(f.id)).unwrap();
    assert_eq!(gone.nlink, 0, "the inode row waits for GC");
    // A non-empty directory goes to GC whole with `recursive`.
    tx(&mut kv, |ns| ns.remove("/d", true, op(9))).unwrap();
    assert!(names(&mut kv, "/").is_empty());
    assert_eq!(
        gc(&mut kv).len(),
        2,
        "the file and the directory wait for GC"
    );
}

#[test]
fn rename_follows_posix_replace_rules_and_refuses_loops() {
    let mut kv = fresh();
    tx(&mut kv, |ns| ns.mkdirs("/a/sub", 0o755, true, op(1))).unwrap();
    tx(&mut kv, |ns| ns.mkdirs("/full/x", 0o755, true, op(2))).unwrap();
    tx(&mut kv, |ns| ns.mkdirs("/empty", 0o755, false, op(3))).unwrap();
    let f1 = tx(&mut kv, |ns| ns.create("/f1", 0o644, false, None, op(4))).unwrap();
    let f2 = tx(&mut kv, |ns| ns.create("/f2", 0o644, false, None, op(5))).unwrap();
    let rn = |kv: &mut MemKv, a: &str, b: &str, r: u64| tx(kv, |ns| ns.rename(a, b, op(r)));
    assert_eq!(
        rn(&mut kv, "/a", "/a/sub/in", 6),
        Err(MetaError::Invalid("a directory cannot move into itself"))
    );
    assert_eq!(rn(&mut kv, "/a", "/full", 7), Err(MetaError::NotEmpty));
    assert_eq!(rn(&mut kv, "/a", "/f1", 8), Err(MetaError::NotDir));
    assert_eq!(rn(&mut kv, "/f1", "/empty", 9), Err(MetaError::IsDir));
    assert_eq!(rn(&mut kv, "/nope", "/x", 10), Err(MetaError::NotFound));
    // A file replaces a file; the replaced one goes to GC.
    rn(&mut kv, "/f1", "/f2", 11).unwrap();
    assert_eq!(tx(&mut kv, |ns| ns.stat("/f2", true)).unwrap().id, f1.id);
    assert!(gc(&mut kv).contains(&format!("f-{:016x}", f2.id.0)));
    // A directory replaces an empty directory and learns its new parent and name.
    rn(&mut kv, "/a", "/empty", 12).unwrap();
    let moved = tx(&mut kv, |ns| ns.stat("/empty/sub/..", true)).unwrap();
    assert!(
        matches!(&moved.kind, InodeKind::Directory { parent, name, .. } if *parent == ROOT && name == b"empty")
    );
    // Into another directory.
    rn(&mut kv, "/empty", "/full/x/e", 13).unwrap();
    assert_eq!(names(&mut kv, "/full/x"), ["e"]);
    assert_eq!(
        rn(&mut kv, "/full", "/full/x/e/sub/deeper", 14),
        Err(MetaError::Invalid("a directory cannot move into itself"))
    );
}

#[test]
fn symlinks_resolve_and_loops_end() {
    let mut kv = fresh();
    tx(&mut kv, |ns| ns.mkdirs("/real/dir", 0o755, true, op(1))).unwrap();
    tx(&mut kv, |ns| ns.symlink("/l", "/real", op(2))).unwrap();
    tx(&mut kv, |ns| ns.symlink("/real/rel", "dir", op(3))).unwrap();
    let d = tx(&mut kv, |ns| ns.stat("/l/rel", true)).unwrap();
    assert!(matches!(&d.kind, InodeKind::Directory { name, .. } if name == b"dir"));
    let link = tx(&mut kv, |ns| ns.stat("/l", false)).unwrap();
    assert_eq!(link.entry_kind(), EntryKind::Symlink);
    tx(&mut kv, |ns| ns.symlink("/x", "/y", op(4))).unwrap();
    tx(&mut kv, |ns| ns.symlink("/y", "/x", op(5))).unwrap();
    assert_eq!(tx(&mut kv, |ns| ns.stat("/x", true)), Err(MetaError::Loop));
    assert_eq!(
        tx(&mut kv, |ns| ns.symlink("/x", "/z", op(6))),
        Err(MetaError::Exists)
    );
}

#[test]
fn concurrent_creates_of_one_name_serialize() {
    let mut kv = fresh();
    // Two meta servers race to create /same: both read "absent" at the same version; the
    // second commit conflicts, and its retry opens the file the first one created.
    let mut a_kv = kv.clone();
    let req_a = {
        let mut t = Txn::new(&mut a_kv);
        Namespace::new(&mut t)
            .create("/same", 0o644, true, None, op(1))
            .unwrap();
        t.to_commit_req().unwrap()
    };
    let req_b = {
        let mut t = Txn::new(&mut kv);
        Namespace::new(&mut t)
            .create("/same", 0o644, true, None, op(2))
            .unwrap();
        t.to_commit_req().unwrap()
    };
    use crate::kv::KvEngine;
    kv.commit(req_a).unwrap();
    assert_eq!(kv.commit(req_b), Err(crate::kv::KvError::Conflict));
    assert_eq!(
        tx(&mut kv, |ns| ns.create("/same", 0o644, true, None, op(2))),
        Err(MetaError::Exists),
        "the retry sees the winner's file"
    );
}

fn policy(batch: usize) -> GcPolicy {
    GcPolicy {
        batch,
        file_delay: 0,
        respect_sessions: true,
        purge_files: false,
    }
}

#[test]
fn gc_defers_files_held_by_a_write_session_and_empties_directories() {
    let mut kv = fresh();
    tx(&mut kv, |ns| ns.mkdirs("/d/e", 0o755, true, op(1))).unwrap();
    let f = tx(&mut kv, |ns| ns.create("/d/e/f", 0o644, false, None, op(2))).unwrap();
    let g = tx(&mut kv, |ns| ns.create("/g", 0o644, false, None, op(3))).unwrap();
    let link = tx(&mut kv, |ns| ns.hardlink("/d/e/f", "/f2", op(4)));
    assert!(link.is_ok());
    tx(&mut kv, |ns| ns.open("/g", true, 77, op(5))).unwrap();
    tx(&mut kv, |ns| ns.remove("/g", false, op(6))).unwrap();
    tx(&mut kv, |ns| ns.remove("/d", true, op(7))).unwrap();
    // Run GC steps until nothing changes: /d and /d/e are freed; /d/e/f keeps its other name;
    // /g waits for its writer.
    let mut total = GcStats::default();
    for _ in 0..10 {
        let s = tx(&mut kv, |ns| ns.gc_step(b"", 200, policy(2)))
            .unwrap()
            .stats;
        total.freed += s.freed;
        total.dirs += s.dirs;
        total.busy += s.busy;
    }
    assert_eq!(total.dirs, 2, "both directories freed");
    assert_eq!(total.freed, 0, "nothing else freed yet");
    assert!(total.busy > 0, "the held file was seen and deferred");
    assert_eq!(tx(&mut kv, |ns| ns.stat("/f2", false)).unwrap().nlink, 1);
    assert!(tx(&mut kv, |ns| ns.inode(f.id)).is_ok());
    // The writer closes with a length hint; the next step frees the file.
    let closed = tx(&mut kv, |ns| {
        ns.close(
            g.id,
            77,
            Some(crate::meta::length::LengthHint {
                length: 4096,
                truncate_ver: 0,
            }),
            op(8),
        )
    })
    .unwrap();
    assert!(matches!(closed.kind, InodeKind::File { length: 4096, .. }));
    // Too young first: unlinked at 106, delay 10.
    let young = GcPolicy {
        file_delay: 10,
        ..policy(8)
    };
    let s = tx(&mut kv, |ns| ns.gc_step(b"", 110, young)).unwrap().stats;
    assert_eq!((s.freed, s.young), (0, 1));
    let s = tx(&mut kv, |ns| ns.gc_step(b"", 116, young)).unwrap().stats;
    assert_eq!(s.freed, 1);
    assert_eq!(tx(&mut kv, |ns| ns.inode(g.id)), Err(MetaError::NotFound));
    assert!(tx(&mut kv, |ns| ns.list_dir(GC_ROOT, b"", 8))
        .unwrap()
        .is_empty());
}

#[test]
fn sessions_of_dead_clients_are_pruned_once_old_enough() {
    let mut kv = fresh();
    tx(&mut kv, |ns| ns.create("/f", 0o644, false, None, op(1))).unwrap();
    let live = PathOp {
        client: ClientId(1),
        ..op(2)
    };
    let dead = PathOp {
        client: ClientId(2),
        ..op(3)
    };
    tx(&mut kv, |ns| ns.open("/f", true, 10, live)).unwrap();
    tx(&mut kv, |ns| ns.open("/f", true, 11, dead)).unwrap();
    // Too young (opened at 103, min age 60): nothing goes.
    let (n, _, _) = tx(&mut kv, |ns| {
        ns.prune_sessions(&[ClientId(1)], b"", 8, 150, 60)
    })
    .unwrap();
    assert_eq!(n, 0);
    let (n, next, files) = tx(&mut kv, |ns| {
        ns.prune_sessions(&[ClientId(1)], b"", 8, 200, 60)
    })
    .unwrap();
    assert_eq!((n, next), (1, Vec::new()), "only the dead client's session");
    let f = tx(&mut kv, |ns| ns.stat("/f", false)).unwrap();
    assert_eq!(files, vec![f.id], "its file gets a length-updating close");
    let left = transact(&mut kv, |ns| Ok(ns.txn().range(&session_range(f.id), 8)?)).unwrap();
    assert_eq!(left.len(), 1);
}

#[test]
fn setattr_changes_only_what_it_is_given_and_batch_stat_answers_each_path() {
    let mut kv = fresh();
    tx(&mut kv, |ns| ns.create("/f", 0o644, false, None, op(1))).unwrap();
    tx(&mut kv, |ns| ns.symlink("/l", "/f", op(2))).unwrap();
    let attr = SetAttr {
        perm: Some(0o100_600),
        mtime: Some(7),
        ..SetAttr::default()
    };
    let i = tx(&mut kv, |ns| ns.setattr("/l", attr, op(3))).unwrap();
    assert!(
        matches!(i.kind, InodeKind::File { .. }),
        "the link is followed"
    );
    assert_eq!((i.perm, i.mtime, i.ctime, i.uid), (0o600, 7, 103, 0));
    let paths: Vec<String> = ["/f", "/nope", "/l/x"].map(String::from).to_vec();
    let rs = tx(&mut kv, |ns| ns.batch_stat(&paths)).unwrap();
    assert!(rs[0].is_ok());
    assert_eq!(rs[1], Err(MetaError::NotFound));
    assert_eq!(rs[2], Err(MetaError::NotDir));
    let many = vec!["/f".to_string(); BATCH_STAT_MAX + 1];
    assert!(tx(&mut kv, |ns| ns.batch_stat(&many)).is_err());
}

/// A listing answers at most `DIR_LIST_PAGE_MAX` names whatever limit it is asked for (so its
/// reply stays below the codec's list limit); the caller pages on after the last name.
#[test]
fn a_listing_page_is_capped() {
    use crate::limits::DIR_LIST_PAGE_MAX;
    let mut kv = fresh();
    let n = DIR_LIST_PAGE_MAX + 3;
    tx(&mut kv, |ns| {
        (0..n).try_for_each(|i| {
            ns.create(&format!("/f{i:05}"), 0o644, false, None, op(1))
                .map(|_| ())
        })
    })
    .unwrap();
    let list = |kv: &mut MemKv, after: Vec<u8>| {
        let op = MetaOp::List {
            path: "/".into(),
            after,
            limit: u32::MAX,
        };
        match req(kv, 7, 2, op) {
            Ok(MetaAnswer::Entries(rows)) => rows,
            r => panic!("a listing: {r:?}"),
        }
    };
    let first = list(&mut kv, Vec::new());
    assert_eq!(first.len(), DIR_LIST_PAGE_MAX as usize);
    let reply = crate::msg::Msg::MetaReply(crate::msg::meta::MetaReply {
        request: RequestId(2),
        result: Ok(MetaAnswer::Entries(first.clone())),
        dirs: Default::default(),
    });
    assert_eq!(crate::msg::Msg::decode(&reply.encode()), Ok(reply));
    let rest = list(&mut kv, first.last().unwrap().0.clone());
    assert_eq!(rest.len(), 3);
    assert_eq!(rest[2].0, format!("f{:05}", n - 1).into_bytes());
}

#[test]
fn a_directory_counts_two_links_and_one_per_subdirectory() {
    let mut kv = fresh();
    let nlink = |kv: &mut MemKv, p: &str| tx(kv, |ns| ns.stat(p, false)).unwrap().nlink;
    for (n, p) in ["/a", "/b", "/a/x", "/a/y", "/b/z"].into_iter().enumerate() {
        tx(&mut kv, |ns| ns.mkdirs(p, 0o755, false, op(n as u64 + 1))).unwrap();
    }
    tx(&mut kv, |ns| ns.create("/a/f", 0o644, true, None, op(9))).unwrap();
    assert_eq!(
        (
            nlink(&mut kv, "/"),
            nlink(&mut kv, "/a"),
            nlink(&mut kv, "/b")
        ),
        (4, 4, 3)
    );
    // A directory moved to another parent moves its ".." with it.
    tx(&mut kv, |ns| ns.rename("/a/x", "/b/x", op(10))).unwrap();
    assert_eq!((nlink(&mut kv, "/a"), nlink(&mut kv, "/b")), (3, 4));
    // Replacing an empty directory: the source's parent loses one, the destination's keeps
    // its count (one replaced, one arrived); in one directory, one fewer.
    tx(&mut kv, |ns| ns.rename("/a/y", "/b/z", op(11))).unwrap();
    assert_eq!((nlink(&mut kv, "/a"), nlink(&mut kv, "/b")), (2, 4));
    tx(&mut kv, |ns| ns.rename("/b/x", "/b/z", op(12))).unwrap();
    assert_eq!(nlink(&mut kv, "/b"), 3);
    // A file's rename changes no directory's count; rmdir takes one away.
    tx(&mut kv, |ns| ns.rename("/a/f", "/b/f", op(13))).unwrap();
    assert_eq!((nlink(&mut kv, "/a"), nlink(&mut kv, "/b")), (2, 3));
    tx(&mut kv, |ns| ns.remove("/b/z", false, op(14))).unwrap();
    assert_eq!(nlink(&mut kv, "/b"), 2);
}
