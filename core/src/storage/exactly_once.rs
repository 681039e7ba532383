//! The exactly-once filter of a target (3FS `ReliableUpdate`, §3.2 step 2).
//!
//! State is keyed by (client, channel): the last seqnum seen, whether an update with it is still
//! running, and its cached successful result. Because the client tag travels down the chain,
//! every replica holds such records, so a client retry that lands on a new head after a chain
//! change is answered from the cache instead of being applied twice (§3.5 #6).
//!
//! Invariant: at most one running update per (client, channel). Bounded by
//! `CHANNEL_RECORDS_PER_TARGET_MAX`: the idle record least recently executed is evicted. 3FS's
//! records are volatile, so a restarted target re-executes a retry it already applied (§3.5
//! #9); t3fs keeps each committed client update's record with its chunk and [`ExactlyOnce::adopt`]s
//! them back at boot (the swarm found the double apply breaking linearizability, seed 2001).

use std::collections::BTreeMap;

use crate::chunk::UpdateTag;
use crate::ids::{ChannelId, ClientId, SeqNum};
use crate::limits::CHANNEL_RECORDS_PER_TARGET_MAX;
use crate::msg::{MessageTag, UpdateResult};

/// What to do with an arriving update.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Admission {
    /// Execute it (the channel is now marked running).
    Execute,
    /// Answer with this cached result; do not execute.
    Cached(UpdateResult),
    /// An update with this seqnum is running: answer `ChannelLocked`.
    Locked,
    /// The seqnum is older than the channel's: answer `DuplicateUpdate`.
    Duplicate,
}

#[derive(Clone, Debug, Eq, Hash, PartialEq)]
struct Record {
    seqnum: SeqNum,
    running: bool,
    result: Option<UpdateResult>,
    last_used: u64,
}

/// Per-target channel records.
#[derive(Clone, Debug, Default, Eq, Hash, PartialEq)]
pub struct ExactlyOnce {
    records: BTreeMap<(ClientId, ChannelId), Record>,
    clock: u64,
}

impl ExactlyOnce {
    /// Decides what to do with an update carrying `tag`, marking the channel running on
    /// `Execute`.
    pub fn admit(&mut self, tag: &MessageTag) -> Admission {
        let key = (tag.client, tag.channel);
        if let Some(rec) = self.records.get_mut(&key) {
            if tag.seqnum < rec.seqnum {
                return Admission::Duplicate;
            }
            if tag.seqnum == rec.seqnum {
                if rec.running {
                    return Admission::Locked;
                }
                if let Some(result) = rec.result {
                    return Admission::Cached(result);
                }
            }
            // Recency advances only when a new update executes, so replays and lock contention
            // leave the table unchanged (fewer distinct states for the model checker).
            self.clock += 1;
            *rec = Record {
                seqnum: tag.seqnum,
                running: true,
                result: None,
                last_used: self.clock,
            };
            return Admission::Execute;
        }
        if self.records.len() >= CHANNEL_RECORDS_PER_TARGET_MAX {
            self.evict_one();
        }
        self.clock += 1;
        let rec = Record {
            seqnum: tag.seqnum,
            running: true,
            result: None,
            last_used: self.clock,
        };
        self.records.insert(key, rec);
        Admission::Execute
    }

    /// Records the end of the running update with `tag`: its result on success, none on failure
    /// (so that a retry executes again).
    pub fn finish(&mut self, tag: &MessageTag, result: Option<UpdateResult>) {
        if let Some(rec) = self.records.get_mut(&(tag.client, tag.channel)) {
            if rec.seqnum == tag.seqnum {
                rec.running = false;
                rec.result = result;
            }
        }
    }

    /// Takes over the result of an update found on disk at boot or made durable by a force
    /// commit; the channel's newest seqnum wins.
    pub fn adopt(&mut self, tag: &UpdateTag, result: UpdateResult) {
        let key = (tag.client, tag.channel);
        if let Some(rec) = self.records.get(&key) {
            if rec.seqnum > tag.seqnum || (rec.seqnum == tag.seqnum && rec.result.is_some()) {
                return;
            }
        } else if self.records.len() >= CHANNEL_RECORDS_PER_TARGET_MAX {
            self.evict_one();
        }
        self.clock += 1;
        let rec = Record {
            seqnum: tag.seqnum,
            running: false,
            result: Some(result),
            last_used: self.clock,
        };
        self.records.insert(key, rec);
    }

    /// Number of records held.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no record is held.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    fn evict_one(&mut self) {
        let victim = self
            .records
            .iter()
            .filter(|(_, r)| !r.running)
            .min_by_key(|(_, r)| r.last_used)
            .map(|(k, _)| *k);
        // If every record is running the table is over its bound until one finishes; running
        // records are bounded by chunk-lock waiters, so this cannot grow without limit.
        if let Some(k) = victim {
            self.records.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ChunkVersion, RequestId};

    fn tag(seq: u64) -> MessageTag {
        MessageTag {
            client: ClientId(1),
            request: RequestId(0),
            channel: ChannelId(1),
            seqnum: SeqNum(seq),
        }
    }

    #[test]
    fn retry_gets_cached_result_and_old_seqnum_is_duplicate() {
        let mut eo = ExactlyOnce::default();
        assert_eq!(eo.admit(&tag(1)), Admission::Execute);
        assert_eq!(eo.admit(&tag(1)), Admission::Locked);
        let res = UpdateResult {
            commit_version: ChunkVersion(1),
            ..Default::default()
        };
        eo.finish(&tag(1), Some(res));
        assert_eq!(eo.admit(&tag(1)), Admission::Cached(res));
        assert_eq!(eo.admit(&tag(2)), Admission::Execute);
        assert_eq!(eo.admit(&tag(1)), Admission::Duplicate);
        eo.finish(&tag(2), None);
        // A failed update leaves no cached result: the retry executes again.
        assert_eq!(eo.admit(&tag(2)), Admission::Execute);
    }
}
