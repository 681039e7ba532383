//! [`Draft`]: a successor state under construction, and the view a canonicalizer gets of it.
//!
//! It edits the id array of `super::SystemState` in place, keeping its layout and canonical
//! order: messages sorted by id (unordered networks) or by link in send order (FIFO), timers
//! sorted by id without repeats. Not here: running actors (`super::ActorSystem::step`).

use std::hash::Hash;

use stateright::actor::{Actor, Envelope, Id};

use super::{ActorSystem, CANCEL, KIND, SEND, SET, UNCHANGED};
use crate::model::system::{Links, Shared};

/// Messages and timers a step may add before its additions stop being tracked.
const TRACKED: usize = 16;

/// A state under construction.
pub struct Draft<'a, 'w, A: Actor, C, H> {
    sys: &'a ActorSystem<A, C, H>,
    words: &'w mut Vec<u32>,
    /// The state this one is a successor of (none for an initial state).
    parent: Option<&'w [u32]>,
    /// Messages (`SEND | id`) and timers (`SET | id`) this step added, if they fit.
    added: [u32; TRACKED],
    added_len: usize,
}

impl<'a, 'w, A, C, H> Draft<'a, 'w, A, C, H>
where
    A: Actor,
    A::State: Hash + Eq,
    A::Msg: Hash + Eq,
    A::Timer: Hash + Eq,
    H: Clone + Hash + Eq,
{
    pub(super) fn new(
        sys: &'a ActorSystem<A, C, H>,
        words: &'w mut Vec<u32>,
        parent: Option<&'w [u32]>,
    ) -> Self {
        Self {
            sys,
            words,
            parent,
            added: [0; TRACKED],
            added_len: 0,
        }
    }

    fn track(&mut self, w: u32) {
        // Past the limit the length keeps counting, which marks the record incomplete.
        if self.added_len < TRACKED {
            self.added[self.added_len] = w;
        }
        self.added_len += 1;
    }

    /// The messages and timers this step added (`Some` unless there were too many to track):
    /// everything else was in the parent state, which was canonical already.
    fn added(&self) -> Option<&[u32]> {
        (self.parent.is_some() && self.added_len <= TRACKED).then(|| &self.added[..self.added_len])
    }

    fn n(&self) -> usize {
        self.sys.actors.len()
    }

    fn net(&self) -> std::ops::Range<usize> {
        let n = self.n();
        n + 2..n + 2 + self.words[n + 1] as usize
    }

    /// The model's configuration.
    pub fn cfg(&self) -> &'a C {
        &self.sys.cfg
    }

    /// The state of actor `index`.
    pub fn actor(&self, index: usize) -> &'a A::State {
        self.sys.states.get(self.words[index])
    }

    /// The facts (see `ActorSystem::facts`) of actor `index`.
    pub fn fact(&self, index: usize) -> u64 {
        self.sys.fact_of(self.words[index])
    }

    /// The actor whose state this step changed (one at most), with its facts before and
    /// after; `None` if the step changed no actor's state.
    pub fn changed(&self) -> Option<(usize, u64, u64)> {
        let p = self.parent?;
        let i = (0..self.n()).find(|&i| p[i] != self.words[i])?;
        Some((i, self.sys.fact_of(p[i]), self.fact(i)))
    }

    /// Every actor state, by index.
    pub fn actor_states(&self) -> impl Iterator<Item = &'a A::State> + '_ {
        (0..self.n()).map(|i| self.actor(i))
    }

    pub(super) fn set_actor(&mut self, index: usize, id: u32) {
        self.words[index] = id;
    }

    pub(super) fn begin_step(&mut self) {
        let n = self.n();
        let h = self.words[n];
        let sys = self.sys;
        self.words[n] = sys.histories.fact(h, |h| {
            let mut next = h.clone();
            (sys.begin_step)(&mut next);
            u64::from(sys.histories.id(Shared::new(next)))
        }) as u32;
    }

    pub(super) fn remove_message(&mut self, e: u32) {
        let net = self.net();
        let at = net.start
            + match self.sys.links {
                Links::Unordered => self.words[net.clone()].binary_search(&e).ok(),
                // The delivered message is its link's head: the first occurrence of its id.
                Links::Fifo => self.words[net.clone()].iter().position(|&x| x == e),
            }
            .expect("delivered message is in flight");
        self.words.remove(at);
        let n = self.n();
        self.words[n + 1] -= 1;
    }

    pub(super) fn cancel_timer(&mut self, t: u32) {
        let start = self.net().end;
        if let Ok(i) = self.words[start..].binary_search(&t) {
            self.words.remove(start + i);
        }
    }

    fn set_timer(&mut self, t: u32) {
        let start = self.net().end;
        if let Err(i) = self.words[start..].binary_search(&t) {
            self.words.insert(start + i, t);
            self.track(SET | t);
        }
    }

    fn send(&mut self, e: u32) {
        let sys = self.sys;
        let n = self.n();
        let h = self.words[n];
        let records = sys.envelopes.fact(e, |env| u64::from((sys.records)(env))) != 0;
        let recorded = if !records {
            UNCHANGED
        } else {
            sys.recorded.get_or(h, e, || {
                let env = sys.envelopes.get(e);
                let env = Envelope {
                    src: env.src,
                    dst: env.dst,
                    msg: &env.msg,
                };
                (sys.record_out)(&sys.cfg, sys.histories.get(h), env)
                    .map_or(UNCHANGED, |next| sys.histories.id(Shared::new(next)))
            })
        };
        if recorded != UNCHANGED {
            self.words[n] = recorded;
        }
        let env = sys.envelopes.get(e);
        if usize::from(env.dst) >= n {
            return; // Addressed to no actor: never deliverable, so not state.
        }
        let net = self.net();
        let at = net.start
            + match sys.links {
                Links::Unordered => self.words[net.clone()].partition_point(|&x| x <= e),
                // After every message already on its link and every earlier link: FIFO.
                Links::Fifo => {
                    let link = (env.src, env.dst);
                    self.words[net.clone()].partition_point(|&x| {
                        let o = sys.envelopes.get(x);
                        (o.src, o.dst) <= link
                    })
                }
            };
        self.words.insert(at, e);
        self.words[n + 1] += 1;
        self.track(SEND | e);
    }

    pub(super) fn apply(&mut self, effects: &[u32]) {
        for &w in effects {
            match w & KIND {
                SEND => self.send(w & !KIND),
                SET => self.set_timer(w & !KIND),
                CANCEL => self.cancel_timer(w & !KIND),
                _ => unreachable!("effect kind"),
            }
        }
    }

    /// Keeps only the messages in flight for which `keep` is true; with `only_added`, judges
    /// only the messages this step sent (when they are known; all otherwise), as when the rule
    /// is the one the parent state was canonicalized by.
    pub fn retain_messages(
        &mut self,
        only_added: bool,
        mut keep: impl FnMut(&Envelope<A::Msg>) -> bool,
    ) {
        let sys = self.sys;
        if let Some(added) = self.added().filter(|_| only_added) {
            let drop: Vec<u32> = added
                .iter()
                .filter(|&&w| w & KIND == SEND && !keep(sys.envelopes.get(w & !KIND)))
                .map(|&w| w & !KIND)
                .collect();
            for e in drop {
                // The copy this step sent: the last on its link (equal messages sent earlier
                // keep their places).
                let net = self.net();
                let at = self.words[net.clone()]
                    .iter()
                    .rposition(|&x| x == e)
                    .expect("an added message is in flight");
                self.words.remove(net.start + at);
                let n = self.n();
                self.words[n + 1] -= 1;
            }
            return;
        }
        let net = self.net();
        let mut at = net.start;
        let mut end = net.end;
        while at < end {
            if keep(sys.envelopes.get(self.words[at])) {
                at += 1;
            } else {
                self.words.remove(at);
                end -= 1;
            }
        }
        let n = self.n();
        self.words[n + 1] = (end - net.start) as u32;
    }

    /// Drops every message in flight for which `idempotent` is true that repeats one already in
    /// flight on its link (the later copy goes): for requests whose second copy brings nothing
    /// the first does not. Judges only what this step sent, when that is known.
    pub fn drop_repeats(&mut self, mut idempotent: impl FnMut(&Envelope<A::Msg>) -> bool) {
        let sys = self.sys;
        let candidates: Vec<u32> = match self.added() {
            Some(added) => added
                .iter()
                .filter(|&&w| w & KIND == SEND)
                .map(|&w| w & !KIND)
                .collect(),
            None => self.words[self.net()].to_vec(),
        };
        for e in candidates {
            if !idempotent(sys.envelopes.get(e)) {
                continue;
            }
            loop {
                let net = self.net();
                let copies = self.words[net.clone()].iter().filter(|&&x| x == e).count();
                if copies <= 1 {
                    break;
                }
                let at = self.words[net.clone()]
                    .iter()
                    .rposition(|&x| x == e)
                    .expect("a repeated message is in flight");
                self.words.remove(net.start + at);
                let n = self.n();
                self.words[n + 1] -= 1;
            }
        }
    }

    /// Keeps only the armed timers for which `keep` is true; `only_added` as for
    /// [`Draft::retain_messages`].
    pub fn retain_timers(&mut self, only_added: bool, mut keep: impl FnMut(Id, &A::Timer) -> bool) {
        let sys = self.sys;
        if let Some(added) = self.added().filter(|_| only_added) {
            let drop: Vec<u32> = added
                .iter()
                .filter(|&&w| w & KIND == SET)
                .filter(|&&w| {
                    let (id, t) = sys.timers.get(w & !KIND);
                    !keep(*id, t)
                })
                .map(|&w| w & !KIND)
                .collect();
            for t in drop {
                self.cancel_timer(t);
            }
            return;
        }
        let start = self.net().end;
        let mut i = start;
        while i < self.words.len() {
            let (id, t) = sys.timers.get(self.words[i]);
            if keep(*id, t) {
                i += 1;
            } else {
                self.words.remove(i);
            }
        }
    }
}
