//! The routing watcher: a native client that asks mgmtd for routing every `poll` and records
//! every chain change it sees (version, per-target public states) with the wall time it saw
//! it, as the chain timeline and `chain` events of a real run's directory.
//!
//! Invariant: it only observes what mgmtd publishes to clients, so the timeline is mgmtd's
//! routing history as any client sees it, late by at most one refresh (`poll`) plus a round
//! trip. Not here: injecting faults (the caller records those as `fault` events) or writing the
//! run directory (bench_run.rs).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use t3fs_core::ids::{ChainId, NodeId, TargetId};
use t3fs_core::mgmtd::chain_update::render;
use t3fs_core::routing::{ChainInfo, PublicState, RoutingInfo};
use t3fs_reports::{ChainPoint, EventLine};

use t3fs_client::client::{Client, ClientError, ClientOptions};

/// One observed chain state.
#[derive(Clone, Debug)]
pub struct Seen {
    /// When the watcher saw it.
    pub at: Instant,
    /// The chain as published.
    pub chain: ChainInfo,
}

/// A running watcher.
pub struct RoutingWatch {
    seen: Arc<Mutex<Vec<Seen>>>,
    hosts: Arc<Mutex<BTreeMap<TargetId, NodeId>>>,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl RoutingWatch {
    /// Connects a client that refreshes routing every `poll` and starts recording.
    pub async fn start(mut opts: ClientOptions, poll: Duration) -> Result<Self, ClientError> {
        opts.refresh = Some(poll);
        let client = Client::connect(opts).await?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let hosts = Arc::new(Mutex::new(BTreeMap::new()));
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let (log, host_log) = (seen.clone(), hosts.clone());
        let task = tokio::spawn(async move {
            let mut last: BTreeMap<ChainId, ChainInfo> = BTreeMap::new();
            // Records at once, every half poll, and once more when told to stop.
            let mut stop = false;
            loop {
                if let Some(r) = client.routing() {
                    record(&r, &mut last, &log);
                    if let Ok(mut h) = host_log.lock() {
                        h.clone_from(&r.targets);
                    }
                }
                if stop {
                    break;
                }
                stop = tokio::select! {
                    _ = tokio::time::sleep(poll / 2) => false,
                    _ = stopped.changed() => true,
                };
            }
            client.close().await;
        });
        Ok(Self {
            seen,
            hosts,
            stop,
            task,
        })
    }

    /// The node hosting `target` in the newest routing seen.
    pub fn target_node(&self, target: TargetId) -> Option<NodeId> {
        self.hosts.lock().ok()?.get(&target).copied()
    }

    /// Which node hosts each target, in the newest routing seen.
    pub fn hosts(&self) -> BTreeMap<TargetId, NodeId> {
        self.hosts.lock().map(|h| h.clone()).unwrap_or_default()
    }

    /// Every chain state seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Whether the newest state of every chain seen has all targets SERVING.
    pub fn all_serving(&self) -> bool {
        let mut newest: BTreeMap<ChainId, &ChainInfo> = BTreeMap::new();
        let seen = self.seen();
        for s in &seen {
            newest.insert(s.chain.chain, &s.chain);
        }
        !newest.is_empty()
            && newest
                .values()
                .all(|c| c.targets.iter().all(|t| t.state == PublicState::Serving))
    }

    /// Stops the watcher and returns everything it saw.
    pub async fn stop(self) -> Vec<Seen> {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        let seen = self.seen.lock().map(|s| s.clone());
        seen.unwrap_or_default()
    }
}

/// Logs every chain of `r` that differs from the last state seen of it.
fn record(r: &RoutingInfo, last: &mut BTreeMap<ChainId, ChainInfo>, log: &Mutex<Vec<Seen>>) {
    let at = Instant::now();
    for (id, c) in &r.chains {
        if last.get(id).is_some_and(|old| old == c) {
            continue;
        }
        last.insert(*id, c.clone());
        if let Ok(mut l) = log.lock() {
            l.push(Seen {
                at,
                chain: c.clone(),
            });
        }
    }
}

fn secs(at: Instant, zero: Instant) -> f64 {
    match at.checked_duration_since(zero) {
        Some(d) => d.as_secs_f64(),
        None => -zero.duration_since(at).as_secs_f64(),
    }
}

/// The chain timeline relative to `zero`: states seen before it are clamped to 0 so every chain
/// starts with the state it had when the run began.
pub fn chain_points(seen: &[Seen], zero: Instant) -> Vec<ChainPoint> {
    seen.iter()
        .map(|s| ChainPoint {
            t: secs(s.at, zero).max(0.0),
            chain: s.chain.chain.to_string(),
            version: s.chain.version.0,
            serving: s
                .chain
                .targets
                .iter()
                .filter(|t| t.state == PublicState::Serving)
                .count() as u32,
            targets: s.chain.targets.len() as u32,
            render: render(&s.chain.targets),
        })
        .collect()
}

/// One `chain` event per change after the first state of each chain, relative to `zero`:
/// which targets changed state, and the chain as published.
pub fn chain_events(seen: &[Seen], zero: Instant) -> Vec<EventLine> {
    let mut last: BTreeMap<ChainId, &ChainInfo> = BTreeMap::new();
    let mut out = Vec::new();
    for s in seen {
        let c = &s.chain;
        if let Some(old) = last.insert(c.chain, c) {
            let changes: Vec<String> = c
                .targets
                .iter()
                .filter_map(|t| {
                    let before = old.targets.iter().find(|o| o.target == t.target);
                    match before {
                        Some(o) if o.state == t.state => None,
                        Some(o) => Some(format!("{} {:?}→{:?}", t.target, o.state, t.state)),
                        None => Some(format!("{} joined {:?}", t.target, t.state)),
                    }
                })
                .collect();
            out.push(EventLine {
                t: secs(s.at, zero),
                kind: "chain".into(),
                node: c.chain.to_string(),
                what: format!(
                    "v{}: {}{}",
                    c.version.0,
                    render(&c.targets),
                    if changes.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", changes.join(", "))
                    }
                ),
            });
        }
    }
    out
}

/// Chain 1 at version `v` with targets 1, 2, … in `states` (tests of routing histories).
#[cfg(test)]
pub(crate) fn test_chain(v: u32, states: &[PublicState]) -> ChainInfo {
    ChainInfo {
        chain: ChainId(1),
        version: t3fs_core::ids::ChainVersion(v),
        targets: states
            .iter()
            .enumerate()
            .map(|(i, s)| t3fs_core::routing::ChainTarget {
                target: TargetId(i as u32 + 1),
                state: *s,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failover_becomes_points_and_events_with_the_changed_target() {
        use PublicState::*;
        let zero = Instant::now();
        let seen = vec![
            Seen {
                at: zero,
                chain: test_chain(1, &[Serving, Serving, Serving]),
            },
            Seen {
                at: zero + Duration::from_secs(3),
                chain: test_chain(2, &[Serving, Serving, Offline]),
            },
        ];
        let p = chain_points(&seen, zero);
        assert_eq!((p[0].serving, p[1].serving, p[1].version), (3, 2, 2));
        let e = chain_events(&seen, zero);
        assert_eq!(e.len(), 1, "the first state is not an event");
        assert!((e[0].t - 3.0).abs() < 1e-6);
        assert!(e[0].what.contains("Serving→Offline"), "{}", e[0].what);
    }
}
