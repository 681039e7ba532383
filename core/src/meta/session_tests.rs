//! Closes of write sessions that wrote nothing (`CloseUnwritten`): only the asker's rows go,
//! no inode changes, the transaction conflicts with no namespace change, the file becomes
//! collectable, and bad input closes nothing.

use super::keys::session_range;
use super::tests::{fresh, op, tx};
use super::*;
use crate::ids::ClientId;
use crate::kv::{KvEngine, Txn};
use request::{execute, MetaAnswer, MetaOp};

fn sessions_of(kv: &mut crate::kv::mem::MemKv, inode: &Inode) -> usize {
    transact(kv, |ns| Ok(ns.txn().range(&session_range(inode.id), 8)?))
        .unwrap()
        .len()
}

#[test]
fn an_unwritten_close_removes_only_the_askers_rows_and_changes_no_inode() {
    let mut kv = fresh();
    let f = tx(&mut kv, |ns| ns.create("/f", 0o644, false, Some(10), op(1))).unwrap();
    let g = tx(&mut kv, |ns| ns.create("/g", 0o644, false, Some(11), op(2))).unwrap();
    let other = PathOp {
        client: ClientId(9),
        ..op(3)
    };
    tx(&mut kv, |ns| ns.open("/f", true, 12, other)).unwrap();
    let before = tx(&mut kv, |ns| ns.inode(f.id)).unwrap();
    // Another client's session id 12 named with this client's id is not its row: it stays.
    let sessions = vec![(f.id, 10), (g.id, 11), (f.id, 12)];
    tx(&mut kv, |ns| ns.close_unwritten(&sessions, op(4))).unwrap();
    assert_eq!(
        sessions_of(&mut kv, &f),
        1,
        "the other client's session stays"
    );
    assert_eq!(sessions_of(&mut kv, &g), 0);
    assert_eq!(
        tx(&mut kv, |ns| ns.inode(f.id)).unwrap(),
        before,
        "no inode change"
    );
}

#[test]
fn an_unwritten_close_conflicts_with_no_change_to_its_files() {
    let mut kv = fresh();
    let f = tx(&mut kv, |ns| ns.create("/f", 0o644, false, Some(10), op(1))).unwrap();
    // The close reads at the version before a chmod of its file commits, and still commits.
    let req = {
        let mut t = Txn::new(&mut kv);
        let mut ns = Namespace::new(&mut t);
        let r = execute(
            &mut ns,
            &MetaOp::CloseUnwritten {
                sessions: vec![(f.id, 10)],
            },
            op(2),
        );
        assert_eq!(r, Ok(MetaAnswer::Done));
        t.to_commit_req().unwrap()
    };
    let chmod = SetAttr {
        perm: Some(0o600),
        ..SetAttr::default()
    };
    tx(&mut kv, |ns| ns.setattr("/f", chmod, op(3))).unwrap();
    assert!(
        kv.commit(req).is_ok(),
        "a write-only close does not conflict"
    );
    assert_eq!(sessions_of(&mut kv, &f), 0);
    // Unlinked now, the file is no longer held: GC frees it.
    tx(&mut kv, |ns| ns.remove("/f", false, op(4))).unwrap();
    let policy = GcPolicy {
        batch: 8,
        file_delay: 0,
        respect_sessions: true,
        purge_files: false,
    };
    let s = tx(&mut kv, |ns| ns.gc_step(b"", 200, policy))
        .unwrap()
        .stats;
    assert_eq!((s.freed, s.busy), (1, 0));
}

#[test]
fn too_many_sessions_in_one_close_close_none() {
    let mut kv = fresh();
    let f = tx(&mut kv, |ns| ns.create("/f", 0o644, false, Some(10), op(1))).unwrap();
    let mut sessions = vec![(f.id, 10)];
    sessions.resize(crate::wire::CLOSE_UNWRITTEN_MAX + 1, (f.id, 99));
    let op_ = MetaOp::CloseUnwritten { sessions };
    let r = tx(&mut kv, |ns| execute(ns, &op_, op(2)));
    assert!(matches!(r, Err(MetaError::Invalid(_))), "{r:?}");
    assert_eq!(sessions_of(&mut kv, &f), 1, "nothing closed");
}
