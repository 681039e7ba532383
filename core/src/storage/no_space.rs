//! Updates a target answered `Status::NoSpace`, remembered so that a late copy of one is
//! refused again (t3fs; 3FS answers `kNoSpace` and leaves the rest to its client's retries).
//!
//! Why: a replica whose store has no room for an update writes nothing of it and answers
//! `NoSpace`; every replica before it gives the update up (`write.rs`), leaving its pending
//! version to be overwritten by the chunk's next update at the same version, as after any other
//! given-up forward. That is safe only while no replica can commit the given-up update later.
//! A refusal for want of space is not deterministic (space may be freed a moment after), so a
//! copy still in the network (an earlier attempt of a predecessor, a duplicated or held frame)
//! could otherwise run after the refusal and commit on this replica and those after it while
//! those before have given the version up and reuse it for other bytes: the replicas would
//! diverge. Within one chain version every copy of an update passes through the replica that
//! refused it, so that replica (and every one that passed the refusal on) answers each later
//! copy with `NoSpace` too, without I/O. A chain change makes every older copy stale anyway
//! (exact chain-version admission).
//!
//! Keyed by (chunk, update version, tag): the identity of one update at one version. Only
//! forwarded updates are remembered: a client write refused at the head was never forwarded,
//! and a retry of it is a fresh decision of the head.
//!
//! Bounded: an entry goes once it is older than the retry horizon (as for exactly-once
//! records, a copy arriving later than that is not covered), and at most
//! [`NO_SPACE_REFUSALS_PER_TARGET_MAX`] are kept, the oldest going first.

use core::time::Duration;
use std::collections::VecDeque;

use crate::chunk::UpdateTag;
use crate::ids::{ChunkId, ChunkVersion};
use crate::limits::NO_SPACE_REFUSALS_PER_TARGET_MAX;
use crate::msg::MessageTag;
use crate::time::Instant;

#[derive(Clone, Copy, Debug, Eq, Hash, PartialEq)]
struct Refusal {
    chunk: ChunkId,
    version: ChunkVersion,
    tag: UpdateTag,
    at: Instant,
}

/// The forwarded updates one target refused for want of space, oldest first.
#[derive(Clone, Debug, Default, Eq, Hash, PartialEq)]
pub struct NoSpaceRefusals {
    entries: VecDeque<Refusal>,
}

impl NoSpaceRefusals {
    /// Remembers that the update `tag` at `version` of `chunk` was answered `NoSpace` at `now`.
    pub fn record(
        &mut self,
        chunk: ChunkId,
        version: ChunkVersion,
        tag: &MessageTag,
        now: Instant,
        horizon: Duration,
    ) {
        self.expire(now, horizon);
        let tag = UpdateTag::from(tag);
        if self.find(chunk, version, tag).is_some() {
            return;
        }
        if self.entries.len() >= NO_SPACE_REFUSALS_PER_TARGET_MAX {
            self.entries.pop_front();
        }
        self.entries.push_back(Refusal {
            chunk,
            version,
            tag,
            at: now,
        });
    }

    /// Whether the update `tag` at `version` of `chunk` was answered `NoSpace` here within the
    /// horizon: a copy of it must be refused again.
    pub fn holds(
        &mut self,
        chunk: ChunkId,
        version: ChunkVersion,
        tag: &MessageTag,
        now: Instant,
        horizon: Duration,
    ) -> bool {
        if self.entries.is_empty() {
            return false;
        }
        self.expire(now, horizon);
        self.find(chunk, version, UpdateTag::from(tag)).is_some()
    }

    /// Entries kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn find(&self, chunk: ChunkId, version: ChunkVersion, tag: UpdateTag) -> Option<usize> {
        self.entries
            .iter()
            .position(|r| r.chunk == chunk && r.version == version && r.tag == tag)
    }

    fn expire(&mut self, now: Instant, horizon: Duration) {
        while self
            .entries
            .front()
            .is_some_and(|r| now.saturating_since(r.at) >= horizon)
        {
            self.entries.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ChannelId, ClientId, RequestId, SeqNum};

    fn tag(seq: u64) -> MessageTag {
        MessageTag {
            client: ClientId(1),
            request: RequestId(seq),
            channel: ChannelId(2),
            seqnum: SeqNum(seq),
        }
    }

    #[test]
    fn a_refusal_is_held_for_its_update_only_until_the_horizon_and_within_the_bound() {
        let (c, v, h) = (ChunkId::new(1, 0), ChunkVersion(3), Duration::from_secs(10));
        let mut r = NoSpaceRefusals::default();
        r.record(c, v, &tag(1), Instant(0), h);
        assert!(r.holds(c, v, &tag(1), Instant(1), h));
        // Another update, another version or another chunk is not refused by it.
        assert!(!r.holds(c, v, &tag(2), Instant(1), h));
        assert!(!r.holds(c, ChunkVersion(4), &tag(1), Instant(1), h));
        assert!(!r.holds(ChunkId::new(1, 1), v, &tag(1), Instant(1), h));
        // The request id is not part of the update's identity (a retry may renumber it).
        let renumbered = MessageTag {
            request: RequestId(99),
            ..tag(1)
        };
        assert!(r.holds(c, v, &renumbered, Instant(1), h));
        // Past the horizon it is forgotten.
        assert!(!r.holds(c, v, &tag(1), Instant(h.as_nanos() as u64), h));
        assert!(r.is_empty());
        // The bound drops the oldest.
        for i in 0..=NO_SPACE_REFUSALS_PER_TARGET_MAX as u64 {
            r.record(c, v, &tag(i + 10), Instant(1), h);
        }
        assert_eq!(r.len(), NO_SPACE_REFUSALS_PER_TARGET_MAX);
        assert!(!r.holds(c, v, &tag(10), Instant(1), h));
        assert!(r.holds(c, v, &tag(11), Instant(1), h));
    }
}
