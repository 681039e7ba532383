//! The namespace checker: every answer clients saw must be explained by one serial order of the
//! namespace operations that respects real time (an operation that returned before another was
//! invoked comes first), replayed on the reference tree (`ns_model.rs`), and that order must
//! end in the tree the KV holds after the run (strict serializability of the meta service).
//!
//! Open operations (the client crashed, or every retry ended in an unknown commit) may appear
//! anywhere after their invocation, or nowhere. The search is Wing & Gong's with a memo of
//! (set of operations placed, tree) states, as in `linearizability.rs`; past a memo budget it
//! answers `Unknown`, never `Pass`. Not here: running the operations (world/ns_client.rs),
//! recording them (`history::ns`).

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use super::ns_model::Tree;
use super::Verdict;
use crate::history::ns::{NsHistory, NsRec};

/// Memo states the search may visit before answering `Unknown`.
pub const NS_BUDGET: usize = 2_000_000;

struct Search<'h> {
    ops: &'h [NsRec],
    final_listing: Option<Vec<(String, String)>>,
    memo: HashSet<(u64, u64)>,
    zobrist: Vec<u64>,
    budget: usize,
    order: Vec<usize>,
    /// The most operations one partial order placed (how far a search out of budget got).
    deepest: usize,
}

fn tree_hash(t: &Tree) -> u64 {
    let mut h = DefaultHasher::new();
    t.hash(&mut h);
    h.finish()
}

impl Search<'_> {
    /// Depth-first: true if the remaining operations can be placed from `tree`.
    fn go(&mut self, tree: &Tree, placed: &mut Vec<bool>, key: u64) -> Result<bool, ()> {
        let done = self
            .ops
            .iter()
            .enumerate()
            .all(|(i, o)| placed[i] || o.ret.is_none());
        if done
            && self
                .final_listing
                .as_ref()
                .is_none_or(|f| *f == tree.listing())
        {
            return Ok(true);
        }
        if !self.memo.insert((key, tree_hash(tree))) {
            return Ok(false);
        }
        if self.memo.len() > self.budget {
            return Err(());
        }
        // Only an operation invoked before every unplaced answered operation returned may go
        // next (otherwise that one returned before it began, and must precede it).
        let bound = self
            .ops
            .iter()
            .enumerate()
            .filter(|(i, o)| !placed[*i] && o.ret.is_some())
            .map(|(_, o)| o.ret.as_ref().map_or(u64::MAX, |r| r.0))
            .min()
            .unwrap_or(u64::MAX);
        for i in 0..self.ops.len() {
            let o = &self.ops[i];
            if o.invoke > bound {
                break;
            }
            if placed[i] {
                continue;
            }
            let mut next = tree.clone();
            let got = next.apply(&o.op, o.who, o.user);
            if o.ret.as_ref().is_some_and(|(_, want)| *want != got) {
                continue;
            }
            placed[i] = true;
            self.order.push(i);
            self.deepest = self.deepest.max(self.order.len());
            if self.go(&next, placed, key ^ self.zobrist[i])? {
                return Ok(true);
            }
            self.order.pop();
            placed[i] = false;
        }
        Ok(false)
    }
}

/// Checks `h` from the tree holding `initial` directories; `final_listing` is the real tree
/// after the run (`None` skips that comparison).
pub fn check(
    h: &NsHistory,
    initial: &[String],
    final_listing: Option<Vec<(String, String)>>,
) -> Verdict {
    if h.ops.is_empty() {
        return Verdict::Pass("no namespace operations".into());
    }
    let mut z = 0x9E37_79B9_7F4A_7C15u64;
    let zobrist = (0..h.ops.len())
        .map(|_| {
            z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut x = z;
            x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            x ^ (x >> 31)
        })
        .collect();
    let mut s = Search {
        ops: &h.ops,
        final_listing,
        memo: HashSet::new(),
        zobrist,
        budget: NS_BUDGET,
        order: Vec::new(),
        deepest: 0,
    };
    let tree = Tree::with_dirs(initial);
    let mut placed = vec![false; h.ops.len()];
    let open = h.ops.len() - h.answered();
    match s.go(&tree, &mut placed, 0) {
        Ok(true) => Verdict::Pass(format!(
            "{} namespace operations ({} answered, {open} open) explained by one serial order ending in the final tree",
            h.ops.len(),
            h.answered()
        )),
        Ok(false) => Verdict::Fail(explain(h, initial, &s.final_listing)),
        Err(()) => Verdict::Unknown(format!(
            "the serializability search used its whole budget (NS_BUDGET = {} memoized states) on {} namespace operations, placing at most {} of them in one order",
            s.budget,
            h.ops.len(),
            s.deepest
        )),
    }
}

fn explain(
    h: &NsHistory,
    initial: &[String],
    final_listing: &Option<Vec<(String, String)>>,
) -> String {
    // The shortest failing prefix of answered operations names the culprit best.
    let answered: Vec<usize> = (0..h.ops.len())
        .filter(|&i| h.ops[i].ret.is_some())
        .collect();
    let mut culprit = None;
    for &end in &answered {
        let cut = h.ops[end].ret.as_ref().map_or(0, |r| r.0);
        let prefix: Vec<NsRec> = h
            .ops
            .iter()
            .filter(|o| o.invoke <= cut)
            .map(|o| {
                let mut o = o.clone();
                if o.ret.as_ref().is_some_and(|r| r.0 > cut) {
                    o.ret = None;
                }
                o
            })
            .collect();
        let mut s = Search {
            ops: &prefix,
            final_listing: None,
            memo: HashSet::new(),
            zobrist: (0..prefix.len() as u64)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
                .collect(),
            budget: NS_BUDGET / 4,
            order: Vec::new(),
            deepest: 0,
        };
        let mut placed = vec![false; prefix.len()];
        if let Ok(false) = s.go(&Tree::with_dirs(initial), &mut placed, 0) {
            culprit = Some(end);
            break;
        }
    }
    match culprit {
        Some(i) => {
            let o = &h.ops[i];
            format!(
                "no serial order explains client {}'s {:?} -> {:?} (invoked at {:.6}s)",
                o.client,
                o.op,
                o.ret.as_ref().map(|r| &r.1),
                o.invoke_ns as f64 / 1e9
            )
        }
        None => format!(
            "every answer is explained, but no serial order ends in the final tree ({} paths)",
            final_listing.as_ref().map_or(0, Vec::len)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use t3fs_core::meta::perm::ROOT_USER;
    use t3fs_core::meta::request::{MetaAnswer, MetaOp, MetaResult};
    use t3fs_core::meta::{Inode, InodeKind, MetaError};

    fn file() -> MetaResult {
        Ok(MetaAnswer::Inode(Inode {
            id: t3fs_core::ids::InodeId(7),
            kind: InodeKind::File {
                length: 0,
                truncate_ver: 0,
                layout: None,
            },
            uid: 0,
            gid: 0,
            perm: 0o644,
            nlink: 1,
            ctime: 0,
            mtime: 0,
            atime: 0,
            atime_ns: 0,
            mtime_ns: 0,
        }))
    }

    fn create(path: &str) -> MetaOp {
        MetaOp::Create {
            path: path.into(),
            perm: 0o644,
            exclusive: true,
            session: None,
        }
    }

    fn stat(path: &str) -> MetaOp {
        MetaOp::Stat {
            path: path.into(),
            follow: false,
        }
    }

    fn listing(rows: &[(&str, &str)]) -> Option<Vec<(String, String)>> {
        Some(
            rows.iter()
                .map(|(p, k)| (p.to_string(), k.to_string()))
                .collect(),
        )
    }

    fn dirs() -> Vec<String> {
        vec!["/d0".to_string()]
    }

    #[test]
    fn sequential_answers_explained_by_the_tree_pass() {
        let mut h = NsHistory::default();
        let a = h.invoke(0, (1, ROOT_USER), create("/d0/a"), 0);
        h.ret(a, file());
        let s = h.invoke(1, (2, ROOT_USER), stat("/d0/a"), 0);
        h.ret(s, file());
        let v = check(&h, &dirs(), listing(&[("/d0", "dir"), ("/d0/a", "file")]));
        assert_eq!(
            v,
            Verdict::Pass(
                "2 namespace operations (2 answered, 0 open) explained by one serial order ending in the final tree".into()
            )
        );
        assert_eq!(
            check(&NsHistory::default(), &dirs(), None),
            Verdict::Pass("no namespace operations".into())
        );
    }

    #[test]
    fn a_stat_missing_a_file_created_before_it_began_fails() {
        let mut h = NsHistory::default();
        let a = h.invoke(0, (1, ROOT_USER), create("/d0/a"), 0);
        h.ret(a, file());
        let s = h.invoke(1, (2, ROOT_USER), stat("/d0/a"), 2_000_000_000);
        h.ret(s, Err(MetaError::NotFound));
        let v = check(&h, &dirs(), None);
        assert!(v.failed(), "{v:?}");
        assert!(
            v.detail()
                .starts_with("no serial order explains client 1's Stat")
                && v.detail().contains("NotFound")
                && v.detail().contains("2.000000s"),
            "{v:?}"
        );
    }

    #[test]
    fn concurrent_operations_may_take_either_order() {
        // The stat is invoked before the create returns: it may precede it.
        let mut h = NsHistory::default();
        let a = h.invoke(0, (1, ROOT_USER), create("/d0/a"), 0);
        let s = h.invoke(1, (2, ROOT_USER), stat("/d0/a"), 0);
        h.ret(a, file());
        h.ret(s, Err(MetaError::NotFound));
        assert!(matches!(
            check(&h, &dirs(), listing(&[("/d0", "dir"), ("/d0/a", "file")])),
            Verdict::Pass(_)
        ));
    }

    #[test]
    fn open_operations_may_or_may_not_have_taken_effect() {
        let mut h = NsHistory::default();
        let a = h.invoke(0, (1, ROOT_USER), create("/d0/a"), 0);
        // Every retry ended in an unknown commit: the operation stays open.
        h.ret(a, Err(MetaError::Kv(t3fs_core::kv::KvError::CommitUnknown)));
        assert_eq!(h.answered(), 0);
        for end in [
            listing(&[("/d0", "dir")]),
            listing(&[("/d0", "dir"), ("/d0/a", "file")]),
        ] {
            assert!(matches!(check(&h, &dirs(), end), Verdict::Pass(_)));
        }
        // But it cannot have made a directory.
        let v = check(&h, &dirs(), listing(&[("/d0", "dir"), ("/d0/a", "dir")]));
        assert!(
            v.detail().starts_with(
                "every answer is explained, but no serial order ends in the final tree"
            ),
            "{v:?}"
        );
    }

    #[test]
    fn a_final_tree_no_order_reaches_fails() {
        let mut h = NsHistory::default();
        let a = h.invoke(0, (1, ROOT_USER), create("/d0/a"), 0);
        h.ret(a, file());
        // The KV lost the file the create acknowledged.
        let v = check(&h, &dirs(), listing(&[("/d0", "dir")]));
        assert_eq!(
            v,
            Verdict::Fail(
                "every answer is explained, but no serial order ends in the final tree (1 paths)"
                    .into()
            )
        );
    }
}
