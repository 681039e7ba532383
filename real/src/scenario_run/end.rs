//! The end of a real run before the cluster stops, past the final reads: the namespace
//! workload's end (its clients close what they hold, then GC and session pruning drain, as the
//! simulator waits for them) and the chunk metadata dump taken once the cluster is quiescent,
//! for the replicas-agree check while the targets still run.
//!
//! Invariant: every wait is bounded (the scenario's convergence bound, the drain bound), and a
//! dump not taken says why. Not here: the checks.

use std::time::{Duration, Instant};

use super::{mark, namespace, RunOptions};
use crate::bench_run::Mark;
use crate::cluster;

/// The namespace workload's end, as the simulator's: wait for the clients to close what they
/// hold (every call has its bound), then for GC and session pruning.
pub(super) async fn ns_end(
    o: &RunOptions,
    clients: Vec<tokio::task::JoinHandle<Result<u64, t3fs_client::client::ClientError>>>,
    log: &namespace::NsLog,
    marks: &mut Vec<Mark>,
    say: &(dyn Fn(&str) + Sync),
) -> Vec<namespace::NsEvent> {
    let mut sent = 0;
    for c in clients {
        match c.await {
            Ok(Ok(n)) => sent += n,
            Ok(Err(e)) => say(&format!("a namespace client could not connect: {e}")),
            Err(e) => say(&format!("a namespace client panicked: {e}")),
        }
    }
    let started = Instant::now();
    let bound = namespace::drain_bound(o.scenario.cluster.timeouts);
    let dir = o.dir.clone();
    let drained =
        tokio::task::spawn_blocking(move || namespace::wait_drained(&cluster::nodes(&dir)?, bound))
            .await
            .unwrap_or_else(|e| Err(format!("the drain wait panicked: {e}")));
    let what = match &drained {
        Ok(true) => format!(
            "namespace: {sent} requests sent, {} answered; GC and session pruning done {:.1} s later",
            log.answered(),
            started.elapsed().as_secs_f64()
        ),
        Ok(false) => format!(
            "namespace: {sent} requests sent; GC or session pruning not done within {bound:?}"
        ),
        Err(e) => format!("namespace: {sent} requests sent; GC state unknown: {e}"),
    };
    mark(marks, say, "phase", "", what);
    log.events()
}

/// The chunk metadata of every target, dumped over the RPC once the cluster is quiescent.
pub(super) async fn live_dump(
    o: &RunOptions,
    quiet: &Result<Duration, String>,
) -> Result<crate::chunk_dump::Dump, String> {
    if let Err(e) = quiet {
        return Err(format!("not taken: the cluster was not quiescent ({e})"));
    }
    let dir = o.dir.clone();
    let bound = o.scenario.converge_within;
    tokio::task::spawn_blocking(move || crate::chunk_dump::dump(&cluster::nodes(&dir)?, bound))
        .await
        .unwrap_or_else(|e| Err(format!("the dump panicked: {e}")))
}
