//! The service configuration: one TOML file per node, written by `t3fs cluster up` or by hand,
//! read by `t3fs serve ROLE --config FILE`. Every key is documented on its field below; an
//! unknown key, a missing one or a bad value is reported with the file, the line and the key.
//!
//! ```toml
//! [node]
//! id = 1                          # stable across restarts; must be the role's id in the plan
//! name = "storage-0"              # used in logs
//! listen = "127.0.0.1:7001"       # the transport's listen address
//! metrics = "127.0.0.1:8001"      # HTTP: /metrics (Prometheus), /ready, /status
//! data = "/tmp/c/storage-0"       # data directory (chunk stores, KV engine, incarnation)
//! store = "file"                  # chunk store: "file" or "uring" (io_uring, O_DIRECT)
//! transport = "tcp"               # "tcp", "rdma" or "soft-rdma"; sized in [rdma] (rdma_config)
//! worker_threads = 2              # optional: the runtime's workers, 0 = the main thread only;
//!                                 # unset: 2 for storage, 0 for other roles
//!
//! [cluster]
//! token = "…"                     # shared secret of the transport handshake
//! kv = "embedded"                 # or "etcd://HOST:PORT"
//! mgmtd = 1                       # node counts: ids follow the plan (t3fs_scenario::plan)
//! storage_nodes = 3
//! targets_per_node = 1
//! replicas = 3
//! chains = 1
//! meta = 1
//! timeouts = "fast"               # "3fs" (60 s failure detection) or "fast" (6 s)
//! chunk_size = 1048576            # chunk size of new files
//! stripe = 1                      # chains a new file stripes over
//! storage_lease = false           # the storage-side lease (see core storage::lease)
//! serial_forwarding = false       # optional: forward only after the local update (3FS's path)
//! # bug = "tail-ack-before-commit" # optional: a planted bug (t3fs_core::bugs), for checker tests
//!
//! [addresses]                     # every server's listen address, by node id
//! 0 = "127.0.0.1:7000"
//! ```
//!
//! Ids: the plan numbers mgmtd first, then storage, then meta; the `kv` service (embedded KV)
//! takes the id after the last meta server. Not here: starting anything (serve.rs).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use t3fs_core::ids::NodeId;
use t3fs_core::node::Role;
use t3fs_scenario::plan::{FileLayout, Plan, Shape};
use t3fs_scenario::plan_cfg::Tuning;
use t3fs_scenario::Timeouts;

/// A node's configuration file.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// This node.
    pub node: NodeSection,
    /// The cluster it belongs to.
    pub cluster: ClusterSection,
    /// Listen addresses of every server, by node id (decimal string keys).
    pub addresses: BTreeMap<String, String>,
    /// Sizes of RDMA connections and where the device is (`rdma_config`).
    #[serde(default, skip_serializing_if = "is_default_rdma")]
    pub rdma: crate::rdma_config::RdmaSection,
}

fn is_default_rdma(r: &crate::rdma_config::RdmaSection) -> bool {
    *r == crate::rdma_config::RdmaSection::default()
}

/// `[node]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSection {
    /// Node id, stable across restarts.
    pub id: u32,
    /// Name in logs.
    pub name: String,
    /// Transport listen address.
    pub listen: String,
    /// Metrics/readiness HTTP address.
    pub metrics: String,
    /// Data directory.
    pub data: PathBuf,
    /// Chunk store of every target: `file` (pread/pwrite/fdatasync) or `uring` (io_uring with
    /// O_DIRECT; needs the `uring` feature, on by default).
    #[serde(default = "file_store")]
    pub store: String,
    /// How frames travel: `tcp`, `rdma` (a verbs device) or `soft-rdma` (the software fabric
    /// of a loopback cluster); see `rdma_config`.
    #[serde(default = "tcp")]
    pub transport: String,
    /// Chunk I/O deadline in milliseconds (0: none). A chunk store operation unanswered this
    /// long is answered as failed: the machine takes its target OFFLINE, the chain fails over,
    /// and the late answer, if one ever comes, is dropped (`node::Driver::expire_chunk_io`).
    /// A hung disk or a dead store thread would otherwise hold chunk locks forever while
    /// heartbeats kept the target SERVING.
    #[serde(default = "chunk_io_deadline_ms")]
    pub chunk_io_deadline_ms: u64,
    /// Serve the fault-injection endpoint (`PUT /fault`, `/disk`, `/clock`, `/kv`: drop
    /// frames, flip bits, fail or hang disks, step the clock). Off by default: a node started
    /// for testing turns it on (`cluster up --fault-injection`, and `cluster run` and `soak`,
    /// which inject faults). Off, those paths answer 404.
    #[serde(default)]
    pub fault_injection: bool,
    /// Worker threads of the node's tokio runtime; 0 runs every task on the process's main
    /// thread (a current-thread runtime). Unset: the role's default
    /// ([`default_worker_threads`]). Blocking work (the KV engine's commits, store threads)
    /// runs on threads of its own either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_threads: Option<usize>,
}

/// The runtime a role gets when its config names none: storage 2 workers, every other role
/// the main thread alone. A metadata request is a few small steps (decode, a KV lookup, an
/// answer), each of which on a multi-threaded runtime may wake another core; on a host with
/// fewer cores than busy processes those wake-ups are most of its cost (8 concurrent native
/// clients: creates +14%, stats +26% with meta, mgmtd and kv on their main threads,
/// docs/results.md). Storage copies chunk bytes, which two workers do in parallel (1 MiB
/// reads at depth 8 lost 5-10% on one thread).
pub fn default_worker_threads(storage: bool) -> usize {
    if storage {
        2
    } else {
        0
    }
}

fn tcp() -> String {
    "tcp".into()
}

fn chunk_io_deadline_ms() -> u64 {
    30_000
}

fn file_store() -> String {
    "file".into()
}

/// `[cluster]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    /// Transport handshake secret.
    pub token: String,
    /// `embedded` or `etcd://HOST:PORT`.
    pub kv: String,
    /// mgmtd count.
    pub mgmtd: u32,
    /// Storage node count.
    pub storage_nodes: u32,
    /// Targets per storage node.
    pub targets_per_node: u32,
    /// Replicas per chain.
    pub replicas: u32,
    /// Chains.
    pub chains: u32,
    /// Meta server count.
    pub meta: u32,
    /// `3fs` or `fast`.
    pub timeouts: String,
    /// Chunk size of new files (bytes).
    pub chunk_size: u32,
    /// Chains a new file stripes over.
    pub stripe: u32,
    /// The storage-side lease.
    pub storage_lease: bool,
    /// Storage forwards an update only after its local update landed (3FS §3.2) instead of
    /// beside it (pipelined, the default); for comparing the two on one host.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub serial_forwarding: bool,
    /// A planted bug every node runs with (`t3fs_core::bugs`: a storage, mgmtd or meta bug by
    /// name), so real-process runs can show that their checkers fail. Absent: the protocol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bug: Option<String>,
}

/// The planted bugs named by `bug` for (storage, mgmtd, meta); `None` if the name is unknown.
pub fn bugs(
    bug: Option<&str>,
) -> Option<(
    Option<t3fs_core::bugs::PlantedBug>,
    Option<t3fs_core::bugs::MgmtdBug>,
    Option<t3fs_core::bugs::MetaBug>,
)> {
    use t3fs_core::bugs::{MetaBug, MgmtdBug, PlantedBug};
    let Some(b) = bug else {
        return Some((None, None, None));
    };
    let found = (
        PlantedBug::from_name(b),
        MgmtdBug::from_name(b),
        MetaBug::from_name(b),
    );
    (found != (None, None, None)).then_some(found)
}

/// A configuration error: file, line (0 if unknown), key and message.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct ConfigError {
    /// The file.
    pub file: String,
    /// 1-based line, 0 when the error has no place.
    pub line: usize,
    /// The key.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: {}: {}",
            self.file, self.line, self.key, self.message
        )
    }
}

impl std::error::Error for ConfigError {}

/// Where the KV lives.
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum KvChoice {
    /// The `kv` service of this cluster.
    Embedded(NodeId),
    /// An etcd endpoint.
    Etcd(String),
}

impl NodeConfig {
    /// Reads and checks `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: file.clone(),
            line: 0,
            key: String::new(),
            message: e.to_string(),
        })?;
        Self::parse(&file, &text)
    }

    /// Parses `text` (from `file`) and checks it.
    pub fn parse(file: &str, text: &str) -> Result<Self, ConfigError> {
        let cfg: Self = toml::from_str(text).map_err(|e| {
            let (line, key) = match e.span() {
                Some(s) => {
                    let line = text[..s.start.min(text.len())].matches('\n').count() + 1;
                    let start = text[..s.start.min(text.len())]
                        .rfind('\n')
                        .map_or(0, |i| i + 1);
                    let l = &text[start..];
                    let l = &l[..l.find('\n').unwrap_or(l.len())];
                    let key = l.split_once('=').map(|(k, _)| k.trim().to_string());
                    (line, key.unwrap_or_else(|| l.trim().to_string()))
                }
                None => (0, String::new()),
            };
            ConfigError {
                file: file.to_string(),
                line,
                key,
                message: e.message().trim().to_string(),
            }
        })?;
        cfg.check(file, text)?;
        Ok(cfg)
    }

    fn check(&self, file: &str, text: &str) -> Result<(), ConfigError> {
        let err = |key: &str, message: String| {
            let short = key.rsplit('.').next().unwrap_or(key);
            let line = text
                .lines()
                .position(|l| {
                    l.split_once('=')
                        .is_some_and(|(k, _)| k.trim().trim_matches('"') == short)
                })
                .map_or(0, |i| i + 1);
            ConfigError {
                file: file.to_string(),
                line,
                key: key.to_string(),
                message,
            }
        };
        self.check_settings(&err)?;
        self.check_addresses(&err)
    }

    /// Checks the cluster's shape and settings, the node's store and transport; `err` makes
    /// the error of a key.
    fn check_settings(&self, err: &dyn Fn(&str, String) -> ConfigError) -> Result<(), ConfigError> {
        self.shape().validate().map_err(|m| {
            let key = m.split(':').next().unwrap_or("").to_string();
            err(&format!("cluster.{key}"), m)
        })?;
        if let Some(b) = &self.cluster.bug {
            if crate::config::bugs(Some(b)).is_none() {
                return Err(err(
                    "cluster.bug",
                    format!("`{b}`: not a planted bug (see `t3fs sim run --help` for the names)"),
                ));
            }
        }
        if !matches!(self.cluster.timeouts.as_str(), "3fs" | "fast") {
            return Err(err(
                "cluster.timeouts",
                format!("`{}`: expected \"3fs\" or \"fast\"", self.cluster.timeouts),
            ));
        }
        if self.cluster.chunk_size == 0
            || self.cluster.chunk_size > t3fs_core::limits::CHUNK_SIZE_MAX
        {
            return Err(err(
                "cluster.chunk_size",
                format!(
                    "{}: must be 1 ..= {}",
                    self.cluster.chunk_size,
                    t3fs_core::limits::CHUNK_SIZE_MAX
                ),
            ));
        }
        if !matches!(self.node.store.as_str(), "file" | "uring") {
            return Err(err(
                "node.store",
                format!("`{}`: expected \"file\" or \"uring\"", self.node.store),
            ));
        }
        self.rdma
            .check(&self.node.transport, self.cluster.chunk_size)
            .map_err(|(key, m)| err(key, m))?;
        if self.cluster.token.len() < 16 {
            return Err(err("cluster.token", "shorter than 16 characters".into()));
        }
        if self.kv_choice().is_err() {
            return Err(err(
                "cluster.kv",
                format!(
                    "`{}`: expected \"embedded\" or \"etcd://HOST:PORT\"",
                    self.cluster.kv
                ),
            ));
        }
        Ok(())
    }

    /// Checks that every address (the cluster's, the node's listen and metrics) is HOST:PORT;
    /// `err` makes the error of a key.
    fn check_addresses(
        &self,
        err: &dyn Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        for (k, v) in &self.addresses {
            if k.parse::<u32>().is_err() {
                return Err(err(&format!("addresses.{k}"), "not a node id".into()));
            }
            if v.parse::<SocketAddr>().is_err() {
                return Err(err(
                    &format!("addresses.{k}"),
                    format!("`{v}`: not HOST:PORT"),
                ));
            }
        }
        for (key, v) in [
            ("node.listen", &self.node.listen),
            ("node.metrics", &self.node.metrics),
        ] {
            if v.parse::<SocketAddr>().is_err() {
                return Err(err(key, format!("`{v}`: not HOST:PORT")));
            }
        }
        Ok(())
    }

    /// The cluster's shape.
    pub fn shape(&self) -> Shape {
        let c = &self.cluster;
        Shape {
            mgmtd: c.mgmtd,
            storage_nodes: c.storage_nodes,
            targets_per_node: c.targets_per_node,
            replicas: c.replicas,
            chains: c.chains,
            clients: 0,
            meta: c.meta,
        }
    }

    /// The cluster plan.
    pub fn plan(&self) -> Plan {
        Plan::new(self.shape())
    }

    /// The id of the `kv` service node.
    pub fn kv_node(&self) -> NodeId {
        let c = &self.cluster;
        NodeId(u64::from(c.mgmtd) + u64::from(c.storage_nodes) + u64::from(c.meta))
    }

    /// Where the KV lives.
    pub fn kv_choice(&self) -> Result<KvChoice, String> {
        match self.cluster.kv.as_str() {
            "embedded" => Ok(KvChoice::Embedded(self.kv_node())),
            s => match s.strip_prefix("etcd://") {
                Some(ep) if !ep.is_empty() => Ok(KvChoice::Etcd(ep.to_string())),
                _ => Err(s.to_string()),
            },
        }
    }

    /// The role of node `id` in the plan (`None`: the kv service or unknown).
    pub fn role_of(&self, id: NodeId) -> Option<Role> {
        let p = self.plan();
        if p.mgmtd.contains(&id) {
            Some(Role::Mgmtd)
        } else if p.storage.contains(&id) {
            Some(Role::Storage)
        } else if p.meta.contains(&id) {
            Some(Role::Meta)
        } else {
            None
        }
    }

    /// Which node id holds which server role (the transport refuses a peer claiming a server
    /// role at another id, or a client's at a server's).
    pub fn roster(&self) -> crate::transport::Roster {
        use crate::transport::PeerRole;
        let p = self.plan();
        let mut r = std::collections::BTreeMap::new();
        for (ids, role) in [
            (&p.mgmtd, PeerRole::Mgmtd),
            (&p.storage, PeerRole::Storage),
            (&p.meta, PeerRole::Meta),
        ] {
            r.extend(ids.iter().map(|n| (*n, role)));
        }
        r.insert(self.kv_node(), PeerRole::Kv);
        crate::transport::Roster(r)
    }

    /// The role-configuration knobs.
    pub fn tuning(&self) -> Tuning {
        let c = &self.cluster;
        Tuning {
            timeouts: if c.timeouts == "3fs" {
                Timeouts::ThreeFs
            } else {
                Timeouts::Fast
            },
            read_mode: t3fs_core::storage::ReadMode::Committed,
            storage_lease: c.storage_lease,
            drift_ppm_max: t3fs_core::limits::CLOCK_DRIFT_PPM_MAX,
            gc_delay: None,
            idem_expire: None,
            file_layout: FileLayout {
                chunk_size: c.chunk_size,
                stripe: c.stripe,
            },
            serial_forwarding: c.serial_forwarding,
        }
    }

    /// Every address, parsed.
    pub fn addrs(&self) -> Vec<(NodeId, SocketAddr)> {
        self.addresses
            .iter()
            .filter_map(|(k, v)| Some((NodeId(k.parse().ok()?), v.parse().ok()?)))
            .collect()
    }

    /// The TOML text of this config.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a config serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[node]
id = 1
name = "storage-0"
listen = "127.0.0.1:7001"
metrics = "127.0.0.1:8001"
data = "/tmp/x"

[cluster]
token = "0123456789abcdef0123"
kv = "embedded"
mgmtd = 1
storage_nodes = 3
targets_per_node = 1
replicas = 3
chains = 1
meta = 1
timeouts = "fast"
chunk_size = 1048576
stripe = 1
storage_lease = false

[addresses]
0 = "127.0.0.1:7000"
"#;

    #[test]
    fn a_good_config_loads_and_round_trips() {
        let c = NodeConfig::parse("n.toml", GOOD).unwrap();
        assert_eq!(c.role_of(NodeId(1)), Some(Role::Storage));
        assert_eq!(c.kv_node(), NodeId(5));
        let again = NodeConfig::parse("n.toml", &c.to_toml()).unwrap();
        assert_eq!(again.to_toml(), c.to_toml());
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let bad = GOOD.replace("stripe = 1", "stripe = 1\nstrip = 2");
        let e = NodeConfig::parse("n.toml", &bad).unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.line, e.key.as_str()),
            ("n.toml", 21, "strip"),
            "{e}"
        );
        let bad = GOOD.replace("timeouts = \"fast\"", "timeouts = \"slow\"");
        let e = NodeConfig::parse("n.toml", &bad).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (18, "cluster.timeouts"), "{e}");
        let bad = GOOD.replace(
            "storage_lease = false",
            "storage_lease = false\nbug = \"nope\"",
        );
        let e = NodeConfig::parse("n.toml", &bad).unwrap_err();
        assert_eq!(e.key, "cluster.bug", "{e}");
        let planted = GOOD.replace(
            "storage_lease = false",
            "storage_lease = false\nbug = \"tail-ack-before-commit\"",
        );
        let c = NodeConfig::parse("n.toml", &planted).unwrap();
        assert_eq!(c.cluster.bug.as_deref(), Some("tail-ack-before-commit"));
        let bad = GOOD.replace("replicas = 3", "replicas = 4");
        let e = NodeConfig::parse("n.toml", &bad).unwrap_err();
        assert_eq!(e.key, "cluster.replicas", "{e}");
        let bad = GOOD.replace("chunk_size = 1048576", "chunk_size = \"big\"");
        let e = NodeConfig::parse("n.toml", &bad).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (19, "chunk_size"), "{e}");
    }
}
