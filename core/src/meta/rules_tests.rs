//! The access rules and per-file state of the namespace against the in-memory KV: length
//! updates and truncate versions, idempotency-record expiry, directory locks, permissions and
//! the sticky bit, and directory default layouts. Helpers come from `tests.rs`.

use super::tests::{fresh, op, req, tx};
use super::*;
use crate::ids::{ClientId, RequestId};
use crate::kv::mem::MemKv;
use request::{MetaAnswer, MetaOp};

#[test]
fn length_updates_follow_truncate_versions() {
    use length::{LengthHint, QueriedLength};
    let mut kv = fresh();
    let f = tx(&mut kv, |ns| ns.create("/f", 0o644, false, None, op(1))).unwrap();
    let len = |kv: &mut MemKv| match tx(kv, |ns| ns.inode(f.id)).unwrap().kind {
        InodeKind::File {
            length,
            truncate_ver,
            ..
        } => (length, truncate_ver),
        _ => unreachable!(),
    };
    let hint = |length, truncate_ver| {
        Some(LengthHint {
            length,
            truncate_ver,
        })
    };
    // A current hint grows the length; a smaller one keeps it.
    tx(&mut kv, |ns| ns.sync(f.id, hint(100, 0), false, 5)).unwrap();
    tx(&mut kv, |ns| ns.sync(f.id, hint(60, 0), false, 6)).unwrap();
    assert_eq!(len(&mut kv), (100, 0));
    // A truncate asks storage first, and says which file it needs.
    let mut wants = None;
    let r = tx(&mut kv, |ns| {
        let r = ns.sync(f.id, None, true, 7);
        wants = ns.length_ctx().wants.take();
        r
    });
    assert_eq!(r, Err(MetaError::LengthUnknown));
    assert_eq!(wants.map(|i| i.id), Some(f.id));
    // An answer asked for another inode state is not applied.
    let answer = |seen| QueriedLength {
        inode: f.id,
        length: 10,
        seen,
    };
    let r = tx(&mut kv, |ns| {
        ns.length_ctx().queried = Some(answer((99, 0)));
        ns.sync(f.id, None, true, 8)
    });
    assert_eq!(r, Err(MetaError::LengthUnknown));
    tx(&mut kv, |ns| {
        ns.length_ctx().queried = Some(answer((100, 0)));
        ns.sync(f.id, None, true, 8)
    })
    .unwrap();
    assert_eq!(
        len(&mut kv),
        (10, 1),
        "storage's length, a new truncate version"
    );
    // A writer's hint from before the truncate is not trusted; one after it is.
    let r = tx(&mut kv, |ns| ns.sync(f.id, hint(100, 0), false, 9));
    assert_eq!(r, Err(MetaError::LengthUnknown));
    tx(&mut kv, |ns| ns.sync(f.id, hint(50, 1), false, 9)).unwrap();
    assert_eq!(len(&mut kv), (50, 1));
    // A query that finds less data than the length (a truncate whose writer died before its
    // sync) shrinks it and bumps the version too.
    tx(&mut kv, |ns| {
        ns.length_ctx().queried = Some(QueriedLength {
            inode: f.id,
            length: 20,
            seen: (50, 1),
        });
        ns.sync(f.id, None, false, 10)
    })
    .unwrap();
    assert_eq!(len(&mut kv), (20, 2));
}

#[test]
fn idempotency_records_expire_after_their_age_and_cleaning_resumes_in_batches() {
    let mut kv = fresh();
    let create = |n: u64| MetaOp::Create {
        path: format!("/f{n}"),
        perm: 0o644,
        exclusive: true,
        session: None,
    };
    // Requests 1..=5 recorded at 101..=105.
    for n in 1..=5 {
        assert!(req(&mut kv, 7, n, create(n)).is_ok());
    }
    // At 110 with expiry 6: records of 101..=103 are old enough; batches of 2 resume.
    let (n, next) = tx(&mut kv, |ns| ns.clean_idem(b"", 2, 110, 6)).unwrap();
    assert_eq!(n, 2);
    assert!(!next.is_empty(), "a full batch says where to go on");
    let (n, next) = tx(&mut kv, |ns| ns.clean_idem(&next, 2, 110, 6)).unwrap();
    assert_eq!(n, 1, "request 4 is too young");
    let (n, next) = tx(&mut kv, |ns| ns.clean_idem(&next, 2, 110, 6)).unwrap();
    assert_eq!((n, next), (0, Vec::new()), "the end: start over next time");
    // A young record still answers its retry; an expired one does not (3FS's trade-off).
    assert!(matches!(
        req(&mut kv, 7, 5, create(5)),
        Ok(MetaAnswer::Inode(_))
    ));
    assert_eq!(req(&mut kv, 7, 1, create(1)), Err(MetaError::Exists));
}

#[test]
fn a_locked_directory_changes_only_for_its_holder() {
    use lock::LockAction::{Clear, PreemptLock, TryLock, Unlock};
    let mut kv = fresh();
    let by = |client: u64, request: u64| PathOp {
        client: ClientId(client),
        request: RequestId(request),
        now: 100 + request,
    };
    tx(&mut kv, |ns| ns.mkdirs("/d", 0o755, false, by(1, 1))).unwrap();
    tx(&mut kv, |ns| {
        ns.create("/d/f", 0o644, false, None, by(1, 2))
    })
    .unwrap();
    let lock = |kv: &mut MemKv, client, action| {
        tx(kv, |ns| {
            ns.lock_directory("/d", action, ClientId(client), 3)
        })
    };
    lock(&mut kv, 1, TryLock).unwrap();
    // Another client can neither take the lock nor change the directory's entries...
    assert_eq!(lock(&mut kv, 2, TryLock), Err(MetaError::NoLock));
    assert_eq!(lock(&mut kv, 2, Unlock), Err(MetaError::NoLock));
    let other = by(2, 4);
    assert_eq!(
        tx(&mut kv, |ns| ns.create("/d/g", 0o644, false, None, other)),
        Err(MetaError::NoLock)
    );
    assert_eq!(
        tx(&mut kv, |ns| ns.remove("/d/f", false, other)),
        Err(MetaError::NoLock)
    );
    assert_eq!(
        tx(&mut kv, |ns| ns.rename("/d/f", "/f", other)),
        Err(MetaError::NoLock)
    );
    assert_eq!(
        tx(&mut kv, |ns| ns.rename("/x", "/d/x", other)),
        Err(MetaError::NotFound)
    );
    // ...but opening an existing file needs no lock, and a missing name is still ENOENT.
    assert!(tx(&mut kv, |ns| ns.create("/d/f", 0o644, false, None, other)).is_ok());
    assert_eq!(
        tx(&mut kv, |ns| ns.remove("/d/nope", false, other)),
        Err(MetaError::NotFound)
    );
    // The holder changes it freely; a re-lock by the holder is fine.
    tx(&mut kv, |ns| {
        ns.create("/d/g", 0o644, false, None, by(1, 5))
    })
    .unwrap();
    lock(&mut kv, 1, TryLock).unwrap();
    // Preempt moves the lock; clear frees it for everyone.
    lock(&mut kv, 2, PreemptLock).unwrap();
    assert_eq!(
        tx(&mut kv, |ns| ns.remove("/d/g", false, by(1, 6))),
        Err(MetaError::NoLock)
    );
    lock(&mut kv, 1, Clear).unwrap();
    tx(&mut kv, |ns| ns.remove("/d/g", false, by(1, 7))).unwrap();
    // A file is not a directory to lock.
    let r = tx(&mut kv, |ns| {
        ns.lock_directory("/d/f", TryLock, ClientId(1), 8)
    });
    assert_eq!(r, Err(MetaError::NotDir));
}

#[test]
fn permissions_and_the_sticky_bit_decide_who_changes_what() {
    use perm::User;
    let mut kv = fresh();
    let (alice, bob) = (User::new(1000, 100), User::new(1001, 100));
    let as_user =
        |kv: &mut MemKv,
         u: User,
         f: &dyn Fn(&mut Namespace<'_, '_, MemKv>) -> Result<(), MetaError>| {
            tx(kv, |ns| {
                ns.set_user(u);
                f(ns)
            })
        };
    // Root makes a sticky, world-writable /tmp and a private /root.
    tx(&mut kv, |ns| {
        ns.mkdirs("/tmp", 0o1777, false, op(1)).map(|_| ())
    })
    .unwrap();
    tx(&mut kv, |ns| {
        ns.mkdirs("/root", 0o700, false, op(2)).map(|_| ())
    })
    .unwrap();
    // What alice creates is hers.
    as_user(&mut kv, alice, &|ns| {
        ns.create("/tmp/a", 0o644, true, None, op(3)).map(|_| ())
    })
    .unwrap();
    let a = tx(&mut kv, |ns| ns.stat("/tmp/a", false)).unwrap();
    assert_eq!((a.uid, a.gid), (1000, 100));
    // Sticky: bob may create in /tmp but not remove or rename alice's file.
    as_user(&mut kv, bob, &|ns| {
        ns.create("/tmp/b", 0o644, true, None, op(4)).map(|_| ())
    })
    .unwrap();
    let r = as_user(&mut kv, bob, &|ns| ns.remove("/tmp/a", false, op(5)));
    assert_eq!(r, Err(MetaError::NotPermitted));
    let r = as_user(&mut kv, bob, &|ns| ns.rename("/tmp/a", "/tmp/c", op(6)));
    assert_eq!(r, Err(MetaError::NotPermitted));
    // Nor replace it by a rename of his own file.
    let r = as_user(&mut kv, bob, &|ns| ns.rename("/tmp/b", "/tmp/a", op(7)));
    assert_eq!(r, Err(MetaError::NotPermitted));
    // The group has read, not write: bob cannot open alice's file for write.
    let r = as_user(&mut kv, bob, &|ns| {
        ns.open("/tmp/a", true, 1, op(8)).map(|_| ())
    });
    assert_eq!(r, Err(MetaError::Access));
    // A private directory is closed to others: no search, no listing, no creation.
    let r = as_user(&mut kv, bob, &|ns| ns.stat("/root/x", false).map(|_| ()));
    assert_eq!(r, Err(MetaError::Access), "EACCES before ENOENT");
    let r = as_user(&mut kv, bob, &|ns| ns.list("/root", b"", 8).map(|_| ()));
    assert_eq!(r, Err(MetaError::Access));
    // chmod is the owner's (or root's); chown is root's.
    let chmod = SetAttr {
        perm: Some(0o600),
        ..Default::default()
    };
    let chown = SetAttr {
        uid: Some(1001),
        ..Default::default()
    };
    let r = as_user(&mut kv, bob, &|ns| {
        ns.setattr("/tmp/a", chmod, op(9)).map(|_| ())
    });
    assert_eq!(r, Err(MetaError::NotPermitted));
    as_user(&mut kv, alice, &|ns| {
        ns.setattr("/tmp/a", chmod, op(10)).map(|_| ())
    })
    .unwrap();
    let r = as_user(&mut kv, alice, &|ns| {
        ns.setattr("/tmp/a", chown, op(11)).map(|_| ())
    });
    assert_eq!(r, Err(MetaError::NotPermitted));
    tx(&mut kv, |ns| {
        ns.setattr("/tmp/a", chown, op(12)).map(|_| ())
    })
    .unwrap();
    // Now bob owns it and may remove it from the sticky directory.
    as_user(&mut kv, bob, &|ns| ns.remove("/tmp/a", false, op(13))).unwrap();
}

#[test]
fn directories_pass_their_default_layout_to_what_is_made_in_them() {
    use placement::{ChainRange, DirLayout, Layout};
    let mut kv = fresh();
    let allocated = Layout::new(
        4096,
        ChainRange {
            table: 1,
            table_version: 1,
            base: 3,
            stripe: 2,
            seed: 9,
        },
    );
    let in_tx =
        |kv: &mut MemKv, f: &dyn Fn(&mut Namespace<'_, '_, MemKv>) -> Result<Inode, MetaError>| {
            tx(kv, |ns| {
                ns.set_new_layout(Some(allocated), 6);
                f(ns)
            })
        };
    tx(&mut kv, |ns| ns.mkdirs("/d", 0o755, false, op(1))).unwrap();
    let wide = DirLayout {
        chunk_size: 1 << 20,
        stripe: 16,
    };
    let set = SetAttr {
        layout: Some(wide),
        ..Default::default()
    };
    tx(&mut kv, |ns| ns.setattr("/d", set, op(2))).unwrap();
    // A file made in /d gets its chunk size, and its stripe clamped to the 6-chain table, over
    // the chains the server allocated; a file elsewhere keeps the allocation as it is.
    let f = in_tx(&mut kv, &|ns| ns.create("/d/f", 0o644, false, None, op(3))).unwrap();
    let InodeKind::File {
        layout: Some(l), ..
    } = f.kind
    else {
        panic!("no layout");
    };
    assert_eq!(
        (l.chunk_size, l.range.stripe, l.range.base, l.range.seed),
        (1 << 20, 6, 3, 9)
    );
    let g = in_tx(&mut kv, &|ns| ns.create("/g", 0o644, false, None, op(4))).unwrap();
    assert!(matches!(g.kind, InodeKind::File { layout: Some(l), .. } if l == allocated));
    // Subdirectories inherit the default.
    let sub = tx(&mut kv, |ns| ns.mkdirs("/d/sub", 0o755, false, op(5))).unwrap();
    assert!(matches!(sub.kind, InodeKind::Directory { layout: Some(l), .. } if l == wide));
    // Only directories take one, only valid ones, and only from the owner or root.
    assert_eq!(
        tx(&mut kv, |ns| ns.setattr("/d/f", set, op(6))),
        Err(MetaError::Invalid("invalid argument"))
    );
    let bad = SetAttr {
        layout: Some(DirLayout {
            chunk_size: 5000,
            stripe: 1,
        }),
        ..Default::default()
    };
    assert_eq!(
        tx(&mut kv, |ns| ns.setattr("/d", bad, op(7))),
        Err(MetaError::Invalid("invalid argument"))
    );
    let stranger = tx(&mut kv, |ns| {
        ns.set_user(perm::User::new(5, 5));
        ns.setattr("/d", set, op(8))
    });
    assert_eq!(stranger, Err(MetaError::NotPermitted));
}

#[test]
fn ctime_moves_where_linux_moves_it() {
    let mut kv = fresh();
    tx(&mut kv, |ns| ns.mkdirs("/a", 0o755, false, op(1))).unwrap();
    tx(&mut kv, |ns| ns.mkdirs("/b", 0o755, false, op(2))).unwrap();
    let f = tx(&mut kv, |ns| ns.create("/a/f", 0o644, false, None, op(3))).unwrap();
    let times = |kv: &mut MemKv, p: &str| {
        let i = tx(kv, |ns| ns.resolve(p, false)).unwrap();
        (i.mtime, i.ctime)
    };
    // A rename moves the inode's ctime and both directories' mtime and ctime.
    tx(&mut kv, |ns| ns.rename("/a/f", "/b/f", op(10))).unwrap();
    assert_eq!(times(&mut kv, "/a"), (110, 110));
    assert_eq!(times(&mut kv, "/b"), (110, 110));
    assert_eq!(times(&mut kv, "/b/f").1, 110);
    // chmod moves ctime only; a truncate both; a link the inode's ctime.
    let chmod = SetAttr {
        perm: Some(0o600),
        ..Default::default()
    };
    tx(&mut kv, |ns| ns.setattr("/b/f", chmod, op(20))).unwrap();
    assert_eq!(times(&mut kv, "/b/f"), (103, 120));
    tx(&mut kv, |ns| {
        ns.length_ctx().queried = Some(length::QueriedLength {
            inode: f.id,
            length: 0,
            seen: (0, 0),
        });
        ns.sync(f.id, None, true, 130)
    })
    .unwrap();
    assert_eq!(times(&mut kv, "/b/f"), (130, 130));
    tx(&mut kv, |ns| ns.hardlink("/b/f", "/a/g", op(40))).unwrap();
    assert_eq!(times(&mut kv, "/b/f"), (130, 140));
    // A writer's report moves mtime and ctime, the length grown or not (a write inside the
    // file).
    let hint = |length| {
        Some(length::LengthHint {
            length,
            truncate_ver: 1,
        })
    };
    tx(&mut kv, |ns| ns.sync(f.id, hint(10), false, 150)).unwrap();
    assert_eq!(times(&mut kv, "/b/f"), (150, 150));
    tx(&mut kv, |ns| ns.sync(f.id, hint(4), false, 160)).unwrap();
    assert_eq!(times(&mut kv, "/b/f"), (160, 160), "a write inside");
    // Unlinked, its ctime is the unlink's (GC's delay counts from it); mtime still moves.
    tx(&mut kv, |ns| ns.remove("/a/g", false, op(70))).unwrap();
    tx(&mut kv, |ns| ns.remove("/b/f", false, op(71))).unwrap();
    tx(&mut kv, |ns| ns.sync(f.id, hint(4), false, 180)).unwrap();
    let i = tx(&mut kv, |ns| ns.inode(f.id)).unwrap();
    assert_eq!((i.mtime, i.ctime), (180, 171));
}

#[test]
fn create_opens_for_write_in_the_same_request_whatever_the_new_files_mode() {
    let mut kv = fresh();
    let nobody = perm::User::new(65534, 65534);
    let as_nobody =
        |kv: &mut MemKv, f: &dyn Fn(&mut Namespace<'_, '_, MemKv>) -> Result<Inode, MetaError>| {
            tx(kv, |ns| {
                ns.set_user(nobody);
                f(ns)
            })
        };
    let sessions = |kv: &mut MemKv, f: &Inode| {
        let rows = tx(kv, |ns| {
            Ok(ns.txn().range(&keys::session_range(f.id), 8)?)
        });
        rows.unwrap().len()
    };
    tx(&mut kv, |ns| ns.mkdirs("/t", 0o1777, false, op(1))).unwrap();
    // open("/t/f", O_CREAT | O_RDWR, 0): the creator's descriptor writes, as POSIX has it.
    let f = as_nobody(&mut kv, &|ns| ns.create("/t/f", 0, true, Some(7), op(2))).unwrap();
    assert_eq!((f.uid, f.perm), (65534, 0));
    assert_eq!(
        sessions(&mut kv, &f),
        1,
        "the write session is in the same transaction"
    );
    // Found rather than made, it is opened only after the write check, as open checks.
    let again = as_nobody(&mut kv, &|ns| {
        ns.create("/t/f", 0o644, false, Some(8), op(3))
    });
    assert_eq!(again, Err(MetaError::Access));
    assert_eq!(sessions(&mut kv, &f), 1);
    // Without a session nothing is opened.
    let g = as_nobody(&mut kv, &|ns| ns.create("/t/g", 0o644, true, None, op(4))).unwrap();
    assert_eq!(sessions(&mut kv, &g), 0);
    // A special file found by an O_CREAT open is refused like any open of one.
    tx(&mut kv, |ns| {
        ns.mknod("/t/p", crate::wire::SpecialKind::Fifo, 0o666, 0, op(5))
    })
    .unwrap();
    let fifo = tx(&mut kv, |ns| {
        ns.create("/t/p", 0o644, false, Some(9), op(6))
    });
    assert_eq!(fifo, Err(MetaError::Invalid(crate::wire::NO_DATA)));
}
