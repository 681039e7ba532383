//! The namespace requests over the in-memory client, without a cluster or `/dev/fuse`: the
//! errno each client failure reaches the kernel as (through the requests, not just the table
//! of errno.rs), acting for the caller, setattr, statfs, and directory listings (readdir's
//! offsets and paging, readdirplus's attributes and what it leaves out).

use fuser::{FileType, INodeNo, RenameFlags};
use t3fs_core::meta::perm::User;
use t3fs_core::meta::request::FsStat;
use t3fs_core::meta::{MetaError, SetAttr};

use super::attr::BLKSIZE;
use super::dir_handles::dir_entries;
use super::mount_client::MountClient;
use super::names::ino_of;
use super::ns_requests::perm_of;
use super::test_mount::{as_user, code, mount, n, ALICE, ROOT};
use crate::client::ClientError;

#[test]
fn namespace_statuses_reach_the_kernel_as_a_local_file_system_answers_them() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let f = m.file(ROOT, "f", b"x").await.ino;
        let d = m.dir(ROOT, "d").await.ino;
        m.dir(d, "sub").await;
        assert_eq!(
            code(s.lookup(ROOT, n("nope")).await).err(),
            Some(libc::ENOENT)
        );
        assert_eq!(code(s.lookup(f, n("x")).await).err(), Some(libc::ENOTDIR));
        assert_eq!(
            code(s.mkdir(ROOT, n("d"), 0o755).await).err(),
            Some(libc::EEXIST)
        );
        let excl = s.create(ROOT, n("f"), 0o644, true, false).await;
        assert_eq!(code(excl).err(), Some(libc::EEXIST));
        assert_eq!(code(s.remove(ROOT, n("d")).await), Err(libc::ENOTEMPTY));
        assert_eq!(code(s.open_ino(d, true, false).await), Err(libc::EISDIR));
        assert_eq!(code(s.readlink(f).await), Err(libc::EINVAL));
        assert_eq!(
            code(s.link(d, ROOT, n("dl")).await).err(),
            Some(libc::EPERM)
        );
        let into_itself = s.rename((ROOT, n("d")), (d, n("in")), RenameFlags::empty());
        assert_eq!(code(into_itself.await), Err(libc::EINVAL));
        let long = "x".repeat(256);
        assert_eq!(
            code(s.lookup(ROOT, n(&long)).await).err(),
            Some(libc::ENAMETOOLONG)
        );
        // Names the kernel never sends: a slash, no name at all.
        assert_eq!(
            code(s.mkdir(ROOT, n("a/b"), 0o755).await).err(),
            Some(libc::EINVAL)
        );
        assert_eq!(
            code(s.symlink(ROOT, n("l"), None).await).err(),
            Some(libc::EINVAL)
        );
    });
}

#[test]
fn permissions_are_the_callers_and_what_it_makes_is_its_own() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let f = m.file(ROOT, "roots", b"r").await.ino;
        // The root directory is root's, mode 0755: the caller may not write in it.
        let denied = as_user(ALICE, s.mkdir(ROOT, n("mine"), 0o755)).await;
        assert_eq!(code(denied).err(), Some(libc::EACCES));
        let chmod = SetAttr {
            perm: Some(0o600),
            ..SetAttr::default()
        };
        let r = as_user(ALICE, s.setattr(f, None, None, chmod)).await;
        assert_eq!(code(r).err(), Some(libc::EPERM), "chmod of another's file");
        // In a directory everyone may write in, the caller's umask applies and it owns what
        // it makes.
        let tmp = s.mkdir(ROOT, n("tmp"), 0o777).await.unwrap().ino;
        let d = as_user(ALICE, s.mkdir(tmp, n("mine"), perm_of(0o777, 0o022))).await;
        let d = d.unwrap();
        assert_eq!((d.uid, d.gid, d.perm), (1000, 1000, 0o755));
        let made = as_user(
            ALICE,
            s.create(tmp, n("f"), perm_of(0o666, 0o077), true, false),
        );
        let (fh, a) = made.await.unwrap();
        assert_eq!((a.uid, a.perm), (1000, 0o600));
        assert_eq!(m.release(fh).await, Ok(()));
        // open(O_CREAT | O_RDWR, 0): the creator's handle writes, as POSIX has it; a second
        // open of the file for write is refused.
        let (fh, a) = as_user(ALICE, s.create(tmp, n("zero"), 0, true, false))
            .await
            .unwrap();
        assert_eq!(a.perm, 0);
        assert_eq!(as_user(ALICE, m.write(fh, 0, b"x")).await, Ok(1));
        assert_eq!(m.release(fh).await, Ok(()));
        let again = as_user(ALICE, s.create(tmp, n("zero"), 0, false, false)).await;
        assert_eq!(code(again.map(|_| ())), Err(libc::EACCES));
        let l = as_user(ALICE, s.symlink(tmp, n("l"), Some("f")))
            .await
            .unwrap();
        assert_eq!((l.uid, l.kind, l.size), (1000, FileType::Symlink, 1));
        // In a sticky directory (as /tmp) only the owner (or root) removes an entry.
        let sticky = s.mkdir(ROOT, n("sticky"), 0o1777).await.unwrap().ino;
        let (fh, _) = as_user(ALICE, s.create(sticky, n("a"), 0o644, true, false))
            .await
            .unwrap();
        assert_eq!(m.release(fh).await, Ok(()));
        let bob = User::new(1001, 1001);
        let r = as_user(bob, s.remove(sticky, n("a"))).await;
        assert_eq!(code(r), Err(libc::EPERM));
        assert_eq!(code(as_user(ALICE, s.remove(sticky, n("a"))).await), Ok(()));
    });
}

#[test]
fn failures_of_the_cluster_are_eio_and_want_of_space_enospc() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let f = m.file(ROOT, "f", b"abc").await.ino;
        m.client().kv_unavailable(true);
        assert_eq!(code(s.lookup(ROOT, n("f")).await).err(), Some(libc::EIO));
        assert_eq!(code(s.stat(f).await).err(), Some(libc::EIO), "never ESTALE");
        m.client().kv_unavailable(false);
        let c = m.client();
        c.fail_next("statfs", ClientError::Failed("no answer".into()));
        assert_eq!(code(s.statfs().await), Err(libc::EIO));
        c.fail_next("mkdir_mode", ClientError::Meta(MetaError::NoLock));
        assert_eq!(
            code(s.mkdir(ROOT, n("d"), 0o755).await).err(),
            Some(libc::EBUSY)
        );
        c.fail_next("lstat", ClientError::Stopped);
        assert_eq!(code(s.stat(f).await).err(), Some(libc::EIO));
        // A remembered path that meta no longer finds is stale, a missing name is not.
        c.fail_next("lstat", ClientError::Meta(MetaError::NotFound));
        assert_eq!(code(s.stat(f).await).err(), Some(libc::ESTALE));
        // Storage without room: the write is accepted, its flush reports ENOSPC.
        let fh = s.open_ino(f, true, false).await.unwrap();
        c.fail_next("write", ClientError::NoSpace);
        assert_eq!(m.write(fh, 0, b"x").await, Ok(1));
        assert_eq!(m.flush(fh).await, Err(libc::ENOSPC));
        assert_eq!(m.release(fh).await, Ok(()));
    });
}

#[test]
fn past_the_largest_file_a_write_is_cut_short_or_efbig_and_a_truncate_efbig() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let (fh, a) = m.created(ROOT, "big").await;
        let max = s.handle(fh).unwrap().0.layout.size_max();
        assert_eq!(m.write(fh, max - 2, b"abcd").await, Ok(2), "short");
        assert_eq!(m.write(fh, max, b"a").await, Err(libc::EFBIG));
        let held = s.handle(fh);
        let cached = s.write(held, max - 1, b"ab".to_vec(), true).await;
        assert_eq!(
            code(cached),
            Err(libc::EFBIG),
            "the writeback cache's short write"
        );
        let r = s
            .setattr(a.ino, None, Some(max + 1), SetAttr::default())
            .await;
        assert_eq!(code(r).err(), Some(libc::EFBIG));
        assert_eq!(m.flush(fh).await, Ok(()));
        assert_eq!(m.release(fh).await, Ok(()));
    });
}

#[test]
fn setattr_changes_what_it_is_asked_and_of_a_symlink_the_link_itself() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let f = m.file(ROOT, "f", b"abc").await.ino;
        let set = SetAttr {
            perm: Some(0o640),
            uid: Some(7),
            gid: Some(8),
            mtime: Some(12345),
            mtime_ns: 6,
            atime: Some(999),
            atime_ns: 7,
            atime_now: false,
            layout: None,
            touch: false,
            nofollow: false,
        };
        let a = s.setattr(f, None, None, set).await.unwrap();
        assert_eq!((a.perm, a.uid, a.gid, a.size), (0o640, 7, 8, 3));
        let at = |s, ns| std::time::UNIX_EPOCH + std::time::Duration::new(s, ns);
        assert_eq!((a.mtime, a.atime), (at(12345, 6), at(999, 7)));
        // Nothing to change: the attributes as they are.
        let same = s.setattr(f, None, None, SetAttr::default()).await.unwrap();
        assert_eq!((same.perm, same.uid), (0o640, 7));
        // The kernel's setattr of a link (lchown, utimensat with AT_SYMLINK_NOFOLLOW) changes
        // the link, never its target.
        let l = s.symlink(ROOT, n("l"), Some("/f")).await.unwrap();
        let lchown = SetAttr {
            uid: Some(65534),
            gid: Some(65533),
            ..SetAttr::default()
        };
        let a = s.setattr(l.ino, None, None, lchown).await.unwrap();
        assert_eq!(
            (a.ino, a.kind, a.uid, a.gid),
            (l.ino, FileType::Symlink, 65534, 65533)
        );
        let target = s.stat(f).await.unwrap();
        assert_eq!((target.uid, target.gid), (7, 8));
        assert_eq!(s.readlink(l.ino).await.unwrap(), b"/f");
    });
}

#[test]
fn statfs_counts_blocks_of_the_reported_block_size() {
    let m = mount();
    m.client().set_space(FsStat {
        capacity: 10 * u64::from(BLKSIZE) + 5,
        used: 4 * u64::from(BLKSIZE),
        free: 6 * u64::from(BLKSIZE) + 5,
    });
    assert_eq!(m.run(m.s.statfs()).unwrap(), (10, 6));
}

#[test]
fn renames_follow_the_flags_and_link_names_the_same_inode() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let a = m.file(ROOT, "a", b"1").await.ino;
        m.file(ROOT, "b", b"2").await;
        let plain = RenameFlags::empty();
        let noreplace = s.rename(
            (ROOT, n("a")),
            (ROOT, n("b")),
            RenameFlags::RENAME_NOREPLACE,
        );
        assert_eq!(code(noreplace.await), Err(libc::EEXIST));
        let exchange = s.rename((ROOT, n("a")), (ROOT, n("b")), RenameFlags::RENAME_EXCHANGE);
        assert_eq!(code(exchange.await), Err(libc::ENOTSUP));
        assert_eq!(
            code(s.rename((ROOT, n("a")), (ROOT, n("c")), plain).await),
            Ok(())
        );
        assert_eq!(s.lookup(ROOT, n("c")).await.unwrap().ino, a);
        let linked = s.link(a, ROOT, n("hard")).await.unwrap();
        assert_eq!((linked.ino, linked.nlink), (a, 2));
        assert_eq!(code(s.remove(ROOT, n("c")).await), Ok(()));
        assert_eq!(s.stat(a).await.unwrap().nlink, 1, "known by its other name");
        let gone = m.client().lstat("/c").await;
        assert_eq!(
            gone.map(|_| ()),
            Err(ClientError::Meta(MetaError::NotFound))
        );
    });
}

#[test]
fn readdir_serves_the_listing_opendir_took_by_offset_across_meta_pages() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let d = m.dir(ROOT, "d").await.ino;
        // More names than one page the mount asks meta for (512).
        for k in 0..520 {
            let f = s
                .create(d, n(&format!("f{k:03}")), 0o644, true, false)
                .await;
            assert_eq!(m.release(f.unwrap().0).await, Ok(()));
        }
        let fh = s.opendir(d).await.unwrap();
        s.create(d, n("later"), 0o644, true, false).await.unwrap();
        let listing = s.dir_listing(fh).unwrap();
        assert_eq!(listing.len(), 520, "the directory as it was at opendir");
        let all: Vec<_> = dir_entries(d, &listing, 0).collect();
        assert_eq!(all.len(), 522);
        assert_eq!(
            all[..2],
            [
                (d, 1, FileType::Directory, "."),
                (d, 2, FileType::Directory, "..")
            ]
        );
        assert_eq!((all[2].1, all[2].3), (3, "f000"));
        // Each entry's offset is where the next call starts: from it on, the rest.
        let from = all[300].1;
        let rest: Vec<_> = dir_entries(d, &listing, from).collect();
        assert_eq!(rest[0], all[301]);
        assert_eq!(rest.len(), 522 - 301);
        assert_eq!(dir_entries(d, &listing, 522).count(), 0);
        s.releasedir(fh);
        assert!(s.dir_listing(fh).is_none());
        s.releasedir(fh); // Twice: nothing happens.
        let moved = m.client().rename("/d", "/e").await;
        assert_eq!(moved, Ok(()));
        assert_eq!(code(s.opendir(d).await), Err(libc::ESTALE));
    });
}

#[test]
fn readdirplus_gives_each_listed_inode_its_attributes_and_leaves_out_what_changed() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let d = m.dir(ROOT, "d").await.ino;
        let f = m.file(d, "f", b"12345").await;
        m.file(d, "gone", b"").await;
        m.file(d, "replaced", b"").await;
        let l = s.symlink(d, n("l"), Some("f")).await.unwrap();
        let sub = m.dir(d, "sub").await;
        let fh = s.opendir(d).await.unwrap();
        let listing = s.dir_listing(fh).unwrap();
        // Another client removes one entry and replaces another after the listing.
        let c = m.client();
        c.remove("/d/gone").await.unwrap();
        c.remove("/d/replaced").await.unwrap();
        c.create_file("/d/replaced", 0o644, true).await.unwrap();
        let page = s.plus_page(d, "/d", &listing, 0).await.unwrap();
        let got: Vec<_> = page
            .iter()
            .map(|(o, name, a, _)| (*o, name.as_str(), a.ino))
            .collect();
        // Listed in name order: f 3, gone 4, l 5, replaced 6, sub 7; gone and replaced (now
        // another inode) are left out.
        let want = [(1, ".", d), (2, "..", d), (3, "f", f.ino), (5, "l", l.ino)];
        assert_eq!(got[..4], want);
        assert_eq!(got[4..], [(7, "sub", sub.ino)]);
        // The link's own attributes (a batch stat would have followed it to f).
        assert_eq!((page[3].2.kind, page[3].2.size), (FileType::Symlink, 1));
        assert_eq!(page[2].2.size, 5);
        // From the offset l carries: the rest, the dots skipped.
        let rest = s.plus_page(d, "/d", &listing, 5).await.unwrap();
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].2.ino, sub.ino);
        assert_eq!(ino_of(t3fs_core::meta::ROOT), INodeNo(1));
    });
}

#[test]
fn lookups_of_absent_names_in_a_directory_this_mount_just_made_ask_no_one() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let d = m.dir(ROOT, "d").await.ino;
        let before = m.client().requests();
        assert_eq!(code(s.lookup(d, n("a")).await).err(), Some(libc::ENOENT));
        assert_eq!(m.client().requests(), before, "answered by the mount");
        // A name made through this mount is found (by meta).
        let (_, a) = m.created(d, "a").await;
        assert_eq!(s.lookup(d, n("a")).await.unwrap().ino, a.ino);
        // A name whose create failed with an unknown outcome may exist: meta is asked.
        let unknown = ClientError::Meta(MetaError::Kv(t3fs_core::kv::KvError::CommitUnknown));
        m.client().fail_next("create_open", unknown);
        assert!(s.create(d, n("b"), 0o644, true, false).await.is_err());
        let before = m.client().requests();
        assert_eq!(code(s.lookup(d, n("b")).await).err(), Some(libc::ENOENT));
        assert_eq!(m.client().requests(), before + 1, "asked meta");
        // Another client's name in it is unseen for the TTL (the documented bound) ...
        m.client().create_file("/d/c", 0o644, true).await.unwrap();
        assert_eq!(code(s.lookup(d, n("c")).await).err(), Some(libc::ENOENT));
        // ... and at once in a directory this mount did not make.
        m.client().mkdir_mode("/e", 0o755).await.unwrap();
        m.client().create_file("/e/c", 0o644, true).await.unwrap();
        let e = s.lookup(ROOT, n("e")).await.unwrap().ino;
        assert!(s.lookup(e, n("c")).await.is_ok());
    });
}

#[test]
fn a_made_directory_whose_ttl_ended_is_listed_once_and_then_shows_other_clients_names() {
    let m = super::test_mount::mount_with(super::MountOptions {
        attr_ttl: std::time::Duration::from_millis(20),
        ..super::MountOptions::default()
    });
    let s = &m.s;
    m.run(async {
        let d = m.dir(ROOT, "d").await.ino;
        m.client().create_file("/d/c", 0o644, true).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(40)).await;
        // The TTL ended: the next lookup lists the directory and answers from the listing.
        let before = m.client().requests();
        assert_eq!(code(s.lookup(d, n("x")).await).err(), Some(libc::ENOENT));
        assert_eq!(m.client().requests() - before, 1, "the listing");
        // It found c, so c's lookup asks meta.
        assert!(s.lookup(d, n("c")).await.is_ok());
        assert_eq!(m.client().requests() - before, 2);
    });
}
