//! `t3fs cluster up|status|kill|restart|down`: a real multi-process cluster on one host.
//!
//! `up` plans the cluster (1+ mgmtd, N storage nodes with T targets each, R replicas, K meta
//! servers, one `kv` service for the embedded KV), writes one config per node under `DIR`, starts
//! every node as its own `t3fs serve` process on loopback (each in its own process group, logs in
//! `DIR/NAME/log`), and waits until every node is ready and mgmtd publishes every chain with all
//! targets SERVING. `DIR/pids` records the running processes; a second `up` on a directory whose
//! processes still run refuses. Data persists across `down` and `up`: a later `up` reuses the
//! configs (same ids, ports and token) and the data directories.
//!
//! Invariants: every process this module starts is recorded in `DIR/pids` before `up` returns
//! or fails, and `down` stops every recorded process (SIGTERM, then SIGKILL after a grace
//! period). With `--hosts netns` (root) every server process runs in its own network namespace
//! (netns.rs), created by `up` and removed by `down`. Not here: the services (serve.rs).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What `up` builds.
#[derive(Clone, Debug)]
pub struct UpOptions {
    /// The cluster directory.
    pub dir: PathBuf,
    /// Storage nodes.
    pub storage: u32,
    /// Targets per storage node.
    pub targets_per_node: u32,
    /// Replicas per chain.
    pub replicas: u32,
    /// mgmtd nodes.
    pub mgmtd: u32,
    /// Meta servers.
    pub meta: u32,
    /// `embedded` or `etcd://HOST:PORT`.
    pub kv: String,
    /// `fast` or `3fs`.
    pub timeouts: String,
    /// Chunk size of new files.
    pub chunk_size: u32,
    /// How long to wait for the cluster to serve.
    pub wait: Duration,
    /// Chunk store: `file` or `uring`.
    pub store: String,
    /// `loopback`, or `netns`: every server process in its own network namespace (root only).
    pub hosts: String,
    /// The storage-side lease (off: 3FS's behaviour).
    pub storage_lease: bool,
    /// Storage forwards only after the local update (3FS's serial path), not beside it.
    pub serial_forwarding: bool,
    /// A planted bug every node runs with (checker tests only).
    pub bug: Option<String>,
    /// `tcp`, `rdma` or `soft-rdma` (every node; `soft-rdma` starts the software fabric).
    pub transport: String,
    /// Chunk I/O deadline of every node in milliseconds (0: none; `NodeSection`).
    pub chunk_io_deadline_ms: u64,
    /// Every node serves the fault-injection endpoint (tests only; `NodeSection`).
    pub fault_injection: bool,
    /// Tokio worker threads of every service (0: its main thread; `None`: the role's default;
    /// `NodeSection`).
    pub worker_threads: Option<usize>,
}

pub use crate::cluster_node::NodeEntry;

mod plan;

type R<T> = Result<T, String>;

/// The nodes of the cluster in `dir`, from its configs (empty if none was written).
pub fn nodes(dir: &Path) -> R<Vec<NodeEntry>> {
    t3fs_client::client::cluster_dir::nodes(dir)
}

/// Running processes recorded in `DIR/pids`: name → pid.
pub fn pids(dir: &Path) -> BTreeMap<String, i32> {
    std::fs::read_to_string(dir.join("pids"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (n, p) = l.split_once(' ')?;
            Some((n.to_string(), p.trim().parse().ok()?))
        })
        .collect()
}

fn write_pids(dir: &Path, pids: &BTreeMap<String, i32>) -> R<()> {
    let text: String = pids.iter().map(|(n, p)| format!("{n} {p}\n")).collect();
    std::fs::write(dir.join("pids"), text).map_err(|e| e.to_string())
}

/// Whether `pid` is a live process: some thread of it has not exited.
///
/// Why every thread and not the leader's state: after SIGKILL the leader thread can show `Z`
/// while the process's other threads are still exiting and still hold its file table, so its
/// listening sockets. A restart that trusted the leader alone could find the old listener still
/// bound (EADDRINUSE).
pub fn alive(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks
        .flatten()
        .any(|t| std::fs::read_to_string(t.path().join("stat")).is_ok_and(|s| running_state(&s)))
}

/// Whether a `/proc/.../stat` line shows a task that has not exited (not zombie or dead).
fn running_state(stat: &str) -> bool {
    stat.rsplit_once(')')
        .and_then(|(_, r)| r.split_whitespace().next())
        .is_some_and(|st| st != "Z" && st != "X")
}

/// Sends `sig` to `pid`.
#[allow(unsafe_code)]
pub fn signal(pid: i32, sig: i32) -> bool {
    // SAFETY: kill(2) takes plain integers and has no memory effects in this process.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// The namespace network of the cluster in `dir`, if it runs with `--hosts netns`.
pub fn net_of(dir: &Path) -> Option<crate::netns::Net> {
    let text = std::fs::read_to_string(dir.join("hosts")).ok()?;
    let hosts: u32 = text.trim().strip_prefix("netns ")?.parse().ok()?;
    let dir = std::fs::canonicalize(dir).ok()?;
    Some(crate::netns::Net::of(&dir, hosts))
}

fn start(exe: &Path, dir: &Path, n: &NodeEntry) -> R<i32> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(&n.name).join("log"))
        .map_err(|e| e.to_string())?;
    let err = log.try_clone().map_err(|e| e.to_string())?;
    use std::os::unix::process::CommandExt;
    let ns = net_of(dir).map(|net| net.ns(n.cfg.node.id));
    let mut cmd = match &ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    let child = cmd
        .args(["serve", &n.role, "--config"])
        .arg(&n.config)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("starting {}: {e}", n.name))?;
    Ok(child.id() as i32)
}

/// `cluster up`: returns the text to print.
pub fn up(o: &UpOptions) -> R<String> {
    std::fs::create_dir_all(&o.dir).map_err(|e| format!("{}: {e}", o.dir.display()))?;
    refuse_running(&o.dir)?;
    let mut entries = nodes(&o.dir)?;
    if entries.is_empty() {
        plan::write_configs(o)?;
        entries = nodes(&o.dir)?;
    }
    if let Some(net) = net_of(&o.dir) {
        net.create()?;
    }
    crate::cluster_rdma::probe_transport(&entries)?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    start_all(&exe, &o.dir, &entries)?;
    if let Err(e) = wait_serving(&o.dir, &entries, o.wait) {
        let _ = down(&o.dir);
        return Err(e);
    }
    up_text(&o.dir, &entries)
}

/// Fails if a process recorded in `dir` still runs.
fn refuse_running(dir: &Path) -> R<()> {
    let running: Vec<String> = pids(dir)
        .into_iter()
        .filter(|(_, p)| alive(*p))
        .map(|(n, p)| format!("{n} (pid {p})"))
        .collect();
    if !running.is_empty() {
        return Err(format!(
            "a cluster is already running in {}: {}; stop it with `t3fs cluster down --dir {}`",
            dir.display(),
            running.join(", "),
            dir.display()
        ));
    }
    Ok(())
}

/// Starts the software fabric (where a node needs it) and every node, recording each pid in
/// `dir/pids`; a node that fails to start takes the cluster down.
fn start_all(exe: &Path, dir: &Path, entries: &[NodeEntry]) -> R<()> {
    let mut started = BTreeMap::new();
    if entries.iter().any(|n| n.cfg.node.transport == "soft-rdma") {
        started.insert(
            "fabric".to_string(),
            crate::cluster_rdma::start_fabric(exe, dir)?,
        );
        write_pids(dir, &started)?;
    }
    for n in entries {
        match start(exe, dir, n) {
            Ok(pid) => {
                started.insert(n.name.clone(), pid);
                write_pids(dir, &started)?;
            }
            Err(e) => {
                down(dir)?;
                return Err(e);
            }
        }
    }
    Ok(())
}

/// What `up` prints: every node's addresses, then where mgmtd and the token are.
fn up_text(dir: &Path, entries: &[NodeEntry]) -> R<String> {
    let mut out = String::new();
    for n in entries {
        out.push_str(&format!(
            "{:<10} {:<8} listen {}  metrics http://{}\n",
            n.name, n.role, n.cfg.node.listen, n.cfg.node.metrics
        ));
    }
    let m = entries
        .iter()
        .find(|n| n.role == "mgmtd")
        .ok_or("no mgmtd")?;
    out.push_str(&format!(
        "cluster up in {}: mgmtd at {}, token in {}\n",
        dir.display(),
        m.cfg.node.listen,
        m.config.display()
    ));
    Ok(out)
}

/// The primary mgmtd's status text, if one answers.
pub fn mgmtd_status(entries: &[NodeEntry]) -> Option<String> {
    entries.iter().filter(|n| n.role == "mgmtd").find_map(|n| {
        let addr: SocketAddr = n.cfg.node.metrics.parse().ok()?;
        let (code, body) = t3fs_services::metrics::get_authed(
            addr,
            &n.cfg.cluster.token,
            "/status",
            Duration::from_secs(2),
        )
        .ok()?;
        (code == 200 && body.starts_with("primary")).then_some(body)
    })
}

/// Whether a status text shows every chain with all targets SERVING.
pub fn all_serving(status: &str, chains: u32) -> bool {
    let lines: Vec<&str> = status.lines().filter(|l| l.starts_with("chain ")).collect();
    lines.len() == chains as usize
        && lines.iter().all(|l| {
            let members = l.split_once(": ").map(|(_, m)| m).unwrap_or("");
            !members.is_empty() && members.split(" → ").all(|m| m.ends_with(" SERVING"))
        })
}

/// Waits until every node is ready and every chain is all SERVING.
pub fn wait_serving(dir: &Path, entries: &[NodeEntry], wait: Duration) -> R<()> {
    let deadline = Instant::now() + wait;
    let chains = entries.first().map_or(0, |n| n.cfg.cluster.chains);
    loop {
        let pids = pids(dir);
        if let Some((n, _)) = pids.iter().find(|(_, p)| !alive(**p)) {
            let log = std::fs::read_to_string(dir.join(n).join("log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(10).collect();
            return Err(format!(
                "{n} exited; last log lines:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ));
        }
        let ready = entries.iter().all(|n| {
            n.cfg
                .node
                .metrics
                .parse()
                .ok()
                .and_then(|a| t3fs_services::metrics::get(a, "/ready", Duration::from_secs(1)).ok())
                .is_some_and(|(c, _)| c == 200)
        });
        if ready && mgmtd_status(entries).is_some_and(|s| all_serving(&s, chains)) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the cluster did not serve within {wait:?}; status:\n{}",
                mgmtd_status(entries).unwrap_or_default()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `cluster status`.
pub fn status(dir: &Path) -> R<String> {
    let entries = nodes(dir)?;
    if entries.is_empty() {
        return Err(format!("no cluster in {}", dir.display()));
    }
    let pids = pids(dir);
    let mut out = String::new();
    for n in &entries {
        let st = match pids.get(&n.name) {
            Some(p) if alive(*p) => {
                let stopped = std::fs::read_to_string(format!("/proc/{p}/stat"))
                    .ok()
                    .and_then(|s| {
                        s.rsplit_once(')')
                            .map(|(_, r)| r.trim_start().starts_with('T'))
                    })
                    .unwrap_or(false);
                if stopped {
                    format!("stopped (pid {p})")
                } else {
                    format!("up (pid {p})")
                }
            }
            _ => "down".to_string(),
        };
        out.push_str(&format!(
            "{:<10} {:<8} node {:<3} {:<22} {}\n",
            n.name, n.role, n.cfg.node.id, n.cfg.node.listen, st
        ));
    }
    match mgmtd_status(&entries) {
        Some(s) => out.push_str(&s),
        None => out.push_str("no primary mgmtd answers\n"),
    }
    let transport = &entries[0].cfg.node.transport;
    if transport != "tcp" {
        out.push_str(&format!(
            "transport {transport}: {}\n",
            crate::wire_tally::tally(&entries)
        ));
    }
    Ok(out)
}

fn find<'a>(entries: &'a [NodeEntry], name: &str) -> R<&'a NodeEntry> {
    entries.iter().find(|n| n.name == name).ok_or_else(|| {
        let names: Vec<&str> = entries.iter().map(|n| n.name.as_str()).collect();
        format!("no node `{name}` (nodes: {})", names.join(", "))
    })
}

/// `cluster kill NODE --signal SIG`.
pub fn kill(dir: &Path, name: &str, sig: &str) -> R<String> {
    let entries = nodes(dir)?;
    find(&entries, name)?;
    let s = match sig {
        "KILL" => libc::SIGKILL,
        "STOP" => libc::SIGSTOP,
        "CONT" => libc::SIGCONT,
        "TERM" => libc::SIGTERM,
        _ => {
            return Err(format!(
                "unknown signal `{sig}`: expected KILL, STOP, CONT or TERM"
            ))
        }
    };
    let pid = *pids(dir)
        .get(name)
        .ok_or_else(|| format!("{name} is not running"))?;
    if !alive(pid) || !signal(pid, s) {
        return Err(format!("{name} (pid {pid}) is not running"));
    }
    Ok(format!("sent SIG{sig} to {name} (pid {pid})\n"))
}

fn stop(pid: i32, grace: Duration) {
    if !alive(pid) {
        return;
    }
    signal(pid, libc::SIGCONT);
    signal(pid, libc::SIGTERM);
    let deadline = Instant::now() + grace;
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if alive(pid) {
        signal(pid, libc::SIGKILL);
        while alive(pid) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// `cluster restart NODE`: stops it if running, starts it again.
pub fn restart(dir: &Path, name: &str) -> R<String> {
    let entries = nodes(dir)?;
    let n = find(&entries, name)?;
    let mut p = pids(dir);
    if let Some(pid) = p.get(name) {
        stop(*pid, Duration::from_secs(10));
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let pid = start(&exe, dir, n)?;
    p.insert(name.to_string(), pid);
    write_pids(dir, &p)?;
    Ok(format!("restarted {name} (pid {pid})\n"))
}

/// `cluster down`: stops every process (data stays).
pub fn down(dir: &Path) -> R<String> {
    let mut p: Vec<(String, i32)> = pids(dir).into_iter().collect();
    // Users of a service stop before it: clients of mgmtd and the KV first, the KV last.
    p.sort_by_key(|(name, _)| stop_rank(name));
    let mut out = String::new();
    for (name, pid) in &p {
        let was = alive(*pid);
        stop(*pid, Duration::from_secs(10));
        if was {
            out.push_str(&format!("stopped {name} (pid {pid})\n"));
        }
    }
    let _ = std::fs::remove_file(dir.join("pids"));
    if let Some(net) = net_of(dir) {
        net.destroy()?;
        out.push_str(&format!(
            "removed bridge {} and {} namespaces\n",
            net.bridge(),
            net.hosts
        ));
    }
    out.push_str(&format!(
        "cluster in {} is down; its data stays\n",
        dir.display()
    ));
    Ok(out)
}

/// Where `name` stops in `down`: meta and storage, then mgmtd, then the KV, then the fabric
/// the others' RDMA ran on.
fn stop_rank(name: &str) -> u8 {
    if name.starts_with("mgmtd") {
        1
    } else if name == "kv" {
        2
    } else if name == "fabric" {
        3
    } else {
        0
    }
}

/// Client options for the cluster in `dir` (the client crate reads them from the nodes'
/// configs, as a user's program does).
pub fn client_options(dir: &Path) -> R<t3fs_client::client::ClientOptions> {
    t3fs_client::client::ClientOptions::from_cluster_dir(dir)
}
