//! `t3fs` subcommands run by a command that owns a loopback cluster (`t3fs calibrate`), and the
//! guarantee that the cluster and those subcommands stop however the owner ends: returning,
//! failing, or interrupted by SIGINT or SIGTERM (which end a process without running drops).
//!
//! Invariant: once an interruption is seen, no subcommand starts (a thread that would start or
//! is waiting for one parks); those running are killed and waited for, then the cluster is
//! stopped, then the process exits with 130. Not here: the
//! cluster's own processes (`cluster up`/`down`, t3fs_real::cluster).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The subcommands running now; `None` once interrupted (nothing may start).
static RUNNING: Mutex<Option<Vec<Child>>> = Mutex::new(Some(Vec::new()));

fn running() -> MutexGuard<'static, Option<Vec<Child>>> {
    RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

/// The caller's end once an interruption is being handled: the handler stops everything and
/// exits the process, so the caller neither starts more nor reports the kill as a failure.
fn stopping() -> ! {
    loop {
        std::thread::park();
    }
}

/// Runs `t3fs ARGS` (this binary) to its end; its output goes to `log`.
pub fn t3fs(args: &[&str], log: &Path) -> Result<(), String> {
    let what = || format!("t3fs {}", args.join(" "));
    let mut cmd = command(args, log)?;
    let pid = {
        // Started under the lock: an interruption either sees this child or stops its start.
        let mut r = running();
        let Some(list) = r.as_mut() else { stopping() };
        let child = cmd.spawn().map_err(|e| format!("{}: {e}", what()))?;
        let pid = child.id();
        list.push(child);
        pid
    };
    let status = loop {
        let mut r = running();
        let Some(list) = r.as_mut() else { stopping() };
        let i = list
            .iter()
            .position(|c| c.id() == pid)
            .expect("a child stays listed until reaped here");
        match list[i].try_wait() {
            Ok(Some(status)) => {
                let _ = list.remove(i).wait(); // reaped by try_wait: returns at once
                break status;
            }
            Ok(None) => {}
            Err(e) => return Err(format!("{}: {e}", what())),
        }
        drop(r);
        std::thread::sleep(Duration::from_millis(20));
    };
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} failed ({status}); see {}",
            what(),
            log.display()
        ))
    }
}

/// `t3fs ARGS` (this binary) with its output going to `log`.
fn command(args: &[&str], log: &Path) -> Result<Command, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this binary: {e}"))?;
    let file = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .stdout(file.try_clone().map_err(|e| e.to_string())?)
        .stderr(file);
    Ok(cmd)
}

/// `t3fs cluster down` of the cluster in `dir`, untracked (it runs while stopping).
fn cluster_down(dir: &Path) {
    let d = dir.display().to_string();
    if let Ok(mut cmd) = command(
        &["cluster", "down", "--dir", &d],
        &dir.with_extension("down.log"),
    ) {
        let _ = cmd.status();
    }
}

/// Owns a running cluster: stops it when dropped, and on SIGINT or SIGTERM stops the running
/// subcommands and it, then exits (130).
pub struct ClusterGuard(PathBuf);

impl ClusterGuard {
    /// Guards the cluster in `dir` (already up).
    pub fn new(dir: PathBuf) -> Self {
        let watched = dir.clone();
        std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(t3fs_services::serve::shutdown_signal());
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                format!(
                    "interrupted: stopping the cluster in {}\n",
                    watched.display()
                )
                .as_bytes(),
            );
            let children = running().take().unwrap_or_default();
            for mut c in children {
                let _ = c.kill();
                let _ = c.wait();
            }
            cluster_down(&watched);
            std::process::exit(130);
        });
        Self(dir)
    }
}

impl Drop for ClusterGuard {
    fn drop(&mut self) {
        cluster_down(&self.0);
    }
}
