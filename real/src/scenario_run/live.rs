//! The live cluster a real run's steps act on: node references (`storage-2`, `head:1`,
//! `primary`) resolved against the processes and mgmtd's routing at the moment a step runs,
//! and the process-level queries the steps and the liveness phase need (which processes run,
//! a storage node's target directories, which chains a node holds the last serving copy of).
//!
//! Invariant: a reference that names nothing at this moment is an error the caller turns into
//! a step that does nothing, as in the simulator. Not here: executing steps (execute.rs).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use t3fs_core::ids::ChainId;
use t3fs_core::routing::PublicState;
use t3fs_scenario::schema::ChainPos;
use t3fs_scenario::{Action, NodeRef};

use crate::cluster;
use crate::routing_watch::RoutingWatch;

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

/// The live cluster the steps act on.
pub struct Live<'a> {
    /// The cluster directory.
    pub dir: &'a Path,
    /// Process names by node id.
    pub names: &'a BTreeMap<u32, String>,
    /// The routing watcher.
    pub watch: &'a RoutingWatch,
    /// The runner's own clients' up/down switches.
    pub clients: &'a super::life::Lives,
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
        u32::try_from(node.0)
            .ok()
            .and_then(|k| self.names.get(&k))
            .cloned()
            .ok_or_else(|| format!("node {} is not in the cluster's configs", node.0))
    }
}

/// The mgmtd whose status page says it is primary.
fn primary_of(entries: &[cluster::NodeEntry]) -> Option<String> {
    entries.iter().filter(|n| n.role == "mgmtd").find_map(|n| {
        let addr = n.cfg.node.metrics.parse().ok()?;
        let (code, body) = t3fs_services::metrics::get_authed(
            addr,
            &n.cfg.cluster.token,
            "/status",
            std::time::Duration::from_secs(2),
        )
        .ok()?;
        (code == 200 && body.starts_with("primary")).then(|| n.name.clone())
    })
}

/// The data directory of storage node `name` (an error for any other role).
pub(super) fn data_dir(dir: &Path, name: &str) -> Result<PathBuf, String> {
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
    Ok(n.cfg.node.data.clone())
}

/// The target directories in storage node `name`'s data directory.
pub(super) fn target_dirs(dir: &Path, name: &str) -> Result<Vec<PathBuf>, String> {
    let read = std::fs::read_dir(data_dir(dir, name)?).map_err(|e| e.to_string())?;
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

/// Chains on which `name` hosts a target and no target of another node is SERVING: replacing
/// its disks there would destroy the last copy (the simulator's fault atlas refuses that too).
pub(super) fn last_copies(live: &Live, name: &str) -> Vec<ChainId> {
    last_intact(live, name, &BTreeSet::new())
}

/// As [`last_copies`], counting only other nodes whose disks are not in `damaged` (rotted
/// bytes the chain has not noticed yet leave a SERVING target that is no intact copy).
pub(super) fn last_intact(live: &Live, name: &str, damaged: &BTreeSet<String>) -> Vec<ChainId> {
    let mut newest: BTreeMap<ChainId, t3fs_core::routing::ChainInfo> = BTreeMap::new();
    for s in live.watch.seen() {
        newest.insert(s.chain.chain, s.chain);
    }
    let node_of = |t| {
        live.watch
            .target_node(t)
            .and_then(|n| live.names.get(&u32::try_from(n.0).ok()?).cloned())
    };
    newest
        .values()
        .filter(|c| {
            let on_it = c
                .targets
                .iter()
                .any(|t| node_of(t.target).as_deref() == Some(name));
            let other_serves = c.targets.iter().any(|t| {
                let n = node_of(t.target);
                t.state == PublicState::Serving
                    && n.as_deref() != Some(name)
                    && !n.is_some_and(|n| damaged.contains(&n))
            });
            on_it && !other_serves
        })
        .map(|c| c.chain)
        .collect()
}

/// Whether every target of the nodes `wiped` (their disks replaced at `since`) has been seen
/// out of SERVING after `since`: an emptied target must be resynced before its chain counts as
/// converged, and until mgmtd notices the restart its routing still shows it SERVING.
pub(super) fn wiped_rejoined(
    watch: &crate::routing_watch::RoutingWatch,
    names: &BTreeMap<u32, String>,
    wiped: &[String],
    since: std::time::Instant,
) -> bool {
    let hosts = watch.hosts();
    let seen = watch.seen();
    hosts
        .iter()
        .filter(|(_, n)| {
            let name = u32::try_from(n.0).ok().and_then(|k| names.get(&k));
            name.is_some_and(|name| wiped.contains(name))
        })
        .all(|(t, _)| {
            seen.iter().filter(|s| s.at >= since).any(|s| {
                s.chain
                    .targets
                    .iter()
                    .any(|c| c.target == *t && c.state != PublicState::Serving)
            })
        })
}

/// The node references of `a`.
pub(super) fn refs(a: &Action) -> Vec<&NodeRef> {
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

/// Whether `name`'s process runs.
pub(super) fn running(dir: &Path, name: &str) -> bool {
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
    fn fixed_references_name_processes() {
        assert_eq!(
            fixed_name(&NodeRef::Storage(2)).as_deref(),
            Some("storage-2")
        );
        assert_eq!(fixed_name(&NodeRef::Mgmtd(0)).as_deref(), Some("mgmtd-0"));
        assert_eq!(fixed_name(&NodeRef::Primary), None);
    }
}
