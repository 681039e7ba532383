//! Special files and setgid directories on a real mount, used by real tools (issue 41, items 1
//! and 2): a FIFO made by `mkfifo` carries bytes between two processes, a UNIX socket bound in
//! the mount answers a client, a character device made by `mknod` keeps its major and minor
//! numbers (and, the mount being `nodev` like every FUSE mount, does not open), `ls -l` shows
//! each type, and links, renames and removals treat them like any inode. An unprivileged
//! caller may make FIFOs and sockets but no device (EPERM, as the kernel answers it), a new
//! entry in a setgid directory takes the directory's group, a caller's supplementary groups
//! count for permissions and chgrp, and utimes to now needs only write access.
//!
//! Reproduce: `cargo nextest run -p t3fs --test fuse_special`. Needs /dev/fuse and fusermount3
//! (the README's test command installs them); the unprivileged part needs root to drop from.

mod support;

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::Command;

use support::{become_nobody, become_nobody_in, mount, processes_under, t3fs, NOBODY};

fn sh(dir: &Path, script: &str) -> (bool, String) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .output()
        .expect("sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn fifos_sockets_and_devices_work_through_the_mount_and_setgid_directories_pass_their_group() {
    let Some((tmp, cluster)) = support::fuse_cluster("special") else {
        return;
    };
    let log = tmp.0.join("mount.log");
    let m = mount(&cluster, &tmp.0.join("mnt"), &["--allow-other"], &log);
    let d = m.at.join("sp");
    fs::create_dir(&d).unwrap();
    fifo_carries_bytes(&d);
    socket_answers(&d);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        devices_keep_their_numbers(&d);
        unprivileged_rules(&m.at);
    } else {
        support::skip(
            "root (mknod of devices, acting as another user)",
            "host:root",
        );
    }
    let (ok, ls) = sh(&d, "ls -l");
    assert!(ok, "{ls}");
    for (name, first) in [("pipe", 'p'), ("sock", 's')]
        .into_iter()
        .chain(root.then_some(("null", 'c')))
    {
        let line = ls.lines().find(|l| l.ends_with(&format!(" {name}")));
        assert!(
            line.is_some_and(|l| l.starts_with(first)),
            "ls -l shows {name} as {line:?}, want type {first}:\n{ls}"
        );
    }
    // Links, renames and removal, as for any inode.
    fs::hard_link(d.join("pipe"), d.join("pipe2")).unwrap();
    assert_eq!(fs::symlink_metadata(d.join("pipe")).unwrap().nlink(), 2);
    fs::rename(d.join("pipe2"), d.join("sock")).unwrap();
    let (ok, kind) = sh(&d, "stat -c %F sock");
    assert!(ok && kind.trim() == "fifo", "{kind}");
    fs::remove_file(d.join("sock")).unwrap();
    fs::remove_file(d.join("pipe")).unwrap();
    assert!(fs::symlink_metadata(d.join("pipe")).is_err());
    drop(m);
    let cs = cluster.to_string_lossy().to_string();
    let (ok, text) = t3fs(&["cluster", "down", "--dir", &cs], &tmp.0);
    assert!(ok, "{text}");
    assert!(processes_under(&tmp.0).is_empty(), "processes left");
}

/// `mkfifo` in the mount, then a writer process and this reader meet in it.
fn fifo_carries_bytes(d: &Path) {
    let (ok, text) = sh(d, "mkfifo -m 640 pipe && stat -c '%F %a' pipe");
    assert!(ok, "{text}");
    assert_eq!(text.trim(), "fifo 640");
    let writer = Command::new("sh")
        .arg("-c")
        .arg("printf 'through the mount' > pipe")
        .current_dir(d)
        .spawn()
        .unwrap();
    let mut got = String::new();
    fs::File::open(d.join("pipe"))
        .unwrap()
        .read_to_string(&mut got)
        .unwrap();
    assert_eq!(got, "through the mount");
    assert!(writer.wait_with_output().unwrap().status.success());
}

/// A listener bound at a path in the mount answers a client that connects by that path.
fn socket_answers(d: &Path) {
    let at = d.join("sock");
    let listener = UnixListener::bind(&at).unwrap();
    let (ok, kind) = sh(d, "stat -c %F sock");
    assert!(ok && kind.trim() == "socket", "{kind}");
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).unwrap();
        s.write_all(&buf.map(|b| b.to_ascii_uppercase())).unwrap();
    });
    let mut c = UnixStream::connect(&at).unwrap();
    c.write_all(b"ping").unwrap();
    let mut back = [0u8; 4];
    c.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"PING");
    server.join().unwrap();
    // Binding again where the inode stays is refused, as on any file system.
    assert_eq!(
        UnixListener::bind(&at).err().and_then(|e| e.raw_os_error()),
        Some(libc::EADDRINUSE)
    );
}

/// `mknod c 1 3` keeps its numbers; opening it fails, as FUSE mounts are `nodev`.
fn devices_keep_their_numbers(d: &Path) {
    let (ok, text) = sh(d, "mknod -m 666 null c 1 3 && stat -c '%F %t %T %a' null");
    assert!(ok, "{text}");
    assert_eq!(text.trim(), "character special file 1 3 666");
    let rdev = fs::symlink_metadata(d.join("null")).unwrap().rdev();
    assert_eq!((libc::major(rdev), libc::minor(rdev)), (1, 3));
    let (ok, text) = sh(d, "mknod blk b 7 1 && stat -c '%F %t %T' blk && rm blk");
    assert!(ok, "{text}");
    assert_eq!(text.trim(), "block special file 7 1");
    assert!(
        fs::File::open(d.join("null")).is_err(),
        "a nodev mount opened a device"
    );
}

/// As nobody: a FIFO is fine, a device is EPERM; in a setgid directory of another group, new
/// entries take its group and a new directory is setgid too.
fn unprivileged_rules(mnt: &Path) {
    let open = mnt.join("open");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
    let shared = mnt.join("shared");
    fs::create_dir(&shared).unwrap();
    std::os::unix::fs::chown(&shared, None, Some(4242)).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o2777)).unwrap();
    std::thread::spawn(move || {
        become_nobody();
        let c = |p: &Path, kind: u32| {
            let s = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: `s` is a valid NUL-terminated path that outlives the call.
            let rc = unsafe { libc::mknod(s.as_ptr(), kind | 0o644, libc::makedev(1, 3)) };
            (rc == 0)
                .then_some(())
                .ok_or_else(|| std::io::Error::last_os_error().raw_os_error())
        };
        assert_eq!(c(&open.join("f"), libc::S_IFIFO), Ok(()));
        assert_eq!(c(&open.join("dev"), libc::S_IFCHR), Err(Some(libc::EPERM)));
        assert_eq!(c(&open.join("f"), libc::S_IFCHR), Err(Some(libc::EEXIST)));
        let f = fs::symlink_metadata(open.join("f")).unwrap();
        assert_eq!((f.uid(), f.gid()), (NOBODY, NOBODY));
        fs::write(shared.join("file"), b"x").unwrap();
        fs::create_dir(shared.join("sub")).unwrap();
        let file = fs::metadata(shared.join("file")).unwrap();
        let sub = fs::metadata(shared.join("sub")).unwrap();
        assert_eq!(
            (file.uid(), file.gid()),
            (NOBODY, 4242),
            "file in a setgid dir"
        );
        assert_eq!(sub.gid(), 4242, "directory in a setgid dir");
        assert_eq!(
            sub.mode() & 0o2000,
            0o2000,
            "a new directory there is setgid"
        );
    })
    .join()
    .unwrap_or_else(|e| std::panic::resume_unwind(e));
    supplementary_groups(mnt);
}

/// As nobody in supplementary group 4242 (the mount reads it from /proc): the group class of
/// a 4242 directory, chgrp of its own file to 4242 but not to 4243, and utimes to now of a
/// file it may write but does not own (not to an explicit time).
fn supplementary_groups(mnt: &Path) {
    let team = mnt.join("team");
    fs::create_dir(&team).unwrap();
    std::os::unix::fs::chown(&team, None, Some(4242)).unwrap();
    fs::set_permissions(&team, fs::Permissions::from_mode(0o770)).unwrap();
    let shared = mnt.join("writable");
    fs::write(&shared, b"x").unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o666)).unwrap();
    let mnt = mnt.to_path_buf();
    std::thread::spawn(move || {
        become_nobody_in(&[4242]);
        let mine = team.join("mine");
        fs::write(&mine, b"ok").expect("the group class lets a member of 4242 write in it");
        std::os::unix::fs::chown(&mine, None, Some(4242)).unwrap();
        assert_eq!(fs::metadata(&mine).unwrap().gid(), 4242);
        let err = std::os::unix::fs::chown(&mine, None, Some(4243)).unwrap_err();
        assert_eq!(
            err.raw_os_error(),
            Some(libc::EPERM),
            "chgrp to a group not mine"
        );
        let f = fs::File::options().write(true).open(&shared).unwrap();
        f.set_modified(std::time::SystemTime::UNIX_EPOCH)
            .expect_err("explicit times need the owner");
        // utimensat(path, NULL): this thread's call (a child process would exec as root).
        let c = std::ffi::CString::new(mnt.join("writable").as_os_str().as_encoded_bytes());
        let c = c.unwrap();
        // SAFETY: `c` is a valid NUL-terminated path; a null `times` means now.
        let rc = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), std::ptr::null(), 0) };
        assert_eq!(
            rc,
            0,
            "utimes to now by a writer: {}",
            std::io::Error::last_os_error()
        );
    })
    .join()
    .unwrap_or_else(|e| std::panic::resume_unwind(e));
}
