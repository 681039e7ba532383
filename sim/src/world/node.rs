//! Simulated nodes: a process (mgmtd, storage, client or meta machine) with its volatile context
//! (timers, in-flight I/O, clock) and, for storage, durable disks that survive crashes.
//!
//! Node ids are dense: mgmtd first, then storage, then clients, then meta servers (last, so a
//! cluster without meta keeps its ids), and `NodeId(i)` is `nodes[i]`.
//! Invariant: a crashed node holds no process and no timers; its disks stay (unless replaced on
//! restart); its incarnation number grows on every crash, so completions and timers of an older
//! incarnation are recognised and discarded. Not here: event handling (mod.rs, drive.rs).

use std::collections::BTreeMap;

use t3fs_core::bugs::{MgmtdBug, PlantedBug};
use t3fs_core::chunk::ChunkOp;
use t3fs_core::client::{Client, ClientConfig};
use t3fs_core::ids::{IoId, NodeId, TargetId};
use t3fs_core::kv::KvOp;
use t3fs_core::meta::server::MetaServer;
use t3fs_core::mgmtd::{Mgmtd, MgmtdConfig};
use t3fs_core::routing::RoutingInfo;
use t3fs_core::storage::{StorageConfig, StorageNode};
use t3fs_core::time::Instant;
use t3fs_scenario::plan::Plan;
use t3fs_scenario::plan_cfg::Tuning;
use t3fs_scenario::schema::Cluster;

use super::client::Driver;
use super::clock::Clock;
use super::disk::Disk;

pub use t3fs_core::node::{client_id, counters_of, AnyTimer, Process, Role};

/// Whether the process runs.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Life {
    /// Running.
    Up,
    /// Crashed (no process).
    Down,
    /// Frozen: events wait until it resumes.
    Paused,
}

/// An I/O in flight, as the simulator keeps it until its drawn completion time: the operation
/// runs against the disk or KV when it completes, and a crash hands unfinished disk operations
/// to the disk's crash model.
pub enum Pending {
    /// On a target's disk.
    Chunk(TargetId, ChunkOp),
    /// On the KV.
    Kv(KvOp),
}

/// Everything about a node except its process.
pub struct Ctx {
    /// Its id.
    pub id: NodeId,
    /// Name used in scenarios and logs (`storage-2`).
    pub name: String,
    /// Role.
    pub role: Role,
    /// Index among nodes of its role.
    pub index: u32,
    /// Running, crashed or paused.
    pub life: Life,
    /// Crash count; stamps timers and I/O.
    pub incarnation: u64,
    /// The node's clock.
    pub clock: Clock,
    /// The clock as first drawn (bounded background skew); healing restores it, as NTP would
    /// after a step or a scripted skew.
    pub base_clock: Clock,
    /// I/O in flight with its operation (the runtime's table knows only where it went).
    pub ops: t3fs_core::vec_map::VecMap<IoId, Pending>,
    /// Storage: disks by target (durable).
    pub disks: BTreeMap<TargetId, Disk>,
    /// Storage: crash right after the next forwarded update.
    pub crash_after_forward: bool,
    /// mgmtd: pause right after the next KV commit is submitted.
    pub pause_on_commit: bool,
    /// Storage: heartbeats are lost until this true time.
    pub drop_heartbeats_until: Instant,
    /// Events that arrived while paused, in arrival order.
    pub deferred: Vec<super::Ev>,
    /// Client: the workload driver.
    pub driver: Option<Driver>,
    /// Client: the namespace workload driver.
    pub ns: Option<super::ns_client::NsDriver>,
}

/// A node.
pub struct Node {
    /// Context.
    pub ctx: Ctx,
    /// Process.
    pub proc: Process,
    /// Armed timers and I/O in flight (volatile: cleared on a crash).
    pub tables: t3fs_core::node::Tables,
}

/// Static facts of the simulated cluster: the shared plan (ids, targets, chains; read through
/// `Deref`) plus what only the simulator decides (timeout scaling, planted bugs).
#[derive(Clone, Debug)]
pub struct Layout {
    /// The cluster plan.
    pub plan: Plan,
    /// Cluster-wide knobs of the role configurations.
    pub tuning: Tuning,
    /// Clients boot from empty routing (`[cluster] client_boot_empty`).
    pub client_boot_empty: bool,
    /// Planted storage bug.
    pub bug: Option<PlantedBug>,
    /// Planted mgmtd bug.
    pub mgmtd_bug: Option<MgmtdBug>,
    /// Planted meta bug.
    pub meta_bug: Option<t3fs_core::bugs::MetaBug>,
}

impl Layout {
    /// Lays out `c` with the shared plan (see `t3fs_scenario::plan` for placement).
    pub fn new(c: &Cluster, bugs: crate::bugs::Bugs) -> Self {
        Self {
            plan: Plan::new(c.into()),
            tuning: Tuning::of(c),
            client_boot_empty: c.client_boot_empty,
            bug: bugs.storage,
            mgmtd_bug: bugs.mgmtd,
            meta_bug: bugs.meta,
        }
    }

    /// mgmtd configuration (the plan's, with the planted bug).
    pub fn mgmtd_cfg(&self, node: NodeId) -> MgmtdConfig {
        let mut m = self.plan.mgmtd_cfg(node, &self.tuning);
        m.bug = self.mgmtd_bug;
        m
    }

    /// Storage configuration (the plan's, with the planted bug).
    pub fn storage_cfg(&self, node: NodeId) -> StorageConfig {
        let mut s = self.plan.storage_cfg(node, &self.tuning);
        s.bug = self.bug;
        s
    }

    /// Client configuration for incarnation `inc` (a restarted client is a new session).
    pub fn client_cfg(&self, node: NodeId, inc: u64) -> ClientConfig {
        let mut c = self
            .plan
            .client_cfg(node, client_id(node, inc), &self.tuning);
        c.user = client_user(node);
        c
    }

    /// A fresh process for `ctx` (first start or restart), a storage node booting from `metas`
    /// (what its disks list). `in_service`: the initial cluster.
    pub fn process(
        &self,
        ctx: &Ctx,
        metas: BTreeMap<TargetId, Vec<t3fs_core::chunk::ChunkMeta>>,
        in_service: bool,
    ) -> Process {
        match ctx.role {
            Role::Mgmtd => Process::Mgmtd(Box::new(Mgmtd::new(self.mgmtd_cfg(ctx.id)))),
            Role::Storage => {
                let cfg = self.storage_cfg(ctx.id);
                let node = if in_service {
                    StorageNode::new_in_service(cfg, metas, self.initial.clone())
                } else {
                    StorageNode::new(cfg, metas, RoutingInfo::default())
                };
                Process::Storage(Box::new(node.with_io_base(ctx.incarnation << 40)))
            }
            Role::Client => Process::Client(Box::new(Client::new(
                self.client_cfg(ctx.id, ctx.incarnation),
                if self.client_boot_empty {
                    RoutingInfo::default()
                } else {
                    self.initial.clone()
                },
            ))),
            Role::Meta => {
                let gc_client = client_id(ctx.id, ctx.incarnation);
                let mut cfg = self.plan.meta_cfg(ctx.id, gc_client, &self.tuning);
                cfg.bug = self.meta_bug;
                if let Some((c, _)) = &mut cfg.storage {
                    c.user = client_user(ctx.id);
                }
                Process::Meta(Box::new(MetaServer::new(cfg, ctx.incarnation << 40)))
            }
        }
    }
}

impl core::ops::Deref for Layout {
    type Target = Plan;
    fn deref(&self) -> &Plan {
        &self.plan
    }
}

/// The user a client node's namespace requests act for: root, or uid 1000 or 1001 of group
/// 100, by node id, so that permissions and the sticky bit decide some answers.
pub fn client_user(node: NodeId) -> t3fs_core::meta::perm::User {
    t3fs_scenario::ns_files::client_user(node.0)
}
