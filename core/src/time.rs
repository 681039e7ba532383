//! Time as machines see it: an [`Instant`] handed in by the driver (simulated or system clock),
//! counted from one cluster-wide epoch (see [`Instant`] for the contract).
//!
//! Machines never read a clock; they compare instants they were given and ask for timers with a
//! duration range. This module does not provide a clock: drivers implement [`Clock`].

use core::fmt;
use core::ops::{Add, Sub};
use core::time::Duration;

/// Nanoseconds since one cluster-wide epoch: the Unix epoch on real nodes (the system clock),
/// true simulated time plus the node's clock offset in the simulator.
///
/// Instants of different nodes are therefore comparable up to the clocks' skew, and the
/// protocol compares them in three places, each within `MgmtdConfig::max_clock_skew` (the one
/// skew bound the protocol names, 30 s by default): mgmtd refuses heartbeats whose timestamp is
/// further than that from its clock; a standby mgmtd takes over only after the lease end its
/// predecessor wrote, and the predecessor stops trusting its lease `suspicious_interval` (20 s)
/// before that end, so tenures cannot overlap while skew stays below the suspicious interval;
/// meta's idempotency records and file sessions carry the writing meta server's time, with
/// expiries (minutes to hours) long next to the bound. The storage-side lease never compares
/// clocks across nodes: it is measured on the storage node's own clock, bounded by drift
/// (`limits::CLOCK_DRIFT_PPM_MAX`).
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct Instant(pub u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Self = Self(0);

    /// Time elapsed since `earlier`, saturating at zero.
    pub fn saturating_since(self, earlier: Self) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Self;
    fn add(self, d: Duration) -> Self {
        Self(
            self.0
                .saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        )
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_since(rhs)
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:06}s",
            self.0 / 1_000_000_000,
            (self.0 % 1_000_000_000) / 1_000
        )
    }
}

/// A monotonic time source, implemented by drivers (never called by machines).
pub trait Clock {
    /// The current instant of this node.
    fn now(&self) -> Instant;
}
