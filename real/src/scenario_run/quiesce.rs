//! Quiescence before replicas are compared: CRAQ replicas agree only once no update is in
//! flight. After the final reads a write a client gave up on may still be moving down or its
//! commit back up a chain (a retry after a lost frame), so the tail may have committed a version
//! the head still holds pending. The simulator runs until no chunk lock is held and every target
//! is UPTODATE before comparing; this waits for the same, read from each storage node's status
//! (`targets_updating 0 targets_not_uptodate 0`, node/status.rs).
//!
//! Invariant: a cluster that does not quiesce within the bound is said so, and its replicas are
//! not compared (UNKNOWN, never PASS or FAIL). Not here: the comparison (the simulator's
//! agreement check) or reading the stores (dump.rs).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::cluster;

/// Why one storage node is not quiet, or `None` when it is.
fn busy(status: &str) -> Option<String> {
    let field = |k: &str| {
        status
            .split_whitespace()
            .skip_while(|w| *w != k)
            .nth(1)
            .and_then(|v| v.parse::<u64>().ok())
    };
    match (field("targets_updating"), field("targets_not_uptodate")) {
        (Some(0), Some(0)) => None,
        (Some(u), Some(b)) => Some(format!("{u} targets updating, {b} not UPTODATE")),
        _ => Some("no storage status".into()),
    }
}

/// Waits until every storage node of the cluster in `dir` reports no update in progress and
/// every target UPTODATE, polling; returns how long it took, or what was still busy at `bound`.
pub async fn quiesce(dir: &Path, bound: Duration) -> Result<Duration, String> {
    let start = Instant::now();
    loop {
        let d = dir.to_path_buf();
        let state = tokio::task::spawn_blocking(move || -> Result<Vec<String>, String> {
            let mut out = Vec::new();
            for n in cluster::nodes(&d)?.iter().filter(|n| n.role == "storage") {
                let addr = n.cfg.node.metrics.parse().map_err(|e| format!("{e}"))?;
                let token = &n.cfg.cluster.token;
                let why = match t3fs_services::metrics::get_authed(
                    addr,
                    token,
                    "/status",
                    Duration::from_secs(1),
                ) {
                    Ok((200, body)) => busy(&body),
                    Ok((code, _)) => Some(format!("status answered {code}")),
                    Err(e) => Some(e.to_string()),
                };
                out.extend(why.map(|w| format!("{}: {w}", n.name)));
            }
            Ok(out)
        })
        .await
        .map_err(|e| e.to_string())??;
        if state.is_empty() {
            return Ok(start.elapsed());
        }
        if start.elapsed() > bound {
            return Err(state.join("; "));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_quiet_only_with_nothing_updating_and_everything_uptodate() {
        let quiet = "running 3 routing v7 targets_updating 0 targets_not_uptodate 0\n";
        assert_eq!(busy(quiet), None);
        let updating = "running 3 routing v7 targets_updating 1 targets_not_uptodate 0\n";
        assert_eq!(
            busy(updating).as_deref(),
            Some("1 targets updating, 0 not UPTODATE")
        );
        assert!(busy("running 3\n").is_some(), "no fields is not quiet");
    }
}
