//! The namespace workload of a client node: one meta request at a time with think time, every
//! invocation and answer recorded in the namespace history for the serializability checker.
//!
//! Request ids of namespace calls have the top bit set, so they never collide with the chunk
//! workload's calls on the same client machine. A call whose client crashes stays open in the
//! history (its effect is unknown). Not here: the checker (check/namespace.rs), the history's
//! types (`history::ns`, `history::file_io`).

use std::collections::BTreeMap;

use t3fs_core::client::{ClientCall, ClientRet};
use t3fs_core::ids::{InodeId, RequestId};
use t3fs_core::kv::mem::MemKv;
use t3fs_core::meta::request::MetaAnswer;
use t3fs_core::meta::request::{execute, MetaOp};
use t3fs_core::meta::{transact, PathOp};
use t3fs_scenario::namespace::{NsGenerator, NsWorkload};
use t3fs_scenario::Rng;

use super::{Ev, World};
use t3fs_core::node::Input;
use t3fs_scenario::ns_files::Step;
pub use t3fs_scenario::ns_files::{initial_dirs, Session, FILE_WRITE_BYTES};

/// Namespace calls carry request ids with this bit set.
pub const NS_REQUEST_BIT: u64 = 1 << 63;

/// What a meta request's answer is for.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum MetaFor {
    /// Only the history.
    Plain,
    /// An open for write (or a create that opens): the answer starts a session.
    OpenWrite,
    /// The sync ending open session `k`'s truncate.
    Sync(usize),
}

/// A namespace driver's call in flight.
#[derive(Clone, Copy, Debug)]
pub enum NsRunning {
    /// A meta request: its id, history index, and what its answer is for.
    Meta(RequestId, usize, MetaFor),
    /// A storage call (a write or a truncate step) of open session `k`.
    Data(RequestId, usize),
}

/// Per-client namespace workload state.
pub struct NsDriver {
    /// The operation stream.
    pub gen: NsGenerator,
    /// The running call.
    pub running: Option<NsRunning>,
    /// Write sessions this client holds.
    pub open: Vec<Session>,
    next_req: u64,
}

impl NsDriver {
    /// A driver drawing from `rng`.
    pub fn new(w: &NsWorkload, rng: Rng) -> Self {
        Self {
            gen: NsGenerator::new(w, rng),
            running: None,
            open: Vec::new(),
            next_req: 0,
        }
    }
}

/// Writes the root, the GC root and the initial directories into the KV before the run.
pub fn seed_namespace(kv: &mut MemKv, dirs: u32) {
    transact(kv, |ns| ns.init(0)).expect("fresh KV");
    for (k, path) in initial_dirs(dirs).into_iter().enumerate() {
        let op = MetaOp::Mkdirs {
            path,
            perm: t3fs_scenario::ns_files::INITIAL_DIR_PERM,
            recursive: false,
        };
        let p = PathOp {
            client: t3fs_core::ids::ClientId(u64::MAX),
            request: RequestId(k as u64 + 1),
            now: 0,
        };
        transact(kv, |ns| execute(ns, &op, p)).expect("seeding the namespace");
    }
}

impl World {
    /// Starts client `i`'s next namespace operation, if any: first the next step of a file it
    /// holds open (a write, a read, a truncate step), else maybe a close of one of its
    /// sessions, else the generator's.
    pub(super) fn ns_next(&mut self, i: usize) {
        let stopped = self.sim.workload_stopped;
        let table = self.layout.initial.chain_tables.get(&(1, 1)).cloned();
        let n = &mut self.nodes[i];
        let Some(d) = n.ctx.ns.as_mut() else {
            return;
        };
        // Once the workload stops, a writer only closes what it still holds.
        if d.running.is_some() || (stopped && d.open.is_empty()) {
            return;
        }
        d.next_req += 1;
        let req = RequestId(NS_REQUEST_BIT | d.next_req);
        let who = (
            t3fs_core::node::client_id(n.ctx.id, n.ctx.incarnation).0,
            t3fs_scenario::ns_files::client_user(n.ctx.id.0),
        );
        // The data path of a file the client holds open: its plan's writes and truncates,
        // on the chains its layout names (meta only for a truncate's sync).
        if let Some(k) = d.open.iter().position(|s| s.busy(stopped)) {
            let step = table.as_deref().and_then(|t| d.open[k].step(t, req));
            match step {
                Some(Step::Data(call)) => {
                    self.sim
                        .file_io
                        .called((i, n.ctx.incarnation, req.0), &call);
                    d.running = Some(NsRunning::Data(req, k));
                    return self.drive(i, Input::Call(req, t3fs_core::node::AnyCall::Client(call)));
                }
                Some(Step::Sync(op)) => {
                    let now = self.sim.now().0;
                    let index = self
                        .sim
                        .ns_history
                        .invoke(n.ctx.index, who, op.clone(), now);
                    d.running = Some(NsRunning::Meta(req, index, MetaFor::Sync(k)));
                    return self.drive(
                        i,
                        Input::Call(req, t3fs_core::node::AnyCall::Client(ClientCall::Meta(op))),
                    );
                }
                None => {}
            }
        }
        let Some(op) =
            t3fs_scenario::ns_files::next_request(&mut d.gen, &mut d.open, stopped, req.0)
        else {
            return;
        };
        let why = match t3fs_scenario::ns_files::opens_session(&op) {
            true => MetaFor::OpenWrite,
            false => MetaFor::Plain,
        };
        let now = self.sim.now().0;
        let index = self
            .sim
            .ns_history
            .invoke(n.ctx.index, who, op.clone(), now);
        d.running = Some(NsRunning::Meta(req, index, why));
        self.drive(
            i,
            Input::Call(req, t3fs_core::node::AnyCall::Client(ClientCall::Meta(op))),
        );
    }

    /// A namespace call (or its data write) returned; true if it was one.
    pub(super) fn ns_returned(&mut self, i: usize, req: RequestId, ret: &ClientRet) -> bool {
        if req.0 & NS_REQUEST_BIT == 0 {
            return false;
        }
        let n = &mut self.nodes[i];
        let Some(d) = n.ctx.ns.as_mut() else {
            return true;
        };
        match (d.running, ret) {
            (Some(NsRunning::Meta(running, index, why)), ClientRet::Meta(result, _))
                if running == req =>
            {
                match (why, result) {
                    (MetaFor::OpenWrite, Ok(MetaAnswer::Inode(inode))) => {
                        let plan = d.gen.file_plan(FILE_WRITE_BYTES.into());
                        d.open.extend(Session::opened(inode, req.0, plan));
                    }
                    (MetaFor::Sync(k), result) => {
                        if let Some(s) = d.open.get_mut(k) {
                            s.synced(result);
                        }
                    }
                    _ => {}
                }
                self.sim.ns_history.ret(index, result.clone());
            }
            (Some(NsRunning::Data(running, k)), ret) if running == req => {
                if let Some(s) = d.open.get_mut(k) {
                    // A read's bytes reach the file-read log from `ret` below.
                    let _ = s.data_returned(ret);
                }
                self.sim
                    .file_io
                    .returned((i, n.ctx.incarnation, req.0), ret);
            }
            _ => return true,
        }
        d.running = None;
        if !self.sim.workload_stopped || !d.open.is_empty() {
            let think = d.gen.think();
            let inc = n.ctx.incarnation;
            self.sim.schedule_in(think, Ev::NsNext { node: i, inc });
        }
        true
    }

    /// Whether GC and session pruning are done: no GC entry and no write session is left.
    /// A stop condition checked after every event, so two one-row range reads, not a scan.
    pub fn gc_drained(&mut self) -> bool {
        use t3fs_core::kv::KvEngine;
        use t3fs_core::meta::{all_sessions, dirent_range, GC_ROOT};
        let kv = &mut self.sim.kv.kv;
        let at = kv.version();
        let empty = |kv: &mut MemKv, r| kv.range(at, &r, 1).is_ok_and(|rows| rows.is_empty());
        empty(kv, dirent_range(GC_ROOT, b"")) && empty(kv, all_sessions())
    }

    /// The file chunks (not the chunk workload's) committed on any target: per file, per
    /// chunk index, the longest committed length (the data the length check bounds lengths by).
    pub fn file_chunks(&self) -> BTreeMap<InodeId, BTreeMap<u32, u32>> {
        let workload = InodeId(super::client::WORKLOAD_INODE);
        let mut chunks: BTreeMap<InodeId, BTreeMap<u32, u32>> = BTreeMap::new();
        for d in self.nodes.iter().flat_map(|n| n.ctx.disks.values()) {
            // Committed data only: a remove still in flight (two meta servers may purge one
            // file) leaves a pending entry behind for a moment.
            for (c, m) in d.store.chunks().iter().filter(|(_, m)| m.committed.0 > 0) {
                if c.inode != workload {
                    let len = chunks
                        .entry(c.inode)
                        .or_default()
                        .entry(c.index)
                        .or_default();
                    *len = (*len).max(m.data.len() as u32);
                }
            }
        }
        chunks
    }

    /// Whether any client still waits for a namespace answer.
    pub fn ns_busy(&self) -> bool {
        self.nodes
            .iter()
            .any(|n| n.ctx.ns.as_ref().is_some_and(|d| d.running.is_some()))
    }
}
