//! Two-tier BUGGIFY (FoundationDB's scheme): when a run enables it, each site is switched on for
//! the whole run with probability 1/4, and a switched-on site fires with probability 1/4 each
//! time it is reached. Sites shrink timeouts and force rare error paths that background rates
//! would almost never combine.
//!
//! Invariant: decisions draw from the world's generator only when buggify is on, so runs without
//! it are unchanged; every firing is counted as a reachability class. Not here: what a site does
//! (its caller decides).

use std::collections::BTreeSet;

use t3fs_scenario::Rng;

/// Every site.
pub const SITES: [&str; 4] = [
    // A machine's timer fires after a tenth of its minimum delay (shrunk timeouts).
    "buggify: shrunk timer",
    // A KV commit fails with a spurious conflict.
    "buggify: kv conflict",
    // A chunk update is refused by the store without a medium failure (a transient error path:
    // the replica answers `DiskError`, its predecessor retries). It was ENOSPC until a full
    // disk became a client-visible `NoSpace` (`core/src/storage/write.rs`); the site keeps the
    // transient path, and its draws and traces, while full disks come from `fill_disk` steps
    // (catalog `disk_full`, the soak).
    "buggify: disk refused",
    // A message takes a latency spike.
    "buggify: net delay",
];

/// The sites enabled for one run.
#[derive(Clone, Debug, Default)]
pub struct Buggify {
    enabled: BTreeSet<&'static str>,
}

impl Buggify {
    /// Decides the enabled sites (none unless `on`).
    pub fn new(on: bool, rng: &mut Rng) -> Self {
        let enabled = if on {
            SITES.into_iter().filter(|_| rng.chance(0.25)).collect()
        } else {
            BTreeSet::new()
        };
        Self { enabled }
    }

    /// Whether `site` fires now.
    pub fn fire(&self, site: &'static str, rng: &mut Rng) -> bool {
        debug_assert!(SITES.contains(&site), "unknown buggify site {site}");
        self.enabled.contains(site) && rng.chance(0.25)
    }

    /// The enabled sites.
    pub fn enabled(&self) -> impl Iterator<Item = &&'static str> {
        self.enabled.iter()
    }
}
