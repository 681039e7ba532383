//! The meta server's own work besides client requests: length queries to storage (§4.4),
//! GC steps and the purges they start (§4.5), the space statFs reports, and starting the
//! server's background transactions.
//!
//! Invariant: own work runs under the reserved client id `SELF`, one entry per kind (or per
//! file), so a timer that fires while the previous round still runs does not start a second.
//! Not here: running transactions (`server.rs`), the operations (`gc.rs`, `session.rs`,
//! `idem.rs`, `length.rs`).

use super::purge::StorageDone;
use super::replay::ReplayKv;
use super::server::{Key, MetaServer, MetaTimer, Own, Running, Work, SELF};
use super::MetaError;
use crate::ids::RequestId;
use crate::kv::KvError;
use crate::machine::Outbox;
use crate::time::Instant;

impl MetaServer {
    /// Files whose chunks are gone get their inodes freed (a failed purge waits for GC's
    /// next round).
    /// statFs's answer from the cached reports of the nodes the routing still names.
    pub(super) fn fs_stat(&self) -> super::request::FsStat {
        let Some(routing) = self.purger.as_ref().map(|p| p.routing()) else {
            return Default::default();
        };
        let (mut capacity, mut used) = (0u64, 0u64);
        for (node, targets) in &self.space {
            for t in targets {
                if routing.targets.get(&t.target) == Some(node) {
                    capacity = capacity.saturating_add(t.capacity);
                    used = used.saturating_add(t.used);
                }
            }
        }
        super::request::FsStat {
            capacity,
            used,
            free: capacity.saturating_sub(used),
        }
    }

    /// Length queries answered go back to their requests.
    pub(super) fn purged(&mut self, done: Vec<StorageDone>, now: Instant, out: &mut Outbox<Self>) {
        for d in done {
            match d {
                StorageDone::Purged(inode, entry, true) => self.start_own(
                    (SELF, RequestId(inode.0)),
                    Work::Free(entry, inode),
                    now,
                    out,
                ),
                StorageDone::Purged(..) => {}
                StorageDone::Length(key, len) => self.length_known(key, len, now, out),
            }
        }
    }

    /// A request's final replay needs the length of `file` from storage (`length.rs`).
    pub(super) fn ask_length(
        &mut self,
        key: Key,
        file: super::Inode,
        now: Instant,
        out: &mut Outbox<Self>,
    ) {
        let Some(r) = self.running.get_mut(&key) else {
            return;
        };
        let super::InodeKind::File {
            length,
            truncate_ver,
            ..
        } = file.kind
        else {
            return self.answer(key, Err(MetaError::IsDir), now, out);
        };
        r.queries += 1;
        if r.queries > self.cfg.attempts_max {
            // The file keeps changing under the query: the client retries later.
            let e = Err(MetaError::Kv(KvError::Unavailable));
            return self.answer(key, e, now, out);
        }
        r.querying = Some((file.id, (length, truncate_ver)));
        self.counters.0.length_queries += 1;
        let done = match &mut self.purger {
            Some(p) => p.query_length(key, &file, now, out),
            // No storage to ask: the stored length stands.
            None => vec![StorageDone::Length(key, Some(length))],
        };
        self.purged(done, now, out);
    }

    /// Storage answered a length query: run the request again with the answer, from a fresh
    /// read version (rows read before the query may predate updates the answer reflects).
    pub(super) fn length_known(
        &mut self,
        key: Key,
        len: Option<u64>,
        now: Instant,
        out: &mut Outbox<Self>,
    ) {
        let Some(r) = self.running.get_mut(&key) else {
            return;
        };
        let Some((inode, seen)) = r.querying.take() else {
            return;
        };
        let Some(length) = len else {
            let e = Err(MetaError::Kv(KvError::Unavailable));
            return self.answer(key, e, now, out);
        };
        r.queried = Some(super::length::QueriedLength {
            inode,
            length,
            seen,
        });
        r.rows = ReplayKv::default();
        r.answer = None;
        r.now = now.0 / 1_000_000_000;
        self.step(key, now, out);
    }

    /// Starts the server's own `work` under `key` unless it is already running.
    pub(super) fn start_own(&mut self, key: Key, work: Work, now: Instant, out: &mut Outbox<Self>) {
        if let std::collections::btree_map::Entry::Vacant(e) = self.running.entry(key) {
            e.insert(Running::new(None, work, now));
            self.step(key, now, out);
        }
    }

    /// A GC step ended: continue after it next time, start purging what it found, re-arm.
    pub(super) fn gc_done(&mut self, gc: Option<Own>, now: Instant, out: &mut Outbox<Self>) {
        if let Some(Own::Gc(g)) = gc {
            self.gc_after = g.next;
            self.counters.0.gc_freed += u64::from(g.stats.freed + g.stats.dirs);
            self.counters.0.gc_busy += u64::from(g.stats.busy);
            for (entry, file) in g.purge {
                let done = match &mut self.purger {
                    Some(p) if !p.busy(file.id) => p.purge(entry, &file, now, out),
                    _ => Vec::new(),
                };
                self.purged(done, now, out);
            }
        }
        if let Some(every) = self.cfg.gc_interval.clone() {
            out.set_timer(MetaTimer::Gc, every);
        }
    }
}
