//! Helpers of the tests that run the t3fs binary and its service processes: run a command with
//! a private temporary directory, find processes whose command line names a directory, and a
//! scratch directory whose drop kills every such process and removes it (pass or fail).

#![allow(dead_code)] // Each test binary uses its own subset.

use std::path::{Path, PathBuf};
use std::process::Command;

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
