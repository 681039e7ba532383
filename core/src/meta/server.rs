//! The meta server machine (3FS §4): stateless, it runs each client request as one optimistic
//! KV transaction through `IoOp::Kv` and answers it.
//!
//! A request's attempt replays the operation against the rows fetched so far (`replay.rs`),
//! fetching one missing row or range per round trip at the attempt's read version, then sends
//! the commit. KV failures follow the contract's reactions:
//! - `Conflict`, `TooOld`: a fresh attempt (new read version, empty cache);
//! - `CommitUnknown`: a fresh attempt too, which is safe because mutating requests are
//!   exactly-once through their idempotency record (`request.rs`);
//! - `Unavailable`: a fresh attempt after a backoff timer.
//!
//! After `attempts_max` attempts the client is told `Kv(CommitUnknown)` if any attempt's commit
//! had an unknown outcome (so it must not assume the request did nothing), else the last error;
//! clients retry both with the same request id.
//!
//! Inode ids come in blocks of 4096 from the KV counter (3FS §4.1), one small transaction per
//! block, so concurrent creates on different servers do not all conflict on the counter row.
//! A request that can make inodes reserves the ids it may use from the server's block when it
//! starts and keeps them over its retries (an attempt whose commit was unknown either applied,
//! and then its record answers the retry, or did not, and then the ids are still unused).
//! Requests that find the block too small wait for the next one.
//!
//! Invariants: at most one running attempt per (client, request) (a duplicate request only
//! updates where the answer goes); every I/O in flight belongs to running work; at most
//! [`REQUESTS_MAX`] requests run at once (more are refused with `Kv(Unavailable)`, a retryable
//! answer); no two running requests hold overlapping ids. A crash loses running requests and
//! the rest of the block, which is harmless: ids are unique, not dense.
//! GC (§4.5) runs as the server's own work too: every `gc_interval` one bounded step over the
//! GC root (`gc.rs`), continuing where the last one stopped.
//! Every `idem_clean_interval` it deletes idempotency records older than `idem_expire`
//! (`idem.rs`), in batches, continuing where the last batch stopped.
//! Every `prune_interval` it asks the primary mgmtd for the live clients and deletes the
//! write sessions of the others (`session.rs`), so a dead writer's files can be collected.
//! A length update that needs storage (`length.rs`) pauses its request: the embedded storage
//! client asks the file's chain heads, and the request runs again, from a fresh read version,
//! with the answer. The server's own work (length queries, GC and purges, statFs's space) is
//! `server_own.rs`; configuration, timers and counters are `server_cfg.rs`; what runs (requests,
//! batches, own work) is `server_work.rs`.
//! Closes and syncs go through per-file batches (`batch.rs`).

use std::collections::BTreeMap;

use super::prefetch::{answers, speculate, RowHints};
use super::replay::{Missing, ReplayKv};
use super::request::{MetaOp, MetaResult};
use super::server_replay::{replay_guess, replay_on, Cursors, Replayed};
use super::MetaError;
use crate::ids::{ClientId, IoId, NodeId, RequestId};
use crate::kv::{KvDone, KvError, KvOp};
use crate::machine::{EventOf, IoOp, IoResult, Machine, NoCall, Outbox, Unobserved};
use crate::msg::meta::{MetaReply, MetaReq};
use crate::msg::Msg;
use crate::time::Instant;

pub use super::server_cfg::{
    LayoutPolicy, MetaConfig, MetaCounters, MetaTimer, IDEM_CLEAN_BATCH, REQUESTS_MAX,
};

pub(super) use super::server_work::{Key, Own, Running, Work, SELF, SYNC_KEY_BIT};

/// The directories among the rows `mutations` write (module docs of `msg/meta.rs`).
fn dirs_written(mutations: &[crate::kv::Mutation]) -> Vec<super::Inode> {
    let inode = |m: &crate::kv::Mutation| match m {
        crate::kv::Mutation::Set(k, v) if super::keys::is_inode_key(k) => {
            crate::mgmtd::store::decode::<super::Inode>(v).ok()
        }
        _ => None,
    };
    let dirs = mutations.iter().filter_map(inode).filter(|i| i.is_dir());
    dirs.take(crate::msg::meta::DIRS_CHANGED_MAX).collect()
}

/// The meta server.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct MetaServer {
    pub(super) cfg: MetaConfig,
    pub(super) running: BTreeMap<(ClientId, RequestId), Running>,
    pub(super) ios: BTreeMap<IoId, (ClientId, RequestId)>,
    pub(super) next_io: u64,
    /// Unreserved ids of the current block.
    pub(super) pool: core::ops::Range<u64>,
    /// Requests waiting for ids, in arrival order.
    pub(super) waiting: Vec<Key>,
    /// The GC entry the next GC step continues after.
    pub(super) gc_after: Vec<u8>,
    /// Round-robin bases of new files' chain ranges.
    pub(super) allocator: super::placement::ChainAllocator,
    /// GC's chunk removal on storage.
    pub(super) purger: Option<super::purge::Purger>,
    /// The mgmtd believed primary (follows `NotPrimary` hints).
    pub(super) mgmtd: Option<NodeId>,
    /// The session key the next prune continues after.
    pub(super) prune_after: Vec<u8>,
    /// The record key the next idempotency cleaning continues after.
    pub(super) idem_after: Vec<u8>,
    /// The last space each storage node reported (statFs).
    pub(super) space: BTreeMap<NodeId, Vec<crate::msg::TargetSpace>>,
    /// The running length-update batch of each file (its running key).
    pub(super) length_batches: BTreeMap<crate::ids::InodeId, Key>,
    /// Length updates waiting for the running batch of their file.
    pub(super) length_queue: BTreeMap<crate::ids::InodeId, Vec<super::batch::Member>>,
    /// The running batch of each member of one.
    pub(super) batch_of: BTreeMap<Key, Key>,
    pub(super) counters: Unobserved<MetaCounters>,
    /// What this server last saw of each row, to prefetch by (`prefetch.rs`).
    pub(super) hints: RowHints,
}

impl MetaServer {
    /// A server with nothing running. `io_base` keeps I/O ids of incarnations apart.
    pub fn new(cfg: MetaConfig, io_base: u64) -> Self {
        let purger = match (&cfg.storage, &cfg.layout) {
            (Some((client, routing)), Some(p)) => Some(super::purge::Purger::new(
                client.clone(),
                routing.clone(),
                p.chains.clone(),
            )),
            _ => None,
        };
        Self {
            purger,
            mgmtd: cfg.mgmtd.first().copied(),
            prune_after: Vec::new(),
            idem_after: Vec::new(),
            space: BTreeMap::new(),
            length_batches: BTreeMap::new(),
            length_queue: BTreeMap::new(),
            batch_of: BTreeMap::new(),
            cfg,
            running: BTreeMap::new(),
            ios: BTreeMap::new(),
            next_io: io_base,
            pool: 0..0,
            waiting: Vec::new(),
            gc_after: Vec::new(),
            allocator: Default::default(),
            counters: Default::default(),
            hints: RowHints::default(),
        }
    }

    /// Counters.
    pub fn counters(&self) -> &MetaCounters {
        &self.counters
    }

    /// Requests running.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    fn on_request(&mut self, from: NodeId, req: MetaReq, now: Instant, out: &mut Outbox<Self>) {
        let key = (req.client, req.request);
        if super::batch::length_update(&req.op).is_some() {
            let member = super::batch::Member {
                key,
                op: req.op,
                reply_to: Some(from),
                user: req.user,
            };
            self.batch_length_update(member, now, out);
            return;
        }
        if let Some(r) = self.running.get_mut(&key) {
            r.reply_to = Some(from); // A retry: answer where the client now listens.
            return;
        }
        if self.running.len() >= REQUESTS_MAX {
            let result = Err(MetaError::Kv(KvError::Unavailable));
            let reply = MetaReply {
                request: req.request,
                result,
                dirs: Default::default(),
            };
            return out.send(from, Msg::MetaReply(reply));
        }
        let need = req.op.ids_needed();
        let mut r = Running::new(Some(from), Work::Request(req.op), now);
        r.user = req.user;
        if let (Work::Request(MetaOp::Create { .. }), Some(p)) = (&r.work, &self.cfg.layout) {
            // The shuffle seed is derived from the request, so a rerun picks the same one.
            let seed = super::placement::seed_of(key.0 .0, key.1 .0);
            let len = p.chains.len() as u32;
            r.layout = self
                .allocator
                .allocate(p.table, p.table_version, len, p.stripe.min(len), seed)
                .map(|range| super::placement::Layout::new(p.chunk_size, range));
        }
        let earlier = self.running.insert(key, r);
        // At most one running attempt per (client, request): a duplicate only re-addresses.
        debug_assert!(earlier.is_none(), "request {key:?} started twice");
        debug_assert!(
            self.running.len() <= REQUESTS_MAX,
            "more than REQUESTS_MAX running"
        );
        if need > 0 {
            self.waiting.push(key);
            return self.hand_out_ids(now, out);
        }
        self.step(key, now, out);
    }

    /// Gives waiting requests their ids in arrival order, fetching a new block when short.
    pub(super) fn hand_out_ids(&mut self, now: Instant, out: &mut Outbox<Self>) {
        while let Some(&key) = self.waiting.first() {
            let need = match self.running.get(&key).map(|r| &r.work) {
                Some(Work::Request(op)) => op.ids_needed(),
                _ => 0,
            };
            if self.pool.end - self.pool.start < need {
                let alloc = (SELF, RequestId(0));
                self.start_own(alloc, Work::AllocIds, now, out);
                return;
            }
            self.waiting.remove(0);
            let start = self.pool.start;
            self.pool.start += need;
            if let Some(r) = self.running.get_mut(&key) {
                // Ids are handed out once per request and kept over its retries: a second
                // block would leak the first and could overlap another request's.
                debug_assert!(r.ids.is_empty(), "request {key:?} got ids twice");
                r.ids = start..start + need;
            }
            self.step(key, now, out);
        }
    }

    /// What a replay reads of the server beside the request (`server_replay.rs`).
    fn cursors(&self) -> Cursors<'_> {
        Cursors {
            cfg: &self.cfg,
            gc_after: &self.gc_after,
            prune_after: &self.prune_after,
            idem_after: &self.idem_after,
            purging: self.purger.is_some(),
        }
    }

    /// Replays the request on its rows: fetch the next missing rows, commit, or answer.
    pub(super) fn step(&mut self, key: Key, now: Instant, out: &mut Outbox<Self>) {
        // Summed only for a statFs: every other request would discard it.
        let space = match self.running.get(&key).map(|r| &r.work) {
            Some(Work::Request(MetaOp::StatFs)) => self.fs_stat(),
            _ => Default::default(),
        };
        let Some(r) = self.running.get_mut(&key) else {
            return;
        };
        let (mut rows, mut own) = (std::mem::take(&mut r.rows), r.own.take());
        let Some(r) = self.running.get(&key) else {
            return;
        };
        let done = replay_on(&self.cursors(), space, key, r, &mut rows, &mut own);
        let Some(r) = self.running.get_mut(&key) else {
            return;
        };
        (r.rows, r.own) = (rows, own);
        let answer = match done.replayed {
            Replayed::Answer(answer) => answer,
            // A batch member whose POSIX error discarded the batch's writes so far
            // (`request.rs`): never answered, the batch replays without the member.
            Replayed::Split(k) => {
                self.leave_batch(key, k);
                return self.step(key, now, out);
            }
        };
        if let Some(miss) = r.rows.take_missing() {
            return self.fetch(key, miss, out);
        }
        if let (Err(MetaError::LengthUnknown), Some(file)) = (&answer, done.wants) {
            return self.ask_length(key, file, now, out);
        }
        match done.commit {
            // Mutating requests always read their idempotency record first, so the read
            // version is real; were it not, version 0 would only make the commit conflict.
            // A failed request commits too: its record holds the error (`request.rs`).
            Ok(req) if !req.mutations.is_empty() => {
                r.answer = Some(answer);
                r.dirs.dirs = dirs_written(&req.mutations);
                self.hints.learn_writes(&req.mutations);
                self.submit(key, KvOp::Commit(req), Vec::new(), out);
            }
            // A read-only request writes nothing: answer at once.
            _ => self.answer(key, answer, now, out),
        }
    }

    /// Reads the row or range the replay of `key` missed, with the rows its replay would read
    /// next as far as the hints tell (`prefetch.rs`), in one read at the attempt's version.
    fn fetch(&mut self, key: Key, miss: Missing, out: &mut Outbox<Self>) {
        let Some(r) = self.running.get(&key) else {
            return;
        };
        let cursors = self.cursors();
        let misses = speculate(miss, &r.rows, &self.hints, |rows| {
            replay_guess(&cursors, key, r, rows)
        });
        let (mut keys, mut ranges) = (Vec::new(), Vec::new());
        for m in &misses {
            match m {
                Missing::Key(k) => keys.push(k.clone()),
                Missing::Range(range, limit) => ranges.push((range.clone(), *limit)),
            }
        }
        let at = r.rows.version();
        self.counters.0.reads += 1;
        self.counters.0.rows_fetched += misses.len() as u64;
        self.submit(key, KvOp::Read { at, keys, ranges }, misses, out);
    }

    /// Sends `op` for `key`; `misses` are the rows a read asks for (empty for a commit).
    fn submit(&mut self, key: Key, op: KvOp, misses: Vec<Missing>, out: &mut Outbox<Self>) {
        self.next_io += 1;
        let id = IoId(self.next_io);
        self.ios.insert(id, key);
        if let Some(r) = self.running.get_mut(&key) {
            r.io = Some((id, misses));
        }
        out.io(id, IoOp::Kv(op));
    }

    pub(super) fn answer(
        &mut self,
        key: Key,
        result: MetaResult,
        now: Instant,
        out: &mut Outbox<Self>,
    ) {
        let Some(r) = self.running.remove(&key) else {
            return;
        };
        // The server's own work: apply what its committed final replay found.
        let own = if result.is_ok() { r.own } else { None };
        match (r.work, own) {
            (Work::Batch(members), own) => {
                let results = match (result, own) {
                    (Ok(_), Some(Own::Batch(rs))) => Ok(rs),
                    (Err(e), _) => Err(e),
                    (Ok(_), _) => Err(MetaError::Corrupt),
                };
                return self.batch_done(members, results, now, out);
            }
            (Work::Request(_), _) => {}
            (Work::Free(..), freed) => {
                if freed == Some(Own::Freed(true)) {
                    self.counters.0.gc_freed += 1;
                }
                return;
            }
            (Work::Prune(_), pruned) => {
                if let Some(Own::Pruned(n, next, files)) = pruned {
                    self.prune_after = next;
                    self.counters.0.sessions_pruned += u64::from(n);
                    for inode in files {
                        let key = (SELF, RequestId(inode.0 | SYNC_KEY_BIT));
                        self.start_own(key, Work::Sync(inode), now, out);
                    }
                }
                return;
            }
            (Work::Sync(_), _) => return,
            (Work::IdemClean, cleaned) => {
                if let Some(Own::IdemCleaned(n, next)) = cleaned {
                    self.counters.0.idem_cleaned += u64::from(n);
                    // More to do: the next batch at once, not a whole interval later.
                    let more = !next.is_empty();
                    self.idem_after = next;
                    if more {
                        self.start_own((SELF, RequestId(3)), Work::IdemClean, now, out);
                    }
                }
                return;
            }
            (Work::Gc, gc) => return self.gc_done(gc, now, out),
            // A committed block replaces what is left of the old one (never reused); a failed
            // allocation is tried again by the next request that waits.
            (Work::AllocIds, ids) => {
                if let Some(Own::Ids(ids)) = ids {
                    self.pool = ids;
                } else if result == Err(MetaError::Kv(KvError::NoSpace)) {
                    // No room for a block of ids: the requests waiting for one fail as their own
                    // commits would (allocating again at once would spin while the KV is full).
                    for key in std::mem::take(&mut self.waiting) {
                        self.answer(key, Err(MetaError::Kv(KvError::NoSpace)), now, out);
                    }
                }
                return self.hand_out_ids(now, out);
            }
        }
        self.counters.0.answered += 1;
        let reply = MetaReply {
            request: key.1,
            result,
            dirs: r.dirs,
        };
        if let Some(to) = r.reply_to {
            out.send(to, Msg::MetaReply(reply));
        }
    }

    fn on_io_done(&mut self, id: IoId, result: IoResult, now: Instant, out: &mut Outbox<Self>) {
        let Some(key) = self.ios.remove(&id) else {
            return;
        };
        let Some(r) = self.running.get_mut(&key) else {
            return;
        };
        let Some((_, misses)) = r.io.take() else {
            return;
        };
        let IoResult::Kv(result) = result else {
            return;
        };
        match (result, misses.is_empty()) {
            (
                Ok(KvDone::Read {
                    version,
                    values,
                    ranges,
                }),
                false,
            ) => {
                self.hints.learn_read(&misses, &values, &ranges);
                for (miss, fetched) in answers(misses, values, ranges) {
                    r.rows.fill(version, miss, fetched);
                }
                self.step(key, now, out);
            }
            (Ok(KvDone::Committed(version)), true) => {
                r.dirs.version = version.0;
                let answer = r.answer.take().expect("a commit follows a final replay");
                self.answer(key, answer, now, out);
            }
            (Ok(_), _) => self.retry(key, KvError::Conflict, now, out),
            (Err(e), _) => self.retry(key, e, now, out),
        }
    }

    /// Starts a fresh attempt after `e`, or gives up with an answer the client retries on.
    fn retry(&mut self, key: Key, e: KvError, now: Instant, out: &mut Outbox<Self>) {
        let Some(r) = self.running.get_mut(&key) else {
            return;
        };
        if e == KvError::CommitUnknown {
            r.unknown = true;
            self.counters.0.commit_unknown += 1;
        }
        // No room in the KV: another attempt cannot fit until space is freed. A client's request
        // (or a batch of closes) fails now, ENOSPC through a mount, and so does an inode-id
        // allocation, failing the requests that wait for ids with it (`answer`). The server's
        // background work backs off as for `Unavailable` (its deletes fit in the KV's reserve).
        let fail_now = e == KvError::NoSpace
            && matches!(r.work, Work::Request(_) | Work::Batch(_) | Work::AllocIds);
        if r.attempts >= self.cfg.attempts_max || fail_now {
            let e = if r.unknown { KvError::CommitUnknown } else { e };
            return self.answer(key, Err(MetaError::Kv(e)), now, out);
        }
        r.attempts += 1;
        r.rows = ReplayKv::default();
        r.answer = None;
        r.now = now.0 / 1_000_000_000;
        self.counters.0.retries += 1;
        if matches!(e, KvError::Unavailable | KvError::NoSpace) {
            out.set_timer(
                MetaTimer::Retry(key.0, key.1),
                self.cfg.unavailable_wait.clone(),
            );
        } else {
            self.step(key, now, out);
        }
    }

    /// A message: a client's request, the answers to the server's own questions (space,
    /// live clients, the primary's name), or one for the storage client GC removes chunks with.
    fn on_msg(&mut self, from: NodeId, msg: Msg, now: Instant, out: &mut Outbox<Self>) {
        match msg {
            Msg::MetaReq(req) => self.on_request(from, req, now, out),
            Msg::SpaceInfoReply(s) => {
                self.space.insert(s.node, s.targets);
            }
            Msg::ClientSessions(s) => {
                if s.complete {
                    let mut live = s.clients;
                    live.sort_unstable();
                    self.start_own((SELF, RequestId(2)), Work::Prune(live), now, out);
                }
            }
            msg => {
                if let Msg::NotPrimary { primary: Some(p) } = &msg {
                    self.mgmtd = Some(*p);
                }
                // Everything else is for the storage client GC removes chunks with.
                if let Some(p) = &mut self.purger {
                    let done = p.on_msg(from, msg, now, out);
                    self.purged(done, now, out);
                }
            }
        }
    }

    /// A timer: the storage client's, a periodic task of the server's own (re-armed), or a
    /// request's retry.
    fn on_timer(&mut self, timer: MetaTimer, now: Instant, out: &mut Outbox<Self>) {
        match timer {
            MetaTimer::Storage(t) => {
                if let Some(p) = &mut self.purger {
                    let done = p.on_timer(t, now, out);
                    self.purged(done, now, out);
                }
            }
            MetaTimer::Prune => {
                if let Some(m) = self.mgmtd {
                    out.send(m, Msg::GetClientSessions);
                }
                if let Some(every) = self.cfg.prune_interval.clone() {
                    out.set_timer(MetaTimer::Prune, every);
                }
            }
            MetaTimer::Space => {
                if let Some(p) = &self.purger {
                    let nodes: std::collections::BTreeSet<NodeId> =
                        p.routing().targets.values().copied().collect();
                    for n in nodes {
                        out.send(n, Msg::SpaceInfo);
                    }
                }
                if let Some(every) = self.cfg.space_interval.clone() {
                    out.set_timer(MetaTimer::Space, every);
                }
            }
            MetaTimer::IdemClean => {
                self.start_own((SELF, RequestId(3)), Work::IdemClean, now, out);
                if let Some(every) = self.cfg.idem_clean_interval.clone() {
                    out.set_timer(MetaTimer::IdemClean, every);
                }
            }
            MetaTimer::Gc => {
                self.start_own((SELF, RequestId(1)), Work::Gc, now, out);
            }
            MetaTimer::Retry(c, r) => {
                if self.running.get(&(c, r)).is_some_and(|r| r.io.is_none()) {
                    self.step((c, r), now, out);
                }
            }
        }
    }
}

impl Machine for MetaServer {
    type Msg = Msg;
    type Timer = MetaTimer;
    type Call = NoCall;
    type Ret = NoCall;

    fn start(&mut self, now: Instant, out: &mut Outbox<Self>) {
        if let (Some(every), Some(_)) = (self.cfg.prune_interval.clone(), self.mgmtd) {
            out.set_timer(MetaTimer::Prune, every);
        }
        if let Some(p) = &mut self.purger {
            p.start(now, out);
        }
        if let Some(every) = self.cfg.gc_interval.clone() {
            out.set_timer(MetaTimer::Gc, every);
        }
        if let Some(every) = self.cfg.idem_clean_interval.clone() {
            out.set_timer(MetaTimer::IdemClean, every);
        }
        if let (Some(every), Some(_)) = (self.cfg.space_interval.clone(), &self.purger) {
            out.set_timer(MetaTimer::Space, every);
        }
    }

    fn handle(
        &mut self,
        now: Instant,
        event: EventOf<Msg, MetaTimer, NoCall>,
        out: &mut Outbox<Self>,
    ) {
        match event {
            EventOf::Recv { from, msg } => self.on_msg(from, msg, now, out),
            EventOf::IoDone { id, result } => self.on_io_done(id, result, now, out),
            EventOf::Timer(t) => self.on_timer(t, now, out),
            EventOf::Call { call, .. } => match call {},
        }
    }

    fn check_invariants(&self) {
        self.check_batches();
        assert!(
            self.running.keys().filter(|k| k.0 != SELF).count() <= REQUESTS_MAX,
            "too many meta requests"
        );
        if let Some(p) = &self.purger {
            p.check_invariants();
        }
        for (id, key) in &self.ios {
            let r = self.running.get(key);
            assert!(
                r.is_some_and(|r| r.io.as_ref().is_some_and(|(i, _)| i == id)),
                "meta I/O {id:?} without its running request"
            );
        }
        let mut held: Vec<&core::ops::Range<u64>> = self
            .running
            .values()
            .filter(|r| !r.ids.is_empty())
            .map(|r| &r.ids)
            .chain(Some(&self.pool).filter(|p| !p.is_empty()))
            .collect();
        held.sort_by_key(|r| r.start);
        assert!(
            held.windows(2).all(|w| w[0].end <= w[1].start),
            "two requests hold the same inode ids"
        );
        for r in self.running.values() {
            assert!(r.attempts <= self.cfg.attempts_max);
        }
        for k in &self.waiting {
            assert!(
                self.running.contains_key(k),
                "a waiting request is not running"
            );
        }
    }
}
