//! The storage-side lease: a t3fs improvement over 3FS, behind `StorageConfig::lease`
//! (`[cluster] storage_lease` in scenarios; off by default, which is 3FS's behaviour).
//!
//! Why: 3FS has no storage-side lease (reference note Appendix B #1/#4). A storage node that
//! the primary mgmtd has declared failed (its heartbeats stopped arriving: cut off, paused,
//! late) keeps serving reads under its old chain version until it learns the new routing, and
//! a client whose routing is as old reads a value older than a write acknowledged through the
//! new chain. With the lease, a node serves reads and accepts updates for its targets only
//! while it holds a lease that the primary's heartbeat replies renew; a node whose lease lapsed
//! answers `Status::NoLease` (retryable) and refreshes routing.
//!
//! The timing argument (next to the reference note's §2.3, failure detection). Let F be
//! mgmtd's `heartbeat_fail_interval`, ρ the maximum clock drift rate (the configured
//! `max_clock_drift_ppm` / 10⁶) and L the lease length.
//! - The node stamps each heartbeat with its own clock at sending, `s`. The primary answers an
//!   accepted heartbeat with `MgmtdStatus::Accepted`, echoing `s`; the node then holds its lease
//!   until local time `s + L`. Only the node's own clock is read, so clock *offsets* between
//!   nodes do not matter, only drift rates.
//! - The primary accepted that heartbeat at some true time `r ≥` (true time of `s`): messages
//!   take non-negative time. Acceptance re-arms the node's failure deadline for F (mgmtd's
//!   clock), so mgmtd declares the node failed, and can publish a chain without its targets,
//!   no earlier than true time `r + F/(1+ρ)`.
//! - The lease ends, in true time, no later than (true time of `s`) `+ L/(1−ρ)`.
//! - So with `L ≤ F·(1−ρ)/(1+ρ)` every lease has ended before any chain that excludes the node
//!   is published, hence before any write is acknowledged through that chain, hence before
//!   any client can start a read that must see that write. `length` returns exactly this
//!   bound (the margin `F − L ≈ 2ρF` covers the drift of both clocks over one interval).
//! - A new primary: it freezes every chain for `bootstrap_length` after taking office (and the
//!   old primary's heartbeats were all accepted before its tenure ended), so the argument holds
//!   as long as `bootstrap_length ≥ F`, true of 3FS's defaults (2 min ≥ 60 s) and of the
//!   simulator's scaled ones.
//! - An exclusion decided *before* a grant breaks the second step: mgmtd's deadline fired,
//!   the chain update that takes the node's targets out is being committed, a heartbeat
//!   arrives and is accepted, and the commit lands right after, long before `r + F` (swarm
//!   seed 4000194: storage-1 cut from every mgmtd for 4.6 s, its heartbeat accepted 1.3 ms
//!   before the chain that excludes it was published, and a stale read 160 ms later). Two
//!   rules close it. mgmtd grants no lease to a node while a chain update that takes one of
//!   its SERVING targets out is queued or running in its writer (`mgmtd/heartbeat.rs`,
//!   `demotion_pending`), so every exclusion committed after a grant was decided after it, by
//!   a deadline at least `F` after `r`. And a grant is bound to the routing version the reply
//!   carries: the lease holds only once the node has applied routing at least that new
//!   (`holds`), so an exclusion committed before the grant is known to the node before it
//!   serves under the lease. Planted bug `lease-during-demotion` drops the first rule; the
//!   catalog scenario `lease_race_pending_demotion` catches it.
//! - Replayed or duplicated replies carry old timestamps and never extend a lease past the
//!   newest `s + L`; a delayed heartbeat is accepted (and re-arms the deadline) no earlier than
//!   it arrives, which only moves `r` later.
//!
//! Not covered (documented limits): a storage clock *stepped backwards* while a lease runs
//! (a step is not drift; NTP slews in practice), and an admin taking a live, leased target
//! offline (mgmtd would have to wait out one lease before publishing such a change; t3fs's
//! simulator never does this). Not here: the checks themselves (`read.rs`, `write.rs`) and the
//! replies (`mgmtd/heartbeat.rs`).

use core::time::Duration;

use crate::ids::RoutingVersion;
use crate::time::Instant;

/// The lease a node holds: valid while the local clock is below `until` and the node has
/// applied routing at least as new as `routing`, the newest version a grant carried.
#[derive(Clone, Copy, Debug, Default, Eq, Hash, PartialEq)]
pub struct Lease {
    until: Option<Instant>,
    routing: RoutingVersion,
}

impl Lease {
    /// The longest safe lease for failure-detection interval `fail` and maximum drift
    /// `drift_ppm` on any clock: `fail · (1 − ρ) / (1 + ρ)` (see the module doc).
    pub fn length(fail: Duration, drift_ppm: u32) -> Duration {
        let rho = u128::from(drift_ppm.min(999_999));
        let nanos = fail.as_nanos() * (1_000_000 - rho) / (1_000_000 + rho);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// An accepted heartbeat sent at local time `sent`, answered by a primary whose routing
    /// was at version `routing`, renews the lease to `sent + length`; never shortens it (an
    /// old reply may arrive after a newer one) and never lowers the routing it is bound to.
    pub fn renew(&mut self, sent: Instant, length: Duration, routing: RoutingVersion) {
        let until = Instant(sent.0.saturating_add(length.as_nanos() as u64));
        if self.until.is_none_or(|u| u < until) {
            self.until = Some(until);
        }
        self.routing = self.routing.max(routing);
    }

    /// Whether the lease holds at local time `now` for a node whose applied routing is at
    /// version `applied`.
    pub fn holds(&self, now: Instant, applied: RoutingVersion) -> bool {
        self.until.is_some_and(|u| now < u) && applied >= self.routing
    }

    /// The local time the lease ends, if one was ever granted.
    pub fn until(&self) -> Option<Instant> {
        self.until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_is_shorter_than_failure_detection_by_the_drift_of_both_clocks() {
        let f = Duration::from_secs(60);
        assert_eq!(Lease::length(f, 0), f);
        let l = Lease::length(f, 1_000); // 0.1 %: both clocks may drift 60 ms over 60 s.
        assert!(l < f - Duration::from_millis(119) && l > f - Duration::from_millis(121));
        // The worst case of the argument: the lease, measured on a clock running slow by ρ,
        // still ends before mgmtd's deadline, measured on a clock running fast by ρ.
        let rho = 1e-3;
        assert!(l.as_secs_f64() / (1.0 - rho) <= f.as_secs_f64() / (1.0 + rho) + 1e-9);
    }

    #[test]
    fn renewals_only_extend_and_a_lapsed_lease_does_not_hold() {
        let mut l = Lease::default();
        let r = RoutingVersion(3);
        assert!(
            !l.holds(Instant(0), r),
            "no lease before the first accepted heartbeat"
        );
        let len = Duration::from_secs(5);
        l.renew(Instant(10_000_000_000), len, r);
        assert!(l.holds(Instant(14_999_999_999), r));
        assert!(!l.holds(Instant(15_000_000_000), r));
        // A late reply to an older heartbeat does not shorten it.
        l.renew(Instant(9_000_000_000), len, RoutingVersion(2));
        assert_eq!(l.until(), Some(Instant(15_000_000_000)));
        assert!(
            l.holds(Instant(14_000_000_000), r),
            "nor lowers its routing"
        );
    }

    #[test]
    fn a_grant_holds_only_once_the_routing_it_carried_is_applied() {
        // Seed 4000194's shape: the reply comes from a primary that has already published a
        // chain excluding this node; until the node applies that routing it must not serve.
        let mut l = Lease::default();
        let len = Duration::from_secs(5);
        l.renew(Instant(1_000_000_000), len, RoutingVersion(7));
        assert!(!l.holds(Instant(2_000_000_000), RoutingVersion(6)));
        assert!(l.holds(Instant(2_000_000_000), RoutingVersion(7)));
        assert!(l.holds(Instant(2_000_000_000), RoutingVersion(8)));
    }
}
