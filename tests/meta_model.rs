//! The namespace checker's reference tree agrees with t3fs's meta operations: the same random
//! sequences (every mix of the namespace workload) give the same abstract answers one by one
//! and the same final tree. Run sequentially, so every difference is a semantic one; the
//! checker can then trust the model (and a namespace failure in simulation is a concurrency
//! or exactly-once defect, not a model mismatch).

use t3fs_core::ids::{ClientId, RequestId};
use t3fs_core::kv::mem::MemKv;
use t3fs_core::meta::request::{execute, MetaOp};
use t3fs_core::meta::{transact, MetaError, PathOp};
use t3fs_scenario::namespace::{NsGenerator, NsMix, NsWorkload};
use t3fs_scenario::Rng;
use t3fs_sim::check::ns_listing::final_listing;
use t3fs_sim::check::ns_model::Tree;
use t3fs_sim::history::ns::{abstract_of, Abstract};
use t3fs_sim::world::ns_client::{initial_dirs, seed_namespace};

#[test]
fn the_reference_tree_answers_like_the_meta_service() {
    // Answers decided by permissions, the sticky bit and directory locks: the rules must be
    // exercised, not only agree.
    let mut denied: std::collections::BTreeMap<String, u32> = Default::default();
    for mix in [
        NsMix::Mixed,
        NsMix::OneDir,
        NsMix::RenameLoops,
        NsMix::Truncate,
    ] {
        for seed in 0..150u64 {
            let w = NsWorkload {
                dirs: 2,
                names: 3,
                mix,
                think: core::time::Duration::ZERO..core::time::Duration::from_millis(1),
                ops_per_client: Some(200),
                gc_delay: None,
                idem_expire: None,
            };
            let mut kv = MemKv::new(100_000);
            seed_namespace(&mut kv, w.dirs);
            let mut tree = Tree::with_dirs(&initial_dirs(w.dirs));
            let mut gen = NsGenerator::new(&w, Rng::new(seed));
            let mut n = 0;
            while let Some(op) = gen.next_op() {
                n += 1;
                // Three clients take turns, as root and two users of one group (one also in
                // group 200), so that directory locks, permissions, chown's group rule and the
                // sticky bit decide some answers.
                let who = 1 + n % 3;
                let user = t3fs_scenario::ns_files::client_user(who - 1);
                let p = PathOp {
                    client: ClientId(who),
                    request: RequestId(n),
                    now: n,
                };
                let real = transact(&mut kv, |ns| {
                    ns.set_user(user);
                    execute(ns, &op, p)
                });
                let want = tree.apply(&op, who, user);
                if let Abstract::Error(
                    e @ (MetaError::Access | MetaError::NotPermitted | MetaError::NoLock),
                ) = &want
                {
                    *denied.entry(format!("{e:?}")).or_default() += 1;
                }
                assert_eq!(
                    abstract_of(&real),
                    want,
                    "{mix:?} seed {seed}, op {n}: {op:?}"
                );
            }
            assert_eq!(
                final_listing(&mut kv).unwrap(),
                tree.listing(),
                "{mix:?} seed {seed}: final trees differ"
            );
        }
    }
    eprintln!("answers decided by the rules: {denied:?}");
    for e in ["Access", "NotPermitted", "NoLock"] {
        assert!(
            denied.get(e).is_some_and(|n| *n > 10),
            "{e} too rare: {denied:?}"
        );
    }
}

/// Scripted cases the random mixes reach too rarely, run through both meta and the model: a
/// setgid directory gives new entries its group (so a user of another group loses the group
/// class), a new directory in it is setgid too; FIFOs and sockets are anyone's to make and
/// link, devices root's.
#[test]
fn setgid_directories_and_special_files_agree_with_the_model() {
    use t3fs_core::meta::perm::{User, ROOT_USER};
    use t3fs_core::meta::SetAttr;
    use t3fs_core::wire::SpecialKind;
    let alice = User::new(999, 100);
    let carol = User {
        groups: t3fs_core::wire::Groups::of(&[50]),
        ..User::new(1002, 100)
    };
    let set = |path: &str, attr: SetAttr| MetaOp::SetAttr {
        path: path.into(),
        attr,
    };
    let touch = |path: &str| {
        set(
            path,
            SetAttr {
                touch: true,
                ..Default::default()
            },
        )
    };
    let utimes = |path: &str, t| {
        set(
            path,
            SetAttr {
                mtime: Some(t),
                ..Default::default()
            },
        )
    };
    let chmod = |path: &str, p| {
        set(
            path,
            SetAttr {
                perm: Some(p),
                ..Default::default()
            },
        )
    };
    let bob = User::new(1000, 100);
    let mkdir = |path: &str, perm| MetaOp::Mkdirs {
        path: path.into(),
        perm,
        recursive: false,
    };
    let stat = |path: &str| MetaOp::Stat {
        path: path.into(),
        follow: false,
    };
    let mknod = |path: &str, kind| MetaOp::Mknod {
        path: path.into(),
        kind,
        perm: 0o644,
        rdev: 259,
    };
    let link = |a: &str, b: &str| MetaOp::Hardlink {
        existing: a.into(),
        path: b.into(),
    };
    let chgrp = |path: &str, gid| MetaOp::SetAttr {
        path: path.into(),
        attr: SetAttr {
            gid: Some(gid),
            ..Default::default()
        },
    };
    use t3fs_core::wire::{EntryKind as K, MetaError as E};
    let script: Vec<(User, MetaOp, Abstract)> = vec![
        (
            ROOT_USER,
            mkdir("/d0/s", 0o2777),
            Abstract::Kind(K::Directory),
        ),
        (ROOT_USER, chgrp("/d0/s", 50), Abstract::Kind(K::Directory)),
        // Alice's directory takes group 50, not hers: Bob, of her group, is "other" there.
        (alice, mkdir("/d0/s/x", 0o750), Abstract::Kind(K::Directory)),
        (
            alice,
            mkdir("/d0/s/x/y", 0o755),
            Abstract::Kind(K::Directory),
        ),
        (bob, stat("/d0/s/x/y"), Abstract::Error(E::Access)),
        // It is setgid too, so its own new entries take group 50 as well.
        (
            alice,
            mkdir("/d0/s/x/y/z", 0o750),
            Abstract::Kind(K::Directory),
        ),
        (
            ROOT_USER,
            chgrp("/d0/s/x", 100),
            Abstract::Kind(K::Directory),
        ),
        (bob, stat("/d0/s/x/y/z"), Abstract::Kind(K::Directory)),
        (
            bob,
            mkdir("/d0/s/x/y/z/w", 0o755),
            Abstract::Error(E::Access),
        ),
        (
            alice,
            mknod("/d0/p", SpecialKind::Fifo),
            Abstract::Kind(K::Special(SpecialKind::Fifo)),
        ),
        (
            bob,
            mknod("/d0/q", SpecialKind::Socket),
            Abstract::Kind(K::Special(SpecialKind::Socket)),
        ),
        (
            bob,
            mknod("/d0/c", SpecialKind::CharDevice),
            Abstract::Error(E::NotPermitted),
        ),
        (
            bob,
            mknod("/d0/p", SpecialKind::CharDevice),
            Abstract::Error(E::Exists),
        ),
        (
            ROOT_USER,
            mknod("/d0/c", SpecialKind::CharDevice),
            Abstract::Kind(K::Special(SpecialKind::CharDevice)),
        ),
        (
            alice,
            link("/d0/p", "/d0/p2"),
            Abstract::Kind(K::Special(SpecialKind::Fifo)),
        ),
        (
            alice,
            stat("/d0/p2"),
            Abstract::Kind(K::Special(SpecialKind::Fifo)),
        ),
        // Supplementary groups: Carol is in 50 besides her primary 100.
        (
            ROOT_USER,
            mkdir("/d0/g", 0o770),
            Abstract::Kind(K::Directory),
        ),
        (ROOT_USER, chgrp("/d0/g", 50), Abstract::Kind(K::Directory)),
        (
            carol,
            mkdir("/d0/g/in", 0o755),
            Abstract::Kind(K::Directory),
        ),
        (bob, mkdir("/d0/g/in2", 0o755), Abstract::Error(E::Access)),
        // The owner may change the group to one of hers, no other; nobody else may.
        (carol, mkdir("/d0/cf", 0o755), Abstract::Kind(K::Directory)),
        (carol, chgrp("/d0/cf", 50), Abstract::Kind(K::Directory)),
        (
            carol,
            chgrp("/d0/cf", 300),
            Abstract::Error(E::NotPermitted),
        ),
        (bob, chgrp("/d0/cf", 100), Abstract::Error(E::NotPermitted)),
        // utimes to now: the owner or a writer (EACCES otherwise); explicit times: the owner.
        (bob, touch("/d0/cf"), Abstract::Error(E::Access)),
        (carol, chmod("/d0/cf", 0o777), Abstract::Kind(K::Directory)),
        (bob, touch("/d0/cf"), Abstract::Kind(K::Directory)),
        (bob, utimes("/d0/cf", 5), Abstract::Error(E::NotPermitted)),
        // No write session may hold one: a close could not end it (swarm seed 39 found that).
        (
            alice,
            MetaOp::Open {
                path: "/d0/p2".into(),
                write: true,
                session: 7,
            },
            Abstract::Error(E::Invalid(t3fs_core::wire::NO_DATA)),
        ),
    ];
    let mut kv = MemKv::new(100_000);
    seed_namespace(&mut kv, 2);
    let mut tree = Tree::with_dirs(&initial_dirs(2));
    for (n, (user, op, want)) in script.into_iter().enumerate() {
        let n = n as u64 + 1;
        let p = PathOp {
            client: ClientId(1),
            request: RequestId(n),
            now: n,
        };
        let real = transact(&mut kv, |ns| {
            ns.set_user(user);
            execute(ns, &op, p)
        });
        assert_eq!(abstract_of(&real), want, "meta, step {n}: {op:?}");
        assert_eq!(tree.apply(&op, 1, user), want, "model, step {n}: {op:?}");
    }
    assert_eq!(final_listing(&mut kv).unwrap(), tree.listing());
}
