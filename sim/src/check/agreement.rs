//! CRAQ agreement at quiescence: every SERVING target of a chain holds the same committed
//! version and bytes of every chunk it stores.
//!
//! The rule only: [`check`] compares what each chain's serving targets hold (pure); the world
//! gathers that from its disks (`World::serving_contents`), a real cluster from its stores'
//! dumps, so this module names neither (the shape, [`Content`], is the history leaf's).
//! Invariant: only committed chunks (version > 0) are compared; a pending update in flight is
//! not a disagreement. Not here: when the cluster is quiescent (the runner waits for that),
//! which value is right (the history checkers say that).

use t3fs_core::ids::{ChainId, TargetId};

use super::Verdict;
use crate::history::Content;

/// Per chain, its serving targets' committed contents in chain order: every one must equal the
/// first. `Fail` names the chain, the two targets and the first chunk they differ on.
pub fn check(chains: &[(ChainId, Vec<(TargetId, Content)>)]) -> Verdict {
    let mut compared = 0;
    for (chain, targets) in chains {
        let mut reference: Option<&(TargetId, Content)> = None;
        for t in targets {
            let (target, content) = t;
            compared += content.len();
            match reference {
                None => reference = Some(t),
                Some((rt, r)) if r != content => {
                    let diff = r
                        .keys()
                        .chain(content.keys())
                        .find(|k| r.get(k) != content.get(k))
                        .copied()
                        .unwrap_or_default();
                    return Verdict::Fail(format!(
                        "chain {chain}: {rt} and {target} differ on chunk {diff}: {:?} vs {:?}",
                        r.get(&diff).map(|(v, _)| v),
                        content.get(&diff).map(|(v, _)| v)
                    ));
                }
                Some(_) => {}
            }
        }
    }
    Verdict::Pass(format!(
        "{compared} committed chunk replicas identical across serving targets"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use t3fs_core::ids::{ChunkId, InodeId};

    fn chunk(index: u32) -> ChunkId {
        ChunkId {
            inode: InodeId(5),
            index,
        }
    }

    fn content(rows: &[(u32, u32, &[u8])]) -> Content {
        rows.iter()
            .map(|(i, v, b)| (chunk(*i), (*v, b.to_vec())))
            .collect()
    }

    #[test]
    fn identical_replicas_pass_and_count_every_replica() {
        let c = content(&[(0, 3, b"abc"), (1, 1, b"x")]);
        let chains = vec![
            (
                ChainId(1),
                vec![(TargetId(1), c.clone()), (TargetId(2), c.clone())],
            ),
            // A chain with one serving target, and one with none, agree trivially.
            (ChainId(2), vec![(TargetId(3), c)]),
            (ChainId(3), vec![]),
        ];
        let v = check(&chains);
        assert_eq!(
            v,
            Verdict::Pass("6 committed chunk replicas identical across serving targets".into())
        );
    }

    #[test]
    fn a_version_or_byte_difference_or_a_missing_chunk_fails_naming_it() {
        let a = content(&[(0, 3, b"abc"), (1, 1, b"x")]);
        // Same bytes, older version on the second target.
        let older = content(&[(0, 2, b"abc"), (1, 1, b"x")]);
        let v = check(&[(
            ChainId(7),
            vec![(TargetId(1), a.clone()), (TargetId(2), older)],
        )]);
        assert!(v.failed());
        let chunk0 = chunk(0);
        assert_eq!(
            v.detail(),
            format!(
                "chain {}: {} and {} differ on chunk {chunk0}: Some(3) vs Some(2)",
                ChainId(7),
                TargetId(1),
                TargetId(2)
            )
        );
        // Same version, different bytes: still a disagreement (versions alone would hide it).
        let flipped = content(&[(0, 3, b"abd"), (1, 1, b"x")]);
        let v = check(&[(
            ChainId(7),
            vec![(TargetId(1), a.clone()), (TargetId(2), flipped)],
        )]);
        assert!(v.detail().contains("Some(3) vs Some(3)"), "{v:?}");
        // The third target lacks chunk 1: named, with the version the others hold.
        let missing = content(&[(0, 3, b"abc")]);
        let v = check(&[(
            ChainId(7),
            vec![
                (TargetId(1), a.clone()),
                (TargetId(2), a),
                (TargetId(3), missing),
            ],
        )]);
        let chunk1 = chunk(1);
        assert!(
            v.detail().ends_with(&format!(
                "{} differ on chunk {chunk1}: Some(1) vs None",
                TargetId(3)
            )),
            "{v:?}"
        );
    }
}
