//! A real run's background faults: the `[faults]` rates and clocks that hold for the whole
//! safety phase (message loss, duplication and heartbeat loss on every server, KV conflicts and
//! unknown commits, each server's clock offset and drift), set once before the first step.
//!
//! Invariant: clocks are drawn as the simulator draws them (offset uniform within ±offset,
//! drift within ±ppm, in node-id order) from a stream of their own, so drawing them leaves the
//! workload's streams unchanged; a node that could not be reached is named in the line that
//! reports the fault, never dropped silently. Not here: the timed steps (steps.rs).

use std::collections::BTreeMap;
use std::path::Path;

use t3fs_scenario::{Faults, Rng};

use super::execute::{self, Injected};
use t3fs_services::node::clock::ClockFaults;

/// Sets `f`'s background faults on the cluster in `dir`; returns the injected state the steps
/// start from and one line per fault set.
pub fn start(
    f: &Faults,
    dir: &Path,
    names: &BTreeMap<u32, String>,
    rng: &mut Rng,
) -> Result<(Injected, Vec<String>), String> {
    let mut injected = Injected {
        clock_base: clocks(f, names, rng),
        ..Default::default()
    };
    let mut lines = Vec::new();
    if !injected.clock_base.is_empty() {
        injected.clock.reset_to(&injected.clock_base.clone());
        let missed = injected.clock.apply(dir)?;
        let drawn: Vec<String> = injected
            .clock_base
            .iter()
            .map(|(n, c)| format!("{n} {:+} ms {:+} ppm", c.offset_ns / 1_000_000, c.drift_ppm))
            .collect();
        lines.push(format!(
            "background clocks: {}{}",
            drawn.join(", "),
            not_reached(&missed)
        ));
    }
    if f.kv_conflict > 0.0 || f.kv_commit_unknown > 0.0 {
        let (conflict, unknown) = (f.kv_conflict, f.kv_commit_unknown);
        execute::set_kv(dir, &mut injected, |k| {
            k.conflict = conflict;
            k.commit_unknown = unknown;
        })?;
        let missed = injected.kv.apply(dir)?;
        lines.push(format!(
            "background: KV conflict rate {conflict}, commit-unknown rate {unknown}{}",
            not_reached(&missed)
        ));
    }
    let net = &mut injected.net;
    (net.loss, net.duplicate) = (f.loss, f.duplicate);
    net.spike_latency = (f.net_spike_latency.start, f.net_spike_latency.end);
    net.hb_loss = f.heartbeat_loss;
    if f.loss > 0.0 || f.duplicate > 0.0 || f.heartbeat_loss > 0.0 {
        let missed = net.apply(dir)?;
        lines.push(format!(
            "background: message loss {}, duplication {} and heartbeat loss {} on every server{}",
            f.loss,
            f.duplicate,
            f.heartbeat_loss,
            not_reached(&missed)
        ));
    }
    Ok((injected, lines))
}

fn not_reached(missed: &[String]) -> String {
    if missed.is_empty() {
        String::new()
    } else {
        format!(" (not reached: {})", missed.join(", "))
    }
}

/// Each server's clock drawn from `[faults] clock_offset` and `clock_drift_ppm`.
fn clocks(
    f: &Faults,
    names: &BTreeMap<u32, String>,
    rng: &mut Rng,
) -> BTreeMap<String, ClockFaults> {
    let max = f.clock_offset.as_nanos() as i64;
    let ppm = i64::from(f.clock_drift_ppm);
    if max == 0 && ppm == 0 {
        return BTreeMap::new();
    }
    // The simulator's own draws: an offset in [-max, max), a drift in [-ppm, ppm].
    let mut draw = |m: i64, inclusive: bool| {
        if m > 0 {
            rng.range(0..2 * m as u64 + u64::from(inclusive)) as i64 - m
        } else {
            0
        }
    };
    names
        .values()
        .filter(|n| !n.starts_with("kv"))
        .map(|n| {
            let offset_ns = draw(max, false);
            let drift_ppm = draw(ppm, true);
            (
                n.clone(),
                ClockFaults {
                    offset_ns,
                    drift_ppm,
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn clocks_are_drawn_within_bounds_for_servers_only_and_from_the_seed() {
        let names: BTreeMap<u32, String> = [(0, "mgmtd-0"), (1, "storage-0"), (9, "kv")]
            .into_iter()
            .map(|(i, n)| (i, n.to_string()))
            .collect();
        let f = Faults {
            clock_offset: Duration::from_millis(300),
            clock_drift_ppm: 200,
            ..Faults::default()
        };
        let a = clocks(&f, &names, &mut Rng::new(5));
        assert_eq!(a, clocks(&f, &names, &mut Rng::new(5)));
        assert_eq!(a.keys().collect::<Vec<_>>(), vec!["mgmtd-0", "storage-0"]);
        assert!(a
            .values()
            .all(|c| c.offset_ns.abs() <= 300_000_000 && c.drift_ppm.abs() <= 200));
        assert!(clocks(&Faults::default(), &names, &mut Rng::new(5)).is_empty());
    }
}
