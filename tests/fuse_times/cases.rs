//! The cases of `fuse_times.rs`: what root prepares in each case's directory, the one call,
//! and the paths watched. Each setup builds only from root's own calls, so it is the same on
//! the mount and on the local directory.

use std::ffi::CString;
use std::fs;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::{Outcome, TEAM};
use crate::support::NOBODY;

/// One case: its name (its directory), what root prepares there, the call, and the paths whose
/// state is compared afterwards (`old>new` for an inode a rename moves; `.` is the case's
/// directory).
pub struct Case {
    pub name: &'static str,
    pub setup: fn(&Path),
    pub call: fn(&Path) -> Outcome,
    pub watch: &'static [&'static str],
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
}

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_encoded_bytes()).unwrap()
}

/// A libc call's answer as an outcome.
fn ok(rc: i32) -> Outcome {
    if rc == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

fn io(r: std::io::Result<()>) -> Outcome {
    r.map_err(|e| e.raw_os_error().unwrap_or(-1))
}

/// A file of `len` bytes with `mode` and owner `uid:gid`.
fn file(d: &Path, name: &str, mode: u32, uid: u32, gid: u32, len: usize) {
    let p = d.join(name);
    fs::write(&p, vec![7u8; len]).unwrap();
    std::os::unix::fs::chown(&p, Some(uid), Some(gid)).unwrap();
    // After the chown, which clears setuid and setgid.
    fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
}

/// A directory with `mode` and owner `uid:gid`.
fn dir(d: &Path, name: &str, mode: u32, uid: u32, gid: u32) {
    let p = d.join(name);
    fs::create_dir(&p).unwrap();
    std::os::unix::fs::chown(&p, Some(uid), Some(gid)).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
}

/// utimensat(2) of `p` (not following a final symlink) with `times` (None: NULL).
pub fn utimens(p: &Path, times: Option<[(i64, i64); 2]>) -> Outcome {
    crate::support::utimensat(p, times, true)
}

const NOW: (i64, i64) = (0, libc::UTIME_NOW);
const OMIT: (i64, i64) = (0, libc::UTIME_OMIT);
const THEN: (i64, i64) = (1_234_567_890, 500);

fn truncate(p: &Path, len: i64) -> Outcome {
    let path = c(p);
    // SAFETY: a valid NUL-terminated path.
    ok(unsafe { libc::truncate(path.as_ptr(), len) })
}

/// Writes `data` at `off` through a handle opened for write only, and closes it.
fn write_at(p: &Path, off: u64, data: &[u8]) -> Outcome {
    use std::os::unix::fs::FileExt;
    io(fs::OpenOptions::new()
        .write(true)
        .open(p)
        .and_then(|f| f.write_all_at(data, off)))
}

fn chown(p: &Path, uid: Option<u32>, gid: Option<u32>) -> Outcome {
    io(std::os::unix::fs::lchown(p, uid, gid))
}

fn chmod(p: &Path, mode: u32) -> Outcome {
    io(fs::set_permissions(p, fs::Permissions::from_mode(mode)))
}

/// A plain 0644 root file `f` of 100 bytes.
fn plain(d: &Path) {
    file(d, "f", 0o644, 0, 0, 100);
}

/// `f` writable by anyone (0666, root's), and `g` the unprivileged user's own.
fn shared(d: &Path) {
    file(d, "f", 0o666, 0, 0, 100);
    file(d, "g", 0o644, NOBODY, NOBODY, 100);
}

fn nothing(_: &Path) {}

/// A sticky directory `t` (root's, 1777) holding root's file `r`, the unprivileged user's `n`
/// and root's directory `s`.
fn sticky(d: &Path) {
    dir(d, "t", 0o1777, 0, 0);
    file(&d.join("t"), "r", 0o666, 0, 0, 10);
    file(&d.join("t"), "n", 0o644, NOBODY, NOBODY, 10);
    dir(&d.join("t"), "s", 0o777, 0, 0);
}

/// Every case, in order.
pub fn cases() -> Vec<Case> {
    [
        mode_bits(),
        names(),
        contents(),
        utimes(),
        entries(),
        directory_rules(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The cases of chmod, chown and chgrp, and the setuid and setgid bits they and writes clear.
fn mode_bits() -> Vec<Case> {
    vec![
        Case {
            name: "chmod",
            setup: plain,
            call: |d| chmod(&d.join("f"), 0o600),
            watch: &["f", "."],
        },
        Case {
            name: "chmod-own",
            setup: shared,
            call: |d| chmod(&d.join("g"), 0o640),
            watch: &["g"],
        },
        Case {
            name: "chmod-dir",
            setup: |d| dir(d, "s", 0o755, NOBODY, NOBODY),
            call: |d| chmod(&d.join("s"), 0o700),
            watch: &["s", "."],
        },
        Case {
            name: "chown",
            setup: plain,
            call: |d| chown(&d.join("f"), Some(NOBODY), Some(NOBODY)),
            watch: &["f", "."],
        },
        Case {
            name: "chown-unchanged",
            setup: shared,
            call: |d| chown(&d.join("g"), None, None),
            watch: &["g"],
        },
        Case {
            name: "chgrp-team",
            setup: shared,
            call: |d| chown(&d.join("g"), None, Some(TEAM)),
            watch: &["g"],
        },
        Case {
            name: "chgrp-other",
            setup: shared,
            call: |d| chown(&d.join("g"), None, Some(0)),
            watch: &["g"],
        },
        Case {
            name: "chown-clears-setuid",
            setup: |d| file(d, "f", 0o6755, NOBODY, NOBODY, 10),
            call: |d| chown(&d.join("f"), None, Some(TEAM)),
            watch: &["f"],
        },
        Case {
            name: "chown-keeps-setgid-without-group-exec",
            setup: |d| file(d, "f", 0o6744, NOBODY, NOBODY, 10),
            call: |d| chown(&d.join("f"), None, Some(TEAM)),
            watch: &["f"],
        },
        Case {
            name: "chmod-setgid-outside-group",
            setup: |d| file(d, "f", 0o644, NOBODY, 0, 10),
            call: |d| chmod(&d.join("f"), 0o2755),
            watch: &["f"],
        },
        Case {
            name: "chmod-setgid-in-team",
            setup: |d| file(d, "f", 0o644, NOBODY, TEAM, 10),
            call: |d| chmod(&d.join("f"), 0o2755),
            watch: &["f"],
        },
        Case {
            name: "write-clears-setuid",
            setup: |d| file(d, "f", 0o6777, 0, 0, 10),
            call: |d| write_at(&d.join("f"), 0, b"x"),
            watch: &["f"],
        },
        Case {
            name: "write-keeps-setgid-without-group-exec",
            setup: |d| file(d, "f", 0o6766, 0, 0, 10),
            call: |d| write_at(&d.join("f"), 0, b"x"),
            watch: &["f"],
        },
    ]
}

/// The cases of links, renames and unlinks: the inode's ctime and its directories' mtime and ctime.
fn names() -> Vec<Case> {
    vec![
        Case {
            name: "link",
            setup: shared,
            call: |d| io(fs::hard_link(d.join("g"), d.join("h"))),
            watch: &["g", "."],
        },
        Case {
            name: "link-across",
            setup: |d| {
                shared(d);
                dir(d, "t", 0o777, 0, 0);
            },
            call: |d| io(fs::hard_link(d.join("g"), d.join("t/h"))),
            watch: &["g", ".", "t"],
        },
        Case {
            name: "rename",
            setup: shared,
            call: |d| io(fs::rename(d.join("g"), d.join("h"))),
            watch: &["g>h", "."],
        },
        Case {
            name: "rename-across",
            setup: |d| {
                shared(d);
                dir(d, "t", 0o777, 0, 0);
            },
            call: |d| io(fs::rename(d.join("g"), d.join("t/g"))),
            watch: &["g>t/g", ".", "t"],
        },
        Case {
            name: "rename-dir-across",
            setup: |d| {
                dir(d, "s", 0o777, NOBODY, NOBODY);
                dir(d, "t", 0o777, 0, 0);
            },
            call: |d| io(fs::rename(d.join("s"), d.join("t/s"))),
            watch: &[".", "t"],
        },
        Case {
            name: "rename-replaces",
            setup: |d| {
                shared(d);
                file(d, "k", 0o666, NOBODY, NOBODY, 5);
                fs::hard_link(d.join("k"), d.join("k2")).unwrap();
            },
            call: |d| io(fs::rename(d.join("g"), d.join("k"))),
            watch: &["g>k", "k2", "."],
        },
        Case {
            name: "unlink-one-of-two-links",
            setup: |d| {
                shared(d);
                fs::hard_link(d.join("g"), d.join("h")).unwrap();
            },
            call: |d| io(fs::remove_file(d.join("g"))),
            watch: &["h", "."],
        },
    ]
}

/// The cases of truncates, O_TRUNC and writes: mtime and ctime.
fn contents() -> Vec<Case> {
    vec![
        Case {
            name: "truncate-shrink",
            setup: shared,
            call: |d| truncate(&d.join("f"), 10),
            watch: &["f"],
        },
        Case {
            name: "truncate-same",
            setup: shared,
            call: |d| truncate(&d.join("f"), 100),
            watch: &["f"],
        },
        Case {
            name: "ftruncate-same",
            setup: shared,
            call: |d| {
                io(fs::OpenOptions::new()
                    .write(true)
                    .open(d.join("f"))
                    .and_then(|f| f.set_len(100)))
            },
            watch: &["f"],
        },
        Case {
            name: "ftruncate-grow",
            setup: shared,
            call: |d| {
                io(fs::OpenOptions::new()
                    .write(true)
                    .open(d.join("f"))
                    .and_then(|f| f.set_len(5000)))
            },
            watch: &["f"],
        },
        Case {
            name: "open-trunc",
            setup: shared,
            call: |d| {
                io(fs::OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(d.join("f"))
                    .map(drop))
            },
            watch: &["f"],
        },
        Case {
            name: "open-trunc-empty",
            setup: |d| file(d, "f", 0o666, 0, 0, 0),
            call: |d| {
                io(fs::OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(d.join("f"))
                    .map(drop))
            },
            watch: &["f"],
        },
        Case {
            name: "write-extends",
            setup: shared,
            call: |d| write_at(&d.join("f"), 100, b"tail"),
            watch: &["f"],
        },
        Case {
            name: "write-inside",
            setup: shared,
            call: |d| write_at(&d.join("f"), 3, b"mid"),
            watch: &["f"],
        },
    ]
}

/// A case of utimensat of `$file` (in the `shared` set-up) with `$times`.
macro_rules! utimes_case {
    ($name:literal, $file:literal, $times:expr) => {
        Case {
            name: $name,
            setup: shared,
            call: |d| utimens(&d.join($file), $times),
            watch: &[$file],
        }
    };
}

/// The cases of every form of utimensat, and who may use it.
fn utimes() -> Vec<Case> {
    vec![
        utimes_case!("utimes-null", "f", None),
        utimes_case!("utimes-now-now", "f", Some([NOW, NOW])),
        utimes_case!("utimes-now-omit", "f", Some([NOW, OMIT])),
        utimes_case!("utimes-omit-now", "f", Some([OMIT, NOW])),
        utimes_case!("utimes-omit-omit", "f", Some([OMIT, OMIT])),
        utimes_case!("utimes-explicit", "f", Some([THEN, THEN])),
        utimes_case!("utimes-omit-explicit", "f", Some([OMIT, THEN])),
        utimes_case!("utimes-explicit-now", "f", Some([THEN, NOW])),
        utimes_case!("utimes-own-explicit", "g", Some([THEN, OMIT])),
        utimes_case!("utimes-own-null", "g", None),
        Case {
            name: "utimes-symlink",
            setup: |d| {
                shared(d);
                std::os::unix::fs::symlink("f", d.join("l")).unwrap();
            },
            call: |d| utimens(&d.join("l"), Some([THEN, THEN])),
            watch: &["l", "f"],
        },
    ]
}

/// The cases of new and removed entries: their directory's mtime and ctime.
fn entries() -> Vec<Case> {
    vec![
        Case {
            name: "create",
            setup: nothing,
            call: |d| {
                io(fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o640)
                    .open(d.join("n"))
                    .map(drop))
            },
            watch: &[".", "n"],
        },
        Case {
            name: "mkdir",
            setup: nothing,
            call: |d| io(fs::create_dir(d.join("s"))),
            watch: &[".", "s"],
        },
        Case {
            name: "rmdir",
            setup: |d| dir(d, "s", 0o777, NOBODY, NOBODY),
            call: |d| io(fs::remove_dir(d.join("s"))),
            watch: &["."],
        },
        Case {
            name: "mkfifo",
            setup: nothing,
            call: |d| {
                let p = c(&d.join("p"));
                // SAFETY: a valid NUL-terminated path.
                ok(unsafe { libc::mkfifo(p.as_ptr(), 0o640) })
            },
            watch: &[".", "p"],
        },
        Case {
            name: "symlink",
            setup: nothing,
            call: |d| io(std::os::unix::fs::symlink("target", d.join("l"))),
            watch: &[".", "l"],
        },
        Case {
            name: "unlink",
            setup: shared,
            call: |d| io(fs::remove_file(d.join("g"))),
            watch: &["."],
        },
    ]
}

/// The cases of a sticky directory's removals and renames, and a setgid directory's new entries.
fn directory_rules() -> Vec<Case> {
    vec![
        Case {
            name: "sticky-unlink-others",
            setup: sticky,
            call: |d| io(fs::remove_file(d.join("t/r"))),
            watch: &["t", "t/r"],
        },
        Case {
            name: "sticky-unlink-own",
            setup: sticky,
            call: |d| io(fs::remove_file(d.join("t/n"))),
            watch: &["t"],
        },
        Case {
            name: "sticky-rename-others",
            setup: sticky,
            call: |d| io(fs::rename(d.join("t/r"), d.join("t/r2"))),
            watch: &["t", "t/r"],
        },
        Case {
            name: "sticky-rename-over-others",
            setup: sticky,
            call: |d| io(fs::rename(d.join("t/n"), d.join("t/r"))),
            watch: &["t", "t/r"],
        },
        Case {
            name: "sticky-rmdir-others",
            setup: sticky,
            call: |d| io(fs::remove_dir(d.join("t/s"))),
            watch: &["t", "t/s"],
        },
        Case {
            name: "sticky-dir-owner-unlinks",
            setup: |d| {
                dir(d, "t", 0o1777, NOBODY, NOBODY);
                file(&d.join("t"), "r", 0o644, 0, 0, 10);
            },
            call: |d| io(fs::remove_file(d.join("t/r"))),
            watch: &["t"],
        },
        Case {
            name: "setgid-dir-file",
            setup: |d| dir(d, "t", 0o2777, 0, TEAM),
            call: |d| {
                io(fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o2775)
                    .open(d.join("t/n"))
                    .map(drop))
            },
            watch: &["t", "t/n"],
        },
        Case {
            name: "setgid-dir-mkdir",
            setup: |d| dir(d, "t", 0o2777, 0, TEAM),
            call: |d| io(fs::create_dir(d.join("t/s"))),
            watch: &["t", "t/s"],
        },
    ]
}
