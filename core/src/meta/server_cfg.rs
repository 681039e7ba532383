//! The meta server's configuration, timers and counters (`server.rs` runs the machine).
//!
//! Defaults follow 3FS where it has one (GC every 200 ms with a 5 min file delay, session
//! pruning every 5 min for sessions older than 1 min, idempotency records kept 30 min and
//! cleaned every minute); the simulator scales them. Not here: behaviour.

use std::ops::Range;

use core::time::Duration;

use crate::bugs::MetaBug;
use crate::ids::{ClientId, NodeId, RequestId};

/// Requests one server runs at once.
pub const REQUESTS_MAX: usize = 1024;

/// Idempotency records one cleaning transaction looks at (3FS: 2048).
pub const IDEM_CLEAN_BATCH: usize = 2048;

/// Static configuration.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct MetaConfig {
    /// This node.
    pub node: NodeId,
    /// Attempts of one request before the client gets an error to retry on.
    pub attempts_max: u32,
    /// Backoff after `Unavailable`.
    pub unavailable_wait: Range<Duration>,
    /// A planted bug (simulation only).
    pub bug: Option<MetaBug>,
    /// Period of GC steps (3FS scans every 200 ms); `None` disables GC on this server.
    pub gc_interval: Option<Range<Duration>>,
    /// GC entries (and directory children) one GC step handles.
    pub gc_batch: usize,
    /// Seconds an unlinked file waits before GC frees it (3FS `gc_file_delay`: 5 min).
    pub gc_file_delay: u64,
    /// How new files are laid out; `None`: files get no layout.
    pub layout: Option<LayoutPolicy>,
    /// mgmtd instances, asked for live client sessions when pruning file sessions.
    pub mgmtd: Vec<NodeId>,
    /// Period of session pruning (3FS: 5 min); `None` disables it.
    pub prune_interval: Option<Range<Duration>>,
    /// Sessions younger than this many seconds are never pruned (3FS: 1 min).
    pub prune_min_age: u64,
    /// Seconds an idempotency record is kept (3FS `idempotent_record_expire`: 30 min).
    pub idem_expire: u64,
    /// Period of idempotency-record cleaning (3FS: 1 min); `None` disables it.
    pub idem_clean_interval: Option<Range<Duration>>,
    /// Period of polling storage nodes' space for statFs; `None` disables it.
    pub space_interval: Option<Range<Duration>>,
    /// The storage client GC removes chunks with, and the routing it starts from; `None`:
    /// GC frees inodes without touching storage (tests of the namespace alone).
    pub storage: Option<(crate::client::ClientConfig, crate::routing::RoutingInfo)>,
}

/// The chain table and the defaults new files are laid out with (3FS: the root directory's
/// default layout from `init-cluster`, and the chain table from mgmtd's routing info).
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct LayoutPolicy {
    /// Chain table id.
    pub table: u32,
    /// Its version.
    pub table_version: u32,
    /// Its chains, in table order.
    pub chains: Vec<crate::ids::ChainId>,
    /// Bytes per chunk.
    pub chunk_size: u32,
    /// Chains per file.
    pub stripe: u32,
}

impl MetaConfig {
    /// Defaults: 16 attempts, 100–200 ms backoff.
    pub fn new(node: NodeId) -> Self {
        Self {
            node,
            attempts_max: 16,
            unavailable_wait: Duration::from_millis(100)..Duration::from_millis(200),
            bug: None,
            gc_interval: Some(Duration::from_millis(200)..Duration::from_millis(300)),
            gc_batch: 32,
            gc_file_delay: 300,
            layout: None,
            storage: None,
            mgmtd: Vec::new(),
            prune_interval: Some(Duration::from_secs(300)..Duration::from_secs(330)),
            prune_min_age: 60,
            idem_expire: 1800,
            idem_clean_interval: Some(Duration::from_secs(60)..Duration::from_secs(66)),
            space_interval: Some(Duration::from_secs(5)..Duration::from_secs(6)),
        }
    }
}

/// Timers of the meta server.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum MetaTimer {
    /// Start the next attempt of a request after `Unavailable`.
    Retry(ClientId, RequestId),
    /// Run the next GC step.
    Gc,
    /// Ask mgmtd for live clients, then prune sessions of the others.
    Prune,
    /// Delete expired idempotency records.
    IdemClean,
    /// Ask the storage nodes for their space.
    Space,
    /// A timer of the embedded storage client (GC's chunk removal).
    Storage(crate::client::ClientTimer),
}

/// Counters a driver can report.
#[derive(Clone, Debug, Default, Eq, Hash, PartialEq)]
pub struct MetaCounters {
    /// Requests answered.
    pub answered: u64,
    /// Fresh attempts after a KV failure.
    pub retries: u64,
    /// Commits whose outcome was unknown.
    pub commit_unknown: u64,
    /// KV reads issued (round trips).
    pub reads: u64,
    /// Rows those reads fetched (more than `reads` where the prefetch batched them).
    pub rows_fetched: u64,
    /// Inodes (files, symlinks, directories) freed by GC.
    pub gc_freed: u64,
    /// GC entries skipped because a write session held the file.
    pub gc_busy: u64,
    /// Write sessions of dead clients deleted.
    pub sessions_pruned: u64,
    /// Length queries sent to storage (§4.4).
    pub length_queries: u64,
    /// Expired idempotency records deleted.
    pub idem_cleaned: u64,
    /// Length updates that ran in a batch of two or more (`batch.rs`).
    pub batched: u64,
}
