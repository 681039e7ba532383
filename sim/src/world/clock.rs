//! Per-node clocks: what a node believes the time is, given the true simulated time. A clock has
//! an offset (signed), a drift (parts per million) and can be stepped forward or backward; this
//! is how lease and timeout logic meets skew (3FS relies on bounded skew for leases, §2.2).
//!
//! Invariant: local time is `true * (1 + drift) + offset`, saturating at zero. Timer durations a
//! machine asks for are local; `to_true` converts them so a fast clock fires timers early in true
//! time. Not here: which nodes get which skew (scenario steps and swarm options).

use core::time::Duration;

use t3fs_core::time::Instant;

/// A node's clock model.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
pub struct Clock {
    /// Offset from true time, nanoseconds.
    pub offset_ns: i64,
    /// Rate error, parts per million (positive runs fast).
    pub drift_ppm: i64,
}

impl Clock {
    /// The node's reading at true time `now`.
    pub fn local(&self, now: Instant) -> Instant {
        let t = now.0 as i128;
        let drifted = t + t * self.drift_ppm as i128 / 1_000_000;
        Instant((drifted + self.offset_ns as i128).clamp(0, u64::MAX as i128) as u64)
    }

    /// True-time length of a local duration `d`.
    pub fn to_true(&self, d: Duration) -> Duration {
        let n = d.as_nanos() as i128;
        let t = n * 1_000_000 / (1_000_000 + self.drift_ppm as i128).max(1);
        Duration::from_nanos(t.clamp(0, u64::MAX as i128) as u64)
    }

    /// Jumps the clock by `by_ns` (negative: backward).
    pub fn step(&mut self, by_ns: i64) {
        self.offset_ns = self.offset_ns.saturating_add(by_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_drift_and_steps() {
        let mut c = Clock {
            offset_ns: 1_000,
            drift_ppm: 100,
        };
        assert_eq!(
            c.local(Instant(1_000_000)),
            Instant(1_000_000 + 100 + 1_000)
        );
        assert!(c.to_true(Duration::from_secs(1)) < Duration::from_secs(1));
        c.step(-5_000);
        assert_eq!(c.local(Instant(0)), Instant(0), "saturates at zero");
    }
}
