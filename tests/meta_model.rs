//! The namespace checker's reference tree agrees with t3fs's meta operations: the same random
//! sequences (every mix of the namespace workload) give the same abstract answers one by one
//! and the same final tree. Run sequentially, so every difference is a semantic one; the
//! checker can then trust the model (and a namespace failure in simulation is a concurrency
//! or exactly-once defect, not a model mismatch).

use t3fs_core::ids::{ClientId, RequestId};
use t3fs_core::kv::mem::MemKv;
use t3fs_core::meta::request::execute;
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
                // Three clients take turns, as root and two users of one group, so that
                // directory locks, permissions and the sticky bit decide some answers.
                let who = 1 + n % 3;
                let user = match who {
                    1 => t3fs_core::meta::perm::ROOT_USER,
                    k => t3fs_core::meta::perm::User {
                        uid: 998 + k as u32,
                        gid: 100,
                    },
                };
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
