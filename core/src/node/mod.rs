//! The node runtime: what carries out a machine's actions, shared by every driver.
//!
//! A node runs one [`Process`] (mgmtd, storage, client or meta machine) and keeps two volatile
//! [`Tables`]: armed timers with generations and the I/O in flight. [`step`] feeds the process
//! one [`Input`] at the node's local time, checks its invariants, and executes the actions it
//! emits through a [`Host`]: sends, timers (the host resolves the jitter range), chunk I/O routed
//! to a target's store, KV operations, returns to a local caller, and halts. The simulator
//! implements `Host` with its fault hooks and seeded event queue; the tokio driver (t3fs-real)
//! implements it with TCP, disk stores and a KV client. Both run exactly this code, so there is
//! no `if sim` anywhere: what only a simulator can do lives in its `Host`.
//!
//! Invariants: a timer fires only with the generation it was last armed with ([`Timers::fire`]);
//! an I/O completion reaches the machine only if its id is in flight ([`Inflight::complete`]);
//! `check_invariants` runs after every step the host asks for it (in simulation every step, or a
//! seeded sample of a storage node's, whose check walks all its chunks).
//! Not here: scheduling (when timers fire, when I/O completes), transports, stores, and the
//! cluster plan (t3fs-scenario's `plan`).

mod counters;
mod tables;

use core::ops::Range;
use core::time::Duration;

pub use counters::{counters_of, ProcessCounters};
pub use tables::{Inflight, IoDest, Outboxes, Tables, Timers};

use crate::chunk::ChunkOp;
use crate::client::{Client, ClientCall, ClientRet, ClientTimer};
use crate::ids::{ClientId, IoId, NodeId, RequestId, TargetId};
use crate::kv::KvOp;
use crate::machine::{ActionOf, Event, EventOf, HaltReason, IoOp, IoResult, Machine, Outbox};
use crate::meta::server::{MetaServer, MetaTimer};
use crate::mgmtd::{AdminCall, AdminRet, Mgmtd, MgmtdTimer};
use crate::msg::Msg;
use crate::storage::{StorageNode, StorageTimer};
use crate::time::Instant;

/// A node's role.
#[derive(Clone, Copy, Debug, Eq, Ord, PartialEq, PartialOrd)]
pub enum Role {
    /// Cluster manager.
    Mgmtd,
    /// Storage service.
    Storage,
    /// Client (a workload driver in simulation, the native client library in real runs).
    Client,
    /// Meta server.
    Meta,
}

impl Role {
    /// The lower-case name used in configs, CLIs and node names (`storage-2`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Mgmtd => "mgmtd",
            Self::Storage => "storage",
            Self::Client => "client",
            Self::Meta => "meta",
        }
    }
}

/// The machine a node runs.
pub enum Process {
    /// None (crashed or not started).
    None,
    /// mgmtd.
    Mgmtd(Box<Mgmtd>),
    /// Storage.
    Storage(Box<StorageNode>),
    /// Client.
    Client(Box<Client>),
    /// Meta server.
    Meta(Box<MetaServer>),
}

/// Timers of any machine kind.
#[derive(Clone, Copy, Debug, Eq, Ord, PartialEq, PartialOrd)]
pub enum AnyTimer {
    /// mgmtd's.
    Mgmtd(MgmtdTimer),
    /// Storage's.
    Storage(StorageTimer),
    /// Client's.
    Client(ClientTimer),
    /// Meta server's.
    Meta(MetaTimer),
}

/// What a node is given.
#[derive(Debug)]
pub enum Input {
    /// Boot.
    Start,
    /// A decoded message.
    Recv(NodeId, Msg),
    /// A timer whose fire [`Timers::fire`] accepted.
    Timer(AnyTimer),
    /// An I/O completion whose id [`Inflight::complete`] accepted.
    IoDone(IoId, IoResult),
    /// A local call: a client API call, or an admin call to mgmtd.
    Call(RequestId, AnyCall),
}

/// A local call to any machine that takes calls.
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum AnyCall {
    /// To a client machine.
    Client(ClientCall),
    /// To mgmtd (admin verbs).
    Admin(AdminCall),
}

/// The answer to an [`AnyCall`].
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum AnyRet {
    /// From a client machine.
    Client(ClientRet),
    /// From mgmtd.
    Admin(AdminRet),
}

/// What a driver provides to carry out actions. Every method is called during [`step`], in the
/// order the machine emitted its actions; none may call back into the node.
pub trait Host {
    /// Sends `msg` to `to` (best effort).
    fn send(&mut self, to: NodeId, msg: Msg);
    /// Arms `timer` to fire after a delay the host picks in `after`, carrying `gen` (the fire is
    /// live only if [`Timers::fire`] accepts it). Returns the host's handle of that fire, which
    /// [`Timers`] keeps for [`Host::cancel_timer`] (0 for a host that cancels nothing).
    fn set_timer(&mut self, timer: AnyTimer, gen: u64, after: Range<Duration>) -> u64;
    /// The fire `handle` of `timer` became stale (the timer was cancelled or re-armed): a host
    /// that queues fires may drop it (the tables already refuse it; this only saves the host
    /// the work).
    fn cancel_timer(&mut self, _timer: AnyTimer, _handle: u64) {}
    /// Submits chunk I/O `id` to `target`'s store; its completion comes back as
    /// [`Input::IoDone`] after [`Inflight::complete`].
    fn submit_chunk(&mut self, id: IoId, target: TargetId, op: ChunkOp);
    /// Submits KV operation `id`; completion as for chunk I/O.
    fn submit_kv(&mut self, id: IoId, op: KvOp);
    /// The local call `req` returned.
    fn returned(&mut self, req: RequestId, ret: AnyRet);
    /// The machine halted: the host stops the process (crash in simulation, exit in real runs).
    fn halted(&mut self, reason: HaltReason);
    /// Whether to run the machine's `check_invariants` after this step. Some checks scan the
    /// whole state (every chunk of every target), so a host that steps millions of times over
    /// a large state may check only where it can afford to: the simulator checks every step
    /// (a seeded sample of storage nodes' steps), a real node in debug builds (its tests) and
    /// not in release builds.
    fn check_invariants(&self) -> bool {
        true
    }
}

/// Runs one step of `process` at local time `now` and carries out its actions through `host`.
/// Returns false when the input does not belong to the process (a timer of another machine
/// kind, a call it does not take, no process): nothing ran.
pub fn step(
    process: &mut Process,
    tables: &mut Tables,
    host: &mut impl Host,
    now: Instant,
    input: Input,
) -> bool {
    match process {
        Process::None => false,
        Process::Mgmtd(m) => {
            let kinds = Kinds {
                out: |o| &mut o.mgmtd,
                wrap: AnyTimer::Mgmtd,
                timer: |t| match t {
                    AnyTimer::Mgmtd(t) => Some(t),
                    _ => None,
                },
                call: |c| match c {
                    AnyCall::Admin(c) => Some(c),
                    AnyCall::Client(_) => None,
                },
                ret: AnyRet::Admin,
            };
            run(m.as_mut(), tables, host, now, input, &kinds)
        }
        Process::Storage(m) => {
            let kinds = Kinds {
                out: |o| &mut o.storage,
                wrap: AnyTimer::Storage,
                timer: |t| match t {
                    AnyTimer::Storage(t) => Some(t),
                    _ => None,
                },
                call: |_| None,
                ret: |r| match r {},
            };
            run(m.as_mut(), tables, host, now, input, &kinds)
        }
        Process::Client(m) => {
            let kinds = Kinds {
                out: |o| &mut o.client,
                wrap: AnyTimer::Client,
                timer: |t| match t {
                    AnyTimer::Client(t) => Some(t),
                    _ => None,
                },
                call: |c| match c {
                    AnyCall::Client(c) => Some(c),
                    AnyCall::Admin(_) => None,
                },
                ret: AnyRet::Client,
            };
            run(m.as_mut(), tables, host, now, input, &kinds)
        }
        Process::Meta(m) => {
            let kinds = Kinds {
                out: |o| &mut o.meta,
                wrap: AnyTimer::Meta,
                timer: |t| match t {
                    AnyTimer::Meta(t) => Some(t),
                    _ => None,
                },
                call: |_| None,
                ret: |r| match r {},
            };
            run(m.as_mut(), tables, host, now, input, &kinds)
        }
    }
}

/// How one machine kind's timers, calls and returns map to the node-level enums.
struct Kinds<M: Machine> {
    out: fn(&mut Outboxes) -> &mut Outbox<M>,
    wrap: fn(M::Timer) -> AnyTimer,
    timer: fn(AnyTimer) -> Option<M::Timer>,
    call: fn(AnyCall) -> Option<M::Call>,
    ret: fn(M::Ret) -> AnyRet,
}

/// The machine-specific event for `input`; `None` when it is not this machine's.
fn event<M: Machine<Msg = Msg>>(input: Input, k: &Kinds<M>) -> Option<Option<Event<M>>> {
    Some(match input {
        Input::Start => None,
        Input::Recv(from, msg) => Some(EventOf::Recv { from, msg }),
        Input::Timer(t) => Some(EventOf::Timer((k.timer)(t)?)),
        Input::IoDone(id, result) => Some(EventOf::IoDone { id, result }),
        Input::Call(req, c) => Some(EventOf::Call {
            req,
            call: (k.call)(c)?,
        }),
    })
}

fn run<M: Machine<Msg = Msg>>(
    m: &mut M,
    tables: &mut Tables,
    host: &mut impl Host,
    now: Instant,
    input: Input,
    k: &Kinds<M>,
) -> bool {
    let Some(ev) = event::<M>(input, k) else {
        return false;
    };
    let mut out = core::mem::take((k.out)(&mut tables.outboxes));
    match ev {
        None => m.start(now, &mut out),
        Some(e) => m.handle(now, e, &mut out),
    }
    if host.check_invariants() {
        m.check_invariants();
    }
    for a in out.drain_kept() {
        match a {
            ActionOf::Send { to, msg } => host.send(to, msg),
            ActionOf::SetTimer { timer, after } => {
                let key = (k.wrap)(timer);
                let gen = tables.timers.next_gen();
                let handle = host.set_timer(key, gen, after);
                if let Some(old) = tables.timers.arm(key, gen, handle) {
                    host.cancel_timer(key, old);
                }
            }
            ActionOf::CancelTimer(timer) => {
                let key = (k.wrap)(timer);
                if let Some(handle) = tables.timers.cancel(key) {
                    host.cancel_timer(key, handle);
                }
            }
            ActionOf::Io { id, op } => match op {
                IoOp::Chunk { target, op } => {
                    tables.inflight.insert(id, IoDest::Chunk(target));
                    host.submit_chunk(id, target, op);
                }
                IoOp::Kv(op) => {
                    tables.inflight.insert(id, IoDest::Kv);
                    host.submit_kv(id, op);
                }
            },
            ActionOf::Return { req, ret } => host.returned(req, (k.ret)(ret)),
            ActionOf::Halt(reason) => host.halted(reason),
        }
    }
    *(k.out)(&mut tables.outboxes) = out;
    true
}

/// The exactly-once and meta identity of incarnation `inc` of client node `node`: a restarted
/// client is a new client, so storage's exactly-once records (keyed by client, channel and
/// seqnum) never meet a reused sequence. For node ids below 2³² (servers, simulated clients):
/// a real client draws its `ClientId` at random instead (`t3fs_client::client`).
pub fn client_id(node: NodeId, inc: u64) -> ClientId {
    ClientId(node.0 | inc << 32)
}
