//! setattr's rules against the in-memory KV: a final symlink changed itself with `nofollow`,
//! what a writer who is not the owner may change (setuid/setgid dropped, times to now), and
//! utimensat's times (explicit with nanoseconds, to now, omitted). Helpers come from
//! `tests.rs`.

use super::tests::{fresh, op, tx};
use super::*;
use crate::kv::mem::MemKv;

#[test]
fn nofollow_changes_the_link_and_a_writer_may_only_drop_setuid_and_setgid() {
    let mut kv = fresh();
    let nobody = perm::User::new(65534, 65534);
    tx(&mut kv, |ns| ns.create("/f", 0o6777, true, None, op(1))).unwrap();
    tx(&mut kv, |ns| ns.symlink("/l", "/f", op(2))).unwrap();
    let lchown = SetAttr {
        uid: Some(65534),
        gid: Some(65534),
        nofollow: true,
        ..Default::default()
    };
    tx(&mut kv, |ns| ns.setattr("/l", lchown, op(3))).unwrap();
    let link = tx(&mut kv, |ns| ns.stat("/l", false)).unwrap();
    let file = tx(&mut kv, |ns| ns.stat("/f", false)).unwrap();
    assert_eq!(
        (link.uid, link.gid),
        (65534, 65534),
        "lchown changes the link"
    );
    assert_eq!(
        (file.uid, file.gid, file.perm),
        (0, 0, 0o6777),
        "not its target"
    );
    // The kernel clears setuid/setgid for a writer who is not the owner with a setattr of the
    // mode: allowed to anyone who may write, and nothing else is.
    let as_nobody = |kv: &mut MemKv, perm: u32| {
        let set = SetAttr {
            perm: Some(perm),
            ..Default::default()
        };
        tx(kv, |ns| {
            ns.set_user(nobody);
            ns.setattr("/f", set, op(4)).map(|i| i.perm)
        })
    };
    // Outside the file's group, setgid goes with it (as any chmod by one outside the group).
    assert_eq!(as_nobody(&mut kv, 0o2777), Ok(0o777), "setuid dropped");
    assert_eq!(
        as_nobody(&mut kv, 0o777),
        Err(MetaError::NotPermitted),
        "no change"
    );
    assert_eq!(as_nobody(&mut kv, 0o755), Err(MetaError::NotPermitted));
    let set = SetAttr {
        perm: Some(0o4600),
        ..Default::default()
    };
    tx(&mut kv, |ns| ns.setattr("/f", set, op(5))).unwrap();
    assert_eq!(
        as_nobody(&mut kv, 0o600),
        Err(MetaError::Access),
        "no write access"
    );
}

#[test]
fn utimensat_sets_each_time_explicitly_to_now_or_not_at_all() {
    let mut kv = fresh();
    tx(&mut kv, |ns| ns.mkdirs("/t", 0o777, false, op(1))).unwrap();
    let alice = perm::User::new(1000, 1000);
    let bob = perm::User::new(1001, 1001);
    let set = |kv: &mut MemKv, u: perm::User, attr: SetAttr, at: u64| {
        tx(kv, |ns| {
            ns.set_user(u);
            ns.setattr("/t/f", attr, op(at))
        })
    };
    tx(&mut kv, |ns| {
        ns.set_user(alice);
        ns.create("/t/f", 0o666, true, None, op(2))
    })
    .unwrap();
    // Explicit times with nanoseconds, each on its own (UTIME_OMIT leaves the other).
    let atime = SetAttr {
        atime: Some(1_900_000_000),
        atime_ns: 100,
        ..Default::default()
    };
    let i = set(&mut kv, alice, atime, 10).unwrap();
    assert_eq!(
        (i.atime, i.atime_ns, i.mtime, i.ctime),
        (1_900_000_000, 100, 102, 110)
    );
    let mtime = SetAttr {
        mtime: Some(1_950_000_000),
        mtime_ns: 200,
        ..Default::default()
    };
    let i = set(&mut kv, alice, mtime, 11).unwrap();
    assert_eq!(
        (i.atime, i.mtime, i.mtime_ns),
        (1_900_000_000, 1_950_000_000, 200)
    );
    // Explicit times are the owner's; to now, anyone's who may write (bob may: mode 0666).
    assert_eq!(set(&mut kv, bob, atime, 12), Err(MetaError::NotPermitted));
    let now = SetAttr {
        atime_now: true,
        touch: true,
        ..Default::default()
    };
    let i = set(&mut kv, bob, now, 13).unwrap();
    assert_eq!((i.atime, i.atime_ns, i.mtime, i.mtime_ns), (113, 0, 113, 0));
    // The server's own stamps clear the nanoseconds it does not have.
    set(&mut kv, alice, mtime, 14).unwrap();
    tx(&mut kv, |ns| ns.hardlink("/t/f", "/t/g", op(15))).unwrap();
    let f = tx(&mut kv, |ns| ns.stat("/t/f", false)).unwrap();
    assert_eq!(
        (f.mtime, f.mtime_ns, f.ctime),
        (1_950_000_000, 200, 115),
        "a link moves ctime"
    );
    let d = tx(&mut kv, |ns| ns.stat("/t", false)).unwrap();
    assert_eq!((d.mtime, d.mtime_ns, d.ctime), (115, 0, 115));
}
