//! A scenario's `[namespace]` workload on real meta servers: one native client per scenario
//! client runs the simulator's namespace stream (the same generator, the same file plans through
//! `t3fs_scenario::ns_files`) one request at a time, and every meta request, every data call of
//! an open file and every answer goes into one ordered log. The CLI replays that log into the
//! simulator's namespace history and file-read log and runs the simulator's checkers
//! (serializability, fsck over the KV rows, file reads).
//!
//! Invariant: events are appended under one lock in the order they happen, so the replay's
//! logical clocks order them as the wall clock did. A call that gets no answer within the
//! bound stays open (its effect unknown) and ends its client: the client closes, mgmtd drops
//! its session, and meta prunes what it held, as when a simulated client crashes (a scripted
//! crash, `life.rs`, does the same and restarts it later). Not here: the checkers, the register
//! workload (`workload.rs`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use t3fs_core::client::{ClientCall, ClientRet};
use t3fs_core::ids::{ChainId, NodeId, RequestId};
use t3fs_core::kv::{Key, KeyRange, KvEngine, Value};
use t3fs_core::meta::perm::User;
use t3fs_core::meta::request::{MetaAnswer, MetaOp, MetaResult};
use t3fs_scenario::namespace::{NsGenerator, NsWorkload};
use t3fs_scenario::ns_files::{
    client_user, initial_dirs, next_request, opens_session, Session, Step, FILE_WRITE_BYTES,
    INITIAL_DIR_PERM,
};
use t3fs_scenario::Rng;

use super::life::Life;
use t3fs_client::client::{Client, ClientError, ClientOptions};

/// Namespace request ids (and payload names) carry this bit, as in the simulator.
pub const NS_REQUEST_BIT: u64 = 1 << 63;

/// Identifies one data call: (client index, 0, request id), the simulator's call key.
pub type CallKey = (usize, u64, u64);

/// One entry of the log, in the order it happened.
#[derive(Clone, Debug)]
pub enum NsEvent {
    /// A meta request was sent.
    Invoke {
        /// Scenario client index.
        client: u32,
        /// The asking client's id.
        who: u64,
        /// The user it acts for.
        user: User,
        /// The request.
        op: MetaOp,
        /// Nanoseconds since the run's time 0.
        at_ns: u64,
    },
    /// The answer of the `index`-th `Invoke`.
    Ret {
        /// Which invocation (counted from 0 over `Invoke` events).
        index: usize,
        /// The answer.
        result: MetaResult,
    },
    /// A data call of an open file was sent.
    Called {
        /// The call's key.
        key: CallKey,
        /// The call.
        call: ClientCall,
    },
    /// A data call answered.
    Returned {
        /// The call's key.
        key: CallKey,
        /// The answer.
        ret: ClientRet,
    },
}

#[derive(Default)]
struct Events {
    log: Vec<NsEvent>,
    invokes: usize,
}

/// The shared log and its clock.
#[derive(Clone)]
pub struct NsLog {
    inner: Arc<Mutex<Events>>,
    zero: Instant,
}

impl NsLog {
    /// An empty log whose time 0 is `zero`.
    pub fn new(zero: Instant) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Events::default())),
            zero,
        }
    }

    fn push(&self, e: NsEvent) -> usize {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let index = g.invokes;
        if matches!(e, NsEvent::Invoke { .. }) {
            g.invokes += 1;
        }
        g.log.push(e);
        index
    }

    fn invoke(&self, client: u32, (who, user): (u64, User), op: MetaOp) -> usize {
        let at_ns = self.zero.elapsed().as_nanos() as u64;
        self.push(NsEvent::Invoke {
            client,
            who,
            user,
            op,
            at_ns,
        })
    }

    /// Every event so far, in order.
    pub fn events(&self) -> Vec<NsEvent> {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.log.clone()
    }

    /// Meta requests answered so far.
    pub fn answered(&self) -> usize {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.log
            .iter()
            .filter(|e| matches!(e, NsEvent::Ret { .. }))
            .count()
    }
}

/// What every namespace client shares.
#[derive(Clone)]
pub struct NsLoad {
    /// How clients reach the cluster.
    pub opts: ClientOptions,
    /// The scenario's namespace workload.
    pub w: NsWorkload,
    /// The log.
    pub log: NsLog,
    /// When new operations stop (open files are still closed after it).
    pub stop: Instant,
    /// The longest one call may wait for its answer before it is left open.
    pub call_bound: Duration,
}

/// Makes the starting tree (`/d0` …) as root, outside the history: the checker's reference
/// model starts from the same tree. Retries until `bound`, since meta may still be starting.
pub async fn seed_dirs(opts: &ClientOptions, dirs: u32, bound: Duration) -> Result<(), String> {
    let c = Client::connect(opts.clone())
        .await
        .map_err(|e| e.to_string())?;
    let end = Instant::now() + bound;
    let mut result = Ok(());
    for path in initial_dirs(dirs) {
        let op = MetaOp::Mkdirs {
            path: path.clone(),
            perm: INITIAL_DIR_PERM,
            recursive: false,
        };
        result = loop {
            let left = end.saturating_duration_since(Instant::now());
            let answer = tokio::time::timeout(left, c.call(ClientCall::Meta(op.clone()))).await;
            match answer {
                // Exists: an earlier attempt that timed out here committed after all.
                Ok(Ok(ClientRet::Meta(Ok(_) | Err(t3fs_core::meta::MetaError::Exists), _))) => {
                    break Ok(())
                }
                _ if left.is_zero() => break Err(format!("making {path}: no answer in {bound:?}")),
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        if result.is_err() {
            break;
        }
    }
    c.close().await;
    result
}

/// The chain table a session's layout names, from the client's routing.
fn table_of(c: &Client, s: &Session) -> Vec<ChainId> {
    let Some(l) = s.layout else {
        return Vec::new();
    };
    c.routing()
        .and_then(|r| {
            r.chain_tables
                .get(&(l.range.table, l.range.table_version))
                .cloned()
        })
        .unwrap_or_default()
}

/// One client's state.
struct Driver {
    gen: NsGenerator,
    open: Vec<Session>,
    next_req: u64,
    index: u32,
    who: (u64, User),
}

/// Why a call has no answer.
enum Cut {
    /// None came within the bound: the client's loop ends.
    Unanswered,
    /// The client crashed while waiting.
    Crashed,
}

/// One client's loop: the namespace stream with think times until the load stops and every
/// file it opened is closed. A crash (`life`) abandons the running call (open in the log) and
/// the files it holds; a restart connects with a fresh identity and the stream goes on.
/// Returns the meta requests it sent.
pub async fn client_loop(
    load: NsLoad,
    index: u32,
    rng: Rng,
    mut life: Life,
) -> Result<u64, ClientError> {
    let mut opts = load.opts.clone();
    opts.user = client_user(index.into());
    let mut c = Client::connect(opts.clone()).await?;
    let mut d = Driver {
        gen: NsGenerator::new(&load.w, rng),
        open: Vec::new(),
        next_req: 0,
        index,
        who: (c.id.0, client_user(index.into())),
    };
    let mut sent = 0;
    loop {
        let stopped = Instant::now() >= load.stop;
        if stopped && d.open.is_empty() {
            break;
        }
        match next(&c, &load, &mut d, stopped, &mut life).await {
            Ok(Some(meta)) => {
                sent += u64::from(meta);
                tokio::select! {
                    () = tokio::time::sleep(d.gen.think()) => continue,
                    () = life.crashed() => {}
                }
            }
            Ok(None) | Err(Cut::Unanswered) => break,
            Err(Cut::Crashed) => {}
        }
        // Crashed: the dead incarnation's sessions are for meta to prune.
        d.open.clear();
        c.close().await;
        tokio::select! {
            () = life.restarted() => {}
            () = tokio::time::sleep_until(load.stop.into()) => return Ok(sent),
        }
        c = Client::connect(opts.clone()).await?;
        d.who.0 = c.id.0;
    }
    c.close().await;
    Ok(sent)
}

/// Runs the client's next operation: a step of a file it holds open, else maybe a close, else
/// the generator's. `Ok(Some(true))` when it was a meta request, `Ok(None)` when nothing is left.
async fn next(
    c: &Client,
    load: &NsLoad,
    d: &mut Driver,
    stopped: bool,
    life: &mut Life,
) -> Result<Option<bool>, Cut> {
    d.next_req += 1;
    let req = RequestId(NS_REQUEST_BIT | d.next_req);
    if let Some(k) = d.open.iter().position(|s| s.busy(stopped)) {
        let table = table_of(c, &d.open[k]);
        match d.open[k].step(&table, req) {
            Some(Step::Data(call)) => {
                let key = (d.index as usize, 0, req.0);
                load.log.push(NsEvent::Called {
                    key,
                    call: call.clone(),
                });
                let ret = answer(c, call, load.call_bound, life).await?;
                load.log.push(NsEvent::Returned {
                    key,
                    ret: ret.clone(),
                });
                let _ = d.open[k].data_returned(&ret);
                return Ok(Some(false));
            }
            Some(Step::Sync(op)) => {
                let result = meta(c, load, d, op, life).await?;
                if let Some(s) = d.open.get_mut(k) {
                    s.synced(&result);
                }
                return Ok(Some(true));
            }
            None => {}
        }
    }
    let Some(op) = next_request(&mut d.gen, &mut d.open, stopped, req.0) else {
        return Ok(None);
    };
    let write_open = opens_session(&op);
    let result = meta(c, load, d, op, life).await?;
    if let (true, Ok(MetaAnswer::Inode(inode))) = (write_open, &result) {
        let plan = d.gen.file_plan(FILE_WRITE_BYTES.into());
        d.open.extend(Session::opened(inode, req.0, plan));
    }
    Ok(Some(true))
}

/// Sends one meta request and logs it and its answer.
async fn meta(
    c: &Client,
    load: &NsLoad,
    d: &Driver,
    op: MetaOp,
    life: &mut Life,
) -> Result<MetaResult, Cut> {
    let index = load.log.invoke(d.index, d.who, op.clone());
    match answer(c, ClientCall::Meta(op), load.call_bound, life).await? {
        ClientRet::Meta(result, _) => {
            load.log.push(NsEvent::Ret {
                index,
                result: result.clone(),
            });
            Ok(result)
        }
        // An answer of the wrong kind: the effect is unknown; it stays open.
        _ => Err(Cut::Unanswered),
    }
}

/// The client machine's answer to `call`; none within `bound`, or a crash first, cuts it.
async fn answer(
    c: &Client,
    call: ClientCall,
    bound: Duration,
    life: &mut Life,
) -> Result<ClientRet, Cut> {
    tokio::select! {
        biased;
        () = life.crashed() => Err(Cut::Crashed),
        r = tokio::time::timeout(bound, c.call(call)) => match r {
            Ok(Ok(ret)) => Ok(ret),
            _ => Err(Cut::Unanswered),
        },
    }
}

/// Whether GC and session pruning are done in `kv` (nothing under the GC root, no write session), as the simulator waits for.
pub fn gc_drained(kv: &mut dyn KvEngine) -> Result<bool, String> {
    use t3fs_core::meta::{all_sessions, dirent_range, GC_ROOT};
    let at = kv.read_version().map_err(|e| e.to_string())?;
    let empty = |kv: &mut dyn KvEngine, r: KeyRange| {
        kv.range(at, &r, 1)
            .map(|rows| rows.is_empty())
            .map_err(|e| e.to_string())
    };
    Ok(empty(kv, dirent_range(GC_ROOT, b""))? && empty(kv, all_sessions())?)
}

/// Every row of the KV at its newest version, in key order.
pub fn all_rows(kv: &mut dyn KvEngine) -> Result<Vec<(Key, Value)>, String> {
    let at = kv.read_version().map_err(|e| e.to_string())?;
    kv.range(at, &KeyRange::prefix(b""), usize::MAX)
        .map_err(|e| e.to_string())
}

/// A node id for the runner's own KV connection, outside the plan's and the clients' ranges.
pub const RUNNER_KV_NODE: NodeId = NodeId((1 << 30) + 7);

/// The kv service's node entry.
fn kv_entry(nodes: &[crate::cluster::NodeEntry]) -> Result<&crate::cluster::NodeEntry, String> {
    nodes
        .iter()
        .find(|n| n.role == "kv")
        .ok_or_else(|| "the cluster has no kv service".to_string())
}

/// How long GC and session pruning may take once the workload ended, as the simulator allows:
/// a dead writer's sessions go once mgmtd dropped its client session (1.5 session timeouts)
/// and a prune round ran (10 s).
pub fn drain_bound(timeouts: t3fs_scenario::Timeouts) -> Duration {
    let t = t3fs_core::mgmtd::MgmtdConfig::new(NodeId(0)).session_timeout;
    let t = match timeouts {
        t3fs_scenario::Timeouts::ThreeFs => t,
        t3fs_scenario::Timeouts::Fast => t / 10,
    };
    t + t / 2 + Duration::from_secs(10)
}

/// Polls the running cluster's KV until GC and session pruning are done or `bound` passes;
/// blocking (the remote KV runs its own runtime). `Ok(true)`: drained.
pub fn wait_drained(nodes: &[crate::cluster::NodeEntry], bound: Duration) -> Result<bool, String> {
    let kv = kv_entry(nodes)?;
    let addr = kv
        .cfg
        .node
        .listen
        .parse()
        .map_err(|e| format!("kv address: {e}"))?;
    let mut remote = t3fs_services::kv_service::RemoteKv::connect(
        RUNNER_KV_NODE,
        NodeId(kv.cfg.node.id.into()),
        addr,
        &kv.cfg.cluster.token,
    )
    .map_err(|e| format!("connecting to the kv service: {e}"))?;
    let end = Instant::now() + bound;
    loop {
        // A KV error (the service restarting) is retried like "not yet".
        if gc_drained(&mut remote) == Ok(true) {
            return Ok(true);
        }
        if Instant::now() >= end {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Every KV row, read from the kv service's engine on disk once every process has exited.
pub fn rows_after_stop(nodes: &[crate::cluster::NodeEntry]) -> Result<Vec<(Key, Value)>, String> {
    let dir = kv_entry(nodes)?.cfg.node.data.join("kv");
    let mut kv =
        t3fs_services::wal_kv::WalKv::open(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    all_rows(&mut kv)
}
