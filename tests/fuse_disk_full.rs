//! A full disk end to end (issue 37): a cluster whose every node keeps its data on one 64 MiB
//! tmpfs, mounted with FUSE, is written through the mount until a write fails. Checked: the
//! failure is ENOSPC ("No space left on device"), never EIO; every file written before it reads
//! back byte for byte; `cluster status` still shows every target SERVING; and once a file is
//! removed (its chunks collected), a new write succeeds and reads back.
//!
//! Needs root (to mount the tmpfs), /dev/fuse and fusermount3; skips (recorded in the skip
//! report) otherwise. The mount, every process and the tmpfs go away when the test ends, pass or
//! fail.
//!
//! Reproduce: `cargo nextest run -p t3fs --test fuse_disk_full`.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::{mount, processes_under, t3fs};

/// Size of the tmpfs holding every node's data (3 replicas of each chunk, the KV, the logs).
const TMPFS_MIB: u32 = 64;
/// Size of each file written, in MiB (four 1 MiB chunks).
const FILE_MIB: u32 = 4;

/// A size-limited tmpfs mounted on `dir`. Dropping it first kills every process whose command
/// line names it (the cluster's services, if the test failed before stopping them), then
/// unmounts it (lazily if still busy) and removes the mount point.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a `TMPFS_MIB` tmpfs on `dir`; `None` (a skip recorded) without root.
    fn mount(dir: &Path) -> Option<Self> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            support::skip("root (mounting a size-limited tmpfs)", "host:root");
            return None;
        }
        std::fs::create_dir_all(dir).expect("mount point");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={TMPFS_MIB}m"), "tmpfs"])
            .arg(dir)
            .output()
            .expect("mount runs");
        if !out.status.success() {
            let why = support::text_of(&out);
            support::skip(
                &format!("mounting a tmpfs (root with CAP_SYS_ADMIN): {}", why.trim()),
                "host:root",
            );
            return None;
        }
        Some(Self(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        for p in processes_under(&self.0) {
            if let Some(pid) = p.split(':').next().and_then(|x| x.parse::<i32>().ok()) {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        }
        let umount = |lazy: bool| {
            let mut c = Command::new("umount");
            if lazy {
                c.arg("-l");
            }
            c.arg(&self.0).status().is_ok_and(|s| s.success())
        };
        // The killed processes may take a moment to release their files.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !umount(false) {
            if Instant::now() > deadline {
                if !umount(true) {
                    eprintln!("could not unmount {}", self.0.display());
                    return;
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Runs `script` with `sh -c` in `dir`, bounded at two minutes (a hung call fails the test
/// rather than hanging it).
fn sh(dir: &Path, script: &str) -> Output {
    Command::new("timeout")
        .args(["120", "sh", "-c", script])
        .current_dir(dir)
        .output()
        .expect("sh runs")
}

fn text(o: &Output) -> String {
    support::text_of(o)
}

/// The target lines of a `cluster status` text that are not SERVING (empty: all serve).
fn not_serving(status: &str) -> Vec<String> {
    let chains: Vec<&str> = status
        .lines()
        .filter(|l| l.trim_start().starts_with("chain "))
        .collect();
    assert!(!chains.is_empty(), "no chain in the status:\n{status}");
    chains
        .into_iter()
        .filter(|l| {
            let members = l.split_once(": ").map_or("", |(_, m)| m);
            members.is_empty() || !members.split(" → ").all(|m| m.ends_with(" SERVING"))
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn a_full_disk_answers_enospc_keeps_serving_and_takes_writes_again_once_space_is_freed() {
    if !support::fuse_or_skip() {
        return;
    }
    let tmp = support::Scratch(
        std::env::temp_dir().join(format!("t3fs-fuse-full-{}", std::process::id())),
    );
    std::fs::create_dir_all(&tmp.0).unwrap();
    let Some(fs) = Tmpfs::mount(&tmp.0.join("fs")) else {
        return;
    };
    let cluster = fs.0.join("cluster");
    let cs = cluster.to_string_lossy().to_string();
    let (ok, out) = t3fs(&["cluster", "up", "--dir", &cs], &tmp.0);
    assert!(ok, "cluster up: {out}");
    let status = || {
        let (ok, out) = t3fs(&["cluster", "status", "--dir", &cs], &tmp.0);
        assert!(ok, "cluster status: {out}");
        out
    };
    // direct_io: reads reach the cluster, not the page cache.
    let at = tmp.0.join("mnt");
    let m = mount(&cluster, &at, &["--direct-io"], &tmp.0.join("mount.log"));
    let local = tmp.0.join("local");
    std::fs::create_dir_all(&local).unwrap();
    let mount_log = || std::fs::read_to_string(tmp.0.join("mount.log")).unwrap_or_default();

    // Write files until one fails; the room is at most TMPFS_MIB / 3 replicas.
    let most = TMPFS_MIB / FILE_MIB + 2;
    let mut written = Vec::new();
    let mut refused = None;
    for i in 0..most {
        let name = format!("f{i}");
        let src = local.join(&name);
        let o = sh(
            &at,
            &format!(
                "head -c {} /dev/urandom > '{}' && dd if='{}' of={name} bs=1M conv=fsync 2>&1",
                FILE_MIB << 20,
                src.display(),
                src.display()
            ),
        );
        if o.status.success() {
            written.push(name);
        } else {
            refused = Some((name, text(&o)));
            break;
        }
    }
    let Some((failed, why)) = refused else {
        panic!("{most} files of {FILE_MIB} MiB fitted on a {TMPFS_MIB} MiB tmpfs");
    };
    eprintln!(
        "{} files of {FILE_MIB} MiB written, {failed} refused: {}",
        written.len(),
        why.trim()
    );
    assert!(
        why.contains("No space left on device"),
        "want ENOSPC: {why}\nmount log:\n{}",
        mount_log()
    );
    assert!(
        !why.contains("Input/output error"),
        "EIO on a full disk: {why}"
    );
    assert!(!written.is_empty(), "not even one file fitted");

    // Everything acknowledged reads back, and every target still serves.
    let check = |names: &[String], when: &str| {
        for n in names {
            let o = sh(&at, &format!("cmp '{}' {n}", local.join(n).display()));
            assert!(o.status.success(), "{n} {when}: {}", text(&o));
        }
    };
    check(&written, "when full");
    let st = status();
    assert!(not_serving(&st).is_empty(), "when full:\n{st}");

    // Space comes back once a file is removed and its chunks are collected (meta's GC waits
    // `gc_file_delay` after the unlink, 30 s under the fast timeouts): a new write succeeds
    // (refused with ENOSPC until then, retried each second), and reads back.
    let gone = written.remove(0);
    let o = sh(&at, &format!("rm {gone}"));
    assert!(o.status.success(), "rm {gone} on a full disk: {}", text(&o));
    let src = local.join("again");
    let o = sh(
        &tmp.0,
        &format!("head -c 1048576 /dev/urandom > '{}'", src.display()),
    );
    assert!(o.status.success(), "{}", text(&o));
    let deadline = Instant::now() + Duration::from_secs(90);
    let (mut tries, mut last) = (0, String::new());
    loop {
        tries += 1;
        let o = sh(
            &at,
            &format!("dd if='{}' of=again bs=1M conv=fsync 2>&1", src.display()),
        );
        if o.status.success() {
            break;
        }
        let why = text(&o);
        assert!(
            why.contains("No space left on device"),
            "while space is freed, want ENOSPC or success: {why}"
        );
        assert!(
            Instant::now() < deadline,
            "no write fitted within 90 s of removing {gone} ({tries} tries): {why}"
        );
        last = why;
        std::thread::sleep(Duration::from_secs(1));
    }
    eprintln!(
        "a write fitted again after {tries} tries; the last refusal: {}",
        last.trim()
    );
    written.push("again".into());
    check(&written, "after space was freed");
    let st = status();
    assert!(not_serving(&st).is_empty(), "after space was freed:\n{st}");

    drop(m);
    let (ok, out) = t3fs(&["cluster", "down", "--dir", &cs], &tmp.0);
    assert!(ok, "cluster down: {out}");
    assert!(processes_under(&tmp.0).is_empty(), "processes left");
    drop(fs);
}
