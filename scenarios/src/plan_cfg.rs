//! Per-role machine configurations of a planned cluster: 3FS's defaults, the timeout profile of
//! the scenario or `t3fs cluster up` (`fast` divides every timeout by ten), and the cluster-wide
//! knobs in [`Tuning`]. Shared by the simulator (which then plants bugs) and the real services.
//! Not here: bugs, addresses, data directories.

use core::ops::Range;
use core::time::Duration;

use t3fs_core::client::ClientConfig;
use t3fs_core::ids::{ClientId, NodeId};
use t3fs_core::limits;
use t3fs_core::meta::server::MetaConfig;
use t3fs_core::mgmtd::MgmtdConfig;
use t3fs_core::storage::{ReadMode, StorageConfig};

use crate::plan::{FileLayout, Plan};
use crate::schema::Timeouts;

/// Cluster-wide knobs of the role configurations.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// Timeout profile.
    pub timeouts: Timeouts,
    /// Read mode of every target.
    pub read_mode: ReadMode,
    /// The storage-side lease is on.
    pub storage_lease: bool,
    /// The clock drift the storage lease must tolerate (ppm).
    pub drift_ppm_max: u32,
    /// GC delay for unlinked files (`None`: 3FS's, scaled).
    pub gc_delay: Option<Duration>,
    /// Idempotency-record expiry (`None`: 3FS's, scaled).
    pub idem_expire: Option<Duration>,
    /// The layout of new files.
    pub file_layout: FileLayout,
    /// Storage forwards an update only after its local update landed (3FS §3.2's serial
    /// path) instead of beside it (`t3fs_core::storage` pipelining, the default).
    pub serial_forwarding: bool,
}

impl Tuning {
    /// The knobs of a scenario's `[cluster]`; files stripe over up to four chains of table 1 in
    /// 4 KiB chunks (small, so that simulated files span many chunks).
    pub fn of(c: &crate::Cluster) -> Self {
        Self {
            timeouts: c.timeouts,
            read_mode: if c.reject_dirty_reads {
                ReadMode::RejectDirty
            } else {
                ReadMode::Committed
            },
            storage_lease: c.storage_lease,
            drift_ppm_max: limits::CLOCK_DRIFT_PPM_MAX,
            gc_delay: None,
            idem_expire: None,
            file_layout: FileLayout {
                chunk_size: 4096,
                stripe: 4,
            },
            serial_forwarding: c.serial_forwarding,
        }
    }
}

impl Plan {
    fn scale(t: &Tuning, d: Duration) -> Duration {
        match t.timeouts {
            Timeouts::ThreeFs => d,
            Timeouts::Fast => d / 10,
        }
    }

    fn jitter(t: &Tuning, d: Duration) -> Range<Duration> {
        let d = Self::scale(t, d);
        d..d * 11 / 10
    }

    /// mgmtd configuration of `node`.
    pub fn mgmtd_cfg(&self, node: NodeId, t: &Tuning) -> MgmtdConfig {
        let mut m = MgmtdConfig::new(node);
        let s = |d: Duration| Self::scale(t, d);
        m.lease_length = s(m.lease_length);
        m.extend_interval = Self::jitter(t, m.extend_interval.start);
        m.suspicious_interval = s(m.suspicious_interval);
        m.heartbeat_fail_interval = s(m.heartbeat_fail_interval);
        m.max_clock_skew = s(m.max_clock_skew);
        m.bootstrap_length = s(m.bootstrap_length);
        m.session_timeout = s(m.session_timeout);
        m.chain_update_interval = Self::jitter(t, m.chain_update_interval.start);
        m.storage_lease = t.storage_lease;
        m
    }

    /// Storage configuration.
    pub fn storage_cfg(&self, node: NodeId, t: &Tuning) -> StorageConfig {
        let targets = self.targets_of[&node]
            .iter()
            .map(|x| (*x, t.read_mode))
            .collect();
        let mut s = StorageConfig::new(node, targets);
        s.pipeline = !t.serial_forwarding;
        s.mgmtd = self.mgmtd.clone();
        s.heartbeat_interval = Some(Self::jitter(t, limits::HEARTBEAT_INTERVAL));
        if let Some(f) = &s.forward_timeout {
            s.forward_timeout = Some(Self::scale(t, f.start)..Self::scale(t, f.end));
        }
        s.forward_retry_wait =
            Self::scale(t, s.forward_retry_wait.start)..Self::scale(t, s.forward_retry_wait.end);
        s.retry_horizon = Self::scale(t, s.retry_horizon);
        if t.storage_lease {
            let fail = self.mgmtd_cfg(NodeId(0), t).heartbeat_fail_interval;
            s.lease = Some(t3fs_core::storage::lease::Lease::length(
                fail,
                t.drift_ppm_max,
            ));
        }
        s
    }

    /// Client configuration for incarnation `inc` (a restarted client is a new session).
    pub fn client_cfg(&self, node: NodeId, client: ClientId, t: &Tuning) -> ClientConfig {
        let mut c = ClientConfig::new(node, client);
        c.mgmtd = self.mgmtd.first().copied();
        c.channels = 4;
        if let Some(r) = &c.io_timeout {
            c.io_timeout = Some(Self::scale(t, r.start)..Self::scale(t, r.end));
        }
        c.retry_wait = Self::scale(t, c.retry_wait.start)..Self::scale(t, c.retry_wait.end);
        c.refresh_interval = Some(Self::jitter(t, limits::ROUTING_REFRESH));
        c.meta = self.meta.clone();
        c.meta_timeout = Self::scale(t, c.meta_timeout.start)..Self::scale(t, c.meta_timeout.end);
        c
    }

    /// Meta server configuration of `node`, whose GC removes chunks as client `gc_client`.
    pub fn meta_cfg(&self, node: NodeId, gc_client: ClientId, t: &Tuning) -> MetaConfig {
        let mut cfg = MetaConfig::new(node);
        cfg.mgmtd = self.mgmtd.clone();
        cfg.gc_file_delay = match t.gc_delay {
            Some(d) => d.as_secs(),
            None => Self::scale(t, Duration::from_secs(cfg.gc_file_delay)).as_secs(),
        };
        cfg.space_interval = cfg
            .space_interval
            .map(|r| Self::scale(t, r.start)..Self::scale(t, r.end));
        cfg.prune_interval = cfg
            .prune_interval
            .map(|r| Self::scale(t, r.start)..Self::scale(t, r.end));
        cfg.prune_min_age = Self::scale(t, Duration::from_secs(cfg.prune_min_age)).as_secs();
        match t.idem_expire {
            Some(d) => {
                cfg.idem_expire = d.as_secs();
                cfg.idem_clean_interval = Some(d / 4..d * 11 / 40);
            }
            None => {
                cfg.idem_expire = Self::scale(t, Duration::from_secs(cfg.idem_expire)).as_secs();
                cfg.idem_clean_interval = cfg
                    .idem_clean_interval
                    .map(|r| Self::scale(t, r.start)..Self::scale(t, r.end));
            }
        }
        // GC removes chunks through its own storage client.
        cfg.storage = Some((self.client_cfg(node, gc_client, t), self.initial.clone()));
        cfg.layout = self.layout_policy(t.file_layout);
        cfg.gc_interval = cfg
            .gc_interval
            .map(|r| Self::scale(t, r.start)..Self::scale(t, r.end));
        cfg.unavailable_wait =
            Self::scale(t, cfg.unavailable_wait.start)..Self::scale(t, cfg.unavailable_wait.end);
        cfg
    }
}
