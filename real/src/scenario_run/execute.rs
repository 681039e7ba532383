//! Executing a real run's steps: processes are signalled and restarted, and the network's,
//! disks', clocks' and KV's faults the steps build are pushed to the nodes' fault layers through
//! the fault RPC.
//!
//! Invariant: a step that fails to execute is reported as failed, not as done; one whose node
//! is nowhere at this moment does nothing and says so, as in the simulator. Not here: which
//! steps run (steps.rs), resolving references (live.rs), the fault layers themselves
//! (transport/faults.rs, chunk_store/faults.rs, node/clock.rs, kv_faults.rs).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use t3fs_scenario::{Action, NodeRef};

use super::live::{
    data_dir, last_copies, last_intact, refs, resume_all, running, target_dirs, Live,
};
use super::net::Net;
use super::pushed::PerNode;
use crate::cluster;
use t3fs_services::chunk_store::DiskFaults;
use t3fs_services::node::clock::ClockFaults;

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
    pub kv: PerNode<t3fs_services::kv_faults::KvFaults>,
    /// The clocks drawn at start from `[faults] clock_offset` and `clock_drift_ppm`, which a
    /// heal returns to (as the simulator's base clocks).
    pub clock_base: BTreeMap<String, ClockFaults>,
    /// Storage nodes whose disks hold rotted bytes, until their disks are replaced (at a
    /// restart, or in the liveness phase), as the simulator replaces damaged disks.
    pub damaged: BTreeSet<String>,
    /// The fault atlas stands aside (`[expect] loss_allowed`): damage and replacement may
    /// destroy a chain's last intact copy, as in the simulator.
    pub atlas_off: bool,
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

/// Kills `name` if it runs, wipes its whole data directory (a replaced disk: target
/// directories, incarnation, markers; the identity in its config is kept) and restarts it; says what was done. Where a chain of the node has no SERVING copy elsewhere the
/// disks are kept and the node only restarts, as the simulator's fault atlas does: replacing
/// them would destroy the last copy, a double fault no protocol survives.
pub fn replace_disks(live: &Live, f: &mut Injected, name: &str) -> Result<String, String> {
    replace_disks_wiped(live, f, name).map(|(what, _)| what)
}

/// [`replace_disks`], also saying whether the target directories were emptied (the atlas may
/// keep them).
pub fn replace_disks_wiped(
    live: &Live,
    f: &mut Injected,
    name: &str,
) -> Result<(String, bool), String> {
    let dir = live.dir;
    if running(dir, name) {
        cluster::kill(dir, name, "KILL")?;
    }
    let last = if f.atlas_off {
        Vec::new()
    } else {
        last_copies(live, name)
    };
    let what = if last.is_empty() {
        // The whole data directory goes, as with a replaced disk: the target directories, the
        // incarnation file and any marker. Only the config (outside it) keeps the identity.
        let dirs = target_dirs(dir, name)?;
        let data = data_dir(dir, name)?;
        std::fs::remove_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
        f.damaged.remove(name);
        format!(
            "restart {name} with its data directory wiped ({} target directories)",
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
    Ok((what, last.is_empty()))
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
        A::FailDisk(_)
        | A::HealDisk(_)
        | A::SlowDisk { .. }
        | A::FillDisk(_)
        | A::CorruptChunk(_) => disk_step(live, f, action),
        A::SkewClock { .. } | A::StepClock { .. } => clock_step(live, f, action),
        A::KvUnavailable | A::KvAvailable | A::KvFaults { .. } => kv_step(live, f, action),
        A::Crash(NodeRef::Client(k)) | A::Restart(NodeRef::Client(k)) => {
            client_step(live, *k, matches!(action, A::Restart(_)))
        }
        _ => process_step(live, f, action),
    }
}

/// How cuts are made, for the step's description: said only when the kernel makes them.
fn cut_by(live: &Live) -> &'static str {
    if cluster::net_of(live.dir).is_some() {
        " (nftables in the nodes' namespaces)"
    } else {
        ""
    }
}

/// A network step: a cut, a rate, a link's shape, dropped heartbeats or a flapping node.
fn network_step(
    live: &Live,
    f: &mut Injected,
    action: &Action,
) -> Result<(String, String), String> {
    use Action as A;
    match action {
        A::Partition { .. }
        | A::Repair { .. }
        | A::Isolate(_)
        | A::Hold { .. }
        | A::Release { .. } => cut_step(live, f, action),
        A::SetLoss(_)
        | A::SetDuplicate(_)
        | A::SetLatency(_)
        | A::Link { .. }
        | A::DropHeartbeats { .. } => rate_step(live, f, action),
        A::Flap {
            node,
            down,
            up,
            count,
        } => flap(live, f, node, *down, *up, *count),
        other => Err(format!("`{}` is not a network step", other.verb())),
    }
}

/// A network step that cuts or repairs links: partition, repair, isolate, hold or release.
fn cut_step(live: &Live, f: &mut Injected, action: &Action) -> Result<(String, String), String> {
    use Action as A;
    let net = &mut f.net;
    match action {
        A::Partition { a, b, oneway } => {
            let (a, b) = (names(live, a)?, names(live, b)?);
            net.partition(&a, &b, *oneway);
            let arrow = if *oneway { "→" } else { "↔" };
            let via = cut_by(live);
            push(
                live,
                f,
                format!("partition {} {arrow} {}{via}", a.join(","), b.join(",")),
            )
        }
        A::Repair { a, b } => {
            let (a, b) = (names(live, a)?, names(live, b)?);
            net.repair(&a, &b);
            let via = cut_by(live);
            push(
                live,
                f,
                format!("repair {} ↔ {}{via}", a.join(","), b.join(",")),
            )
        }
        A::Isolate(r) => {
            let n = live.resolve(r)?;
            net.isolated.insert(n.clone());
            let via = cut_by(live);
            push(live, f, format!("isolate {n}{via}")).map(|(_, w)| (n, w))
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
        other => Err(format!("`{}` is not a network step", other.verb())),
    }
}

/// A network step that changes what links do to messages: loss, duplication, delay, a link's
/// shape, or a node's heartbeats dropped.
fn rate_step(live: &Live, f: &mut Injected, action: &Action) -> Result<(String, String), String> {
    use Action as A;
    let net = &mut f.net;
    match action {
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
            let link = t3fs_services::transport::Link {
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
        other => Err(format!("`{}` is not a network step", other.verb())),
    }
}

/// `flap`: cuts `node`'s links for `down` and restores them for `up`, `count` times.
fn flap(
    live: &Live,
    f: &mut Injected,
    node: &NodeRef,
    down: std::time::Duration,
    up: std::time::Duration,
    count: u32,
) -> Result<(String, String), String> {
    let net = &mut f.net;
    let n = live.resolve(node)?;
    let via = cut_by(live);
    for _ in 0..count {
        net.isolated.insert(n.clone());
        net.apply(live.dir)?;
        std::thread::sleep(down);
        net.isolated.remove(&n);
        net.apply(live.dir)?;
        std::thread::sleep(up);
    }
    Ok((
        n.clone(),
        format!("flapped {n}'s links {count} times ({down:?} cut, {up:?} up){via}"),
    ))
}

fn disk_step(live: &Live, f: &mut Injected, action: &Action) -> Result<(String, String), String> {
    use Action as A;
    let (r, what) = match action {
        A::FailDisk(r) => (r, "fail disks of"),
        A::HealDisk(r) => (r, "heal disks of"),
        A::SlowDisk { node, .. } => (node, "slow disks of"),
        A::FillDisk(r) => (r, "fill disks of"),
        A::CorruptChunk(r) => return corrupt(live, f, r),
        other => return Err(format!("`{}` is not a disk step", other.verb())),
    };
    let n = live.resolve(r)?;
    target_dirs(live.dir, &n)?; // A storage node, or a clear error.
    match action {
        A::FailDisk(_) => f.disk.set(&n, |d| d.eio = true),
        // Rots asked stay counted: the process compares the count with those it carried out.
        A::HealDisk(_) => f.disk.set(&n, |d| {
            *d = t3fs_services::chunk_store::DiskFaults {
                rot: d.rot,
                ..Default::default()
            }
        }),
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

/// `corrupt_chunk`: one bit of one committed chunk on the node's disks flipped at rest, unless
/// the node holds a chain's last intact copy (the simulator's fault atlas refuses that too).
fn corrupt(live: &Live, f: &mut Injected, r: &NodeRef) -> Result<(String, String), String> {
    let n = live.resolve(r)?;
    target_dirs(live.dir, &n)?;
    if !f.atlas_off && !last_intact(live, &n, &f.damaged).is_empty() {
        let what = format!("atlas: no corruption on {n} (no other intact replica)");
        return Ok((n, what));
    }
    f.disk.set(&n, |d| d.rot += 1);
    f.damaged.insert(n.clone());
    let what = format!(
        "corrupt a committed chunk on {n} (one bit flipped at rest at its next chunk I/O; \
         the disk is replaced at its restart or in the liveness phase)"
    );
    push(live, f, what).map(|(_, w)| (n, w))
}

/// Sets `change` on every kv node's faults.
pub fn set_kv(
    dir: &Path,
    f: &mut Injected,
    change: impl Fn(&mut t3fs_services::kv_faults::KvFaults),
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

/// A crash or restart of the runner's own client `k` (`life.rs`).
fn client_step(live: &Live, k: u32, up: bool) -> Result<(String, String), String> {
    let n = format!("client-{k}");
    let what = match (live.clients.set(k, up)?, up) {
        (true, false) => format!("crash {n}: its call in flight abandoned, its node stopped"),
        (true, true) => format!("restart {n} with a fresh identity"),
        (false, false) => format!("crash {n}: not running, nothing to do"),
        (false, true) => format!("restart {n}: running, nothing to restart"),
    };
    Ok((n, what))
}

/// A process step: SIGKILL, SIGSTOP or SIGCONT, a restart (with its disks replaced or not), or
/// a heal of everything.
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
        A::Restart(r) => restart(live, f, r),
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
        A::Resume(r) => resume(live, f, r),
        A::Heal => heal(live, f),
        other => Err(format!("`{}` does not run on real processes", other.verb())),
    }
}

/// `restart`: a node that is down is restarted, with its disks replaced if they hold damage.
fn restart(live: &Live, f: &mut Injected, r: &NodeRef) -> Result<(String, String), String> {
    let dir = live.dir;
    let n = live.resolve(r)?;
    if running(dir, &n) {
        // As in the simulator: restarting a node that runs does nothing.
        return Ok((
            n.clone(),
            format!("restart {n}: running, nothing to restart"),
        ));
    }
    if f.damaged.contains(&n) {
        // As in the simulator: a restart replaces disks holding damage.
        let what = replace_disks(live, f, &n)?;
        return Ok((n, format!("{what} (damaged disks)")));
    }
    cluster::restart(dir, &n)?;
    rejoin(live, f, &n);
    Ok((n.clone(), format!("restart {n}")))
}

/// `resume`: a paused node gets SIGCONT and the faults pushed again.
fn resume(live: &Live, f: &mut Injected, r: &NodeRef) -> Result<(String, String), String> {
    let dir = live.dir;
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

/// `heal`: every process resumed, every network, disk, clock and KV fault undone.
fn heal(live: &Live, f: &mut Injected) -> Result<(String, String), String> {
    let dir = live.dir;
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
