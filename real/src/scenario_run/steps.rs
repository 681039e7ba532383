//! A scenario's steps on real processes: which of them run for real, which run in an
//! approximate form and which cannot run yet (all said before the run starts), and the
//! execution of the ones that run, with node references (`head:1`, `primary`) resolved against
//! the live cluster's routing at the moment the step runs.
//!
//! Invariant: every step of the file gets exactly one [`How`]; nothing is dropped without a
//! line saying so, and a step that fails to execute is reported as failed, not as done. Not
//! here: the workload, the checkers, or the fault layers themselves (transport/faults.rs,
//! chunk_store/faults.rs, node/clock.rs, kv_faults.rs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use t3fs_core::ids::ChainId;
use t3fs_core::routing::PublicState;
use t3fs_scenario::schema::{ChainPos, Faults};
use t3fs_scenario::{Action, NodeRef, Scenario, Step};

use super::net::Net;
use super::pushed::PerNode;
use crate::chunk_store::DiskFaults;
use crate::cluster;
use crate::node::clock::ClockFaults;
use crate::routing_watch::RoutingWatch;

/// How a step is carried out on real processes.
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum How {
    /// Exactly as the simulator does it.
    Real,
    /// In a real form that differs from the simulator's; the text says how.
    Approx(String),
    /// Not carried out; the text says why.
    NotRun(String),
}

/// A step with how it will run.
#[derive(Clone, Debug)]
pub struct Planned {
    /// The step.
    pub step: Step,
    /// How.
    pub how: How,
}

/// What cannot run for real: a step's verb or a background fault. Said before a run starts.
const NO_NET: &str = "needs per-message faults the transport's fault layer does not have yet";
const NO_CLIENT_NET: &str =
    "the workload's clients live in the runner's process; their links are not faulted yet";

fn is_client(r: &NodeRef) -> bool {
    matches!(r, NodeRef::Client(_))
}
const NO_DISK: &str =
    "needs damage or random failures in the chunk store's fault layer, which has only whole-disk modes (EIO, ENOSPC, latency)";
const NO_DRIFT: &str =
    "drift moves the time machines read, but their timers keep true durations (the simulator stretches them)";
const NO_CLIENT_CLOCK: &str =
    "the workload's clients live in the runner's process and read its clock";

/// How `action` runs on real processes.
pub fn how(action: &Action) -> How {
    use Action as A;
    match action {
        A::Crash(NodeRef::Client(_)) | A::Restart(NodeRef::Client(_)) => How::NotRun(
            "the workload's clients live in the runner's process; crashing one is not built yet"
                .into(),
        ),
        A::Crash(_) | A::Restart(_) | A::RestartEmpty(_) | A::Pause(_) | A::Resume(_) => How::Real,
        A::CrashAfterForward(_) => How::Approx(
            "SIGKILL while the workload's writes flow: which update is half-way down the chain at that instant is not chosen from outside the process".into(),
        ),
        A::PauseOnCommit(_) => How::Approx(
            "SIGSTOP at the step's time, not at the mgmtd's next chain-row commit".into(),
        ),
        A::Partition { a, b, .. } | A::Repair { a, b } if a.iter().chain(b).any(is_client) => {
            How::NotRun(NO_CLIENT_NET.into())
        }
        A::Isolate(r) | A::Flap { node: r, .. } if is_client(r) => How::NotRun(NO_CLIENT_NET.into()),
        A::Heal
        | A::Partition { .. }
        | A::Isolate(_)
        | A::Repair { .. }
        | A::SetLoss(_)
        | A::SetDuplicate(_)
        | A::SetLatency(_)
        | A::Flap { .. } => How::Real,
        A::Hold { a, b } | A::Release { a, b } if a.iter().chain(b).any(is_client) => {
            How::NotRun(NO_CLIENT_NET.into())
        }
        A::Link { a, b, .. } if a.iter().chain(b).any(is_client) => How::Approx(
            "frames the runner's clients send are not slowed: their links are slowed one way, toward the clients".into(),
        ),
        A::Link { .. } | A::Hold { .. } | A::Release { .. } => How::Real,
        A::DropHeartbeats { .. } => How::Real,
        // The parser already refuses disk verbs on nodes without disks.
        A::FailDisk(_) | A::HealDisk(_) | A::SlowDisk { .. } | A::FillDisk(_) => How::Real,
        A::CorruptChunk(_) => How::NotRun(NO_DISK.into()),
        A::SkewClock { node: r, .. } | A::StepClock { node: r, .. } if is_client(r) => {
            How::NotRun(NO_CLIENT_CLOCK.into())
        }
        A::SkewClock { .. } | A::StepClock { .. } => How::Real,
        A::KvUnavailable | A::KvAvailable | A::KvFaults { .. } => How::Real,
    }
}

/// Every step of `sc` with how it runs.
pub fn plan(sc: &Scenario) -> Vec<Planned> {
    sc.steps
        .iter()
        .map(|s| Planned {
            step: s.clone(),
            how: how(&s.action),
        })
        .collect()
}

/// The scenario's settings that real processes do not honour yet: background fault rates that
/// differ from the simulator's defaults, cluster options and a namespace workload.
pub fn not_honoured(sc: &Scenario) -> Vec<String> {
    let d = Faults::default();
    let f = &sc.faults;
    let mut out = Vec::new();
    let mut rate = |name: &str, v: f64, why: &str| {
        if v > 0.0 {
            out.push(format!("[faults] {name} = {v}: {why}"));
        }
    };
    rate("net_spike", f.net_spike, NO_NET);
    rate("disk_spike", f.disk_spike, NO_DISK);
    rate("disk_eio", f.disk_eio, NO_DISK);
    rate("disk_corrupt", f.disk_corrupt, NO_DISK);
    rate("torn_write", f.torn_write, NO_DISK);
    rate("lost_write", f.lost_write, NO_DISK);
    if f.net_latency != d.net_latency {
        out.push(format!(
            "[faults] net_latency = {:?}: real links have loopback's own latency",
            f.net_latency
        ));
    }
    if f.disk_latency != d.disk_latency {
        out.push(format!(
            "[faults] disk_latency = {:?}: real disks have their own latency",
            f.disk_latency
        ));
    }
    if f.clock_drift_ppm > 0 {
        out.push(format!(
            "[faults] clock_drift_ppm = {}: {NO_DRIFT}",
            f.clock_drift_ppm
        ));
    }
    if f.buggify {
        out.push("[faults] buggify: a simulator-only search aid".into());
    }
    if sc.cluster.reject_dirty_reads {
        out.push("[cluster] reject_dirty_reads: real targets run committed reads".into());
    }
    if sc.namespace.is_some() {
        out.push(
            "[namespace]: the namespace workload and its checkers do not run on real processes yet"
                .into(),
        );
    }
    out
}

/// The process name of a fixed node reference (`storage-2`), or `None` for references that
/// need the live cluster (`primary`, `head:1`).
fn fixed_name(r: &NodeRef) -> Option<String> {
    match r {
        NodeRef::Mgmtd(i) => Some(format!("mgmtd-{i}")),
        NodeRef::Storage(i) => Some(format!("storage-{i}")),
        NodeRef::Meta(i) => Some(format!("meta-{i}")),
        NodeRef::Client(i) => Some(format!("client-{i}")),
        NodeRef::Primary | NodeRef::ChainPos(..) => None,
    }
}

/// The faults the steps have injected so far.
#[derive(Clone, Debug, Default)]
pub struct Injected {
    /// The network's.
    pub net: Net,
    /// The storage nodes' disks'.
    pub disk: PerNode<DiskFaults>,
    /// The nodes' clocks'.
    pub clock: PerNode<ClockFaults>,
    /// The KV service's (on the kv node).
    pub kv: PerNode<crate::kv_faults::KvFaults>,
    /// The clocks drawn at start from `[faults] clock_offset` and `clock_drift_ppm`, which a
    /// heal returns to (as the simulator's base clocks).
    pub clock_base: BTreeMap<String, ClockFaults>,
}

/// The live cluster the steps act on.
pub struct Live<'a> {
    /// The cluster directory.
    pub dir: &'a Path,
    /// Process names by node id.
    pub names: &'a BTreeMap<u32, String>,
    /// The routing watcher.
    pub watch: &'a RoutingWatch,
}

impl Live<'_> {
    /// The process name `r` refers to now.
    pub fn resolve(&self, r: &NodeRef) -> Result<String, String> {
        if let Some(n) = fixed_name(r) {
            return Ok(n);
        }
        match r {
            NodeRef::Primary => {
                let entries = cluster::nodes(self.dir)?;
                primary_of(&entries).ok_or_else(|| "no mgmtd answers as primary".into())
            }
            NodeRef::ChainPos(pos, chain) => self.chain_pos(*pos, *chain),
            _ => unreachable!("fixed references resolved above"),
        }
    }

    fn chain_pos(&self, pos: ChainPos, chain: u32) -> Result<String, String> {
        let seen = self.watch.seen();
        let c = seen
            .iter()
            .rev()
            .find(|s| s.chain.chain == ChainId(chain))
            .ok_or_else(|| format!("chain {chain} is not in the routing seen"))?;
        let serving: Vec<_> = c
            .chain
            .targets
            .iter()
            .filter(|t| t.state == PublicState::Serving)
            .collect();
        let t = pos
            .pick(&serving)
            .ok_or_else(|| format!("chain {chain} has no {pos:?} among its serving targets"))?;
        let node = self
            .watch
            .target_node(t.target)
            .ok_or_else(|| format!("no node hosts {} in the routing seen", t.target))?;
        self.names
            .get(&node.0)
            .cloned()
            .ok_or_else(|| format!("node {} is not in the cluster's configs", node.0))
    }
}

/// The mgmtd whose status page says it is primary.
fn primary_of(entries: &[cluster::NodeEntry]) -> Option<String> {
    entries.iter().filter(|n| n.role == "mgmtd").find_map(|n| {
        let addr = n.cfg.node.metrics.parse().ok()?;
        let (code, body) =
            crate::metrics::get(addr, "/status", std::time::Duration::from_secs(2)).ok()?;
        (code == 200 && body.starts_with("primary")).then(|| n.name.clone())
    })
}

/// A storage node's target directories (its replaced disks), not its identity files.
fn target_dirs(dir: &Path, name: &str) -> Result<Vec<PathBuf>, String> {
    let entries = cluster::nodes(dir)?;
    let n = entries
        .iter()
        .find(|n| n.name == name)
        .ok_or_else(|| format!("no node `{name}`"))?;
    if n.role != "storage" {
        return Err(format!(
            "{name} is not a storage node; restart_empty replaces storage disks"
        ));
    }
    let read = std::fs::read_dir(&n.cfg.node.data).map_err(|e| e.to_string())?;
    Ok(read
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|f| f.to_str())
                .is_some_and(|f| f.starts_with("target-"))
        })
        .collect())
}

fn names(live: &Live, refs: &[NodeRef]) -> Result<Vec<String>, String> {
    refs.iter().map(|r| live.resolve(r)).collect()
}

/// Pushes the network's and disks' faults; says which nodes still wait for theirs.
fn push(live: &Live, f: &mut Injected, what: String) -> Result<(String, String), String> {
    let mut missed = f.net.apply(live.dir)?;
    missed.extend(f.disk.apply(live.dir)?);
    missed.extend(f.clock.apply(live.dir)?);
    missed.extend(f.kv.apply(live.dir)?);
    missed.sort();
    missed.dedup();
    Ok((
        String::new(),
        if missed.is_empty() {
            what
        } else {
            format!("{what} (pending on {} until they run)", missed.join(", "))
        },
    ))
}

/// A process came back: it gets the network's faults and its clock again, and healthy disks.
fn rejoin(live: &Live, f: &mut Injected, name: &str) {
    f.net.forget(name);
    f.disk.restarted(name);
    f.clock.restarted(name);
    let _ = f.net.apply(live.dir);
    let _ = f.clock.apply(live.dir);
}

/// Chains on which `name` hosts a target and no target of another node is SERVING: replacing
/// its disks there would destroy the last copy (the simulator's fault atlas refuses that too).
fn last_copies(live: &Live, name: &str) -> Vec<ChainId> {
    let mut newest: BTreeMap<ChainId, t3fs_core::routing::ChainInfo> = BTreeMap::new();
    for s in live.watch.seen() {
        newest.insert(s.chain.chain, s.chain);
    }
    let node_of = |t| {
        live.watch
            .target_node(t)
            .and_then(|n| live.names.get(&n.0).cloned())
    };
    newest
        .values()
        .filter(|c| {
            let on_it = c
                .targets
                .iter()
                .any(|t| node_of(t.target).as_deref() == Some(name));
            let other_serves = c.targets.iter().any(|t| {
                t.state == PublicState::Serving && node_of(t.target).as_deref() != Some(name)
            });
            on_it && !other_serves
        })
        .map(|c| c.chain)
        .collect()
}

/// Kills `name` if it runs, wipes its target directories (a replaced disk, identity kept) and
/// restarts it; says what was done. Where a chain of the node has no SERVING copy elsewhere the
/// disks are kept and the node only restarts, as the simulator's fault atlas does: replacing
/// them would destroy the last copy, a double fault no protocol survives.
pub fn replace_disks(live: &Live, f: &mut Injected, name: &str) -> Result<String, String> {
    let dir = live.dir;
    if running(dir, name) {
        cluster::kill(dir, name, "KILL")?;
    }
    let last = last_copies(live, name);
    let what = if last.is_empty() {
        let dirs = target_dirs(dir, name)?;
        for d in &dirs {
            std::fs::remove_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        format!(
            "restart {name} with {} empty target directories",
            dirs.len()
        )
    } else {
        let chains: Vec<String> = last.iter().map(|c| c.0.to_string()).collect();
        format!(
            "restart {name}; atlas: disks kept (no other target of chain {} SERVING)",
            chains.join(", ")
        )
    };
    cluster::restart(dir, name)?;
    rejoin(live, f, name);
    Ok(what)
}

/// The node references of `a`.
fn refs(a: &Action) -> Vec<&NodeRef> {
    use Action as A;
    match a {
        A::Crash(r)
        | A::CrashAfterForward(r)
        | A::PauseOnCommit(r)
        | A::Restart(r)
        | A::RestartEmpty(r)
        | A::Pause(r)
        | A::Resume(r)
        | A::Isolate(r)
        | A::CorruptChunk(r)
        | A::FailDisk(r)
        | A::HealDisk(r)
        | A::FillDisk(r)
        | A::Flap { node: r, .. }
        | A::SkewClock { node: r, .. }
        | A::StepClock { node: r, .. }
        | A::SlowDisk { node: r, .. }
        | A::DropHeartbeats { node: r, .. } => vec![r],
        A::Partition { a, b, .. }
        | A::Link { a, b, .. }
        | A::Repair { a, b }
        | A::Hold { a, b }
        | A::Release { a, b } => a.iter().chain(b).collect(),
        A::Heal
        | A::SetLoss(_)
        | A::SetDuplicate(_)
        | A::SetLatency(_)
        | A::KvUnavailable
        | A::KvAvailable
        | A::KvFaults { .. } => Vec::new(),
    }
}

/// Executes one real or approximated step; returns the node it concerned and what was done.
pub fn execute(live: &Live, f: &mut Injected, action: &Action) -> Result<(String, String), String> {
    use Action as A;
    // As in the simulator, a step whose node is nowhere at this moment (a chain with no middle
    // among its serving targets, no primary) does nothing; it is said, not failed.
    if let Some(e) = refs(action).into_iter().find_map(|r| live.resolve(r).err()) {
        return Ok((
            String::new(),
            format!("{}: {e}; nothing done", action.verb()),
        ));
    }
    match action {
        A::Partition { .. }
        | A::Repair { .. }
        | A::Isolate(_)
        | A::SetLoss(_)
        | A::SetDuplicate(_)
        | A::SetLatency(_)
        | A::Flap { .. }
        | A::Link { .. }
        | A::Hold { .. }
        | A::Release { .. }
        | A::DropHeartbeats { .. } => network_step(live, f, action),
        A::FailDisk(_) | A::HealDisk(_) | A::SlowDisk { .. } | A::FillDisk(_) => {
            disk_step(live, f, action)
        }
        A::SkewClock { .. } | A::StepClock { .. } => clock_step(live, f, action),
        A::KvUnavailable | A::KvAvailable | A::KvFaults { .. } => kv_step(live, f, action),
        _ => process_step(live, f, action),
    }
}

fn network_step(
    live: &Live,
    f: &mut Injected,
    action: &Action,
) -> Result<(String, String), String> {
    use Action as A;
    let net = &mut f.net;
    match action {
        A::Partition { a, b, oneway } => {
            let (a, b) = (names(live, a)?, names(live, b)?);
            net.partition(&a, &b, *oneway);
            let arrow = if *oneway { "→" } else { "↔" };
            push(
                live,
                f,
                format!("partition {} {arrow} {}", a.join(","), b.join(",")),
            )
        }
        A::Repair { a, b } => {
            let (a, b) = (names(live, a)?, names(live, b)?);
            net.repair(&a, &b);
            push(live, f, format!("repair {} ↔ {}", a.join(","), b.join(",")))
        }
        A::Isolate(r) => {
            let n = live.resolve(r)?;
            net.isolated.insert(n.clone());
            push(live, f, format!("isolate {n}")).map(|(_, w)| (n, w))
        }
        A::SetLoss(p) => {
            net.loss = *p;
            push(live, f, format!("message loss {p}"))
        }
        A::SetDuplicate(p) => {
            net.duplicate = *p;
            push(live, f, format!("message duplication {p}"))
        }
        A::SetLatency(r) => {
            net.delay = Some((r.start, r.end));
            push(live, f, format!("added one-way delay {r:?}"))
        }
        A::Link {
            a,
            b,
            latency,
            spike,
            loss,
        } => {
            // The runner's clients have no fault RPC: only servers' sends to them are slowed.
            let (a, b) = (names(live, a)?, names(live, b)?);
            let link = crate::transport::Link {
                latency: (latency.start, latency.end),
                spike: *spike,
                spike_latency: net.spike_latency,
                loss: *loss,
            };
            net.link(&a, &b, link);
            push(
                live,
                f,
                format!(
                    "link {} ↔ {}: {latency:?}, spike {spike}, loss {loss}",
                    a.join(","),
                    b.join(",")
                ),
            )
        }
        A::DropHeartbeats { node, duration } => {
            let n = live.resolve(node)?;
            net.hb_until
                .insert(n.clone(), std::time::Instant::now() + *duration);
            push(live, f, format!("drop {n}'s heartbeats for {duration:?}")).map(|(_, w)| (n, w))
        }
        A::Hold { a, b } | A::Release { a, b } => {
            let (a, b) = (names(live, a)?, names(live, b)?);
            let on = matches!(action, A::Hold { .. });
            net.hold(&a, &b, on);
            let verb = if on { "hold" } else { "release" };
            push(
                live,
                f,
                format!("{verb} frames {} → {}", a.join(","), b.join(",")),
            )
        }
        A::Flap {
            node,
            down,
            up,
            count,
        } => {
            let n = live.resolve(node)?;
            for _ in 0..*count {
                net.isolated.insert(n.clone());
                net.apply(live.dir)?;
                std::thread::sleep(*down);
                net.isolated.remove(&n);
                net.apply(live.dir)?;
                std::thread::sleep(*up);
            }
            Ok((
                n.clone(),
                format!("flapped {n}'s links {count} times ({down:?} cut, {up:?} up)"),
            ))
        }
        other => Err(format!("`{}` is not a network step", other.verb())),
    }
}

fn disk_step(live: &Live, f: &mut Injected, action: &Action) -> Result<(String, String), String> {
    use Action as A;
    let (r, what) = match action {
        A::FailDisk(r) => (r, "fail disks of"),
        A::HealDisk(r) => (r, "heal disks of"),
        A::SlowDisk { node, .. } => (node, "slow disks of"),
        A::FillDisk(r) => (r, "fill disks of"),
        other => return Err(format!("`{}` is not a disk step", other.verb())),
    };
    let n = live.resolve(r)?;
    target_dirs(live.dir, &n)?; // A storage node, or a clear error.
    match action {
        A::FailDisk(_) => f.disk.set(&n, |d| d.eio = true),
        A::HealDisk(_) => f
            .disk
            .set(&n, |d| *d = crate::chunk_store::DiskFaults::default()),
        A::SlowDisk { latency, .. } => f
            .disk
            .set(&n, |d| d.latency = Some((latency.start, latency.end))),
        _ => f.disk.set(&n, |d| d.full = true),
    }
    let detail = match action {
        A::FailDisk(_) => " (EIO on every I/O; replaced in the liveness phase)".to_string(),
        A::SlowDisk { latency, .. } => format!(" ({latency:?} per I/O)"),
        A::FillDisk(_) => " (ENOSPC on updates)".to_string(),
        _ => String::new(),
    };
    push(live, f, format!("{what} {n}{detail}")).map(|(_, w)| (n, w))
}

/// Sets `change` on every kv node's faults.
pub fn set_kv(
    dir: &Path,
    f: &mut Injected,
    change: impl Fn(&mut crate::kv_faults::KvFaults),
) -> Result<(), String> {
    for n in cluster::nodes(dir)?.iter().filter(|n| n.role == "kv") {
        f.kv.set(&n.name, &change);
    }
    Ok(())
}

fn kv_step(live: &Live, f: &mut Injected, action: &Action) -> Result<(String, String), String> {
    let what = match action {
        Action::KvUnavailable => {
            set_kv(live.dir, f, |k| k.unavailable = true)?;
            "the KV becomes unavailable".to_string()
        }
        Action::KvAvailable => {
            set_kv(live.dir, f, |k| k.unavailable = false)?;
            "the KV becomes available".to_string()
        }
        Action::KvFaults {
            conflict,
            commit_unknown,
        } => {
            set_kv(live.dir, f, |k| {
                k.conflict = *conflict;
                k.commit_unknown = *commit_unknown;
            })?;
            format!("KV faults: conflict {conflict}, commit unknown {commit_unknown}")
        }
        other => return Err(format!("`{}` is not a KV step", other.verb())),
    };
    push(live, f, what)
}

fn clock_step(live: &Live, f: &mut Injected, action: &Action) -> Result<(String, String), String> {
    let ms = 1_000_000i64;
    let (n, what) = match action {
        Action::SkewClock {
            node,
            offset_ms,
            drift_ppm,
        } => {
            let n = live.resolve(node)?;
            f.clock.set(&n, |c| {
                c.offset_ns = offset_ms.saturating_mul(ms);
                c.drift_ppm = *drift_ppm;
            });
            let what = format!("skew {n}'s clock: offset {offset_ms} ms, drift {drift_ppm} ppm");
            (n, what)
        }
        Action::StepClock { node, by_ms } => {
            let n = live.resolve(node)?;
            f.clock.set(&n, |c| {
                c.offset_ns = c.offset_ns.saturating_add(by_ms.saturating_mul(ms))
            });
            (n.clone(), format!("step {n}'s clock by {by_ms} ms"))
        }
        other => return Err(format!("`{}` is not a clock step", other.verb())),
    };
    push(live, f, what).map(|(_, w)| (n, w))
}

fn process_step(
    live: &Live,
    f: &mut Injected,
    action: &Action,
) -> Result<(String, String), String> {
    use Action as A;
    let dir = live.dir;
    match action {
        A::Crash(r) | A::CrashAfterForward(r) | A::Pause(r) | A::PauseOnCommit(r)
            if !running(dir, &live.resolve(r)?) =>
        {
            // As in the simulator: a node that is down cannot crash or freeze again.
            let n = live.resolve(r)?;
            Ok((
                n.clone(),
                format!("{} {n}: not running, nothing to do", action.verb()),
            ))
        }
        A::Crash(r) | A::CrashAfterForward(r) => {
            let n = live.resolve(r)?;
            cluster::kill(dir, &n, "KILL")?;
            Ok((n.clone(), format!("kill -9 {n} ({})", action.verb())))
        }
        A::Restart(r) => {
            let n = live.resolve(r)?;
            if running(dir, &n) {
                // As in the simulator: restarting a node that runs does nothing.
                return Ok((
                    n.clone(),
                    format!("restart {n}: running, nothing to restart"),
                ));
            }
            cluster::restart(dir, &n)?;
            rejoin(live, f, &n);
            Ok((n.clone(), format!("restart {n}")))
        }
        A::RestartEmpty(r) => {
            let n = live.resolve(r)?;
            let what = replace_disks(live, f, &n)?;
            Ok((n, what))
        }
        A::Pause(r) | A::PauseOnCommit(r) => {
            let n = live.resolve(r)?;
            cluster::kill(dir, &n, "STOP")?;
            Ok((n.clone(), format!("kill -STOP {n} ({})", action.verb())))
        }
        A::Resume(r) => {
            let n = live.resolve(r)?;
            if !cluster::pids(dir)
                .get(&n)
                .is_some_and(|p| cluster::alive(*p))
            {
                // As in the simulator: resuming a node that is down does nothing.
                return Ok((
                    n.clone(),
                    format!("resume {n}: not running, nothing to resume"),
                ));
            }
            cluster::kill(dir, &n, "CONT")?;
            let _ = f.net.apply(dir);
            let _ = f.disk.apply(dir);
            let _ = f.clock.apply(dir);
            Ok((n.clone(), format!("kill -CONT {n}")))
        }
        A::Heal => {
            let resumed = resume_all(dir);
            f.net.heal();
            f.disk.heal();
            f.clock.reset_to(&f.clock_base.clone());
            f.kv.reset_to(&BTreeMap::new());
            push(
                live,
                f,
                format!("heal: every link repaired, rates reset, slow and full disks healed, clocks and the KV reset, {resumed} processes sent SIGCONT"),
            )
        }
        other => Err(format!("`{}` does not run on real processes", other.verb())),
    }
}

/// Whether `name`'s process runs.
fn running(dir: &Path, name: &str) -> bool {
    cluster::pids(dir)
        .get(name)
        .is_some_and(|p| cluster::alive(*p))
}

/// Sends SIGCONT to every live process of the cluster (harmless to running ones).
pub fn resume_all(dir: &Path) -> usize {
    cluster::pids(dir)
        .values()
        .filter(|p| cluster::alive(**p) && cluster::signal(**p, libc::SIGCONT))
        .count()
}

/// Restarts every process of the cluster that is not running; returns their names.
pub fn restart_dead(dir: &Path) -> Result<Vec<String>, String> {
    let dead: Vec<String> = cluster::pids(dir)
        .into_iter()
        .filter(|(_, p)| !cluster::alive(*p))
        .map(|(n, _)| n)
        .collect();
    for n in &dead {
        cluster::restart(dir, n)?;
    }
    Ok(dead)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_verb_is_classified_and_process_steps_run_for_real() {
        let sc = t3fs_scenario::parse(
            "x.toml",
            "name = \"x\"\nabout = \"x\"\nduration = \"5s\"\n[cluster]\nstorage_nodes = 3\nreplicas = 3\n\
             [[step]]\nat = \"1s\"\ndo = \"crash\"\nnode = \"head:1\"\n\
             [[step]]\nat = \"2s\"\ndo = \"restart_empty\"\nnode = \"storage-0\"\n\
             [[step]]\nat = \"2s\"\ndo = \"partition\"\na = [\"storage-1\"]\nb = [\"mgmtd-0\"]\n\
             [[step]]\nat = \"3s\"\ndo = \"crash_after_forward\"\nnode = \"storage-1\"\n\
             [[step]]\nat = \"4s\"\ndo = \"slow_disk\"\nnode = \"tail:1\"\nlatency = \"5ms..9ms\"\n\
             [[step]]\nat = \"4s\"\ndo = \"step_clock\"\nnode = \"primary\"\nby_ms = -3000\n\
             [faults]\nloss = 0.01\n",
        )
        .expect("scenario");
        let p = plan(&sc);
        assert_eq!(p.len(), 6);
        assert_eq!(p[0].how, How::Real);
        assert_eq!(p[1].how, How::Real);
        assert_eq!(p[2].how, How::Real);
        assert!(matches!(p[3].how, How::Approx(_)));
        assert_eq!(
            p[4].how,
            How::Real,
            "disk faults run in the chunk store's fault layer"
        );
        assert!(not_honoured(&sc).is_empty(), "loss runs in the fault layer");
        let sc = t3fs_scenario::parse(
            "y.toml",
            "name = \"y\"\nabout = \"y\"\nduration = \"5s\"\n[cluster]\nclients = 2\n\
             [[step]]\nat = \"1s\"\ndo = \"isolate\"\nnode = \"client-1\"\n\
             [[step]]\nat = \"2s\"\ndo = \"drop_heartbeats\"\nnode = \"storage-0\"\nfor = \"1s\"\n\
             [faults]\ntorn_write = 0.5\n",
        )
        .expect("scenario");
        let p = plan(&sc);
        assert!(
            matches!(p[0].how, How::NotRun(_)),
            "a client's links: {p:?}"
        );
        assert_eq!(
            p[1].how,
            How::Real,
            "heartbeats are told apart by the fault layer"
        );
        let n = not_honoured(&sc);
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(n[0].starts_with("[faults] torn_write = 0.5"));
    }

    #[test]
    fn fixed_references_name_processes() {
        assert_eq!(
            fixed_name(&NodeRef::Storage(2)).as_deref(),
            Some("storage-2")
        );
        assert_eq!(fixed_name(&NodeRef::Mgmtd(0)).as_deref(), Some("mgmtd-0"));
        assert_eq!(fixed_name(&NodeRef::Primary), None);
    }
}
