//! Primary election by a lease row in the KV (3FS §2.2, `MgmtdStore::extendLease`), as a pure
//! decision over the stored row and the caller's clock.
//!
//! Invariant: a decision never shortens another holder's unexpired lease, and an older release
//! never takes the lease from a newer one (upgrade safety). A holder whose own lease lapsed
//! (it stalled past the end) gets a fresh start, i.e. a new tenure: everything it learned from
//! heartbeats before the lapse is void, because for a while it held no lease and heard nothing
//! it could trust (3FS keeps the old start; the simulator found a stalled primary that woke up,
//! declared every node dead at once and made an emptied head LASTSRV). Fencing is not here: it is the
//! lease re-check inside every write transaction (`writer.rs`), which is what makes a deposed
//! primary unable to commit.

use core::time::Duration;

use super::store::LeaseInfo;
use crate::ids::NodeId;
use crate::time::Instant;

/// What `extendLease` does with the stored row.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum LeaseDecision {
    /// Write this row (acquire, take over or extend).
    Write(LeaseInfo),
    /// Leave the stored row; it is the current lease (mine or someone else's).
    Keep(LeaseInfo),
}

/// The lease parameters that enter the decision.
#[derive(Clone, Copy, Debug, Eq, Hash, PartialEq)]
pub struct LeaseParams {
    /// The caller.
    pub me: NodeId,
    /// The caller's release.
    pub release_version: u32,
    /// Lease length (3FS 60 s).
    pub length: Duration,
    /// Refuse to take a lease held by a newer release (3FS `extend_lease_check_release_version`).
    pub check_release_version: bool,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The §2.2 decision, in the reference's order.
pub fn decide(stored: Option<LeaseInfo>, now: Instant, p: &LeaseParams) -> LeaseDecision {
    let fresh_end = now.0.saturating_add(nanos(p.length));
    let mine = |start| LeaseInfo {
        primary: p.me,
        start,
        end: fresh_end,
        release_version: p.release_version,
    };
    let Some(s) = stored else {
        return LeaseDecision::Write(mine(now.0));
    };
    if p.check_release_version && s.release_version > p.release_version {
        return LeaseDecision::Keep(s);
    }
    if s.end >= fresh_end {
        return LeaseDecision::Keep(s);
    }
    if s.primary == p.me && s.end >= now.0 {
        return LeaseDecision::Write(mine(s.start));
    }
    if s.end < now.0 {
        return LeaseDecision::Write(mine(now.0));
    }
    LeaseDecision::Keep(s)
}

/// Whether `lease` lets `me` act as primary at `now`: it is mine and does not end within the
/// suspicious interval (3FS `MgmtdState::currentLease`).
pub fn trusted(lease: &LeaseInfo, me: NodeId, now: Instant, suspicious: Duration) -> bool {
    lease.primary == me && now.0.saturating_add(nanos(suspicious)) < lease.end
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn p(me: u32, rv: u32) -> LeaseParams {
        LeaseParams {
            me: NodeId(me.into()),
            release_version: rv,
            length: Duration::from_secs(60),
            check_release_version: true,
        }
    }

    fn lease(primary: u32, start: u64, end: u64, rv: u32) -> LeaseInfo {
        LeaseInfo {
            primary: NodeId(primary.into()),
            start: start * S,
            end: end * S,
            release_version: rv,
        }
    }

    #[test]
    fn election_rules() {
        let now = Instant(100 * S);
        // Nobody holds it: take it.
        assert_eq!(
            decide(None, now, &p(1, 1)),
            LeaseDecision::Write(lease(1, 100, 160, 1))
        );
        // Mine: extend the end, keep the start (same tenure).
        assert_eq!(
            decide(Some(lease(1, 50, 130, 1)), now, &p(1, 1)),
            LeaseDecision::Write(lease(1, 50, 160, 1))
        );
        // Someone else's, unexpired: keep theirs.
        let theirs = lease(2, 90, 130, 1);
        assert_eq!(
            decide(Some(theirs), now, &p(1, 1)),
            LeaseDecision::Keep(theirs)
        );
        // Mine, but lapsed: a fresh start (a new tenure), not an extension.
        assert_eq!(
            decide(Some(lease(1, 50, 99, 1)), now, &p(1, 1)),
            LeaseDecision::Write(lease(1, 100, 160, 1))
        );
        // Someone else's, expired: take over with a fresh start (a new tenure).
        assert_eq!(
            decide(Some(lease(2, 10, 99, 1)), now, &p(1, 1)),
            LeaseDecision::Write(lease(1, 100, 160, 1))
        );
        // A newer release holds it, even expired: an older binary never steals it.
        let newer = lease(2, 10, 99, 2);
        assert_eq!(
            decide(Some(newer), now, &p(1, 1)),
            LeaseDecision::Keep(newer)
        );
        let mut no_check = p(1, 1);
        no_check.check_release_version = false;
        assert!(matches!(
            decide(Some(newer), now, &no_check),
            LeaseDecision::Write(_)
        ));
        // Trust ends 20 s before expiry.
        let mine = lease(1, 100, 160, 1);
        let sus = Duration::from_secs(20);
        assert!(trusted(&mine, NodeId(1), Instant(139 * S), sus));
        assert!(!trusted(&mine, NodeId(1), Instant(140 * S), sus));
        assert!(!trusted(&mine, NodeId(2), Instant(100 * S), sus));
    }
}
