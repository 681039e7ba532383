//! A compact actor-system model for stateright: the semantics of `stateright::actor`'s
//! `ActorModel` for the features the t3fs models use (sends, timers; unordered non-duplicating
//! or per-link FIFO networks), with states built for exhaustive search of large spaces.
//!
//! Why not `ActorModel`: its states hold hash sets that are re-hashed and deep-copied on every
//! step, it runs every actor step afresh, and it cannot merge states that differ only in ways
//! the model knows to be irrelevant. Here every distinct actor state, message (with its sender
//! and recipient), timer and history is interned once ([`intern`]), so a model state is a short
//! array of ids ([`SystemState`]) that is copied, hashed and compared as plain words; each
//! actor step is computed once per (actor state, event) and looked up afterwards ([`memo`]);
//! and a model may install a *canonicalizer* that rewrites each successor into a
//! representative of the states that behave the same.
//!
//! Invariants: equal states are equal whatever path built them (network and timers are kept in
//! a canonical order); a delivery that leaves its recipient unchanged and sends nothing is no
//! transition on an unordered network, and a timer that changes nothing but re-arms itself is
//! none either (both as in `ActorModel`; a first form of this model, before interning and
//! canonicalizers, matched `ActorModel` state for state on the CRAQ and mgmtd models). Ids
//! depend on the order values were first met, so they differ between runs with several
//! threads, but within a run equal values have equal ids. Not here: message loss or duplication,
//! crashes driven by the checker, random choices, non-volatile storage (no t3fs model uses
//! them; the models inject their own faults).

mod draft;
mod intern;
mod memo;
mod shared;

use std::fmt::Debug;
use std::hash::Hash;

use stateright::actor::{Actor, Command, Envelope, Id, Out};
use stateright::{Expectation, Model, Property};

pub use draft::Draft;
use intern::{Interner, Log};
use memo::Memo;
pub use shared::{hash_of, Shared};

/// How the network orders messages.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Links {
    /// Any message in flight may be delivered next; none is lost or duplicated.
    Unordered,
    /// Each directed link delivers in send order (TCP between live processes).
    Fifo,
}

/// A model state: interned ids laid out as `[actor states (one per actor)] [history]
/// [message count k] [k messages in flight] [armed timers]`. Messages are sorted by id on
/// unordered networks, by link with send order kept within a link on FIFO ones; timers are
/// sorted by id.
#[derive(Clone, Debug, Default, Eq, Hash, PartialEq)]
pub struct SystemState {
    words: Vec<u32>,
}

impl SystemState {
    /// A 64-bit fingerprint, never 0.
    pub fn fingerprint(&self) -> u64 {
        hash_of(&self.words[..]).max(1)
    }

    /// The encoded state.
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// Becomes the state `words` encode (from [`SystemState::words`] of the same model).
    pub fn load(&mut self, words: &[u32]) {
        self.words.clear();
        self.words.extend_from_slice(words);
    }
}

/// A step of the system, by interned id.
#[derive(Clone, Copy, Debug, Eq, Hash, PartialEq)]
pub enum SystemAction {
    /// Deliver the message in flight with this envelope id.
    Deliver(u32),
    /// Fire the armed timer with this id.
    Timeout(u32),
}

/// An effect of an actor step, encoded as a word: kind in the top two bits, id below.
const SEND: u32 = 0;
const SET: u32 = 1 << 30;
const CANCEL: u32 = 2 << 30;
const KIND: u32 = 3 << 30;
/// "No new state" in a step.
const UNCHANGED: u32 = u32::MAX;

/// One actor step: its new state (or `UNCHANGED`) and its effects, in order.
struct Step {
    next: u32,
    effects: Box<[u32]>,
}

type RecordOut<C, M, H> = fn(&C, &H, Envelope<&M>) -> Option<H>;
type Condition<A, C, H> = fn(&ActorSystem<A, C, H>, &SystemState) -> bool;

/// The model: actors, their configuration `C` and a history `H` recorded from sends.
pub struct ActorSystem<A: Actor, C, H> {
    actors: Vec<A>,
    /// The configuration, readable by properties.
    pub cfg: C,
    links: Links,
    init_history: H,
    record_out: RecordOut<C, A::Msg, H>,
    records: fn(&Envelope<A::Msg>) -> bool,
    facts: fn(&C, &A::State) -> u64,
    begin_step: fn(&mut H),
    canonicalize: fn(&mut Draft<'_, '_, A, C, H>),
    boundary: fn(&Self, &SystemState) -> bool,
    properties: Vec<(Expectation, &'static str, Condition<A, C, H>)>,
    states: Interner<A::State>,
    envelopes: Interner<Envelope<A::Msg>>,
    timers: Interner<(Id, A::Timer)>,
    histories: Interner<H>,
    /// Every actor step computed, by index.
    steps: Log<Step>,
    msg_steps: Memo,
    timer_steps: Memo,
    /// History after recording a send (`UNCHANGED`: as before).
    recorded: Memo,
}

impl<A, C, H> ActorSystem<A, C, H>
where
    A: Actor,
    A::State: Hash + Eq,
    A::Msg: Hash + Eq,
    A::Timer: Hash + Eq,
    H: Clone + Hash + Eq,
{
    /// A system of `actors` (actor `i` has id `i`).
    pub fn new(cfg: C, init_history: H, actors: Vec<A>, links: Links) -> Self {
        Self {
            actors,
            cfg,
            links,
            init_history,
            record_out: |_, _, _| None,
            records: |_| true,
            facts: |_, _| 0,
            begin_step: |_| {},
            canonicalize: |_| {},
            boundary: |_, _| true,
            properties: Vec::new(),
            states: Interner::new(),
            envelopes: Interner::new(),
            timers: Interner::new(),
            histories: Interner::new(),
            steps: Log::new(),
            msg_steps: Memo::new(),
            timer_steps: Memo::new(),
            recorded: Memo::new(),
        }
    }

    /// Records history from every send (also sends to no actor, which are then dropped).
    pub fn record_msg_out(mut self, f: RecordOut<C, A::Msg, H>) -> Self {
        self.record_out = f;
        self
    }

    /// Which sends `record_msg_out` may record (an optimization: others skip the recorder).
    pub fn records(mut self, f: fn(&Envelope<A::Msg>) -> bool) -> Self {
        self.records = f;
        self
    }

    /// A word of facts about an actor state, computed once per distinct state and read by
    /// properties, canonicalizer and boundary through [`ActorSystem::fact`] and [`Draft::fact`]
    /// instead of inspecting the state each time.
    pub fn facts(mut self, f: fn(&C, &A::State) -> u64) -> Self {
        self.facts = f;
        self
    }

    /// Runs on the history of every successor before the step's sends are recorded: a history
    /// may hold events of the step that entered its state and forget them here.
    pub fn begin_step(mut self, f: fn(&mut H)) -> Self {
        self.begin_step = f;
        self
    }

    /// Rewrites every state into its representative; it must only merge states that no
    /// property and no future step can tell apart.
    pub fn canonicalize(mut self, f: fn(&mut Draft<'_, '_, A, C, H>)) -> Self {
        self.canonicalize = f;
        self
    }

    /// States outside the boundary are not explored.
    pub fn boundary(mut self, f: fn(&Self, &SystemState) -> bool) -> Self {
        self.boundary = f;
        self
    }

    /// Adds a property.
    pub fn property(
        mut self,
        expectation: Expectation,
        name: &'static str,
        condition: Condition<A, C, H>,
    ) -> Self {
        self.properties.push((expectation, name, condition));
        self
    }

    /// The actor states of `s`, by actor index.
    pub fn actor_states<'a>(&'a self, s: &'a SystemState) -> impl Iterator<Item = &'a A::State> {
        s.words[..self.actors.len()]
            .iter()
            .map(|&id| self.states.get(id))
    }

    /// Actors in the system.
    pub fn actor_count(&self) -> usize {
        self.actors.len()
    }

    /// The facts (see [`ActorSystem::facts`]) of actor `index` in `s`.
    pub fn fact(&self, s: &SystemState, index: usize) -> u64 {
        self.fact_of(s.words[index])
    }

    pub(crate) fn fact_of(&self, state: u32) -> u64 {
        self.states.fact(state, |a| (self.facts)(&self.cfg, a))
    }

    /// The history of `s`.
    pub fn history(&self, s: &SystemState) -> &H {
        self.histories.get(s.words[self.actors.len()])
    }

    /// The messages in flight in `s`.
    pub fn network<'a>(&'a self, s: &'a SystemState) -> impl Iterator<Item = &'a Envelope<A::Msg>> {
        let n = self.actors.len();
        let k = s.words[n + 1] as usize;
        s.words[n + 2..n + 2 + k]
            .iter()
            .map(|&id| self.envelopes.get(id))
    }

    /// The message an action delivers, or the actor and timer it fires.
    pub fn resolve(&self, action: &SystemAction) -> Result<&Envelope<A::Msg>, &(Id, A::Timer)> {
        match *action {
            SystemAction::Deliver(e) => Ok(self.envelopes.get(e)),
            SystemAction::Timeout(t) => Err(self.timers.get(t)),
        }
    }

    /// Distinct actor states, messages, timers and histories interned so far, and actor steps
    /// memoized.
    pub fn interned(&self) -> [usize; 5] {
        [
            self.states.len(),
            self.envelopes.len(),
            self.timers.len(),
            self.histories.len(),
            self.msg_steps.len() + self.timer_steps.len(),
        ]
    }

    /// Writes the successor of `last` by `action` into `next` (whatever it held before) and
    /// says whether there is one: `Model::next_state` without allocating, for the checker.
    pub fn successor_into(
        &self,
        last: &SystemState,
        action: SystemAction,
        next: &mut SystemState,
    ) -> bool {
        let index = match action {
            SystemAction::Deliver(e) => usize::from(self.envelopes.get(e).dst),
            SystemAction::Timeout(t) => usize::from(self.timers.get(t).0),
        };
        let step = self.step(index, last.words[index], action);
        let noop = step.next == UNCHANGED
            && match action {
                SystemAction::Deliver(_) => {
                    step.effects.is_empty() && self.links == Links::Unordered
                }
                SystemAction::Timeout(t) => step.effects[..] == [SET | t],
            };
        if noop {
            return false;
        }
        next.words.clear();
        next.words.extend_from_slice(&last.words);
        let mut d = Draft::new(self, &mut next.words, Some(&last.words));
        d.begin_step();
        match action {
            SystemAction::Deliver(e) => d.remove_message(e),
            SystemAction::Timeout(t) => d.cancel_timer(t),
        }
        if step.next != UNCHANGED {
            d.set_actor(index, step.next);
        }
        d.apply(&step.effects);
        (self.canonicalize)(&mut d);
        true
    }

    fn step_of(&self, index: usize, out: Out<A>, next: Option<A::State>) -> Step {
        let effects = out
            .into_iter()
            .map(|c| match c {
                Command::Send(dst, msg) => {
                    SEND | self.envelopes.id(Shared::new(Envelope {
                        src: Id::from(index),
                        dst,
                        msg,
                    }))
                }
                Command::SetTimer(t, _) => SET | self.timers.id(Shared::new((Id::from(index), t))),
                Command::CancelTimer(t) => {
                    CANCEL | self.timers.id(Shared::new((Id::from(index), t)))
                }
                Command::ChooseRandom(..) | Command::Save(_) => {
                    panic!("the actor system supports no random choices or storage")
                }
            })
            .collect();
        Step {
            next: next.map_or(UNCHANGED, |s| self.states.id(Shared::new(s))),
            effects,
        }
    }

    /// Actor `index` in interned state `state` handles a message or a timer.
    fn step(&self, index: usize, state: u32, action: SystemAction) -> &Step {
        let run = |deliver: Option<&Envelope<A::Msg>>, timer: Option<&A::Timer>| {
            let id = Id::from(index);
            let mut s = std::borrow::Cow::Borrowed(self.states.get(state));
            let mut out = Out::new();
            match (deliver, timer) {
                (Some(e), _) => {
                    self.actors[index].on_msg(id, &mut s, e.src, e.msg.clone(), &mut out)
                }
                (_, Some(t)) => self.actors[index].on_timeout(id, &mut s, t, &mut out),
                _ => unreachable!(),
            }
            let next = match s {
                std::borrow::Cow::Owned(s) => Some(s),
                std::borrow::Cow::Borrowed(_) => None,
            };
            self.steps.push(self.step_of(index, out, next))
        };
        let at = match action {
            SystemAction::Deliver(e) => self
                .msg_steps
                .get_or(state, e, || run(Some(self.envelopes.get(e)), None)),
            SystemAction::Timeout(t) => self
                .timer_steps
                .get_or(state, t, || run(None, Some(&self.timers.get(t).1))),
        };
        self.steps.get(at)
    }
}

impl<A, C, H> Model for ActorSystem<A, C, H>
where
    A: Actor,
    A::State: Hash + Eq,
    A::Msg: Hash + Eq,
    A::Timer: Hash + Eq,
    H: Clone + Hash + Eq,
{
    type State = SystemState;
    type Action = SystemAction;

    fn init_states(&self) -> Vec<SystemState> {
        let n = self.actors.len();
        let mut words = vec![0; n + 2];
        words[n] = self.histories.id(Shared::new(self.init_history.clone()));
        let mut d = Draft::new(self, &mut words, None);
        for (index, actor) in self.actors.iter().enumerate() {
            let mut out = Out::new();
            let s = actor.on_start(Id::from(index), &None, &mut out);
            let step = self.step_of(index, out, Some(s));
            d.set_actor(index, step.next);
            d.apply(&step.effects);
        }
        (self.canonicalize)(&mut d);
        vec![SystemState { words }]
    }

    fn actions(&self, s: &SystemState, actions: &mut Vec<SystemAction>) {
        let n = self.actors.len();
        let k = s.words[n + 1] as usize;
        let net = &s.words[n + 2..n + 2 + k];
        let mut prev: Option<u32> = None;
        for &e in net {
            let skip = match (self.links, prev) {
                (_, None) => false,
                // A repeated message is one choice; only a link's head may be delivered.
                (Links::Unordered, Some(p)) => p == e,
                (Links::Fifo, Some(p)) => {
                    let (a, b) = (self.envelopes.get(p), self.envelopes.get(e));
                    (a.src, a.dst) == (b.src, b.dst)
                }
            };
            prev = Some(e);
            if !skip {
                actions.push(SystemAction::Deliver(e));
            }
        }
        for &t in &s.words[n + 2 + k..] {
            actions.push(SystemAction::Timeout(t));
        }
    }

    fn next_state(&self, last: &SystemState, action: SystemAction) -> Option<SystemState> {
        let mut next = SystemState { words: Vec::new() };
        self.successor_into(last, action, &mut next).then_some(next)
    }

    fn format_action(&self, action: &SystemAction) -> String
    where
        Self::Action: Debug,
    {
        match self.resolve(action) {
            Ok(e) => format!("{} -> {}: {:?}", e.src, e.dst, e.msg),
            Err((id, t)) => format!("{id}: timer {t:?}"),
        }
    }

    fn properties(&self) -> Vec<Property<Self>> {
        self.properties
            .iter()
            .map(|(expectation, name, condition)| Property {
                expectation: expectation.clone(),
                name,
                condition: *condition,
            })
            .collect()
    }

    fn within_boundary(&self, state: &SystemState) -> bool {
        (self.boundary)(self, state)
    }
}
