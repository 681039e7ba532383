//! The state-machine contract every t3fs participant implements: events in, actions out.
//!
//! A driver (model checker, simulator or tokio service) owns the machine, feeds it one
//! [`Event`] at a time with the current [`Instant`], and executes the [`Action`]s it pushed into
//! the [`Outbox`]. Machines never block, read clocks, draw randomness or perform I/O (see the
//! crate docs). This module defines only the shape; it does not drive anything.

use core::fmt;
use core::hash::Hash;
use core::ops::Range;
use core::time::Duration;

use crate::chunk::{ChunkDone, ChunkError, ChunkOp};
use crate::ids::{IoId, NodeId, RequestId, TargetId};
use crate::kv::{KvDone, KvError, KvOp};
use crate::limits::OUTBOX_ACTIONS_MAX;
use crate::time::Instant;

/// A deterministic protocol participant. See the crate docs for the rules every impl obeys.
pub trait Machine {
    /// Wire messages this machine sends and receives.
    type Msg: Clone + fmt::Debug + Eq;
    /// Named timers; at most one pending timer per value.
    type Timer: Clone + fmt::Debug + Eq + Ord + Hash;
    /// Local API calls (client machine); servers use [`NoCall`].
    type Call: Clone + fmt::Debug + Eq;
    /// Results of local API calls.
    type Ret: Clone + fmt::Debug + Eq;

    /// Boots from the durable state passed to the constructor and emits the first actions.
    fn start(&mut self, now: Instant, out: &mut Outbox<Self>);
    /// Applies one input. Never blocks, reads clocks, draws randomness or grows without bound.
    fn handle(&mut self, now: Instant, event: Event<Self>, out: &mut Outbox<Self>);
    /// Cheap invariant checks; panics on a broken invariant. Simulators call it after every step.
    fn check_invariants(&self);
}

/// Servers accept no local calls: this type has no values.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum NoCall {}

/// One input to a machine.
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum EventOf<Msg, Timer, Call> {
    /// A local API call (client machine). Answered later by exactly one `Return` with `req`.
    Call {
        /// Caller-chosen id, echoed in the `Return`.
        req: RequestId,
        /// The call.
        call: Call,
    },
    /// Completion of the `Io` action with the same id. Exactly one per `Io`, unless the node
    /// crashed in between (then none: the machine restarts from durable state).
    IoDone {
        /// The id of the `Io` action.
        id: IoId,
        /// Its outcome.
        result: IoResult,
    },
    /// A message from another node. May be lost, duplicated or reordered before it arrives.
    Recv {
        /// The sender.
        from: NodeId,
        /// The decoded message.
        msg: Msg,
    },
    /// A timer set with `SetTimer` fired (and was not cancelled or replaced since).
    Timer(Timer),
}

/// One effect requested by a machine; executed by the driver after the handler returns, in order.
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum ActionOf<Msg, Timer, Ret> {
    /// Cancels a pending timer; no-op when none is pending.
    CancelTimer(Timer),
    /// The machine must stop: the driver logs, flushes and exits; the simulator marks the node
    /// crashed. No further events are delivered.
    Halt(HaltReason),
    /// Starts an asynchronous I/O. Exactly one `IoDone` with this id follows unless the node
    /// crashes. Mutations of one chunk of one target complete in submission order; a read may
    /// overtake an earlier mutation (see `chunk`).
    Io {
        /// Machine-chosen id, unique among this machine's pending I/Os.
        id: IoId,
        /// The operation.
        op: IoOp,
    },
    /// Answers the local call `req`.
    Return {
        /// The call's id.
        req: RequestId,
        /// The result.
        ret: Ret,
    },
    /// Sends a message (best effort: it may be lost, duplicated or delayed).
    Send {
        /// The destination node.
        to: NodeId,
        /// The message.
        msg: Msg,
    },
    /// Arms `timer` to fire after a duration the driver picks within `after` (seeded jitter).
    /// Replaces a pending timer with the same value.
    SetTimer {
        /// Timer name.
        timer: Timer,
        /// Allowed delay range.
        after: Range<Duration>,
    },
}

/// The event type of machine `M`.
pub type Event<M> = EventOf<<M as Machine>::Msg, <M as Machine>::Timer, <M as Machine>::Call>;
/// The action type of machine `M`.
pub type Action<M> = ActionOf<<M as Machine>::Msg, <M as Machine>::Timer, <M as Machine>::Ret>;

/// Why a machine halted.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum HaltReason {
    /// An unrecoverable medium error on a target.
    DiskFailed(TargetId),
    /// The node was told (by a model or a script) to fail-stop here.
    FailStop,
}

/// Asynchronous operations a machine can request.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum IoOp {
    /// An operation on one target's chunk store.
    Chunk {
        /// The target whose store executes the op.
        target: TargetId,
        /// The operation.
        op: ChunkOp,
    },
    /// One step of a KV transaction (read batch or commit), run by the driver's engine.
    Kv(KvOp),
}

/// Completion of an [`IoOp`].
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum IoResult {
    /// Outcome of an [`IoOp::Chunk`].
    Chunk(Result<ChunkDone, ChunkError>),
    /// Outcome of an [`IoOp::Kv`].
    Kv(Result<KvDone, KvError>),
}

/// Actions emitted by one `start`/`handle` call; bounded by [`OUTBOX_ACTIONS_MAX`].
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct Outbox<M: Machine + ?Sized> {
    actions: Vec<Action<M>>,
}

impl<M: Machine + ?Sized> Default for Outbox<M> {
    fn default() -> Self {
        Self {
            actions: Vec::new(),
        }
    }
}

impl<M: Machine + ?Sized> Outbox<M> {
    /// An empty outbox.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends an action. Panics past [`OUTBOX_ACTIONS_MAX`]: a handler emitting that many
    /// actions is a bug (unbounded fan-out), not an environmental condition.
    pub fn push(&mut self, action: Action<M>) {
        assert!(
            self.actions.len() < OUTBOX_ACTIONS_MAX,
            "outbox overflow: unbounded fan-out"
        );
        self.actions.push(action);
    }

    /// Shorthand for [`ActionOf::Send`].
    pub fn send(&mut self, to: NodeId, msg: M::Msg) {
        self.push(ActionOf::Send { to, msg });
    }

    /// Shorthand for [`ActionOf::SetTimer`].
    pub fn set_timer(&mut self, timer: M::Timer, after: Range<Duration>) {
        self.push(ActionOf::SetTimer { timer, after });
    }

    /// Shorthand for [`ActionOf::Io`].
    pub fn io(&mut self, id: IoId, op: IoOp) {
        self.push(ActionOf::Io { id, op });
    }

    /// The collected actions.
    pub fn actions(&self) -> &[Action<M>] {
        &self.actions
    }

    /// Takes the collected actions, leaving the outbox empty.
    pub fn drain(&mut self) -> Vec<Action<M>> {
        core::mem::take(&mut self.actions)
    }

    /// Takes the collected actions one by one, leaving the outbox empty with its buffer kept for
    /// the next step.
    pub fn drain_kept(&mut self) -> std::vec::Drain<'_, Action<M>> {
        self.actions.drain(..)
    }

    /// Whether nothing was emitted.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }
}

/// Observability data carried in machine state but excluded from its identity: two states that
/// differ only in an `Unobserved` field compare equal and hash alike. Use it only for values no
/// protocol decision reads (counters, statistics), so the model checker does not explore states
/// that differ in nothing but bookkeeping.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unobserved<T>(pub T);

impl<T> PartialEq for Unobserved<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T> Eq for Unobserved<T> {}

impl<T> Hash for Unobserved<T> {
    fn hash<H: core::hash::Hasher>(&self, _: &mut H) {}
}

impl<T> core::ops::Deref for Unobserved<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> core::ops::DerefMut for Unobserved<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}
