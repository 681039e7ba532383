//! The driver's clock fault layer: an offset and a drift on the time a node's machine reads, set
//! through the node's control endpoint (`PUT /clock?offset_ns=N&drift_ppm=P`, metrics.rs), so a
//! real run can step a clock forward or back and skew it as the simulator's `step_clock` and
//! `skew_clock` do. The machine's `now` becomes `t + (t - since) * drift / 10^6 + offset`, where
//! `since` is when the drift was set (the simulator measures drift from its time zero; the
//! system clock's zero is 1970, so drift here counts from the moment it is set).
//!
//! The reading underneath is the layer's [`TimeSource`]: the system clock for services, or the
//! runtime's clock from a given epoch for a driver under a simulation (turmoil advances tokio's
//! clock; the system clock would make each run's machine times differ).
//!
//! Invariants: with no fault set the machine reads its source unchanged (one atomic load);
//! the reading saturates at zero. Not here: timer durations, which stay true durations (a
//! drifting node's timers do not stretch, unlike the simulator's), and the host's own clock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use t3fs_core::time::Instant;

/// A node's clock fault.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClockFaults {
    /// Offset from the system clock, nanoseconds.
    pub offset_ns: i64,
    /// Rate error, parts per million (positive runs fast).
    pub drift_ppm: i64,
}

impl ClockFaults {
    /// The control endpoint's query string.
    pub fn to_query(&self) -> String {
        format!("offset_ns={}&drift_ppm={}", self.offset_ns, self.drift_ppm)
    }

    /// Parses [`to_query`](Self::to_query)'s text; every key must be known and every value valid.
    pub fn parse(query: &str) -> Result<Self, String> {
        let mut f = Self::default();
        for pair in crate::fault_query::pairs(query) {
            let (k, v) = pair?;
            let n = v
                .parse::<i64>()
                .map_err(|_| format!("{k}: `{v}` is not an integer"))?;
            match k {
                "offset_ns" => f.offset_ns = n,
                "drift_ppm" if n.abs() < 1_000_000 => f.drift_ppm = n,
                "drift_ppm" => return Err(format!("drift_ppm: {n} is not within ±10^6")),
                _ => return Err(format!("unknown key `{k}`")),
            }
        }
        Ok(f)
    }
}

/// Where a node's time comes from, before its fault.
#[derive(Clone, Copy, Debug, Default)]
pub enum TimeSource {
    /// The system clock, as nanoseconds since the Unix epoch.
    #[default]
    System,
    /// `epoch` plus the time the runtime's clock has advanced since `start`.
    Runtime {
        /// The machine time at `start`.
        epoch: Instant,
        /// The runtime instant the epoch stands for.
        start: tokio::time::Instant,
    },
}

impl TimeSource {
    /// The runtime's clock, reading `epoch` now (call it on the runtime that drives the node).
    pub fn runtime_from(epoch: Instant) -> Self {
        Self::Runtime {
            epoch,
            start: tokio::time::Instant::now(),
        }
    }

    /// The time now.
    pub fn read(&self) -> Instant {
        match self {
            Self::System => super::now(),
            Self::Runtime { epoch, start } => Instant(epoch.0 + start.elapsed().as_nanos() as u64),
        }
    }
}

/// The live clock fault of one node.
#[derive(Debug, Default)]
pub struct ClockLayer {
    on: AtomicBool,
    /// The fault and the source time its drift counts from.
    state: Mutex<(ClockFaults, u64)>,
    source: TimeSource,
}

impl ClockLayer {
    /// No fault, over `source`.
    pub fn over(source: TimeSource) -> Self {
        Self {
            source,
            ..Self::default()
        }
    }

    /// What the node's machine reads now: its source, shifted by the fault.
    pub fn now(&self) -> Instant {
        self.local(self.source.read())
    }

    /// Replaces the fault, its drift counting from now.
    pub fn set_now(&self, f: ClockFaults) {
        self.set(f, self.source.read());
    }

    /// Replaces the fault, its drift counting from `now`.
    pub fn set(&self, f: ClockFaults, now: Instant) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = (f, now.0);
        self.on.store(f != ClockFaults::default(), Ordering::SeqCst);
    }

    /// The fault now.
    pub fn get(&self) -> ClockFaults {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).0
    }

    /// What the node reads when its source reads `now`.
    pub fn local(&self, now: Instant) -> Instant {
        if !self.on.load(Ordering::Relaxed) {
            return now;
        }
        let (f, since) = *self.state.lock().unwrap_or_else(|e| e.into_inner());
        let t = i128::from(now.0);
        let drift = (t - i128::from(since)) * i128::from(f.drift_ppm) / 1_000_000;
        Instant((t + drift + i128::from(f.offset_ns)).clamp(0, i128::from(u64::MAX)) as u64)
    }
}

/// The clock fault at `/clock`.
impl crate::fault_query::FaultResource for ClockLayer {
    fn describe(&self) -> String {
        format!("{}\n", self.get().to_query())
    }
    fn put(&self, query: &str) -> Result<String, String> {
        let f = ClockFaults::parse(query)?;
        tracing::warn!("clock fault set: {}", f.to_query());
        self.set_now(f);
        Ok(self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_and_drift_apply_from_when_they_are_set() {
        let c = ClockLayer::default();
        let t = Instant(5_000_000_000);
        assert_eq!(c.local(t), t, "no fault: the system clock");
        c.set(
            ClockFaults {
                offset_ns: -2_000_000_000,
                drift_ppm: 0,
            },
            t,
        );
        assert_eq!(c.local(t), Instant(3_000_000_000), "stepped back 2 s");
        c.set(
            ClockFaults {
                offset_ns: 0,
                drift_ppm: 100_000,
            },
            t,
        );
        assert_eq!(c.local(t), t, "drift counts from when it is set");
        assert_eq!(c.local(Instant(6_000_000_000)), Instant(6_100_000_000));
        c.set(
            ClockFaults {
                offset_ns: -10_000_000_000,
                drift_ppm: 0,
            },
            t,
        );
        assert_eq!(c.local(t), Instant(0), "saturates at zero");
        let f = ClockFaults {
            offset_ns: -7,
            drift_ppm: 250,
        };
        assert_eq!(ClockFaults::parse(&f.to_query()), Ok(f));
        assert!(ClockFaults::parse("offset_ns=x").is_err());
        assert!(ClockFaults::parse("drift_ppm=2000000").is_err());
        assert!(ClockFaults::parse("skew=1").is_err());
    }
}
