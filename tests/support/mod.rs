//! Helpers of the tests that run the t3fs binary and its service processes: run a command with
//! a private temporary directory, find processes whose command line names a directory, a
//! scratch directory whose drop kills every such process and removes it (pass or fail), and a
//! FUSE mount whose drop unmounts it.

#![allow(dead_code)] // Each test binary uses its own subset.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `t3fs ARGS` with TMPDIR = `tmp`: whether it exited 0, and its output.
pub fn t3fs(args: &[&str], tmp: &Path) -> (bool, String) {
    let (code, text) = t3fs_code(args, tmp);
    (code == Some(0), text)
}

/// Runs `t3fs ARGS` with TMPDIR = `tmp`: its exit code, and its output.
pub fn t3fs_code(args: &[&str], tmp: &Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_t3fs"))
        .args(args)
        .env("TMPDIR", tmp)
        .output()
        .expect("t3fs runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// Processes whose command line mentions `dir` (services run with configs under their cluster's
/// directory).
pub fn processes_under(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().to_string();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(&needle) {
            found.push(format!("{}: {cmd}", e.file_name().to_string_lossy()));
        }
    }
    found
}

/// A test's directory: on drop, every process under it is killed and it is removed.
pub struct Scratch(pub PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        // Whatever happened, no service of this test may keep running.
        for p in processes_under(&self.0) {
            if let Some(pid) = p.split(':').next().and_then(|x| x.parse::<i32>().ok()) {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `t3fs mount` process; dropping it unmounts (lazily if busy) and kills the process.
pub struct Mounted {
    pub at: PathBuf,
    pub child: Child,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("fusermount3")
            .arg("-uz")
            .arg(&self.at)
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether a FUSE file system is mounted at `at`.
pub fn mounted(at: &Path) -> bool {
    let want = format!(" {} fuse", at.display());
    std::fs::read_to_string("/proc/mounts").is_ok_and(|m| m.contains(&want))
}

/// Whether FUSE mounts can be made here (/dev/fuse and fusermount3).
pub fn fuse_available() -> bool {
    Path::new("/dev/fuse").exists()
        && Command::new("sh")
            .args(["-c", "command -v fusermount3"])
            .output()
            .is_ok_and(|o| o.status.success())
}

/// Mounts the cluster in `cluster` at `at` with `flags`, its stderr to `log`; waits until the
/// kernel has the mount (30 s at most).
pub fn mount(cluster: &Path, at: &Path, flags: &[&str], log: &Path) -> Mounted {
    std::fs::create_dir_all(at).unwrap();
    let log = std::fs::File::create(log).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_t3fs"))
        .arg("mount")
        .arg(at)
        .arg("--cluster")
        .arg(cluster)
        .args(flags)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let m = Mounted {
        at: at.to_path_buf(),
        child,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !mounted(at) {
        assert!(Instant::now() < deadline, "not mounted within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    m
}

/// A cluster for a FUSE test: `cluster up` in a fresh scratch directory named after `name`;
/// the scratch and the cluster directory, or None (and a line saying so) where FUSE mounts
/// cannot be made here.
pub fn fuse_cluster(name: &str) -> Option<(Scratch, PathBuf)> {
    if !fuse_available() {
        eprintln!("skipped: needs /dev/fuse and fusermount3 (Debian fuse3; scripts/test.sh)");
        return None;
    }
    let tmp = Scratch(std::env::temp_dir().join(format!("t3fs-{name}-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0).unwrap();
    let cluster = tmp.0.join("cluster");
    let (ok, text) = t3fs(
        &["cluster", "up", "--dir", &cluster.to_string_lossy()],
        &tmp.0,
    );
    assert!(ok, "{text}");
    Some((tmp, cluster))
}
