//! Runs one machine step on a node and executes its actions: sends go through the codec and the
//! network model, timers get seeded jitter and the node's clock rate, I/O goes to the node's
//! disks or the shared KV with drawn latencies, returns go to the workload driver, and a halt
//! crashes the node.
//!
//! Invariant: `check_invariants` runs after every step of every machine; a panic there is an
//! assertion failure of the run (the runner reports it with its reproduce command). Not here:
//! event scheduling policy (mod.rs) and fault decisions of steps (steps.rs).

use t3fs_core::client::{ClientCall, ClientRet};
use t3fs_core::ids::{IoId, NodeId, RequestId};
use t3fs_core::machine::{ActionOf, Event, EventOf, IoOp, IoResult, Machine, Outbox};
use t3fs_core::msg::Msg;
use t3fs_core::time::Instant;

use super::node::{AnyTimer, Ctx, Life, Pending, Proc, Role};
use super::{Ev, Sim, World};

/// What a node is given.
pub enum Input {
    /// Boot.
    Start,
    /// A decoded message.
    Recv(NodeId, Msg),
    /// A timer.
    Timer(AnyTimer),
    /// An I/O completion.
    IoDone(IoId, IoResult),
    /// A client call.
    Call(RequestId, ClientCall),
}

struct Effects<Ret> {
    returns: Vec<(RequestId, Ret)>,
    halted: Option<String>,
    forwarded: bool,
    committed: bool,
}

fn event<M: Machine<Msg = Msg>>(
    input: Input,
    timer: impl Fn(AnyTimer) -> Option<M::Timer>,
    call: impl Fn(ClientCall) -> Option<M::Call>,
) -> Option<Option<Event<M>>> {
    Some(match input {
        Input::Start => None,
        Input::Recv(from, msg) => Some(EventOf::Recv { from, msg }),
        Input::Timer(t) => Some(EventOf::Timer(timer(t)?)),
        Input::IoDone(id, result) => Some(EventOf::IoDone { id, result }),
        Input::Call(req, c) => Some(EventOf::Call {
            req,
            call: call(c)?,
        }),
    })
}

fn run<M: Machine<Msg = Msg>>(
    sim: &mut Sim,
    ctx: &mut Ctx,
    m: &mut M,
    ev: Option<Event<M>>,
    wrap: fn(M::Timer) -> AnyTimer,
) -> Effects<M::Ret> {
    let now = sim.now();
    let local = ctx.clock.local(now);
    let mut out = Outbox::new();
    match ev {
        None => m.start(local, &mut out),
        Some(e) => m.handle(local, e, &mut out),
    }
    m.check_invariants();
    let mut fx = Effects {
        returns: Vec::new(),
        halted: None,
        forwarded: false,
        committed: false,
    };
    for a in out.drain() {
        match a {
            ActionOf::Send { to, msg } => {
                if let Msg::Heartbeat(_) = msg {
                    if now < ctx.drop_heartbeats_until || sim.rng.chance(sim.faults.heartbeat_loss)
                    {
                        sim.reached("heartbeat lost");
                        continue;
                    }
                }
                if let Msg::Update(_) = msg {
                    fx.forwarded = true;
                }
                sim.transmit(ctx.id, to, msg.encode());
            }
            ActionOf::SetTimer { timer, after } => {
                sim.gen += 1;
                let key = wrap(timer);
                ctx.timers.insert(key, sim.gen);
                // mgmtd's heartbeat deadline is exempt: 3FS's reads are safe only while the
                // failure detector is slower than a live replica's routing refresh (no storage-
                // side lease), so shrinking it reports that known hazard, not a new bug.
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
                let d = ctx.clock.to_true(sim.rng.duration(after));
                let at = Instant(now.0 + d.as_nanos() as u64);
                sim.queue.push(
                    at,
                    Ev::Timer {
                        node: ctx.id.0 as usize,
                        timer: key,
                        gen: sim.gen,
                    },
                );
            }
            ActionOf::CancelTimer(timer) => {
                ctx.timers.remove(&wrap(timer));
            }
            ActionOf::Io { id, op } => {
                let at = match op {
                    IoOp::Chunk { target, op } => {
                        let disk = ctx.disks.get_mut(&target).unwrap_or_else(|| {
                            panic!("{} submitted I/O to foreign target {target}", ctx.name)
                        });
                        let at = disk.completion_time(now, &op, &mut sim.rng, &sim.faults);
                        ctx.inflight.insert(id, Pending::Chunk(target, op));
                        at
                    }
                    IoOp::Kv(op) => {
                        // Only commits that write chain rows count (lease extensions run
                        // every second and would make the trigger fire on the wrong commit).
                        fx.committed |= matches!(&op, t3fs_core::kv::KvOp::Commit(c) if c.mutations.iter().any(|m| {
                            matches!(m, t3fs_core::kv::Mutation::Set(k, _) if t3fs_core::mgmtd::store::is_chain_key(k))
                        }));
                        let d = sim.kv.latency(&mut sim.rng, &sim.faults);
                        ctx.inflight.insert(id, Pending::Kv(op));
                        Instant(now.0 + d.as_nanos() as u64)
                    }
                };
                sim.queue.push(
                    at,
                    Ev::Io {
                        node: ctx.id.0 as usize,
                        inc: ctx.incarnation,
                        id,
                    },
                );
            }
            ActionOf::Return { req, ret } => fx.returns.push((req, ret)),
            ActionOf::Halt(reason) => fx.halted = Some(format!("{reason:?}")),
        }
    }
    fx
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
        let (halted, forwarded, returns, published) = match &mut node.proc {
            Proc::None => return,
            Proc::Mgmtd(m) => {
                let before = m.routing().map(|r| r.version);
                let Some(ev) = event::<t3fs_core::mgmtd::Mgmtd>(
                    input,
                    |t| match t {
                        AnyTimer::Mgmtd(t) => Some(t),
                        _ => None,
                    },
                    |_| None,
                ) else {
                    return;
                };
                let fx = run(sim, &mut node.ctx, m.as_mut(), ev, AnyTimer::Mgmtd);
                if fx.committed && node.ctx.pause_on_commit {
                    // Frozen with the commit in flight: its completion waits for the resume.
                    node.ctx.pause_on_commit = false;
                    node.ctx.life = Life::Paused;
                    sim.reached("pause mid-commit");
                }
                let after = m.routing().map(|r| r.version);
                (fx.halted, false, Vec::new(), before != after)
            }
            Proc::Storage(m) => {
                let Some(ev) = event::<t3fs_core::storage::StorageNode>(
                    input,
                    |t| match t {
                        AnyTimer::Storage(t) => Some(t),
                        _ => None,
                    },
                    |_| None,
                ) else {
                    return;
                };
                let fx = run(sim, &mut node.ctx, m.as_mut(), ev, AnyTimer::Storage);
                (fx.halted, fx.forwarded, Vec::new(), false)
            }
            Proc::Client(m) => {
                let Some(ev) = event::<t3fs_core::client::Client>(
                    input,
                    |t| match t {
                        AnyTimer::Client(t) => Some(t),
                        _ => None,
                    },
                    Some,
                ) else {
                    return;
                };
                let fx = run(sim, &mut node.ctx, m.as_mut(), ev, AnyTimer::Client);
                (fx.halted, false, fx.returns, false)
            }
            Proc::Meta(m) => {
                let Some(ev) = event::<t3fs_core::meta::server::MetaServer>(
                    input,
                    |t| match t {
                        AnyTimer::Meta(t) => Some(t),
                        _ => None,
                    },
                    |_| None,
                ) else {
                    return;
                };
                let fx = run(sim, &mut node.ctx, m.as_mut(), ev, AnyTimer::Meta);
                (fx.halted, false, Vec::new(), false)
            }
        };
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
        let may_damage = self.may_damage_node(i);
        let Some(p) = self.nodes[i].ctx.inflight.remove(&id) else {
            return;
        };
        let result = match p {
            Pending::Chunk(_, t3fs_core::chunk::ChunkOp::Update { .. })
                if self
                    .sim
                    .buggify
                    .fire("buggify: disk nospace", &mut self.sim.rng) =>
            {
                self.sim.reached("buggify: disk nospace");
                IoResult::Chunk(Err(t3fs_core::chunk::ChunkError::NoSpace))
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
        self.drive(i, Input::Call(req, call));
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
        self.drive(i, Input::Call(req, call));
        true
    }
}
