//! A scenario's register workload on a real cluster: one native client per scenario client,
//! each running the simulator's operation stream (the same generator and payloads) against the
//! workload file's chunks, and every invocation and response recorded in one shared history.
//!
//! Chunk `k` of the workload is chunk `k` of [`WORKLOAD_INODE`], striped over every chain with
//! the scenario's write size as its chunk size, as in the simulator. Invariant: each record is
//! stamped under the history's lock with the one clock of this process, so the history's order
//! is the wall clock's; an operation that fails or is still running when its client stops stays
//! open (its effect unknown). Not here: the steps or the checks.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use t3fs_core::client::{ClientCall, ClientRet};
use t3fs_core::ids::{ChainId, InodeId};
use t3fs_core::layout::FileLayout;
use t3fs_scenario::history::{History, OpKind};
use t3fs_scenario::workload::{decode_payload, payload, Generator, Op};
use t3fs_scenario::{Rng, Workload};

use super::life::Life;
use t3fs_client::client::{Client, ClientError, ClientOptions};

/// The inode the workload's chunks belong to: far above any inode the meta service allocates,
/// so a cluster with meta keeps both apart.
pub const WORKLOAD_INODE: u64 = 1 << 56;

/// The shared history and its clock.
#[derive(Clone)]
pub struct Recorder {
    history: Arc<Mutex<History>>,
    zero: Instant,
}

impl Recorder {
    /// A new history whose time 0 is `zero`.
    pub fn new(zero: Instant) -> Self {
        Self {
            history: Arc::new(Mutex::new(History::default())),
            zero,
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut History) -> T) -> T {
        let mut h = self.history.lock().unwrap_or_else(|p| p.into_inner());
        h.now_ns = self.zero.elapsed().as_nanos() as u64;
        f(&mut h)
    }

    /// Operations recorded so far.
    pub fn len(&self) -> usize {
        self.with(|h| h.ops.len())
    }

    /// True before the first operation.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The history as it stands.
    pub fn snapshot(&self) -> History {
        self.with(|h| h.clone())
    }
}

/// The workload file's layout.
fn layout(w: &Workload, chains: &[ChainId]) -> FileLayout {
    FileLayout {
        chunk_size: w.write_size,
        chains: chains.to_vec(),
    }
}

/// Runs `op` for `client`, recording it; `deadline` bounds one call (its retries included), and
/// a crash of the client abandons it.
pub async fn execute(
    c: &Client,
    client: u32,
    op: Op,
    load: &Load,
    deadline: Duration,
    life: &mut Life,
) -> bool {
    let (w, chains, rec) = (&load.w, &load.chains, &load.rec);
    let inode = InodeId(WORKLOAD_INODE);
    let (chunk, kind, call) = match op {
        Op::Write { chunk, value } => (
            chunk,
            OpKind::Write(value),
            ClientCall::Write {
                inode,
                layout: layout(w, chains),
                offset: u64::from(chunk) * u64::from(w.write_size),
                data: payload(value, w.write_size),
            },
        ),
        Op::Read { chunk } => (
            chunk,
            OpKind::Read(None),
            ClientCall::Read {
                inode,
                layout: layout(w, chains),
                offset: u64::from(chunk) * u64::from(w.write_size),
                len: u64::from(w.write_size),
            },
        ),
    };
    let index = rec.with(|h| h.invoke(client, chunk, kind));
    let answer = tokio::select! {
        biased;
        () = life.crashed() => None,
        a = tokio::time::timeout(deadline, c.call(call)) => a.ok().and_then(Result::ok),
    };
    rec.with(|h| match answer {
        Some(ClientRet::Updated { .. }) if matches!(op, Op::Write { .. }) => {
            h.ret(index, None);
            true
        }
        Some(ClientRet::Read { data, served, .. }) if matches!(op, Op::Read { .. }) => {
            h.served(index, served.first().copied());
            h.ret(index, Some(decode_payload(&data)));
            true
        }
        // Failed, rejected, timed out or abandoned by a crash: the outcome is unknown; the
        // operation stays open.
        _ => {
            h.fail(index);
            false
        }
    })
}

/// What every workload client shares.
#[derive(Clone)]
pub struct Load {
    /// How clients reach the cluster.
    pub opts: ClientOptions,
    /// The scenario's workload.
    pub w: Workload,
    /// The workload file's chains.
    pub chains: Vec<ChainId>,
    /// The history.
    pub rec: Recorder,
    /// When the safety phase ends.
    pub stop: Instant,
    /// The longest one call may take (its retries included) before it is left open.
    pub call_bound: Duration,
}

/// One client's loop: the scenario's operation stream with think times until the load stops
/// (or the client's budget is spent). A crash (`life`) closes the client; a restart connects a
/// fresh one, and the stream goes on. Returns the operations it issued.
pub async fn client_loop(
    load: Load,
    client: u32,
    rng: Rng,
    mut life: Life,
) -> Result<u64, ClientError> {
    let mut c = Some(Client::connect(load.opts.clone()).await?);
    let mut gen = Generator::new(&load.w, client, rng);
    while Instant::now() < load.stop {
        let Some(cl) = c.as_ref().filter(|_| life.is_up()) else {
            if let Some(cl) = c.take() {
                cl.close().await;
            }
            tokio::select! {
                () = life.restarted() => {}
                () = tokio::time::sleep_until(load.stop.into()) => break,
            }
            c = Some(Client::connect(load.opts.clone()).await?);
            continue;
        };
        let Some(op) = gen.next_op() else { break };
        let left = load.stop.saturating_duration_since(Instant::now());
        let bound = load.call_bound.min(left.max(Duration::from_millis(1)));
        execute(cl, client, op, &load, bound, &mut life).await;
        tokio::select! {
            () = tokio::time::sleep(gen.think()) => {}
            () = life.crashed() => {}
        }
    }
    if let Some(cl) = c {
        cl.close().await;
    }
    Ok(gen.issued())
}

/// The final reads, by a fresh client recorded as `client`: every chunk read until one read
/// answers or `bound` passes. Returns the chunks no read answered.
pub async fn final_reads(
    load: &Load,
    client: u32,
    bound: Duration,
) -> Result<Vec<u32>, ClientError> {
    let c = Client::connect(load.opts.clone()).await?;
    let end = Instant::now() + bound;
    let mut unread = Vec::new();
    // The final reader is never crashed: a switch that stays up.
    let mut up = super::life::Lives::new(0).of(0);
    for chunk in 0..load.w.chunks {
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                unread.push(chunk);
                break;
            }
            let op = Op::Read { chunk };
            if execute(&c, client, op, load, left, &mut up).await {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    c.close().await;
    Ok(unread)
}
