//! Timestamps and the mode-bit rules on a real mount, against the kernel's own file system
//! (issue 41, items 2 and 4): each case makes its own directory on a `t3fs mount` and on a
//! local directory, runs one system call there (as root, and again as an unprivileged user in
//! a supplementary group), and must give the same result or errno, and leave every watched
//! path with the same mode, owner, group, link count and size, and the same timestamp
//! relations: which of atime, mtime and ctime the call moved.
//!
//! The cases: chmod, chown and chgrp (and what they do to setuid and setgid bits), link,
//! rename and unlink (the inode and both directories), truncate and ftruncate (shrinking,
//! growing, to the same size), open with O_TRUNC, writes that extend a file and that do not,
//! every form of utimensat (NULL, NOW, OMIT and explicit times in each combination, and their
//! permission rules), the entries that change a directory (create, mkdir, rmdir, mkfifo,
//! symlink), a sticky directory's rules for unlink, rename and rmdir, a non-owner's write
//! clearing setuid and setgid, a chmod to setgid outside the file's group, and a setgid
//! directory passing its group and bit on.
//!
//! It runs on the default mount and again on a `--writeback-cache` one, where the kernel keeps
//! a file's mtime and ctime itself and sends its "now" to the mount as an explicit time: a
//! non-owner's truncate or touch must still be only a writer's to make (`kernels_own` lists
//! the one relation the kernel decides there).
//!
//! How "moved" is seen: before the calls every watched path's atime and mtime are set to a
//! fixed past time, then the test waits 1.1 s, so a timestamp the call sets to now differs from
//! the one before it even at whole seconds (meta stamps ctime in whole seconds). A read is
//! left out: the mount is `noatime` (mount(8) shows it), the local directory is not.
//!
//! Reproduce: `cargo nextest run -p t3fs --test fuse_times`. Needs /dev/fuse and fusermount3;
//! the unprivileged run needs root to drop from (CI runs as root).

#[path = "fuse_times/cases.rs"]
mod cases;
mod support;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use cases::{cases, utimens, Case};
use support::{become_nobody_in, mount, processes_under, t3fs};

/// The supplementary group of the unprivileged run's user.
const TEAM: u32 = 4242;

/// The past time every watched path starts at (2001-09-09), with nanoseconds.
const PAST: (i64, i64) = (1_000_000_000, 123_456_789);

/// What a call gave: nothing, or the errno.
type Outcome = Result<(), i32>;

/// A path's times as (seconds, nanoseconds): atime, mtime, ctime.
type Times = [(i64, i64); 3];

fn times(m: &fs::Metadata) -> Times {
    [
        (m.atime(), m.atime_nsec()),
        (m.mtime(), m.mtime_nsec()),
        (m.ctime(), m.ctime_nsec()),
    ]
}

/// A watched path's name before the call and after it (`old>new`, or one name for both).
fn old_new(w: &str) -> (&str, &str) {
    w.split_once('>').unwrap_or((w, w))
}

/// The watched `old` paths' times before the call (None: absent).
fn before(d: &Path, watch: &[&str]) -> Vec<Option<Times>> {
    watch
        .iter()
        .map(|w| {
            fs::symlink_metadata(d.join(old_new(w).0))
                .ok()
                .map(|m| times(&m))
        })
        .collect()
}

/// Each watched path after the call: its state and which times moved since `was`.
fn after(d: &Path, watch: &[&str], was: &[Option<Times>]) -> Vec<String> {
    let moved = |now: &Times, then: &Option<Times>| -> String {
        let Some(then) = then else {
            return "new".into();
        };
        let names = ["atime", "mtime", "ctime"];
        let m: Vec<&str> = (0..3)
            .filter(|&i| now[i] != then[i])
            .map(|i| names[i])
            .collect();
        if m.is_empty() {
            "nothing moved".into()
        } else {
            format!("{} moved", m.join("+"))
        }
    };
    watch
        .iter()
        .zip(was)
        .map(
            |(w, then)| match fs::symlink_metadata(d.join(old_new(w).1)) {
                Err(e) => format!("{w}: errno {}", e.raw_os_error().unwrap_or(-1)),
                Ok(m) => {
                    let size = if m.is_dir() {
                        String::new()
                    } else {
                        format!(" size {}", m.len())
                    };
                    format!(
                        "{w}: {:o} {}:{} links {}{size}, {}",
                        m.mode(),
                        m.uid(),
                        m.gid(),
                        m.nlink(),
                        moved(&times(&m), then)
                    )
                }
            },
        )
        .collect()
}

/// Prepares every case under `root`: its directory, its setup, and the past times.
fn prepare(root: &Path, cases: &[Case]) {
    for k in cases {
        let d = root.join(k.name);
        fs::create_dir(&d).unwrap();
        fs::set_permissions(&d, fs::Permissions::from_mode(0o777)).unwrap();
        (k.setup)(&d);
        for w in k.watch {
            let p = d.join(old_new(w).0);
            if fs::symlink_metadata(&p).is_ok() {
                utimens(&p, Some([PAST, PAST])).unwrap();
            }
        }
    }
}

/// Runs every case's call under `root` (as the calling thread's user): its outcome and the
/// watched paths after it, a line each.
fn run(root: &Path, cases: &[Case]) -> Vec<String> {
    cases
        .iter()
        .flat_map(|k| {
            let d = root.join(k.name);
            let was = before(&d, k.watch);
            let got = (k.call)(&d);
            let mut lines = vec![format!("{}: {got:?}", k.name)];
            lines.extend(
                after(&d, k.watch, &was)
                    .into_iter()
                    .map(|l| format!("{}: {l}", k.name)),
            );
            lines
        })
        .collect()
}

/// Whether the line pair `mine`/`theirs` of run `label` differs only where the kernel, not the
/// mount, decides: with the writeback cache the kernel keeps a file's mtime and ctime itself and
/// takes none from the server, and a truncate(2) to the same size stamps nothing in the kernel
/// (ext4 stamps both in its own setattr), whatever meta stamps.
fn kernels_own(label: &str, mine: &str, theirs: &str) -> bool {
    let times = |l: &str| {
        l.rsplit_once(", ")
            .map_or(l.to_string(), |(head, _)| head.to_string())
    };
    label.starts_with("wb ")
        && mine.starts_with("truncate-same: f:")
        && times(mine) == times(theirs)
}

/// The cases on `mine` (the mount) and `theirs` (local) as the current user, or as the
/// unprivileged user in [`TEAM`]: the lines that differ, each pair labelled `label`.
fn compare(mine: &Path, theirs: &Path, unprivileged: bool, label: &str) -> Vec<String> {
    let list = cases();
    for r in [mine, theirs] {
        fs::create_dir(r).unwrap();
        fs::set_permissions(r, fs::Permissions::from_mode(0o755)).unwrap();
        prepare(r, &list);
    }
    // Past whole seconds: a time set to now now differs from the setup's at whole seconds.
    std::thread::sleep(Duration::from_millis(1100));
    let (m, t) = (mine.to_path_buf(), theirs.to_path_buf());
    let (got, want) = std::thread::spawn(move || {
        if unprivileged {
            become_nobody_in(&[TEAM]);
        }
        (run(&m, &list), run(&t, &list))
    })
    .join()
    .unwrap();
    assert_eq!(got.len(), want.len(), "{label}: the runs differ in length");
    got.iter()
        .zip(&want)
        .filter(|(g, w)| g != w && !kernels_own(label, g, w))
        .map(|(g, w)| format!("{label}\n  mount: {g}\n  local: {w}"))
        .collect()
}

#[test]
fn timestamps_and_mode_bit_rules_match_the_kernels_as_root_and_unprivileged() {
    let Some((tmp, cluster)) = support::fuse_cluster("times") else {
        return;
    };
    let cs = cluster.to_string_lossy().to_string();
    let log = tmp.0.join("mount.log");
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    // The default mount, and one where the kernel keeps written pages and their times (it
    // sends mtime and ctime with its writeback).
    let mut differ = Vec::new();
    let mut runs = 0;
    for (name, flags) in [("mnt", &[][..]), ("wb", &["--writeback-cache"][..])] {
        let flags: Vec<&str> = ["--allow-other"].iter().chain(flags).copied().collect();
        let m = mount(&cluster, &tmp.0.join(name), &flags, &log);
        for (who, unprivileged) in [("root", false), ("nobody", true)] {
            if unprivileged && !root {
                support::skip("root (to drop to an unprivileged user)", "host:root");
                continue;
            }
            let (mine, theirs) = (format!("{name}-{who}"), format!("local-{name}-{who}"));
            let label = format!("{name} as {who}");
            differ.extend(compare(
                &m.at.join(&mine),
                &tmp.0.join(&theirs),
                unprivileged,
                &label,
            ));
            runs += 1;
        }
    }
    assert!(
        differ.is_empty(),
        "{} lines differ from the kernel's file system ({runs} runs):\n{}",
        differ.len(),
        differ.join("\n")
    );
    let (ok, text) = t3fs(&["cluster", "down", "--dir", &cs], &tmp.0);
    assert!(ok, "{text}");
    assert!(processes_under(&tmp.0).is_empty(), "processes left");
}
