//! Runs one machine step on a node and executes its actions: sends go through the codec and the
//! network model, timers get seeded jitter and the node's clock rate, I/O goes to the node's
//! disks or the shared KV with drawn latencies, returns go to the workload driver, and a halt
//! crashes the node.
//!
//! Invariant: `check_invariants` runs after every step of every machine but storage nodes, and
//! after a seeded sample of theirs (`STORAGE_CHECK_ONE_IN`); a panic there is an
//! assertion failure of the run (the runner reports it with its reproduce command). Not here:
//! event scheduling policy (mod.rs) and fault decisions of steps (steps.rs).

use core::ops::Range;
use core::time::Duration;

use t3fs_core::chunk::ChunkOp;
use t3fs_core::client::ClientRet;
use t3fs_core::ids::{IoId, NodeId, RequestId, TargetId};
use t3fs_core::kv::KvOp;
use t3fs_core::machine::{HaltReason, IoResult};
use t3fs_core::msg::Msg;
use t3fs_core::node::{self, AnyCall, AnyRet, AnyTimer, Host, Input};
use t3fs_core::time::Instant;

use super::node::{Ctx, Life, Pending, Process, Role};
use super::{Ev, Sim, World};

/// The simulator's [`Host`]: the seeded event queue, the network model, the node's clock and
/// disks, the shared KV, and the fault hooks (heartbeat loss, buggify) on the way.
struct SimHost<'a> {
    sim: &'a mut Sim,
    ctx: &'a mut Ctx,
    /// True time of the step.
    now: Instant,
    returns: Vec<(RequestId, ClientRet)>,
    halted: Option<String>,
    /// An `Update` was forwarded (the crash-after-forward trigger).
    forwarded: bool,
    /// A KV commit writing chain rows was submitted (the pause-mid-commit trigger).
    committed: bool,
    /// Run the machine's `check_invariants` after this step.
    check: bool,
}

impl Host for SimHost<'_> {
    fn send(&mut self, to: NodeId, msg: Msg) {
        let (sim, ctx) = (&mut *self.sim, &mut *self.ctx);
        if let Msg::Heartbeat(_) = msg {
            if self.now < ctx.drop_heartbeats_until || sim.rng.chance(sim.faults.heartbeat_loss) {
                sim.reached("heartbeat lost");
                return;
            }
        }
        if let Msg::Update(_) = msg {
            self.forwarded = true;
        }
        sim.transmit(ctx.id, to, super::Frame::encode(msg));
    }

    fn set_timer(&mut self, key: AnyTimer, gen: u64, after: Range<Duration>) -> u64 {
        let sim = &mut *self.sim;
        // mgmtd's heartbeat deadline is exempt: 3FS's reads are safe only while the failure
        // detector is slower than a live replica's routing refresh (no storage-side lease), so
        // shrinking it reports that known hazard, not a new bug.
        let exempt = matches!(
            key,
            AnyTimer::Mgmtd(t3fs_core::mgmtd::MgmtdTimer::HeartbeatDeadline(_))
        );
        let after = if !exempt && sim.buggify.fire("buggify: shrunk timer", &mut sim.rng) {
            sim.reached("buggify: shrunk timer");
            after.start / 10..after.start / 10
        } else {
            after
        };
        let d = self.ctx.clock.to_true(sim.rng.duration(after));
        let at = Instant(self.now.0 + d.as_nanos() as u64);
        let node = self.ctx.id.0 as usize;
        let h = sim.queue.push(
            at,
            Ev::Timer {
                node,
                timer: key,
                gen,
            },
        );
        h.to_bits()
    }

    // A cancelled or re-armed timer's fire is stale: drop it from the queue.
    fn cancel_timer(&mut self, _key: AnyTimer, handle: u64) {
        self.sim
            .queue
            .cancel(super::queue::Handle::from_bits(handle));
    }

    fn submit_chunk(&mut self, id: IoId, target: TargetId, op: ChunkOp) {
        let (sim, ctx) = (&mut *self.sim, &mut *self.ctx);
        let disk = ctx
            .disks
            .get_mut(&target)
            .unwrap_or_else(|| panic!("{} submitted I/O to foreign target {target}", ctx.name));
        // The store starts when a core takes its own CPU (at once without `[hardware]`).
        let start = match sim.resources.as_mut() {
            Some(r) => {
                let (bytes, write) = (super::disk::op_bytes(&op), super::disk::is_mutation(&op));
                r.store_cpu((ctx.id, self.now), bytes, write)
            }
            None => self.now,
        };
        let key = (ctx.id.0 as usize, ctx.incarnation, id.0);
        let ssd = sim.resources.as_mut().map(|r| (r, target, key));
        let at = disk.completion_time(start, &op, &mut sim.rng, &sim.faults, ssd);
        if let Some(r) = sim.resources.as_mut() {
            r.store_ops.submitted(key, (ctx.id, op.kind()), self.now.0);
        }
        ctx.ops.insert(id, Pending::Chunk(target, op));
        self.complete_at(at, id);
    }

    fn submit_kv(&mut self, id: IoId, op: KvOp) {
        // Only commits that write chain rows count (lease extensions run every second and would
        // make the trigger fire on the wrong commit).
        self.committed |= matches!(&op, t3fs_core::kv::KvOp::Commit(c) if c.mutations.iter().any(|m| {
            matches!(m, t3fs_core::kv::Mutation::Set(k, _) if t3fs_core::mgmtd::store::is_chain_key(k))
        }));
        let d = self.sim.kv.latency(&mut self.sim.rng, &self.sim.faults);
        self.ctx.ops.insert(id, Pending::Kv(op));
        self.complete_at(Instant(self.now.0 + d.as_nanos() as u64), id);
    }

    fn returned(&mut self, req: RequestId, ret: AnyRet) {
        if let AnyRet::Client(ret) = ret {
            self.returns.push((req, ret));
        }
    }

    fn halted(&mut self, reason: HaltReason) {
        self.halted = Some(format!("{reason:?}"));
    }

    fn check_invariants(&self) -> bool {
        self.check
    }
}

impl SimHost<'_> {
    fn complete_at(&mut self, at: Instant, id: IoId) {
        self.sim.queue.push(
            at,
            Ev::Io {
                node: self.ctx.id.0 as usize,
                inc: self.ctx.incarnation,
                id,
            },
        );
    }
}

impl World {
    /// Runs one step of node `i` (no-op for a crashed node or an input of the wrong kind).
    pub(super) fn drive(&mut self, i: usize, input: Input) {
        let now = self.sim.now();
        self.sim.history.now_ns = now.0;
        let (sim, node) = (&mut self.sim, &mut self.nodes[i]);
        if node.ctx.life != Life::Up {
            return;
        }
        let before = match &node.proc {
            Process::Mgmtd(m) => m.routing().map(|r| r.version),
            _ => None,
        };
        let local = node.ctx.clock.local(now);
        let check = !matches!(node.proc, Process::Storage(_))
            || sim.check_rng.below(super::STORAGE_CHECK_ONE_IN) == 0;
        let mut host = SimHost {
            sim,
            ctx: &mut node.ctx,
            now,
            returns: Vec::new(),
            halted: None,
            forwarded: false,
            committed: false,
            check,
        };
        if !node::step(&mut node.proc, &mut node.tables, &mut host, local, input) {
            return;
        }
        let SimHost {
            returns,
            halted,
            forwarded,
            committed,
            ..
        } = host;
        let mut published = false;
        if let Process::Mgmtd(m) = &node.proc {
            if committed && node.ctx.pause_on_commit {
                // Frozen with the commit in flight: its completion waits for the resume.
                node.ctx.pause_on_commit = false;
                node.ctx.life = Life::Paused;
                self.sim.reached("pause mid-commit");
            }
            published = before != m.routing().map(|r| r.version);
        }
        if published {
            self.audit_routing(i);
        }
        for (req, ret) in returns {
            self.client_returned(i, req, ret);
        }
        if let Some(why) = halted {
            self.sim
                .halts
                .push(format!("{} halted: {why}", self.nodes[i].ctx.name));
            self.crash(i, "halt");
        } else if forwarded && self.nodes[i].ctx.crash_after_forward {
            self.crash(i, "right after forwarding an update");
        }
    }

    /// Completes I/O `id` of node `i` (disk or KV) and feeds the result to the machine.
    pub(super) fn complete_io(&mut self, i: usize, id: IoId) {
        // The atlas is asked only when a destructive disk fault could fire: it walks the node's
        // chains on every completion otherwise (a fault with chance zero draws nothing either).
        let f = &self.sim.faults;
        let may_damage = (f.disk_eio > 0.0 || f.disk_corrupt > 0.0) && self.may_damage_node(i);
        let n = &mut self.nodes[i];
        if n.tables.inflight.complete(id).is_none() {
            return;
        }
        let Some(p) = n.ctx.ops.remove(&id) else {
            return;
        };
        let result = match p {
            Pending::Chunk(_, t3fs_core::chunk::ChunkOp::Update { .. })
                if self
                    .sim
                    .buggify
                    .fire("buggify: disk refused", &mut self.sim.rng) =>
            {
                // A refusal that leaves the target up and the update retryable (buggify.rs).
                self.sim.reached("buggify: disk refused");
                IoResult::Chunk(Err(t3fs_core::chunk::ChunkError::VersionConflict))
            }
            Pending::Chunk(target, op) => {
                let disk = self.nodes[i]
                    .ctx
                    .disks
                    .get_mut(&target)
                    .expect("own target");
                let was_damaged = disk.damaged;
                let r = disk.execute(&op, &mut self.sim.rng, &self.sim.faults, may_damage);
                if disk.damaged && !was_damaged {
                    let name = self.nodes[i].ctx.name.clone();
                    self.sim.note(
                        "fault",
                        &name,
                        format!("disk of {target} failed ({r:?}); replacement scheduled"),
                    );
                    self.sim
                        .reached(if matches!(r, Err(t3fs_core::chunk::ChunkError::Corrupt)) {
                            "corruption detected"
                        } else {
                            "disk EIO"
                        });
                    let d = self.sim.rng.duration(self.sim.faults.restart_after.clone());
                    self.sim.schedule_in(
                        d,
                        Ev::Restart {
                            node: i,
                            replace_damaged: true,
                        },
                    );
                }
                IoResult::Chunk(r)
            }
            Pending::Kv(op) => {
                if matches!(op, t3fs_core::kv::KvOp::Commit(_))
                    && self
                        .sim
                        .buggify
                        .fire("buggify: kv conflict", &mut self.sim.rng)
                {
                    self.sim.reached("buggify: kv conflict");
                    self.sim
                        .kv
                        .kv
                        .inject(t3fs_core::kv::mem::MemKvFault::SpuriousConflict);
                }
                IoResult::Kv(self.sim.kv.execute(op, &mut self.sim.rng))
            }
        };
        self.drive(i, Input::IoDone(id, result));
    }

    /// A client call returned: record it and schedule the next operation.
    fn client_returned(&mut self, i: usize, req: RequestId, ret: ClientRet) {
        if self.ns_returned(i, req, &ret) {
            return;
        }
        let n = &mut self.nodes[i];
        let Some(d) = n.ctx.driver.as_mut() else {
            return;
        };
        if !d.complete(req, &ret, &mut self.sim.history) {
            return;
        }
        if n.ctx.role == Role::Client && !self.sim.workload_stopped {
            let think = d.gen.think();
            let inc = n.ctx.incarnation;
            self.sim.schedule_in(think, Ev::ClientNext { node: i, inc });
        }
    }

    /// Starts client `i`'s next workload operation, if any.
    pub(super) fn client_next(&mut self, i: usize) {
        if self.sim.workload_stopped {
            return;
        }
        let n = &mut self.nodes[i];
        let Some(d) = n.ctx.driver.as_mut() else {
            return;
        };
        if d.running.is_some() {
            return;
        }
        let Some(op) = d.gen.next_op() else { return };
        self.sim.history.now_ns = self.sim.now().0;
        let (req, call) = d.invoke(n.ctx.index, op, &mut self.sim.history);
        self.drive(i, Input::Call(req, AnyCall::Client(call)));
    }

    /// Issues a read of workload chunk `chunk` from client `i` outside the workload (the final
    /// reads of the liveness phase); returns false if the client is busy.
    pub fn issue_read(&mut self, i: usize, chunk: u32) -> bool {
        let n = &mut self.nodes[i];
        let Some(d) = n.ctx.driver.as_mut() else {
            return false;
        };
        if d.running.is_some() || n.ctx.life != Life::Up {
            return false;
        }
        self.sim.history.now_ns = self.sim.now().0;
        let (req, call) = d.invoke(
            n.ctx.index,
            t3fs_scenario::workload::Op::Read { chunk },
            &mut self.sim.history,
        );
        self.drive(i, Input::Call(req, AnyCall::Client(call)));
        true
    }
}
