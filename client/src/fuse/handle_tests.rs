//! Open handles through the requests, over the in-memory client: the handle table (handles
//! are independent, a release closes only its own, a second release and a released handle),
//! write-behind behind the file system (overlapping writes land in order, a read sees the
//! writes before it, flush and fsync wait for them and report a failure once), readahead
//! forgotten on writes and truncates, and truncates through a handle or a session of their
//! own.

use std::sync::Arc;

use t3fs_core::meta::{InodeKind, SetAttr};

use super::mount_client::MountClient;
use super::names::id_of;
use super::test_mount::{code, mount, mount_with, run_tasks, ROOT};
use super::MountOptions;
use crate::client::ClientError;

/// Meta's (length, truncate version) of the file at `path`.
async fn meta_length(c: &impl MountClient, path: &str) -> (u64, u64) {
    match c.lstat(path).await.unwrap().kind {
        InodeKind::File {
            length,
            truncate_ver,
            ..
        } => (length, truncate_ver),
        k => panic!("{path} is {k:?}"),
    }
}

#[test]
fn handles_are_independent_and_a_release_closes_only_its_own() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let f = m.file(ROOT, "f", b"0123456789").await.ino;
        let w = s.open_ino(f, true, false).await.unwrap();
        let r = s.open_ino(f, false, false).await.unwrap();
        assert_ne!(w, r);
        assert_eq!(
            m.client().open_sessions(),
            1,
            "a read-only open has no session"
        );
        assert_eq!(m.write(w, 0, b"ab").await, Ok(2));
        assert_eq!(m.release(w).await, Ok(()));
        assert_eq!(m.client().open_sessions(), 0);
        // The other handle reads on, and sees what the released one wrote.
        assert_eq!(m.read(r, 0, 4).await, Ok(b"ab23".to_vec()));
        // A released handle is gone: reads, writes and fsync answer EBADF, flush and a
        // second release nothing.
        assert_eq!(m.read(w, 0, 4).await, Err(libc::EBADF));
        assert_eq!(m.write(w, 0, b"x").await, Err(libc::EBADF));
        assert_eq!(code(s.fsync(s.handle(w)).await), Err(libc::EBADF));
        assert_eq!(m.flush(w).await, Ok(()));
        assert_eq!(m.release(w).await, Ok(()));
        assert_eq!(m.read(r, 4, 4).await, Ok(b"4567".to_vec()));
        assert_eq!(m.release(r).await, Ok(()));
        assert_eq!(m.client().bytes(id_of(f)), b"ab23456789");
    });
}

#[test]
fn overlapping_writes_land_in_order_and_flush_returns_once_they_did() {
    let m = mount();
    let s = Arc::clone(&m.s);
    m.run(async {
        let (fh, a) = m.created(ROOT, "f").await;
        m.client().hold(true);
        assert_eq!(m.write(fh, 0, b"AAAA").await, Ok(4), "accepted, not landed");
        assert_eq!(m.write(fh, 2, b"BBBB").await, Ok(4));
        assert_eq!(m.write(fh, 20, b"CC").await, Ok(2));
        // The size this mount reports has them; meta does not yet.
        assert_eq!(s.stat(a.ino).await.unwrap().size, 22);
        let flushing = tokio::spawn({
            let s = s.clone();
            let held = s.handle(fh);
            async move { code(s.flush(held).await) }
        });
        run_tasks().await;
        assert!(
            !flushing.is_finished(),
            "flush waits for the writes to land"
        );
        assert!(m.client().bytes(id_of(a.ino)).is_empty());
        m.client().hold(false);
        assert_eq!(flushing.await.unwrap(), Ok(()));
        let mut want = b"AABBBB".to_vec();
        want.resize(20, 0);
        want.extend_from_slice(b"CC");
        assert_eq!(m.client().bytes(id_of(a.ino)), want, "B landed after A");
        assert_eq!(meta_length(m.client(), "/f").await, (22, 0));
        assert_eq!(m.release(fh).await, Ok(()));
    });
}

#[test]
fn a_read_sees_every_write_before_it_without_a_flush() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let f = m.file(ROOT, "f", b"0123456789").await.ino;
        let w = s.open_ino(f, true, false).await.unwrap();
        let r = s.open_ino(f, false, false).await.unwrap();
        assert_eq!(m.write(w, 8, b"xyz!").await, Ok(4));
        assert_eq!(
            m.read(r, 6, 10).await,
            Ok(b"67xyz!".to_vec()),
            "past meta's length"
        );
        assert_eq!(
            m.read(r, 12, 10).await,
            Ok(Vec::new()),
            "at the end: nothing"
        );
        assert_eq!(meta_length(m.client(), "/f").await, (10, 0));
        assert_eq!(m.release(w).await, Ok(()));
        assert_eq!(
            meta_length(m.client(), "/f").await,
            (12, 0),
            "release's hint"
        );
        assert_eq!(m.release(r).await, Ok(()));
    });
}

#[test]
fn writes_and_truncates_forget_the_readahead_of_every_handle_of_the_file() {
    let m = mount();
    let s = &m.s;
    let data: Vec<u8> = (0..64).collect();
    m.run(async {
        let f = m.file(ROOT, "f", &data).await.ino;
        let r = s.open_ino(f, false, false).await.unwrap();
        assert_eq!(m.read(r, 0, 4).await, Ok(data[..4].to_vec()));
        run_tasks().await;
        let reads = m.client().reads(id_of(f));
        assert_eq!(
            reads,
            [(0, 16), (16, 16), (32, 16)],
            "units ahead of the reader"
        );
        assert_eq!(m.read(r, 4, 4).await, Ok(data[4..8].to_vec()));
        assert_eq!(m.client().reads(id_of(f)).len(), 3, "answered from a unit");
        // Another handle writes into what the units hold: the reader sees it.
        let w = s.open_ino(f, true, false).await.unwrap();
        assert_eq!(m.write(w, 8, b"new!").await, Ok(4));
        assert_eq!(m.read(r, 8, 4).await, Ok(b"new!".to_vec()));
        // And a truncate (through another session) as well.
        let cut = s
            .setattr(f, None, Some(10), SetAttr::default())
            .await
            .unwrap();
        assert_eq!(cut.size, 10);
        assert_eq!(m.read(r, 12, 4).await, Ok(Vec::new()), "past the new end");
        assert_eq!(m.read(r, 6, 8).await, Ok(vec![6, 7, b'n', b'e']));
        // Extended again: zeros where the units the reader has held bytes.
        s.setattr(f, Some(w), Some(14), SetAttr::default())
            .await
            .unwrap();
        assert_eq!(m.read(r, 8, 6).await, Ok(vec![b'n', b'e', 0, 0, 0, 0]));
        assert_eq!(m.release(w).await, Ok(()));
        assert_eq!(m.release(r).await, Ok(()));
    });
}

#[test]
fn fsync_reports_a_failed_write_once_and_release_hints_only_what_landed() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let (fh, _) = m.created(ROOT, "f").await;
        assert_eq!(m.write(fh, 0, b"first").await, Ok(5));
        assert_eq!(code(s.fsync(s.handle(fh)).await), Ok(()));
        m.client()
            .fail_next("write", ClientError::Failed("chain down".into()));
        assert_eq!(m.write(fh, 16, b"lost").await, Ok(4));
        assert_eq!(code(s.fsync(s.handle(fh)).await), Err(libc::EIO));
        assert_eq!(code(s.fsync(s.handle(fh)).await), Ok(()), "reported once");
        assert_eq!(m.release(fh).await, Ok(()));
        assert_eq!(meta_length(m.client(), "/f").await, (5, 0));
    });
}

#[test]
fn without_a_window_a_write_is_answered_only_after_it_landed() {
    let m = mount_with(MountOptions {
        write_window: 0,
        ..MountOptions::default()
    });
    let s = Arc::clone(&m.s);
    m.run(async {
        let (fh, _) = m.created(ROOT, "f").await;
        m.client().hold(true);
        let writing = tokio::spawn({
            let s = s.clone();
            let held = s.handle(fh);
            async move { code(s.write(held, 0, b"sync".to_vec(), false).await) }
        });
        run_tasks().await;
        assert!(!writing.is_finished());
        m.client().hold(false);
        assert_eq!(writing.await.unwrap(), Ok(4));
        m.client().fail_next("write", ClientError::NoSpace);
        assert_eq!(
            m.write(fh, 4, b"x").await,
            Err(libc::ENOSPC),
            "at the write itself"
        );
        assert_eq!(m.release(fh).await, Ok(()));
        assert_eq!(meta_length(m.client(), "/f").await, (4, 0));
    });
}

#[test]
fn o_trunc_and_truncate_cut_the_file_and_later_writes_count_from_the_new_version() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let f = m.file(ROOT, "f", &[7; 40]).await.ino;
        // O_TRUNC: cut at open; the writes after it are the file.
        let w = s.open_ino(f, true, true).await.unwrap();
        assert_eq!(s.stat(f).await.unwrap().size, 0);
        assert_eq!(meta_length(m.client(), "/f").await, (0, 1));
        assert_eq!(m.write(w, 0, b"abc").await, Ok(3));
        assert_eq!(m.release(w).await, Ok(()));
        assert_eq!(meta_length(m.client(), "/f").await, (3, 1));
        // ftruncate through an open write handle: zero-extended, its hint from the new
        // version on.
        let w = s.open_ino(f, true, false).await.unwrap();
        let a = s
            .setattr(f, Some(w), Some(20), SetAttr::default())
            .await
            .unwrap();
        assert_eq!(a.size, 20);
        assert_eq!(meta_length(m.client(), "/f").await, (20, 2));
        assert_eq!(m.write(w, 20, b"de").await, Ok(2));
        assert_eq!(m.release(w).await, Ok(()));
        assert_eq!(meta_length(m.client(), "/f").await, (22, 2));
        let mut want = b"abc".to_vec();
        want.resize(20, 0);
        want.extend_from_slice(b"de");
        assert_eq!(m.client().bytes(id_of(f)), want);
        // truncate(2) with nothing open: a session of its own, closed after.
        let a = s
            .setattr(f, None, Some(1), SetAttr::default())
            .await
            .unwrap();
        assert_eq!(a.size, 1);
        assert_eq!(m.client().open_sessions(), 0);
        assert_eq!(m.client().bytes(id_of(f)), b"a");
    });
}

#[test]
fn writes_move_mtime_and_ctime_once_reported_and_a_close_after_flush_asks_nothing_more() {
    let m = mount();
    let s = &m.s;
    m.run(async {
        let f = m.file(ROOT, "f", b"0123456789").await.ino;
        let was = times(m.client(), "/f").await;
        // A write inside the file: flush tells meta (one request), which moves both times;
        // the release then has nothing to report, so its close waits with others.
        let w = s.open_ino(f, true, false).await.unwrap();
        assert_eq!(m.write(w, 2, b"ab").await, Ok(2));
        let asked = m.client().requests();
        assert_eq!(m.flush(w).await, Ok(()));
        assert_eq!(m.client().requests(), asked + 1, "flush's sync");
        assert_eq!(m.flush(w).await, Ok(()));
        assert_eq!(m.release(w).await, Ok(()));
        assert_eq!(
            m.client().requests(),
            asked + 1,
            "a second flush and the release"
        );
        let (mtime, ctime) = times(m.client(), "/f").await;
        assert!(
            mtime > was.0 && ctime > was.1,
            "{was:?} -> {mtime}, {ctime}"
        );
        assert_eq!(meta_length(m.client(), "/f").await.0, 10);
        s.send_unwritten().await;
        assert_eq!(m.client().open_sessions(), 0);
        // A setattr of nothing (chown(f, -1, -1)) moves ctime only.
        let was = times(m.client(), "/f").await;
        s.setattr(f, None, None, SetAttr::default()).await.unwrap();
        let now = times(m.client(), "/f").await;
        assert!(now.0 == was.0 && now.1 > was.1, "{was:?} -> {now:?}");
        // O_TRUNC of a file already empty cuts nothing and still moves both.
        let e = m.file(ROOT, "e", b"").await.ino;
        let was = times(m.client(), "/e").await;
        let h = s.open_ino(e, true, true).await.unwrap();
        let now = times(m.client(), "/e").await;
        assert!(now.0 > was.0 && now.1 > was.1, "{was:?} -> {now:?}");
        assert_eq!(m.release(h).await, Ok(()));
    });
}

/// Meta's (mtime, ctime) of the file at `path`.
async fn times(c: &impl MountClient, path: &str) -> (u64, u64) {
    let i = c.lstat(path).await.unwrap();
    (i.mtime, i.ctime)
}
