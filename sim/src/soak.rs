//! The scenario of a soak (`t3fs cluster soak`): a fixed 3-replica cluster under the register
//! workload for a long time, with recoverable faults drawn from one seed by the swarm's own
//! fault generator ([`swarm::Shape::fault`]) plus full disks, one after another, each undone before the next
//! starts, and only faults whose every step the caller accepts (a real run passes "runs for
//! real").
//!
//! Invariants: the scenario is a pure function of (seed, duration, the filter); faults never
//! overlap, so at most one storage node is down or wiped at a time and no fault can take the
//! last copy of a chunk (the simulator's fault atlas is not there to refuse it on real
//! processes). Not here: running it (the CLI hands it to the real runner, or to the simulator).

use core::time::Duration;

use t3fs_scenario::schema::{
    Action, Cluster, Expect, Faults, NodeRef, Scenario, Step, Timeouts, Workload,
};
use t3fs_scenario::Rng;

use crate::swarm::Shape;

/// Draws for one fault before giving up on the filter (every fault kind but a few runs for
/// real, so a handful suffices; the cap keeps a filter that accepts nothing from spinning).
const TRIES: usize = 64;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// One fault: the swarm generator's, or (one draw in [`FULL_EVERY`]) a storage node's disks
/// full for the span and then freed, which the swarm does not draw (its full disks come from
/// the scenario's rates).
fn draw(
    shape: &Shape,
    r: &mut Rng,
    at: Duration,
    span: Duration,
    end: Duration,
) -> Vec<(Duration, Action)> {
    if r.below(FULL_EVERY) == 0 {
        let n = NodeRef::Storage(r.below(u64::from(shape.storage_nodes)) as u32);
        let freed = (at + span).min(end);
        return vec![
            (at, Action::FillDisk(n.clone())),
            (freed, Action::HealDisk(n)),
        ];
    }
    shape.fault(r, at, span, end)
}

/// One fault in this many is a full disk.
const FULL_EVERY: u64 = 8;

/// The soak scenario of `seed` lasting `duration`, keeping faults whose steps `keep` accepts.
pub fn scenario(seed: u64, duration: Duration, keep: &dyn Fn(&Action) -> bool) -> Scenario {
    let cluster = Cluster {
        mgmtd: 2,
        storage_nodes: 3,
        targets_per_node: 2,
        replicas: 3,
        chains: 2,
        clients: 3,
        meta: 0,
        timeouts: Timeouts::Fast,
        reject_dirty_reads: false,
        storage_lease: false,
        serial_forwarding: false,
        client_boot_empty: false,
    };
    let shape = Shape {
        storage_nodes: cluster.storage_nodes,
        replicas: cluster.replicas,
        chains: cluster.chains,
        mgmtd: cluster.mgmtd,
    };
    let mut r = Rng::new(seed ^ 0x534f_414b_0000_0000);
    let mut steps = Vec::new();
    // Calm first, so the report shows the undisturbed rate the faults are measured against.
    let mut at = ms(3000);
    while at + ms(2000) < duration {
        let span = ms(1000 + r.below(8000));
        let fault = (0..TRIES)
            .map(|_| draw(&shape, &mut r, at, span, duration))
            .find(|f| f.iter().all(|(_, a)| keep(a)));
        let Some(fault) = fault else { break };
        let end = fault
            .iter()
            .map(|(t, _)| *t)
            .max()
            .unwrap_or(at)
            .max(at + span);
        steps.extend(fault.into_iter().map(|(at, action)| Step {
            at,
            line: 0,
            action,
        }));
        // Time to recover (failure detection is 6 s with the fast timeouts) before the next.
        at = end + ms(8000 + r.below(7000));
    }
    steps.sort_by_key(|s| s.at);
    Scenario {
        name: "soak".into(),
        about: format!(
            "Soak seed {seed}: {} s under the register workload with {} fault steps drawn by the swarm's generator, one fault at a time.",
            duration.as_secs(),
            steps.len()
        ),
        seeds: vec![seed],
        duration,
        converge_within: Duration::from_secs(90),
        cluster,
        workload: Workload {
            chunks: 8,
            write_size: 4096,
            read_fraction: 0.4,
            think: ms(1)..ms(5),
            ops_per_client: None,
            prefill: false,
        },
        namespace: None,
        faults: Faults::default(),
        hardware: None,
        steps,
        expect: Expect::default(),
        bug: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_come_one_at_a_time_and_only_those_kept() {
        let no_mgmtd_or_flap = |a: &Action| {
            !matches!(
                a,
                Action::StepClock { .. } | Action::Flap { .. } | Action::KvUnavailable
            )
        };
        let a = scenario(7, Duration::from_secs(600), &no_mgmtd_or_flap);
        let b = scenario(7, Duration::from_secs(600), &no_mgmtd_or_flap);
        assert_eq!(a, b, "a pure function of the seed");
        assert!(a.steps.len() >= 20, "{} steps in 10 minutes", a.steps.len());
        assert!(a.steps.iter().all(|s| no_mgmtd_or_flap(&s.action)));
        assert!(a.steps.iter().all(|s| s.at <= a.duration));
        // A crash is restarted before any other storage node is touched.
        let mut down: Option<String> = None;
        for s in &a.steps {
            match &s.action {
                Action::Crash(n) => {
                    assert!(down.is_none(), "two crashes overlap at {:?}", s.at);
                    down = Some(format!("{n:?}"));
                }
                Action::Restart(n) | Action::RestartEmpty(n) => {
                    assert_eq!(down.take(), Some(format!("{n:?}")));
                }
                _ => {}
            }
        }
        let none = scenario(7, Duration::from_secs(60), &|_| false);
        assert!(
            none.steps.is_empty(),
            "a filter that keeps nothing ends the draws"
        );
        assert_ne!(a, scenario(8, Duration::from_secs(600), &no_mgmtd_or_flap));
    }
}
