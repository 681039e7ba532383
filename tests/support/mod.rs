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
    (out.status.code(), text_of(&out))
}

/// A finished command's stdout then stderr, as text.
pub fn text_of(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
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

/// Runs `script` with `sh FLAG` (`-c`, or `-ec` to stop at the first failing command) in
/// `dir`: whether it succeeded, and its stdout then stderr.
pub fn shell_with(flag: &str, dir: &Path, script: &str) -> (bool, String) {
    let out = Command::new("sh")
        .arg(flag)
        .arg(script)
        .current_dir(dir)
        .output()
        .expect("sh runs");
    (out.status.success(), text_of(&out))
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

/// Records that the running test skipped a part (or all) of itself for want of `needs`, and
/// says so on stderr. `provider` names where the prerequisite comes from: `pkg:NAME` for a
/// Debian package that scripts/test.sh installs (so its absence fails the run), `host:WHAT`
/// for what the machine must offer (root, /dev/fuse). scripts/test.sh prints the records as
/// its skip report; CI fails on any.
pub fn skip(needs: &str, provider: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("(unnamed test)")
        .to_string();
    eprintln!("skipped: {test} needs {needs} ({provider}; scripts/test.sh provides pkg: ones)");
    let Ok(path) = std::env::var("T3FS_SKIP_REPORT") else {
        return;
    };
    use std::io::Write;
    // One short append per record: O_APPEND keeps the lines of parallel test processes whole.
    let line = format!("{test}\t{needs}\t{provider}\n");
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        panic!("cannot record the skip in {path}: {e}");
    }
}

/// Whether `tool` is on the PATH.
pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether `tool` is on the PATH; records a skip naming Debian package `pkg` where it is not.
pub fn have_or_skip(tool: &str, pkg: &str) -> bool {
    let ok = have(tool);
    if !ok {
        skip(tool, &format!("pkg:{pkg}"));
    }
    ok
}

/// Whether FUSE mounts can be made here; records which part is missing where not.
pub fn fuse_or_skip() -> bool {
    if !Path::new("/dev/fuse").exists() {
        skip("/dev/fuse", "host:fuse device");
        return false;
    }
    have_or_skip("fusermount3", "fuse3")
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
    if !fuse_or_skip() {
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

/// The version of chain `c1` in a `cluster status` text (0 when absent). A deployment's chain
/// version depends on how mgmtd brought its fresh targets in, so tests compare versions
/// rather than expect `v1`.
#[allow(dead_code)]
/// The number of chain c1's head target in a `cluster status` text (`chain c1@v3: t2 SERVING
/// → ...` gives 2).
pub fn c1_head(status: &str) -> Option<u32> {
    let line = status.lines().find(|l| l.starts_with("chain c1@v"))?;
    let first = line.split(": ").nth(1)?.split_whitespace().next()?;
    first.strip_prefix('t')?.parse().ok()
}

pub fn c1_version(status: &str) -> u32 {
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix("chain c1@v")?
                .split(':')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Stops the cluster in `dir` (pass or fail): `cluster down`, SIGKILL of any recorded process
/// still alive, then removes the directory. For the tests' cluster guards' `Drop`.
pub fn stop_cluster(dir: &Path) {
    use t3fs_real::cluster;
    let pids = cluster::pids(dir);
    let _ = cluster::down(dir);
    for (_, p) in pids {
        if cluster::alive(p) {
            cluster::signal(p, 9);
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// The uid and gid the unprivileged runs act as.
pub const NOBODY: u32 = 65534;

/// Makes the calling thread act as [`NOBODY`] on file systems: fsuid and fsgid (per thread on
/// Linux; the kernel drops the file capabilities of a thread whose fsuid leaves 0, and FUSE
/// sends the fsuid as the caller), with no supplementary groups (the raw syscall: glibc's
/// wrapper would change every thread of the test).
pub fn become_nobody() {
    become_nobody_in(&[]);
}

/// [`become_nobody`], in the supplementary `groups`.
pub fn become_nobody_in(groups: &[u32]) {
    // SAFETY: plain syscalls on this thread's credentials; `groups` outlives the call.
    unsafe {
        assert_eq!(
            libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()),
            0
        );
        libc::setfsgid(NOBODY);
        libc::setfsuid(NOBODY);
        // Called with an invalid id, each answers the current one.
        assert_eq!(libc::setfsuid(u32::MAX) as u32, NOBODY);
        assert_eq!(libc::setfsgid(u32::MAX) as u32, NOBODY);
    }
}

/// utimensat(2) of `path` with `times` (None: NULL, both to now; each time a (seconds,
/// nanoseconds) pair, or `UTIME_NOW`/`UTIME_OMIT` in the nanoseconds), following a final
/// symlink unless `nofollow`: the errno on failure.
pub fn utimensat(path: &Path, times: Option<[(i64, i64); 2]>, nofollow: bool) -> Result<(), i32> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let ts = times.map(|t| {
        t.map(|(s, n)| libc::timespec {
            tv_sec: s,
            tv_nsec: n,
        })
    });
    let ptr = ts.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
    let flags = if nofollow {
        libc::AT_SYMLINK_NOFOLLOW
    } else {
        0
    };
    // SAFETY: `c` is a valid NUL-terminated path; `ptr` is null or two timespecs that outlive
    // the call.
    match unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), ptr, flags) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)),
    }
}
