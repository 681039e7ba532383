//! `t3fs serve ROLE --config FILE`: one process of a real cluster.
//!
//! Builds the role's machine from the config and the shared plan, opens its durable state
//! (chunk stores in `DATA/target-N`, the KV engine in `DATA/kv`), starts the transport and the
//! metrics endpoint, runs the node on the tokio driver, and on SIGTERM or SIGINT shuts down
//! gracefully (in-flight I/O completes, stores close). Every start takes the next incarnation
//! number (`DATA/incarnation`, fsynced), so I/O ids and the identity of meta's storage client
//! are fresh after every restart.
//!
//! Boot: a storage node always starts from what its stores list, and mgmtd decides what an
//! empty store is: the node reports its targets ONLINE (and `fresh` when a store is empty),
//! and mgmtd's restart rule takes them out of their chains and resyncs them from a replica that
//! held data; only when every target of a chain reports fresh (a new deployment, or every copy
//! lost) does mgmtd let one of them serve first, the chain's last SERVING (LASTSRV) rule. No
//! local marker says "this target is new": a wiped or replaced disk cannot keep one, and the
//! `in-service` marker and later the deployment's first-boot token (both gone) were exactly
//! such a marker. A deployment costs one round of that rule (about 3 s for `cluster up`). The
//! `kv` service seeds an empty engine with the plan's mgmtd rows and the namespace root. Not here: config parsing (config.rs), the
//! driver (node/).

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use t3fs_core::chunk::{ChunkDone, ChunkOp, ChunkStore};
use t3fs_core::ids::{IoId, NodeId};
use t3fs_core::kv::KvEngine;
use t3fs_core::node::Role;
use t3fs_scenario::plan::Plan;

use crate::config::{KvChoice, NodeConfig};
use crate::node::{self, KvBackend};
use crate::transport::{Credential, Inbound, PeerRole, Transport, TransportConfig};

mod machine;

/// The role named on the command line (`kv` is the KV service, not a machine).
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum ServeRole {
    /// A machine role.
    Machine(Role),
    /// The KV service.
    Kv,
}

impl std::str::FromStr for ServeRole {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "mgmtd" => Self::Machine(Role::Mgmtd),
            "storage" => Self::Machine(Role::Storage),
            "meta" => Self::Machine(Role::Meta),
            "kv" => Self::Kv,
            _ => {
                return Err(format!(
                    "unknown role `{s}`: expected mgmtd, storage, meta or kv"
                ))
            }
        })
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Reads, bumps and persists the incarnation number in `data`.
pub fn next_incarnation(data: &Path) -> std::io::Result<u64> {
    std::fs::create_dir_all(data)?;
    let p = data.join("incarnation");
    // Only an absent file starts from zero. An unreadable or garbled one is an error: resetting
    // it would repeat an earlier incarnation's I/O ids and meta's storage client id.
    let cur: u64 = match std::fs::read_to_string(&p) {
        Ok(s) => s.trim().parse().map_err(|e| {
            std::io::Error::other(format!(
                "{}: `{}` is no incarnation number ({e}); restore it or write a number above \
                 every earlier one",
                p.display(),
                s.trim()
            ))
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => {
            return Err(std::io::Error::new(
                e.kind(),
                format!("{}: {e}", p.display()),
            ))
        }
    };
    let next = cur
        .checked_add(1)
        .ok_or_else(|| std::io::Error::other(format!("{}: incarnations exhausted", p.display())))?;
    let tmp = data.join("incarnation.tmp");
    let mut f = std::fs::File::create(&tmp)?;
    writeln!(f, "{next}")?;
    f.sync_all()?;
    std::fs::rename(&tmp, &p)?;
    std::fs::File::open(data)?.sync_all()?;
    Ok(next)
}

/// Runs `role` with `cfg` until SIGTERM/SIGINT or a halt; returns the halt reason as an error.
pub async fn serve(role: ServeRole, cfg: NodeConfig) -> Result<(), BoxError> {
    let me = NodeId(cfg.node.id.into());
    check_role_in_plan(role, &cfg, me)?;
    let inc = next_incarnation(&cfg.node.data)?;
    let listen = cfg.node.listen.parse()?;
    let (transport, inbound) = start_transport(role, &cfg, me, listen).await?;
    let metrics = crate::transport::net::bind_tcp(cfg.node.metrics.as_str()).await?;
    tracing::info!(node = %cfg.node.name, id = me.0, incarnation = inc, listen = %listen, "starting {role:?}");
    if role == ServeRole::Kv {
        return serve_kv(&cfg, transport, inbound, metrics).await;
    }
    let ServeRole::Machine(r) = role else {
        unreachable!()
    };
    machine::serve_machine(r, &cfg, me, inc, transport, inbound, metrics).await
}

/// Fails unless the plan gives node `me` the role `role`.
fn check_role_in_plan(role: ServeRole, cfg: &NodeConfig, me: NodeId) -> Result<(), BoxError> {
    let expected = match role {
        ServeRole::Kv => me == cfg.kv_node(),
        ServeRole::Machine(r) => cfg.role_of(me) == Some(r),
    };
    if !expected {
        return Err(format!(
            "node {} is not a {role:?} in this cluster's plan",
            cfg.node.id
        )
        .into());
    }
    Ok(())
}

/// Starts the transport of `role` on `listen` and tells it every other node's address.
async fn start_transport(
    role: ServeRole,
    cfg: &NodeConfig,
    me: NodeId,
    listen: std::net::SocketAddr,
) -> Result<(Transport, tokio::sync::mpsc::Receiver<Inbound>), BoxError> {
    let prole = match role {
        ServeRole::Kv => PeerRole::Kv,
        ServeRole::Machine(r) => PeerRole::of(r),
    };
    let cred = Credential::trusted(&cfg.cluster.token, prole);
    let mut tc = TransportConfig::with_credential(me, Some(listen), cred);
    tc.roster = Some(cfg.roster());
    tc.rdma = cfg.rdma.wire(&cfg.node.transport, &cfg.node.name)?;
    let (transport, inbound) = Transport::start(tc).await?;
    for (n, a) in cfg.addrs() {
        if n != me {
            transport.set_addr(n, a);
        }
    }
    Ok((transport, inbound))
}

/// How a node's driver task ended, as the process's result: a halt or a panic is an error
/// (the process exits non-zero with the cause logged), a shutdown is not. A panicking driver
/// once exited 0, so a supervisor saw a clean stop.
fn driver_outcome(
    name: &str,
    ended: Result<Option<String>, tokio::task::JoinError>,
) -> Result<(), BoxError> {
    match ended {
        Ok(None) => Ok(()),
        Ok(Some(h)) => Err(format!("{name} halted: {h}").into()),
        Err(e) if e.is_panic() => {
            let p = e.into_panic();
            let why = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-text panic payload".into());
            Err(format!("{name}: the node driver panicked: {why}").into())
        }
        Err(e) => Err(format!("{name}: the node driver task ended: {e}").into()),
    }
}

fn kv_backend(cfg: &NodeConfig) -> Result<KvBackend, BoxError> {
    Ok(match cfg.kv_choice()? {
        KvChoice::Embedded(n) => KvBackend::Remote(n),
        KvChoice::Etcd(ep) => etcd_engine(&ep, &cfg.cluster.token)?,
    })
}

/// Connects to etcd (blocking: call it off the runtime). Each cluster keeps its rows under a
/// prefix of its own (derived from its token), so clusters can share one etcd.
#[cfg(feature = "etcd")]
fn etcd_engine(ep: &str, token: &str) -> Result<KvBackend, BoxError> {
    let prefix = etcd_prefix(token);
    let e = crate::etcd_kv::EtcdKv::connect(&[format!("http://{ep}")], prefix.as_bytes())?;
    Ok(KvBackend::Engine(Arc::new(Mutex::new(Box::new(e)))))
}

/// The etcd key prefix of the cluster with `token`: a 64-bit FNV-1a hash of the whole token.
/// It was the token's first 8 bytes, which panicked on a token with a multi-byte character
/// there and gave clusters whose tokens share a prefix the same keys.
pub fn etcd_prefix(token: &str) -> String {
    let h = token.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("t3fs/{h:016x}/")
}

#[cfg(not(feature = "etcd"))]
fn etcd_engine(_: &str, _: &str) -> Result<KvBackend, BoxError> {
    Err("this binary was built without the `etcd` feature (cargo build --features etcd)".into())
}

/// Opens the chunk store (`file` or `uring`) of one target.
pub fn open_store(kind: &str, dir: &Path) -> std::io::Result<Box<dyn crate::chunk_store::Rot>> {
    match kind {
        #[cfg(feature = "uring")]
        "uring" => Ok(Box::new(crate::chunk_store::UringChunkStore::open(dir)?)),
        "file" => Ok(Box::new(crate::chunk_store::FileChunkStore::open(dir)?)),
        k => Err(std::io::Error::other(format!(
            "chunk store `{k}` is not built into this binary"
        ))),
    }
}

/// Lists every chunk of a store (boot).
pub fn list(s: &mut dyn ChunkStore) -> std::io::Result<Vec<t3fs_core::chunk::ChunkMeta>> {
    s.submit(IoId(0), ChunkOp::List);
    let mut done = Vec::new();
    loop {
        s.poll_completions(&mut done);
        if let Some((_, r)) = done.pop() {
            return match r {
                Ok(ChunkDone::Listed(m)) => Ok(m),
                other => Err(std::io::Error::other(format!("listing chunks: {other:?}"))),
            };
        }
        s.wait(std::time::Duration::from_millis(1));
    }
}

async fn serve_kv(
    cfg: &NodeConfig,
    transport: Transport,
    inbound: tokio::sync::mpsc::Receiver<crate::transport::Inbound>,
    metrics: tokio::net::TcpListener,
) -> Result<(), BoxError> {
    let dir = cfg.node.data.join("kv");
    let engine = tokio::task::spawn_blocking(move || crate::wal_kv::WalKv::open(&dir))
        .await??
        .into_shared();
    let mut e = engine.clone();
    let plan: Plan = cfg.plan();
    tokio::task::spawn_blocking(move || seed(&plan, &mut e)).await??;
    let counters = Arc::new(crate::kv_service::KvServiceCounters::default());
    let snapshot = Arc::new(Mutex::new(node::Snapshot {
        ready: true,
        status: "kv serving\n".into(),
        ..Default::default()
    }));
    let kv_faults = Arc::new(crate::kv_faults::KvFaultLayer::default());
    let resources: crate::fault_query::Resources = vec![("/kv", kv_faults.clone())];
    let http = tokio::spawn(crate::metrics::serve(
        metrics,
        snapshot.clone(),
        cfg.cluster.token.clone(),
        cfg.node.fault_injection.then_some(resources),
    ));
    let (t2, c2, s2) = (transport.clone(), counters.clone(), snapshot.clone());
    let refresh = tokio::spawn(async move {
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            let c = t2.counters();
            let m = format!(
                "t3fs_kv_answered_total {}\nt3fs_kv_dropped_total {}\nt3fs_transport_total{{name=\"frames_in\"}} {}\nt3fs_transport_total{{name=\"auth_rejected\"}} {}\nt3fs_transport_total{{name=\"malformed\"}} {}\nt3fs_transport_total{{name=\"refused_role\"}} {}\nt3fs_transport_total{{name=\"id_taken\"}} {}\n",
                c2.answered.load(std::sync::atomic::Ordering::Relaxed),
                c2.dropped.load(std::sync::atomic::Ordering::Relaxed),
                c.frames_in, c.auth_rejected, c.malformed, c.refused_role, c.id_taken
            );
            if let Ok(mut s) = s2.lock() {
                s.metrics = m;
            }
        }
    });
    let serving = tokio::spawn(crate::kv_service::serve(
        engine,
        transport.clone(),
        inbound,
        counters,
        kv_faults,
    ));
    let mut serving = serving;
    let ended = tokio::select! {
        _ = shutdown_signal() => {
            tracing::info!(node = %cfg.node.name, "shutting down");
            serving.abort();
            Ok(())
        }
        // The serving task never ends by itself: if it does, the KV is gone for every other
        // node, and the process says so and exits non-zero rather than idle on.
        r = &mut serving => Err(match r {
            Ok(()) => format!("{}: the KV serving task ended", cfg.node.name),
            Err(e) => format!("{}: the KV serving task failed: {e}", cfg.node.name),
        }),
    };
    refresh.abort();
    http.abort();
    transport.shutdown().await;
    ended.map_err(Into::into)
}

/// Seeds an empty KV with the plan's mgmtd rows, chain tables and namespace root.
fn seed(plan: &Plan, kv: &mut dyn KvEngine) -> Result<(), String> {
    if !Plan::is_seeded(kv).map_err(|e| e.to_string())? {
        plan.seed_mgmtd(kv).map_err(|e| e.to_string())?;
        plan.seed_chain_tables(kv).map_err(|e| e.to_string())?;
        Plan::seed_namespace(kv, node::now().0 / 1_000_000_000)?;
    }
    Ok(())
}

/// Resolves at the first SIGTERM or SIGINT (never, if the handlers cannot be installed).
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

#[cfg(test)]
mod outcome_tests {
    use super::{driver_outcome, etcd_prefix, next_incarnation};

    #[test]
    fn etcd_prefixes_take_the_whole_token_and_any_characters() {
        let a = etcd_prefix("0123456789abcdef-cluster-a");
        let b = etcd_prefix("0123456789abcdef-cluster-b");
        assert_ne!(a, b, "tokens sharing a prefix get their own keys");
        assert_eq!(a, etcd_prefix("0123456789abcdef-cluster-a"));
        // Multi-byte characters across the old 8-byte cut no longer panic.
        assert!(etcd_prefix("ab\u{e9}\u{e9}\u{e9}\u{e9}").starts_with("t3fs/"));
    }

    #[test]
    fn a_garbled_incarnation_file_is_an_error_not_a_reset() {
        let dir = std::env::temp_dir().join(format!("t3fs-inc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(next_incarnation(&dir).unwrap(), 1);
        assert_eq!(next_incarnation(&dir).unwrap(), 2);
        std::fs::write(dir.join("incarnation"), "7\u{0}garbage").unwrap();
        let e = next_incarnation(&dir).expect_err("garbled");
        assert!(e.to_string().contains("no incarnation number"), "{e}");
        assert_eq!(
            std::fs::read_to_string(dir.join("incarnation")).unwrap(),
            "7\u{0}garbage",
            "the file is left for the operator"
        );
        std::fs::write(dir.join("incarnation"), format!("{}\n", u64::MAX)).unwrap();
        assert!(next_incarnation(&dir).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_panicking_driver_is_an_error_that_names_the_panic() {
        let panicked = tokio::spawn(async {
            if std::hint::black_box(true) {
                panic!("store thread gone");
            }
            None::<String>
        })
        .await;
        let e = driver_outcome("storage-1", panicked).expect_err("a panic is no clean stop");
        let text = e.to_string();
        assert!(
            text.contains("panicked") && text.contains("store thread gone"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_halt_is_an_error_and_a_shutdown_is_not() {
        assert!(driver_outcome("m", Ok(None)).is_ok());
        let e = driver_outcome("m", Ok(Some("lease lost".into()))).unwrap_err();
        assert!(e.to_string().contains("m halted: lease lost"));
        let cancelled = {
            let t = tokio::spawn(std::future::pending::<Option<String>>());
            t.abort();
            t.await
        };
        assert!(driver_outcome("m", cancelled).is_err());
    }
}
