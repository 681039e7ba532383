//! The meta server's batch bookkeeping (3FS §4.4, §4.6): which length updates queue behind
//! which running batch, starting the next batch of an inode, and answering every member.
//! The batch itself, as one transaction, is `batch.rs`.
//!
//! Invariants (checked by [`MetaServer::check_batches`]): at most one batch per inode runs;
//! every queued inode has a running batch; every member the server tracks sits in the batch
//! it is recorded under. Not here: running the transaction (`batch.rs`, `server.rs`).

use super::batch::{length_update, Member};
use super::request::MetaResult;
use super::server::{Key, MetaServer, Running, Work, REQUESTS_MAX};
use super::MetaError;
use crate::ids::InodeId;
use crate::kv::KvError;
use crate::machine::Outbox;
use crate::msg::meta::MetaReply;
use crate::msg::Msg;
use crate::time::Instant;

impl MetaServer {
    /// Takes a close or sync: re-addresses a retry of a member, queues it behind the batch of
    /// its inode, or starts a batch. False if `member` is no length update.
    pub(super) fn batch_length_update(
        &mut self,
        member: Member,
        now: Instant,
        out: &mut Outbox<Self>,
    ) -> bool {
        let Some(inode) = length_update(&member.op) else {
            return false;
        };
        let key = member.key;
        // A retry of a member: answer where the client now listens.
        if let Some(m) = self.member_mut(key) {
            m.reply_to = member.reply_to;
            return true;
        }
        if !self.length_batches.contains_key(&inode) && self.running.len() >= REQUESTS_MAX {
            reply(out, &member, Err(MetaError::Kv(KvError::Unavailable)));
            return true;
        }
        if self.length_batches.contains_key(&inode) {
            let queue = self.length_queue.entry(inode).or_default();
            if queue.len() >= REQUESTS_MAX {
                let result = Err(MetaError::Kv(KvError::Unavailable));
                reply(out, &member, result);
                return true;
            }
            queue.push(member);
            return true;
        }
        self.start_batch(inode, vec![member], now, out);
        true
    }

    /// Member `k` of the batch running under `key` leaves it and runs alone after it.
    pub(super) fn leave_batch(&mut self, key: Key, k: usize) {
        let Some(Work::Batch(ms)) = self.running.get_mut(&key).map(|r| &mut r.work) else {
            return;
        };
        let m = ms.remove(k);
        self.batch_of.remove(&m.key);
        let inode = length_update(&m.op).expect("members update lengths");
        self.length_queue.entry(inode).or_default().insert(0, m);
    }

    /// The member with `key`, queued or running.
    fn member_mut(&mut self, key: Key) -> Option<&mut Member> {
        if let Some(bk) = self.batch_of.get(&key) {
            return match self.running.get_mut(bk).map(|r| &mut r.work) {
                Some(Work::Batch(ms)) => ms.iter_mut().find(|m| m.key == key),
                _ => None,
            };
        }
        self.length_queue
            .values_mut()
            .flat_map(|q| q.iter_mut())
            .find(|m| m.key == key)
    }

    fn start_batch(
        &mut self,
        inode: InodeId,
        members: Vec<Member>,
        now: Instant,
        out: &mut Outbox<Self>,
    ) {
        let key = members[0].key;
        for m in &members {
            self.batch_of.insert(m.key, key);
        }
        if members.len() > 1 {
            self.counters.0.batched += members.len() as u64;
        }
        self.length_batches.insert(inode, key);
        self.running
            .insert(key, Running::new(None, Work::Batch(members), now));
        self.step(key, now, out);
    }

    /// A batch ended with `result` (per-member answers, or one error for all): answer every
    /// member, then start the next batch of the inode from what queued meanwhile.
    pub(super) fn batch_done(
        &mut self,
        members: Vec<Member>,
        result: Result<Vec<MetaResult>, MetaError>,
        now: Instant,
        out: &mut Outbox<Self>,
    ) {
        let inode = members.first().and_then(|m| length_update(&m.op));
        for (k, m) in members.iter().enumerate() {
            self.batch_of.remove(&m.key);
            let answer = match &result {
                Ok(rs) => rs.get(k).cloned().unwrap_or(Err(MetaError::Corrupt)),
                Err(e) => Err(e.clone()),
            };
            self.counters.0.answered += 1;
            reply(out, m, answer);
        }
        let Some(inode) = inode else { return };
        self.length_batches.remove(&inode);
        if let Some(next) = self.length_queue.remove(&inode) {
            self.start_batch(inode, next, now, out);
        }
    }

    /// Checks the batch bookkeeping.
    pub(super) fn check_batches(&self) {
        for (inode, key) in &self.length_batches {
            let Some(Work::Batch(ms)) = self.running.get(key).map(|r| &r.work) else {
                panic!("the batch of {inode:?} is not running");
            };
            assert!(ms.iter().all(|m| length_update(&m.op) == Some(*inode)));
        }
        for inode in self.length_queue.keys() {
            assert!(
                self.length_batches.contains_key(inode),
                "length updates of {inode:?} queue behind no batch"
            );
        }
        for (member, batch) in &self.batch_of {
            assert!(
                matches!(self.running.get(batch).map(|r| &r.work), Some(Work::Batch(ms)) if ms.iter().any(|m| m.key == *member)),
                "a member outside its batch"
            );
        }
    }
}

fn reply(out: &mut Outbox<MetaServer>, m: &Member, result: MetaResult) {
    if let Some(to) = m.reply_to {
        let reply = MetaReply {
            request: m.key.1,
            result,
            dirs: Default::default(),
        };
        out.send(to, Msg::MetaReply(reply));
    }
}
