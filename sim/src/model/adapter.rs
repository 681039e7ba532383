//! From `Machine` to stateright: executes one handler call and maps its actions onto
//! stateright's `Out`.
//!
//! Invariants: every message crosses the wire codec (encode, decode, compare) before it enters
//! the model's network, so a codec asymmetry fails the check; `check_invariants` runs after
//! every step; time is frozen at zero because stateright explores every timer order anyway
//! (a model may give a node a clock of its own, [`step_at`]).

use core::fmt::Debug;

use stateright::actor::{model_timeout, Actor, Id, Out};
use t3fs_core::ids::{IoId, NodeId, TargetId};
use t3fs_core::machine::{ActionOf, Event, HaltReason, IoOp, Machine, Outbox};
use t3fs_core::msg::Msg;
use t3fs_core::time::Instant;

/// Maps a node id to its stateright actor id (one actor per node, same index).
pub fn actor_id(node: NodeId) -> Id {
    Id::from(node.0 as usize)
}

/// The target a model's storage node holds: one target per node, numbered alike (model node
/// ids are a handful, so they fit a target id).
pub fn target_of(node: NodeId) -> TargetId {
    TargetId(node.0 as u32)
}

/// The storage node that holds a model's target.
pub fn node_of(target: TargetId) -> NodeId {
    NodeId(target.0.into())
}

/// Maps an actor id back to the node id.
pub fn node_id(id: Id) -> NodeId {
    NodeId(usize::from(id) as u64)
}

/// Messages of a model: protocol messages plus model-only control messages.
pub trait ModelMsg: Sized {
    /// Wraps a protocol message.
    fn wire(msg: Msg) -> Self;
    /// Wraps a self-addressed pending I/O.
    fn io(id: IoId, op: IoOp) -> Self;
}

/// What one machine step produced besides network and timer effects.
#[derive(Debug)]
pub struct StepEffects<Ret> {
    /// Local call results.
    pub returns: Vec<(t3fs_core::ids::RequestId, Ret)>,
    /// Set if the machine halted.
    pub halted: Option<HaltReason>,
}

/// Round-trips `msg` through the wire codec and returns the decoded copy. Panics if the codec
/// loses or changes anything: the model must only ever carry bytes a real peer could decode.
pub fn through_codec(msg: &Msg) -> Msg {
    let bytes = msg.encode();
    let decoded =
        Msg::decode(&bytes).unwrap_or_else(|e| panic!("codec rejects its own frame {msg:?}: {e}"));
    assert_eq!(&decoded, msg, "codec round trip changed a message");
    decoded
}

/// Runs one handler call on `machine` (`start` when `event` is `None`), checks its invariants
/// and forwards the resulting actions to `o`.
pub fn step<M, A>(
    me: Id,
    machine: &mut M,
    event: Option<Event<M>>,
    o: &mut Out<A>,
    wrap_timer: impl Fn(M::Timer) -> A::Timer,
) -> StepEffects<M::Ret>
where
    M: Machine<Msg = Msg>,
    A: Actor,
    A::Msg: ModelMsg,
{
    step_at(Instant::ZERO, me, machine, event, o, wrap_timer)
}

/// Like [`step`], but at local time `now` instead of zero: for models that give a node a
/// clock of its own (the storage-side lease of the mgmtd model, `craq/lease.rs`).
pub fn step_at<M, A>(
    now: Instant,
    me: Id,
    machine: &mut M,
    event: Option<Event<M>>,
    o: &mut Out<A>,
    wrap_timer: impl Fn(M::Timer) -> A::Timer,
) -> StepEffects<M::Ret>
where
    M: Machine<Msg = Msg>,
    A: Actor,
    A::Msg: ModelMsg,
{
    let outbox = run_handler(now, machine, event);
    apply_actions(me, outbox, o, wrap_timer)
}

/// Runs `start` (no event) or `handle` at `now` and checks the machine's invariants.
fn run_handler<M: Machine>(now: Instant, machine: &mut M, event: Option<Event<M>>) -> Outbox<M> {
    let mut outbox = Outbox::<M>::new();
    match event {
        Some(event) => machine.handle(now, event, &mut outbox),
        None => machine.start(now, &mut outbox),
    }
    machine.check_invariants();
    outbox
}

/// Like [`step`], but `Io` actions may complete within the same model step: `exec` runs each
/// and its completion is fed back at once (repeatedly, until no I/O is left). Models use it
/// where the interleaving of an I/O with other deliveries is covered elsewhere and would only
/// multiply states (mgmtd's KV transactions: their races are covered by handler tests). An I/O
/// that `exec` hands back (`Err(op)`) stays asynchronous: it becomes a self-message like in
/// [`step`], and its completion is a later model step (mgmtd's KV commits under `async_kv`).
pub fn step_sync_io<M, A>(
    me: Id,
    machine: &mut M,
    event: Option<Event<M>>,
    o: &mut Out<A>,
    wrap_timer: impl Fn(M::Timer) -> A::Timer,
    mut exec: impl FnMut(IoOp) -> Result<t3fs_core::machine::IoResult, IoOp>,
) -> StepEffects<M::Ret>
where
    M: Machine<Msg = Msg>,
    A: Actor,
    A::Msg: ModelMsg,
{
    let mut outbox = run_handler(Instant::ZERO, machine, event);
    let mut rest = Outbox::<M>::new();
    loop {
        let mut ios = Vec::new();
        for action in outbox.drain() {
            match action {
                ActionOf::Io { id, op } => ios.push((id, op)),
                other => rest.push(other),
            }
        }
        if ios.is_empty() {
            break;
        }
        for (id, op) in ios {
            let result = match exec(op) {
                Ok(result) => result,
                Err(op) => {
                    rest.push(ActionOf::Io { id, op });
                    continue;
                }
            };
            machine.handle(
                Instant::ZERO,
                t3fs_core::machine::EventOf::IoDone { id, result },
                &mut outbox,
            );
            machine.check_invariants();
        }
    }
    apply_actions(me, rest, o, wrap_timer)
}

fn apply_actions<M, A>(
    me: Id,
    mut outbox: Outbox<M>,
    o: &mut Out<A>,
    wrap_timer: impl Fn(M::Timer) -> A::Timer,
) -> StepEffects<M::Ret>
where
    M: Machine<Msg = Msg>,
    A: Actor,
    A::Msg: ModelMsg,
{
    let mut effects = StepEffects {
        returns: Vec::new(),
        halted: None,
    };
    for action in outbox.drain() {
        match action {
            ActionOf::Send { to, msg } => o.send(actor_id(to), A::Msg::wire(through_codec(&msg))),
            ActionOf::SetTimer { timer, .. } => o.set_timer(wrap_timer(timer), model_timeout()),
            ActionOf::CancelTimer(timer) => o.cancel_timer(wrap_timer(timer)),
            ActionOf::Io { id, op } => o.send(me, A::Msg::io(id, op)),
            ActionOf::Return { req, ret } => effects.returns.push((req, ret)),
            ActionOf::Halt(reason) => effects.halted = Some(reason),
        }
    }
    effects
}
