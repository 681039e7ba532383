//! mgmtd's writer pipeline: one KV transaction at a time (3FS's writer mutex), each a read of
//! the rows it depends on followed by a commit with read conflicts on them.
//!
//! Every transaction but the lease extension re-reads the lease row and the stored routing
//! version and aborts unless the lease is still this tenure's and unexpired and the version is
//! the one this primary last wrote (lease-validated writes, §2.2). Both rows are read conflicts,
//! so a takeover between read and commit aborts the commit. In-memory state changes only after
//! a commit succeeded. Reactions to KV errors follow `kv::KvError`: conflicts, unavailability
//! and too-old reads retry after a backoff (bounded); `CommitUnknown` reloads every row before
//! anything else is written. Not here: deciding what to write (lease rule, chain updater, admin).

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use super::admin::AdminPlan;
use super::lease::{self, LeaseDecision, LeaseParams};
use super::store::{self, LeaseInfo, NodeRow, LEASE_KEY, ROUTING_VERSION_KEY};
use super::{AdminCall, AdminError, AdminRet, Mgmtd, MgmtdTimer, Primary};
use crate::bugs::MgmtdBug;
use crate::ids::{ChainId, IoId, NodeId, RequestId, RoutingVersion, TargetId};
use crate::kv::{CommitReq, KeyRange, KvDone, KvError, KvOp, Mutation};
use crate::machine::{ActionOf, IoOp, IoResult, Outbox};
use crate::msg::Msg;
use crate::routing::{ChainInfo, LocalState, RoutingInfo};
use crate::time::Instant;

/// Attempts of one writer operation before it is given up.
const ATTEMPTS_MAX: u32 = 3;
const ROWS_MAX: u32 = crate::limits::LIST_LEN_MAX;

/// A queued writer operation.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub enum WriterOp {
    /// Run the §2.2 lease rule.
    ExtendLease,
    /// New tenure (or after `CommitUnknown`): load every row and bump the routing version.
    Load,
    /// Persist chains the updater changed (versions already bumped).
    Chains(Vec<ChainInfo>),
    /// Persist where targets live (learned from heartbeats).
    TargetNodes(Vec<(TargetId, NodeId)>),
    /// An admin call.
    Admin {
        /// The call's id.
        req: RequestId,
        /// The call.
        call: AdminCall,
    },
}

/// What a commit will change in memory once it succeeds.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
enum Planned {
    Lease(LeaseInfo),
    Routing {
        next: RoutingInfo,
        disabled: Option<BTreeSet<NodeId>>,
        new_chains: Vec<ChainId>,
        load: bool,
    },
}

impl Planned {
    /// A plain routing change: no node rows, no new chains, not a load.
    fn routing(next: RoutingInfo) -> Self {
        Self::Routing {
            next,
            disabled: None,
            new_chains: Vec::new(),
            load: false,
        }
    }
}

#[derive(Clone, Debug, Eq, Hash, PartialEq)]
enum Stage {
    Reading,
    Committing(Box<Planned>),
}

#[derive(Clone, Debug, Eq, Hash, PartialEq)]
struct Running {
    op: WriterOp,
    io: IoId,
    stage: Stage,
}

/// The queue and the running transaction.
#[derive(Clone, Debug, Default, Eq, Hash, PartialEq)]
pub(super) struct Writer {
    queue: VecDeque<(WriterOp, u32)>,
    running: Option<(Running, u32)>,
    /// Waiting for the retry timer after a transient failure.
    blocked: bool,
}

impl Writer {
    pub(super) fn enqueue(&mut self, op: WriterOp) -> bool {
        if self.queue.len() >= crate::limits::MGMTD_WRITER_QUEUE_MAX {
            return false;
        }
        self.queue.push_back((op, 0));
        true
    }

    /// Enqueues `op` unless an equal one is queued or running.
    pub(super) fn enqueue_once(&mut self, op: WriterOp) {
        if !self.has(|o| *o == op) {
            self.enqueue(op);
        }
    }

    pub(super) fn has(&self, pred: impl Fn(&WriterOp) -> bool) -> bool {
        self.queue.iter().any(|(o, _)| pred(o))
            || self.running.as_ref().is_some_and(|(r, _)| pred(&r.op))
    }

    pub(super) fn unblock(&mut self) {
        self.blocked = false;
    }

    fn push_front(&mut self, op: WriterOp, attempts: u32) {
        self.queue.push_front((op, attempts));
    }

    pub(super) fn check(&self) {
        assert!(self.queue.len() <= crate::limits::MGMTD_WRITER_QUEUE_MAX + 2);
    }
}

/// Why a read stage ends without a commit.
enum Abort {
    /// The lease is no longer this tenure's: step down.
    Deposed,
    /// Someone else wrote since our last commit: reload, then retry the op.
    Stale,
    /// Nothing to write (the op is answered as done).
    Nothing,
    /// The admin call is invalid.
    Invalid(AdminError),
}

impl Mgmtd {
    /// Starts the next queued operation if none is running.
    pub(super) fn pump(&mut self, now: Instant, out: &mut Outbox<Self>) {
        while self.writer.running.is_none() && !self.writer.blocked {
            let Some((op, attempts)) = self.writer.queue.pop_front() else {
                return;
            };
            let needs_tenure = !matches!(op, WriterOp::ExtendLease | WriterOp::Load);
            if needs_tenure && !self.is_primary(now) {
                self.drop_op(op, AdminError::NotPrimary(self.primary_hint()), out);
                continue;
            }
            if matches!(op, WriterOp::Load) && self.primary.is_none() {
                continue;
            }
            let mut keys = vec![LEASE_KEY.to_vec()];
            let mut ranges = Vec::new();
            match &op {
                WriterOp::ExtendLease => {}
                WriterOp::Load => {
                    keys.push(ROUTING_VERSION_KEY.to_vec());
                    for r in [
                        store::chains_range(),
                        store::targets_range(),
                        store::tables_range(),
                        store::nodes_range(),
                    ] {
                        ranges.push((r, ROWS_MAX));
                    }
                }
                WriterOp::Chains(chains) => {
                    keys.push(ROUTING_VERSION_KEY.to_vec());
                    keys.extend(chains.iter().map(|c| store::chain_key(c.chain)));
                }
                WriterOp::TargetNodes(_) | WriterOp::Admin { .. } => {
                    keys.push(ROUTING_VERSION_KEY.to_vec());
                }
            }
            let io = self.alloc_io();
            out.io(
                io,
                IoOp::Kv(KvOp::Read {
                    at: None,
                    keys,
                    ranges,
                }),
            );
            self.writer.running = Some((
                Running {
                    op,
                    io,
                    stage: Stage::Reading,
                },
                attempts,
            ));
        }
    }

    fn drop_op(&mut self, op: WriterOp, why: AdminError, out: &mut Outbox<Self>) {
        match op {
            WriterOp::Admin { req, .. } => out.push(ActionOf::Return {
                req,
                ret: AdminRet::Failed(why),
            }),
            WriterOp::Chains(chains) => {
                if let Some(p) = self.primary.as_mut() {
                    p.dirty.extend(chains.iter().map(|c| c.chain));
                }
            }
            _ => {}
        }
    }

    pub(super) fn on_kv_done(
        &mut self,
        now: Instant,
        id: IoId,
        result: IoResult,
        out: &mut Outbox<Self>,
    ) {
        let Some((running, attempts)) = self.writer.running.take() else {
            return;
        };
        if running.io != id {
            self.writer.running = Some((running, attempts)); // Not ours (from before a restart).
            return;
        }
        let IoResult::Kv(result) = result else {
            panic!("mgmtd submits only KV I/O");
        };
        match (running.stage, result) {
            (
                Stage::Reading,
                Ok(KvDone::Read {
                    version,
                    values,
                    ranges,
                }),
            ) => match self.plan(now, &running.op, &values, &ranges) {
                Ok((mutations, conflicts, planned)) => {
                    let io = self.alloc_io();
                    let req = CommitReq {
                        read_version: version,
                        read_conflicts: conflicts,
                        mutations,
                    };
                    out.io(io, IoOp::Kv(KvOp::Commit(req)));
                    let stage = Stage::Committing(Box::new(planned));
                    self.writer.running = Some((
                        Running {
                            op: running.op,
                            io,
                            stage,
                        },
                        attempts,
                    ));
                }
                Err(abort) => self.abort(running.op, attempts, abort, out),
            },
            (Stage::Committing(planned), Ok(KvDone::Committed(_))) => {
                self.counters.commits += 1;
                self.apply(now, *planned, out);
                if let WriterOp::Admin { req, .. } = running.op {
                    let v = self.routing().map(|r| r.version).unwrap_or_default();
                    out.push(ActionOf::Return {
                        req,
                        ret: AdminRet::Ok(v),
                    });
                }
            }
            (_, Ok(done)) => panic!("KV answered {done:?} to the wrong op: contract broken"),
            (_, Err(e)) => {
                self.counters.kv_failures += 1;
                self.kv_failed(running.op, attempts, e, out);
            }
        }
    }

    fn kv_failed(&mut self, op: WriterOp, attempts: u32, e: KvError, out: &mut Outbox<Self>) {
        let retry = match e {
            KvError::Conflict | KvError::TooOld | KvError::Unavailable => true,
            // No room in the KV: the writer's own rows (lease, routing) back off and retry as
            // for `Unavailable` (they must land once space is freed); an admin call fails at
            // once, since retrying cannot help until then.
            KvError::NoSpace => !matches!(op, WriterOp::Admin { .. }),
            // The lease rule re-reads the row, so re-running it is the documented reaction.
            KvError::CommitUnknown => matches!(op, WriterOp::ExtendLease | WriterOp::Load),
        };
        if e == KvError::CommitUnknown && !matches!(op, WriterOp::ExtendLease) {
            // Learn what was applied before writing anything else.
            self.writer.push_front(WriterOp::Load, 0);
        }
        // A tenure without its rows serves nothing and its lease extensions keep the same start,
        // so nothing else would ever load again: a load is retried for as long as the tenure
        // lasts (the swarm found a primary stuck unloaded after a KV outage during its load).
        let load = matches!(op, WriterOp::Load);
        if load || (retry && attempts + 1 < ATTEMPTS_MAX) {
            if !load || e != KvError::CommitUnknown {
                self.writer.push_front(op, attempts.saturating_add(1));
            }
        } else {
            self.drop_op(op, AdminError::Kv(e), out);
        }
        self.writer.blocked = true;
        out.set_timer(MgmtdTimer::WriterRetry, self.cfg.writer_retry_wait.clone());
    }

    fn abort(&mut self, op: WriterOp, attempts: u32, abort: Abort, out: &mut Outbox<Self>) {
        match abort {
            Abort::Deposed => {
                self.primary = None;
                self.drop_op(op, AdminError::NotPrimary(self.primary_hint()), out);
            }
            Abort::Stale => {
                if attempts + 1 < ATTEMPTS_MAX {
                    self.writer.push_front(op, attempts + 1);
                } else {
                    self.drop_op(op, AdminError::Kv(KvError::Conflict), out);
                }
                self.writer.push_front(WriterOp::Load, 0);
            }
            Abort::Nothing => {
                if let WriterOp::Admin { req, .. } = op {
                    let v = self.routing().map(|r| r.version).unwrap_or_default();
                    out.push(ActionOf::Return {
                        req,
                        ret: AdminRet::Ok(v),
                    });
                }
            }
            Abort::Invalid(why) => self.drop_op(op, why, out),
        }
    }

    /// The lease-validation step of every tenure write: the stored lease must be this tenure's
    /// and unexpired (unless the fencing is planted away).
    fn lease_valid(&self, now: Instant, stored: Option<&Vec<u8>>) -> bool {
        if !self.cfg.validate_lease_on_write || self.cfg.bug == Some(MgmtdBug::UnfencedWrites) {
            return true;
        }
        let Some(p) = &self.primary else { return false };
        match stored.map(|b| store::decode::<LeaseInfo>(b)) {
            Some(Ok(l)) => l.primary == self.cfg.node && l.start == p.lease.start && l.end > now.0,
            _ => false,
        }
    }

    /// The rows `op` writes, the ranges its transaction must not see change, and what it
    /// planned; or why it writes nothing.
    #[allow(clippy::type_complexity)]
    fn plan(
        &mut self,
        now: Instant,
        op: &WriterOp,
        values: &[Option<Vec<u8>>],
        ranges: &[Vec<(Vec<u8>, Vec<u8>)>],
    ) -> Result<(Vec<Mutation>, Vec<KeyRange>, Planned), Abort> {
        let lease_row = values.first().and_then(Option::as_ref);
        if let WriterOp::ExtendLease = op {
            return self.plan_lease(now, lease_row);
        }
        let (next_rv, mut conflicts) = self.fence_routing_write(now, op, values)?;
        let unfenced = self.cfg.bug == Some(MgmtdBug::UnfencedWrites);
        let mut mutations = vec![Mutation::Set(
            ROUTING_VERSION_KEY.to_vec(),
            store::encode(&next_rv.0),
        )];
        let planned = match op {
            WriterOp::ExtendLease => unreachable!("handled above"),
            WriterOp::Load => self.plan_load(next_rv, ranges, &mut mutations),
            WriterOp::Chains(chains) => {
                let rows = (&mut mutations, &mut conflicts);
                self.plan_chains(chains, values, next_rv, unfenced, rows)?
            }
            WriterOp::TargetNodes(list) => {
                let p = self.primary.as_ref().ok_or(Abort::Deposed)?;
                let mut next = (*p.routing).clone();
                for (t, n) in list {
                    mutations.push(Mutation::Set(store::target_key(*t), store::encode(n)));
                    next.targets.insert(*t, *n);
                }
                next.version = next_rv;
                Planned::routing(next)
            }
            WriterOp::Admin { call, .. } => {
                let p = self.primary.as_ref().ok_or(Abort::Deposed)?;
                let AdminPlan {
                    mut next,
                    rows,
                    disabled,
                    new_chains,
                } = super::admin::plan(p, call).map_err(|e| match e {
                    None => Abort::Nothing,
                    Some(e) => Abort::Invalid(e),
                })?;
                mutations.extend(rows);
                next.version = next_rv;
                Planned::Routing {
                    next,
                    disabled,
                    new_chains,
                    load: false,
                }
            }
        };
        Ok((mutations, conflicts, planned))
    }

    /// Extending the lease: write the lease `lease::decide` chooses, or adopt the one stored.
    #[allow(clippy::type_complexity)]
    fn plan_lease(
        &mut self,
        now: Instant,
        lease_row: Option<&Vec<u8>>,
    ) -> Result<(Vec<Mutation>, Vec<KeyRange>, Planned), Abort> {
        let stored = match lease_row.map(|b| store::decode::<LeaseInfo>(b)) {
            Some(Ok(l)) => Some(l),
            Some(Err(_)) => {
                self.counters.corrupt_rows += 1;
                None // An unreadable lease row is overwritten like an absent one.
            }
            None => None,
        };
        let params = LeaseParams {
            me: self.cfg.node,
            release_version: self.cfg.release_version,
            length: self.cfg.lease_length,
            check_release_version: self.cfg.check_release_version,
        };
        match lease::decide(stored, now, &params) {
            LeaseDecision::Write(l) if !self.released => Ok((
                vec![Mutation::Set(LEASE_KEY.to_vec(), store::encode(&l))],
                vec![KeyRange::single(LEASE_KEY)],
                Planned::Lease(l),
            )),
            LeaseDecision::Write(_) => Err(Abort::Nothing),
            LeaseDecision::Keep(l) => {
                self.on_lease(l);
                Err(Abort::Nothing)
            }
        }
    }

    /// The fencing of every routing write: this tenure's lease is stored and valid, and the
    /// stored routing version is the one this primary's routing was built on (a load takes
    /// the stored one). Returns the routing version the write publishes and the ranges its
    /// transaction conflicts on.
    fn fence_routing_write(
        &mut self,
        now: Instant,
        op: &WriterOp,
        values: &[Option<Vec<u8>>],
    ) -> Result<(RoutingVersion, Vec<KeyRange>), Abort> {
        let lease_row = values.first().and_then(Option::as_ref);
        if !self.lease_valid(now, lease_row) {
            if let Some(Ok(l)) = lease_row.map(|b| store::decode::<LeaseInfo>(b)) {
                self.lease = Some(l); // So callers are redirected to the real primary.
            }
            return Err(Abort::Deposed);
        }
        let unfenced = self.cfg.bug == Some(MgmtdBug::UnfencedWrites);
        let stored_rv = match values.get(1).and_then(Option::as_ref) {
            Some(b) => store::decode::<u64>(b).map_err(|_| Abort::Stale)?,
            None => 0,
        };
        let p = self.primary.as_ref().ok_or(Abort::Deposed)?;
        let mut conflicts = vec![
            KeyRange::single(LEASE_KEY),
            KeyRange::single(ROUTING_VERSION_KEY),
        ];
        if unfenced {
            conflicts.clear();
        }
        let base_rv = if matches!(op, WriterOp::Load) {
            stored_rv
        } else {
            p.routing.version.0
        };
        if !unfenced && !matches!(op, WriterOp::Load) && stored_rv != base_rv {
            return Err(Abort::Stale);
        }
        Ok((RoutingVersion(base_rv + 1), conflicts))
    }

    /// A new tenure's load: the routing as stored, and this node's own row.
    fn plan_load(
        &mut self,
        next_rv: RoutingVersion,
        ranges: &[Vec<(Vec<u8>, Vec<u8>)>],
        mutations: &mut Vec<Mutation>,
    ) -> Planned {
        let (mut next, disabled, corrupt) = store::load_rows(ranges);
        self.counters.corrupt_rows += corrupt;
        next.version = next_rv;
        let me = self.cfg.node;
        let row = NodeRow {
            disabled: disabled.contains(&me),
        };
        mutations.push(Mutation::Set(store::node_key(me), store::encode(&row)));
        Planned::Routing {
            next,
            disabled: Some(disabled),
            new_chains: Vec::new(),
            load: true,
        }
    }

    /// Chain updates: each stored chain must be one version behind its update (else another
    /// writer got there first).
    fn plan_chains(
        &mut self,
        chains: &[ChainInfo],
        values: &[Option<Vec<u8>>],
        next_rv: RoutingVersion,
        unfenced: bool,
        (mutations, conflicts): (&mut Vec<Mutation>, &mut Vec<KeyRange>),
    ) -> Result<Planned, Abort> {
        let p = self.primary.as_ref().ok_or(Abort::Deposed)?;
        let mut next = (*p.routing).clone();
        for (i, c) in chains.iter().enumerate() {
            let stored = values
                .get(2 + i)
                .and_then(Option::as_ref)
                .map(|b| store::decode_chain(b));
            let stored_version = match stored {
                Some(Ok(s)) => s.version.0,
                _ => 0,
            };
            if !unfenced && stored_version + 1 != c.version.0 {
                return Err(Abort::Stale);
            }
            conflicts.push(KeyRange::single(&store::chain_key(c.chain)));
            mutations.push(Mutation::Set(store::chain_key(c.chain), store::encode(c)));
            next.chains.insert(c.chain, c.clone());
        }
        self.counters.chain_updates += chains.len() as u64;
        next.version = next_rv;
        Ok(Planned::routing(next))
    }

    /// Adopts a lease row: a new tenure of mine starts a load; another holder ends mine.
    pub(super) fn on_lease(&mut self, l: LeaseInfo) {
        self.lease = Some(l);
        if l.primary != self.cfg.node {
            self.primary = None;
            return;
        }
        match self.primary.as_mut() {
            Some(p) if p.lease.start == l.start => p.lease = l,
            _ => {
                self.counters.tenures += 1;
                self.primary = Some(Box::new(Primary {
                    lease: l,
                    loaded: false,
                    routing: Arc::default(),
                    disabled: BTreeSet::new(),
                    local: Default::default(),
                    reported: BTreeSet::new(),
                    admin_offline: BTreeSet::new(),
                    nodes: Default::default(),
                    dirty: BTreeSet::new(),
                    frozen: Default::default(),
                    sessions: Default::default(),
                    orphans: BTreeSet::new(),
                    fresh: BTreeSet::new(),
                }));
                self.writer
                    .queue
                    .retain(|(op, _)| matches!(op, WriterOp::ExtendLease));
                self.writer.push_front(WriterOp::Load, 0);
            }
        }
    }

    fn apply(&mut self, now: Instant, planned: Planned, out: &mut Outbox<Self>) {
        let (next, disabled, new_chains, load) = match planned {
            Planned::Lease(l) => return self.on_lease(l),
            Planned::Routing {
                next,
                disabled,
                new_chains,
                load,
            } => (next, disabled, new_chains, load),
        };
        let until = now + self.cfg.bootstrap_length;
        let me = self.cfg.node;
        let Some(p) = self.primary.as_mut() else {
            return;
        };
        if load && !p.loaded {
            // A tenure's first load: nothing is known about any target yet.
            p.loaded = true;
            p.local = next
                .chains
                .values()
                .flat_map(|c| c.targets.iter().map(|t| (t.target, LocalState::Offline)))
                .collect();
            p.frozen = next.chains.keys().map(|c| (*c, until)).collect();
            p.dirty = next.chains.keys().copied().collect();
        } else if load {
            // A reload within the tenure (after CommitUnknown or a stale read) re-learns the
            // rows only: local states come from this tenure's heartbeats and deadlines, which no
            // KV row can contradict. Resetting them made every target look down at once and an
            // emptied head LASTSRV (found by the swarm, seed 3098).
            let members: BTreeSet<TargetId> = next
                .chains
                .values()
                .flat_map(|c| c.targets.iter().map(|t| t.target))
                .collect();
            for t in &members {
                p.local.entry(*t).or_insert(LocalState::Offline);
            }
            p.local.retain(|t, _| members.contains(t));
            p.dirty = next.chains.keys().copied().collect();
        }
        for c in new_chains {
            for t in &next.chains[&c].targets {
                p.local.entry(t.target).or_insert(LocalState::Offline);
            }
            p.frozen.insert(c, until);
            p.dirty.insert(c);
        }
        if !load {
            // A changed chain is evaluated again: one pass of §2.6.1 need not reach its fixpoint
            // (a deposed LASTSRV turns OFFLINE first and only then may start syncing).
            for (id, c) in &next.chains {
                if p.routing.chains.get(id) != Some(c) {
                    p.dirty.insert(*id);
                }
            }
        }
        if let Some(d) = disabled {
            p.disabled = d;
        }
        if self.cfg.bug.is_none() {
            debug_assert_publishable(&p.routing, &next);
        }
        p.routing = Arc::new(next);
        if p.disabled.contains(&me) {
            // A disabled mgmtd releases its lease and never takes it again (3FS §2.2).
            self.released = true;
            self.primary = None;
            return;
        }
        // A load changes only the version (the rows are what everyone already had, or newer
        // than a poll will fetch anyway): push real changes only.
        if !load {
            for &to in &self.cfg.push_routing_to {
                out.send(to, Msg::Routing((*p.routing).clone()));
            }
        }
    }
}

/// Trips, in debug builds, at the write that would publish a routing that breaks what
/// mgmtd's module docs promise: the routing version grows, no chain's version goes back, and
/// every chain keeps the §2.6.1 invariants (`chain_update::check_chain`). The simulator and
/// the model checker then stop at the step that broke it, not at a later whole-state check.
/// Planted mgmtd bugs break these on purpose (the checkers must see it), so the caller skips
/// the check under one.
pub(super) fn debug_assert_publishable(
    current: &crate::routing::RoutingInfo,
    next: &crate::routing::RoutingInfo,
) {
    if !cfg!(debug_assertions) {
        return;
    }
    assert!(
        next.version > current.version,
        "routing version {} would follow {}",
        next.version,
        current.version
    );
    for (id, c) in &next.chains {
        if let Some(old) = current.chains.get(id) {
            assert!(
                c.version >= old.version,
                "{id}: chain version {} after {}",
                c.version,
                old.version
            );
        }
        if let Err(e) = super::chain_update::check_chain(&c.targets) {
            panic!("{id} would be published breaking §2.6.1: {e}");
        }
    }
}
