//! Inode resolution through the requests, over the in-memory client: lookup counts and
//! forget, ESTALE for an inode another client moved or replaced (and the next lookup finding
//! it again), entries of a directory another client moved reached in that directory (paths
//! anchored at its inode), renames and removals through the mount moving or dropping cached
//! names, and an open but unlinked file answered from its handle.

use fuser::RenameFlags;
use t3fs_core::meta::SetAttr;

use super::inner::lock;
use super::mount_client::MountClient;
use super::names::id_of;
use super::test_mount::{code, mount, n, ROOT};

#[test]
fn each_entry_handed_out_is_a_lookup_and_forget_drops_the_inode_at_none_left() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        // create counted one; two lookups more.
        let f = m.file(ROOT, "f", b"abc").await.ino;
        assert_eq!(s.lookup(ROOT, n("f")).await.unwrap().ino, f);
        assert_eq!(s.lookup(ROOT, n("f")).await.unwrap().size, 3);
        assert_eq!(lock(&s.names).lookups(f), 3);
        s.forget(f, 2);
        assert_eq!(s.stat(f).await.unwrap().ino, f, "still held once");
        s.forget(f, 1);
        assert_eq!(lock(&s.names).lookups(f), 0);
        // The kernel never asks about an inode it forgot; if it did, meta still has it (the
        // number is the inode id: with no name known, the request goes by the inode).
        assert_eq!(s.stat(f).await.unwrap().size, 3);
        // A failed lookup counts nothing.
        assert!(s.lookup(ROOT, n("nope")).await.is_err());
        assert_eq!(lock(&s.names).len(), 1, "only the root");
        s.forget(ROOT, 9);
        assert_eq!(
            s.stat(ROOT).await.unwrap().ino,
            ROOT,
            "the root is never forgotten"
        );
    });
}

#[test]
fn an_inode_another_client_renamed_is_stale_until_looked_up_at_its_new_name() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let f = m.file(ROOT, "a", b"abc").await.ino;
        m.client().rename("/a", "/b").await.unwrap();
        assert_eq!(code(s.stat(f).await).err(), Some(libc::ESTALE));
        assert_eq!(code(s.readlink(f).await), Err(libc::ESTALE));
        assert_eq!(code(s.open_ino(f, false, false).await), Err(libc::ESTALE));
        // The kernel looks the caller's path up again (LOOKUP_REVAL) and retries.
        assert_eq!(s.lookup(ROOT, n("b")).await.unwrap().ino, f);
        assert_eq!(s.stat(f).await.unwrap().size, 3);
        assert_eq!(code(s.lookup(ROOT, n("a")).await).err(), Some(libc::ENOENT));
    });
}

#[test]
fn a_name_another_client_replaced_is_stale_for_the_old_inode_and_opens_nothing_of_the_new() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let old = m.file(ROOT, "f", b"old").await.ino;
        let c = m.client();
        c.remove("/f").await.unwrap();
        c.create_file("/f", 0o644, true).await.unwrap();
        assert_eq!(code(s.stat(old).await).err(), Some(libc::ESTALE));
        // An open of the old inode finds the new one at its path: ESTALE, and the write
        // session meta opened for it is closed again.
        assert_eq!(code(s.open_ino(old, true, false).await), Err(libc::ESTALE));
        assert_eq!(c.open_sessions(), 0);
        let chmod = SetAttr {
            perm: Some(0o600),
            ..SetAttr::default()
        };
        let r = s.setattr(old, None, None, chmod).await;
        assert_eq!(code(r).err(), Some(libc::ESTALE));
        // A truncate of the old inode touches nothing of the new one.
        let r = s.setattr(old, None, Some(0), SetAttr::default()).await;
        assert_eq!(code(r).err(), Some(libc::ESTALE));
        assert_eq!(c.open_sessions(), 0);
        let new = s.lookup(ROOT, n("f")).await.unwrap();
        assert_ne!(new.ino, old);
        assert_eq!((new.size, new.perm), (0, 0o644));
        assert_eq!(
            code(s.stat(old).await).err(),
            Some(libc::ESTALE),
            "f is the new one's"
        );
    });
}

#[test]
fn requests_in_a_directory_another_client_moved_go_to_that_directory() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let d = m.dir(ROOT, "d").await.ino;
        m.file(d, "x", b"").await;
        m.client().rename("/d", "/e").await.unwrap();
        m.client().mkdir_mode("/d", 0o755).await.unwrap();
        // /d is another directory now. d itself is stale by its old name (the kernel looks
        // it up again), but what is looked up, made or removed in d is in d, which is /e,
        // never in the new /d.
        assert_eq!(code(s.stat(d).await).err(), Some(libc::ESTALE));
        assert_eq!(s.lookup(d, n("x")).await.map(|a| a.size).ok(), Some(0));
        s.mkdir(d, n("y"), 0o755).await.unwrap();
        s.create(d, n("z"), 0o644, true, false).await.unwrap();
        assert_eq!(code(s.remove(d, n("x")).await), Ok(()));
        let listed = m.client().list_after("/d", Vec::new(), 10).await.unwrap();
        assert!(listed.is_empty(), "nothing was made in the new /d");
        let listed = m.client().list_after("/e", Vec::new(), 10).await.unwrap();
        let names: Vec<&[u8]> = listed.iter().map(|(n, _)| n.as_slice()).collect();
        assert_eq!(names, [&b"y"[..], b"z"]);
        assert_eq!(s.lookup(ROOT, n("e")).await.unwrap().ino, d);
        assert_eq!(s.stat(d).await.unwrap().ino, d, "found at its new name");
        // Removed by another client, nothing is made in it.
        for p in ["/e/y", "/e/z", "/e"] {
            m.client().remove(p).await.unwrap();
        }
        assert_eq!(code(s.stat(d).await).err(), Some(libc::ESTALE));
        let made = s.create(d, n("w"), 0o644, true, false).await;
        assert_eq!(code(made).err(), Some(libc::ENOENT));
    });
}

#[test]
fn a_rename_through_the_mount_moves_the_subtree_and_unnames_what_it_replaced() {
    let m = mount();
    let s = &m.s;
    let plain = RenameFlags::empty();
    m.run(async {
        let d = m.dir(ROOT, "d").await.ino;
        let x = m.file(d, "x", b"12").await.ino;
        let target = m.file(ROOT, "t", b"").await.ino;
        assert_eq!(
            code(s.rename((ROOT, n("d")), (ROOT, n("e")), plain).await),
            Ok(())
        );
        // Everything under d moved with it, with no lookup.
        assert_eq!(
            lock(&s.names).path(x).map_err(|e| e.code()),
            Ok("/e/x".into())
        );
        assert_eq!(s.stat(x).await.unwrap().size, 2);
        // Over an existing name: the replaced inode has no name here any more.
        assert_eq!(
            code(s.rename((d, n("x")), (ROOT, n("t")), plain).await),
            Ok(())
        );
        assert_eq!(s.stat(x).await.unwrap().ino, x);
        assert_eq!(code(s.stat(target).await).err(), Some(libc::ESTALE));
        assert_eq!(
            lock(&s.names).path(x).map_err(|e| e.code()),
            Ok("/t".into())
        );
    });
}

#[test]
fn an_unlinked_file_open_here_is_answered_from_its_handle_until_released() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let (fh, a) = m.created(ROOT, "f").await;
        assert_eq!(m.write(fh, 0, b"hello").await, Ok(5));
        assert_eq!(s.link(a.ino, ROOT, n("g")).await.unwrap().nlink, 2);
        assert_eq!(code(s.remove(ROOT, n("f")).await), Ok(()));
        assert_eq!(s.stat(a.ino).await.unwrap().nlink, 1, "g still names it");
        // Replaced by a rename: no name left. No path: the handle's inode, its size this
        // mount's accepted writes, its links none.
        let (h, _) = m.created(ROOT, "h").await;
        assert_eq!(m.release(h).await, Ok(()));
        assert_eq!(
            code(
                s.rename((ROOT, n("h")), (ROOT, n("g")), RenameFlags::empty())
                    .await
            ),
            Ok(())
        );
        let st = s.stat(a.ino).await.unwrap();
        assert_eq!((st.ino, st.size, st.nlink), (a.ino, 5, 0));
        // Its writes and reads still go to the inode.
        assert_eq!(m.read(fh, 0, 10).await, Ok(b"hello".to_vec()));
        assert_eq!(m.flush(fh).await, Ok(()));
        assert_eq!(m.client().bytes(id_of(a.ino)), b"hello");
        assert_eq!(m.release(fh).await, Ok(()));
        assert_eq!(code(s.stat(a.ino).await).err(), Some(libc::ESTALE));
        // h's session, unwritten, waits for company (unwritten_closes.rs), and so does fh's:
        // its flush told meta of its writes, so its close has nothing left to report.
        assert_eq!(m.client().open_sessions(), 2);
        s.send_unwritten().await;
        assert_eq!(m.client().open_sessions(), 0);
    });
}
