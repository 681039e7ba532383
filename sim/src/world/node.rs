//! Simulated nodes: a process (mgmtd, storage, client or meta machine) with its volatile context
//! (timers, in-flight I/O, clock) and, for storage, durable disks that survive crashes.
//!
//! Node ids are dense: mgmtd first, then storage, then clients, then meta servers (last, so a
//! cluster without meta keeps its ids), and `NodeId(i)` is `nodes[i]`.
//! Invariant: a crashed node holds no process and no timers; its disks stay (unless replaced on
//! restart); its incarnation number grows on every crash, so completions and timers of an older
//! incarnation are recognised and discarded. Not here: event handling (mod.rs, drive.rs).

use std::collections::BTreeMap;

use core::ops::Range;
use core::time::Duration;

use t3fs_core::bugs::{MgmtdBug, PlantedBug};
use t3fs_core::chunk::ChunkOp;
use t3fs_core::client::{Client, ClientConfig};
use t3fs_core::ids::{IoId, NodeId, TargetId};
use t3fs_core::kv::KvOp;
use t3fs_core::meta::server::{MetaConfig, MetaServer};
use t3fs_core::mgmtd::{Mgmtd, MgmtdConfig};
use t3fs_core::routing::RoutingInfo;
use t3fs_core::storage::{ReadMode, StorageConfig, StorageNode};
use t3fs_core::time::Instant;
use t3fs_scenario::plan::{FileLayout, Plan};
use t3fs_scenario::schema::{Cluster, Timeouts};

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
    pub ops: BTreeMap<IoId, Pending>,
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
    /// Timeout profile.
    pub timeouts: Timeouts,
    /// Read mode of every target.
    pub read_mode: ReadMode,
    /// Planted storage bug.
    pub bug: Option<PlantedBug>,
    /// Planted mgmtd bug.
    pub mgmtd_bug: Option<MgmtdBug>,
    /// Planted meta bug.
    pub meta_bug: Option<t3fs_core::bugs::MetaBug>,
    /// The scenario's GC delay for unlinked files (`None`: 3FS's, scaled).
    pub gc_delay: Option<Duration>,
    /// The scenario's idempotency-record expiry, if it sets one.
    pub idem_expire: Option<Duration>,
    /// The storage-side lease is on (`[cluster] storage_lease`).
    pub storage_lease: bool,
    /// The clock drift the lease must tolerate (ppm): the protocol's bound, or the scenario's
    /// drift if it sets a larger one.
    pub drift_ppm_max: u32,
}

impl Layout {
    /// Lays out `c` with the shared plan (see `t3fs_scenario::plan` for placement).
    pub fn new(c: &Cluster, bugs: crate::bugs::Bugs) -> Self {
        Self {
            plan: Plan::new(c.into()),
            timeouts: c.timeouts,
            read_mode: if c.reject_dirty_reads {
                ReadMode::RejectDirty
            } else {
                ReadMode::Committed
            },
            bug: bugs.storage,
            mgmtd_bug: bugs.mgmtd,
            meta_bug: bugs.meta,
            gc_delay: None,
            idem_expire: None,
            storage_lease: c.storage_lease,
            drift_ppm_max: t3fs_core::limits::CLOCK_DRIFT_PPM_MAX,
        }
    }

    fn scale(&self, d: Duration) -> Duration {
        match self.timeouts {
            Timeouts::ThreeFs => d,
            Timeouts::Fast => d / 10,
        }
    }

    fn jitter(&self, d: Duration) -> Range<Duration> {
        let d = self.scale(d);
        d..d * 11 / 10
    }

    /// mgmtd configuration.
    pub fn mgmtd_cfg(&self, node: NodeId) -> MgmtdConfig {
        let mut m = MgmtdConfig::new(node);
        let s = |d: Duration| self.scale(d);
        m.lease_length = s(m.lease_length);
        m.extend_interval = self.jitter(m.extend_interval.start);
        m.suspicious_interval = s(m.suspicious_interval);
        m.heartbeat_fail_interval = s(m.heartbeat_fail_interval);
        m.max_clock_skew = s(m.max_clock_skew);
        m.bootstrap_length = s(m.bootstrap_length);
        m.session_timeout = s(m.session_timeout);
        m.chain_update_interval = self.jitter(m.chain_update_interval.start);
        m.bug = self.mgmtd_bug;
        m.storage_lease = self.storage_lease;
        m
    }

    /// Storage configuration.
    pub fn storage_cfg(&self, node: NodeId) -> StorageConfig {
        let targets = self.targets_of[&node]
            .iter()
            .map(|t| (*t, self.read_mode))
            .collect();
        let mut s = StorageConfig::new(node, targets);
        s.mgmtd = self.mgmtd.clone();
        s.bug = self.bug;
        s.heartbeat_interval = Some(self.jitter(t3fs_core::limits::HEARTBEAT_INTERVAL));
        if let Some(f) = &s.forward_timeout {
            s.forward_timeout = Some(self.scale(f.start)..self.scale(f.end));
        }
        s.forward_retry_wait =
            self.scale(s.forward_retry_wait.start)..self.scale(s.forward_retry_wait.end);
        if self.storage_lease {
            let fail = self.mgmtd_cfg(NodeId(0)).heartbeat_fail_interval;
            s.lease = Some(t3fs_core::storage::lease::Lease::length(
                fail,
                self.drift_ppm_max,
            ));
        }
        s
    }

    /// Client configuration for incarnation `inc` (a restarted client is a new session).
    pub fn client_cfg(&self, node: NodeId, inc: u64) -> ClientConfig {
        let mut c = ClientConfig::new(node, client_id(node, inc));
        c.user = client_user(node);
        c.mgmtd = self.mgmtd.first().copied();
        c.channels = 4;
        if let Some(t) = &c.io_timeout {
            c.io_timeout = Some(self.scale(t.start)..self.scale(t.end));
        }
        c.retry_wait = self.scale(c.retry_wait.start)..self.scale(c.retry_wait.end);
        c.refresh_interval = Some(self.jitter(t3fs_core::limits::ROUTING_REFRESH));
        c.meta = self.meta.clone();
        c.meta_timeout = self.scale(c.meta_timeout.start)..self.scale(c.meta_timeout.end);
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
                self.initial.clone(),
            ))),
            Role::Meta => {
                let mut cfg = MetaConfig::new(ctx.id);
                cfg.bug = self.meta_bug;
                cfg.mgmtd = self.mgmtd.clone();
                cfg.gc_file_delay = match self.gc_delay {
                    Some(d) => d.as_secs(),
                    None => self.scale(Duration::from_secs(cfg.gc_file_delay)).as_secs(),
                };
                cfg.space_interval = cfg
                    .space_interval
                    .map(|r| self.scale(r.start)..self.scale(r.end));
                cfg.prune_interval = cfg
                    .prune_interval
                    .map(|r| self.scale(r.start)..self.scale(r.end));
                cfg.prune_min_age = self.scale(Duration::from_secs(cfg.prune_min_age)).as_secs();
                match self.idem_expire {
                    Some(d) => {
                        cfg.idem_expire = d.as_secs();
                        cfg.idem_clean_interval = Some(d / 4..d * 11 / 40);
                    }
                    None => {
                        cfg.idem_expire =
                            self.scale(Duration::from_secs(cfg.idem_expire)).as_secs();
                        cfg.idem_clean_interval = cfg
                            .idem_clean_interval
                            .map(|r| self.scale(r.start)..self.scale(r.end));
                    }
                }
                // GC removes chunks through its own storage client.
                cfg.storage = Some((
                    self.client_cfg(ctx.id, ctx.incarnation),
                    self.initial.clone(),
                ));
                // Files stripe over up to four chains of table 1, in 4 KiB chunks.
                cfg.layout = self.plan.layout_policy(FileLayout {
                    chunk_size: 4096,
                    stripe: 4,
                });
                cfg.gc_interval = cfg
                    .gc_interval
                    .map(|r| self.scale(r.start)..self.scale(r.end));
                cfg.unavailable_wait =
                    self.scale(cfg.unavailable_wait.start)..self.scale(cfg.unavailable_wait.end);
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
    match node.0 % 3 {
        0 => t3fs_core::meta::perm::ROOT_USER,
        k => t3fs_core::meta::perm::User {
            uid: 999 + k,
            gid: 100,
        },
    }
}
