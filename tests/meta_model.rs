//! The namespace checker's reference tree agrees with t3fs's meta operations: the same random
//! sequences (every mix of the namespace workload) give the same abstract answers one by one
//! and the same final tree. Run sequentially, so every difference is a semantic one; the
//! checker can then trust the model (and a namespace failure in simulation is a concurrency
//! or exactly-once defect, not a model mismatch).

use t3fs_core::ids::{ClientId, RequestId};
use t3fs_core::kv::mem::MemKv;
use t3fs_core::meta::request::execute;
use t3fs_core::meta::{transact, PathOp};
use t3fs_scenario::namespace::{NsGenerator, NsMix, NsWorkload};
use t3fs_scenario::Rng;
use t3fs_sim::check::ns_model::{abstract_of, Tree};
use t3fs_sim::world::ns_client::{final_listing, initial_dirs, seed_namespace};

#[test]
fn the_reference_tree_answers_like_the_meta_service() {
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
                // Three clients take turns, so directory locks block someone.
                let who = 1 + n % 3;
                let p = PathOp {
                    client: ClientId(who),
                    request: RequestId(n),
                    now: n,
                };
                let real = transact(&mut kv, |ns| execute(ns, &op, p));
                let want = tree.apply(&op, who);
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
}
