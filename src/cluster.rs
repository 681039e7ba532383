//! `t3fs serve` and `t3fs cluster …`: argument parsing for the real services and local clusters
//! (the behaviour is t3fs-real's `serve`, `cluster` and `client`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Subcommand;

use t3fs_client::client::Client;
use t3fs_real::cluster;

/// `t3fs cluster …`.
#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Start a cluster on loopback, one process per node, and wait until every chain serves.
    Up {
        /// The cluster directory (configs, data, logs, pids).
        #[arg(long, default_value = "t3fs-cluster")]
        dir: PathBuf,
        /// Storage nodes.
        #[arg(long, default_value_t = 3)]
        storage: u32,
        /// Targets per storage node.
        #[arg(long, default_value_t = 1)]
        targets_per_node: u32,
        /// Replicas per chain.
        #[arg(long, default_value_t = 3)]
        replicas: u32,
        /// mgmtd nodes.
        #[arg(long, default_value_t = 1)]
        mgmtd: u32,
        /// Meta servers.
        #[arg(long, default_value_t = 1)]
        meta: u32,
        /// `embedded` (a kv process) or `etcd://HOST:PORT`.
        #[arg(long, default_value = "embedded")]
        kv: String,
        /// Timeout profile: `fast` (6 s failure detection) or `3fs` (60 s).
        #[arg(long, default_value = "fast", value_parser = ["fast", "3fs"])]
        timeouts: String,
        /// Chunk size of new files, bytes.
        #[arg(long, default_value_t = 1 << 20)]
        chunk_size: u32,
        /// Seconds to wait for every chain to serve.
        #[arg(long, default_value_t = 60)]
        wait: u64,
        /// Chunk store of every target: `file` or `uring` (io_uring, O_DIRECT).
        #[arg(long, default_value = "file", value_parser = ["file", "uring"])]
        store: String,
        /// `loopback`, or `netns`: every server process in its own network namespace joined by
        /// a bridge (root only), so that the kernel can cut its links.
        #[arg(long, default_value = "loopback", value_parser = ["loopback", "netns"])]
        hosts: String,
        /// The storage-side lease (a t3fs improvement; off is 3FS's behaviour).
        #[arg(long)]
        storage_lease: bool,
        /// Storage forwards an update only after its local update landed (3FS's serial path)
        /// instead of beside it (pipelined, the default): for comparing the two.
        #[arg(long)]
        serial_forwarding: bool,
        /// Run every node with a planted bug (for showing that checkers fail; see `t3fs sim
        /// run --help` for the names).
        #[arg(long)]
        bug: Option<String>,
        /// How frames travel: `tcp`, `rdma` (a verbs device; fails at once, naming what is
        /// missing, on a host without one) or `soft-rdma` (the software verbs fabric in a
        /// process of its own: the RDMA data path without hardware).
        #[arg(long, default_value = "tcp", value_parser = ["tcp", "rdma", "soft-rdma"])]
        transport: String,
        /// Chunk I/O deadline of every storage node in milliseconds (0: none): a store
        /// operation unanswered this long fails its target, which leaves its chains.
        #[arg(long, default_value_t = 30_000)]
        chunk_io_deadline_ms: u64,
        /// Serve the fault-injection endpoint on every node (`PUT /fault`, `/disk`, `/clock`,
        /// `/kv` with the token): for tests; off by default.
        #[arg(long)]
        fault_injection: bool,
        /// Tokio worker threads of every service process (0: each runs its tasks on its main
        /// thread; `[node] worker_threads`). Unset: 2 for storage, 0 for the other roles.
        #[arg(long)]
        worker_threads: Option<usize>,
    },
    /// Run a scenario file (a catalog name or a path) on real processes: a cluster from its
    /// `[cluster]` section, its workload through native clients, its steps as signals and
    /// restarts, then the simulator's checkers on the real history.
    Run(t3fs_crosscheck::cluster_run::RunArgs),
    /// A Jepsen-style soak: a 3-replica cluster under load for N minutes while faults drawn
    /// from a seed (the swarm's generator, restricted to what runs for real) strike one after
    /// another; the whole history is checked at the end.
    Soak(t3fs_crosscheck::cluster_soak::SoakArgs),
    /// Nodes, targets and chains of a running cluster.
    Status {
        /// The cluster directory.
        #[arg(long, default_value = "t3fs-cluster")]
        dir: PathBuf,
    },
    /// Issue a credential for a client: `client` acts for one user (meta takes its uid and
    /// gid, not the ones a request names), `mount` for a trusted mount (acts for the users it
    /// names). The credential does not carry the cluster secret and cannot act as a server.
    Credential {
        /// The cluster directory (the secret is read from its configs).
        #[arg(long, default_value = "t3fs-cluster")]
        dir: PathBuf,
        /// `client` or `mount`.
        #[arg(long, default_value = "client", value_parser = ["client", "mount"])]
        role: String,
        /// The user a client credential acts for.
        #[arg(long, default_value_t = 1000)]
        uid: u32,
        /// Its group.
        #[arg(long, default_value_t = 1000)]
        gid: u32,
    },
    /// Send a signal to one node's process.
    Kill {
        /// The node (`storage-0`).
        node: String,
        /// The cluster directory.
        #[arg(long, default_value = "t3fs-cluster")]
        dir: PathBuf,
        /// KILL, STOP, CONT or TERM.
        #[arg(long, default_value = "KILL", value_parser = ["KILL", "STOP", "CONT", "TERM"])]
        signal: String,
    },
    /// Restart one node (its data and id stay).
    Restart {
        /// The node.
        node: String,
        /// The cluster directory.
        #[arg(long, default_value = "t3fs-cluster")]
        dir: PathBuf,
    },
    /// Stop every process of the cluster; its data stays for the next `up`.
    Down {
        /// The cluster directory.
        #[arg(long, default_value = "t3fs-cluster")]
        dir: PathBuf,
    },
    /// Write a file through the native client in 1 MiB writes, read it back, verify it, and
    /// print both throughputs.
    Io {
        /// The cluster directory.
        #[arg(long, default_value = "t3fs-cluster")]
        dir: PathBuf,
        /// MiB to write and read.
        #[arg(long, default_value_t = 64)]
        mib: u64,
        /// Writes (and reads) in flight at once.
        #[arg(long, default_value_t = 1)]
        depth: usize,
    },
}

/// A credential string for `role` from the secret of the cluster in `dir`.
fn credential(dir: &std::path::Path, role: &str, uid: u32, gid: u32) -> Result<String, String> {
    use t3fs_services::transport::Credential;
    let nodes = cluster::nodes(dir)?;
    let secret = &nodes
        .first()
        .ok_or("no nodes in the cluster directory")?
        .cfg
        .cluster
        .token;
    let c = match role {
        "mount" => Credential::mount(secret),
        _ => Credential::client(secret, uid, gid),
    };
    let text = c
        .encode()
        .ok_or("a trusted credential has no string form")?;
    Ok(format!("{text}\n"))
}

fn done(r: Result<String, String>) -> ExitCode {
    match r {
        Ok(s) => {
            print!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs a cluster command.
pub fn run(cmd: ClusterCommand) -> ExitCode {
    match cmd {
        ClusterCommand::Up {
            dir,
            storage,
            targets_per_node,
            replicas,
            mgmtd,
            meta,
            kv,
            timeouts,
            chunk_size,
            wait,
            store,
            hosts,
            storage_lease,
            serial_forwarding,
            bug,
            transport,
            chunk_io_deadline_ms,
            fault_injection,
            worker_threads,
        } => {
            let o = cluster::UpOptions {
                dir,
                storage,
                targets_per_node,
                replicas,
                mgmtd,
                meta,
                kv,
                timeouts,
                chunk_size,
                wait: Duration::from_secs(wait),
                store,
                hosts,
                storage_lease,
                serial_forwarding,
                bug,
                transport,
                chunk_io_deadline_ms,
                fault_injection,
                worker_threads,
            };
            done(cluster::up(&o))
        }
        ClusterCommand::Run(a) => t3fs_crosscheck::cluster_run::run(a),
        ClusterCommand::Soak(a) => t3fs_crosscheck::cluster_soak::soak(a),
        ClusterCommand::Status { dir } => done(cluster::status(&dir)),
        ClusterCommand::Credential {
            dir,
            role,
            uid,
            gid,
        } => done(credential(&dir, &role, uid, gid)),
        ClusterCommand::Kill { node, dir, signal } => done(cluster::kill(&dir, &node, &signal)),
        ClusterCommand::Restart { node, dir } => done(cluster::restart(&dir, &node)),
        ClusterCommand::Down { dir } => done(cluster::down(&dir)),
        ClusterCommand::Io { dir, mib, depth } => done(io(&dir, mib, depth)),
    }
}

fn io(dir: &std::path::Path, mib: u64, depth: usize) -> Result<String, String> {
    let opts = cluster::client_options(dir)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async move {
        let c = Client::connect(opts).await.map_err(|e| e.to_string())?;
        let r = io_with(&c, mib, depth.max(1)).await;
        c.close().await;
        r
    })
}

async fn io_with(c: &Client, mib: u64, depth: usize) -> Result<String, String> {
    const MIB: u64 = 1 << 20;
    let path = format!("/io-{}-{}", std::process::id(), c.id.0);
    let f = c.create(&path, 0o644).await.map_err(|e| e.to_string())?;
    let block = |i: u64| -> Vec<u8> {
        (0..MIB)
            .map(|k| (k.wrapping_mul(31) ^ i.wrapping_mul(131)) as u8)
            .collect()
    };
    let t = Instant::now();
    let mut i = 0;
    while i < mib {
        let n = (depth as u64).min(mib - i);
        let pieces = (i..i + n).map(|k| (k * MIB, block(k))).collect();
        c.write_many(&f, pieces).await.map_err(|e| e.to_string())?;
        i += n;
    }
    let wt = t.elapsed();
    c.close_file(&f, mib * MIB)
        .await
        .map_err(|e| e.to_string())?;
    let f = c.open(&path, false).await.map_err(|e| e.to_string())?;
    let t = Instant::now();
    let mut i = 0;
    while i < mib {
        let n = (depth as u64).min(mib - i);
        let pieces = (i..i + n).map(|k| (k * MIB, MIB)).collect();
        let got = c.read_many(&f, pieces).await.map_err(|e| e.to_string())?;
        for (k, data) in (i..).zip(got) {
            if data != block(k) {
                return Err(format!("{path}: MiB {k} read back different bytes"));
            }
        }
        i += n;
    }
    let rt = t.elapsed();
    let st = c.stat(&path).await.map_err(|e| e.to_string())?;
    let len = match st.kind {
        t3fs_core::meta::InodeKind::File { length, .. } => length,
        _ => 0,
    };
    Ok(format!(
        "{path}: wrote {mib} MiB in 1 MiB writes (depth {depth}) at {:.1} MiB/s, read back and verified at {:.1} MiB/s; stat length {len}\n",
        mib as f64 / wt.as_secs_f64(),
        mib as f64 / rt.as_secs_f64()
    ))
}

/// A service's runtime: `workers` tokio workers, or with 0 a current-thread runtime that runs
/// every task on the thread calling `block_on`.
fn service_runtime(workers: usize) -> std::io::Result<tokio::runtime::Runtime> {
    let mut b = match workers {
        0 => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
    };
    b.enable_all().build()
}

/// `t3fs serve ROLE --config FILE`.
pub fn serve(role: &str, config: &std::path::Path) -> ExitCode {
    let role: t3fs_services::serve::ServeRole = match role.parse() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let cfg = match t3fs_services::config::NodeConfig::load(config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_target(false)
        .with_ansi(false)
        .init();
    let storage = matches!(
        role,
        t3fs_services::serve::ServeRole::Machine(t3fs_core::node::Role::Storage)
    );
    let workers = cfg
        .node
        .worker_threads
        .unwrap_or_else(|| t3fs_services::config::default_worker_threads(storage));
    let rt = match service_runtime(workers) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(t3fs_services::serve::serve(role, cfg)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}
