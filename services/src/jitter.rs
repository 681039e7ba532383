//! Timer and fault jitter for the real services: a small xorshift generator, seeded from the OS
//! for a service, or from a seed when a driver runs under a simulation (turmoil), so that its
//! run repeats. A leaf: the node driver, the disk fault layer and the kv service draw from it.
//!
//! Not here: the simulator's randomness (`t3fs_scenario::rng`), which is what seeded runs and
//! traces rest on; this one only spreads timers and fault delays.

use std::ops::Range;
use std::time::Duration;

/// Small xorshift generator for timer jitter: from the OS for services, seeded under a simulation.
pub struct Jitter(u64);

impl Jitter {
    /// Seeded from the OS.
    pub fn new() -> Self {
        let mut b = [0u8; 8];
        let _ = getrandom::fill(&mut b);
        Self(u64::from_le_bytes(b) | 1)
    }

    /// 64 random bits.
    pub fn bits(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Seeded (a driver under a simulation); a zero seed is made odd.
    pub fn seeded(seed: u64) -> Self {
        Self(seed | 1)
    }

    /// A duration in `r`.
    pub fn pick(&mut self, r: Range<Duration>) -> Duration {
        self.bits();
        let span = r.end.saturating_sub(r.start).as_nanos() as u64;
        if span == 0 {
            return r.start;
        }
        r.start + Duration::from_nanos(self.0 % span)
    }
}

impl Default for Jitter {
    fn default() -> Self {
        Self::new()
    }
}
