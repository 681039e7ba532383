//! A breadth-first checker for [`ActorSystem`] models, built for large state spaces on few
//! cores: level by level, each batch of a level split across threads; visited states kept as
//! 64-bit fingerprints in an open-addressing table; for every state, its parent's index in the
//! level before and the action taken (6 bytes), so a counterexample is rebuilt by replaying
//! those actions from the initial state.
//!
//! Why not stateright's `spawn_bfs`: it keeps a copy of the whole action path with every
//! frontier state, allocates every successor (most are already visited), and probes a
//! concurrent map one successor at a time. Here successors are built in a scratch state and
//! copied only when new, and successors are fingerprinted in windows whose table slots are all
//! loaded before any is probed, so the cache misses of a large table overlap.
//!
//! Semantics follow stateright's BFS: a state is checked when taken from the frontier; an
//! `Always` property fails at a state where it is false, a `Sometimes` property succeeds at a
//! state where it is true, and an `Eventually` property fails at a terminal state (one without
//! successors within the boundary) if it was false at every state of the tree path to it. The
//! search stops at the end of the batch in which a failure (not a `Sometimes` success) was
//! found. With one thread the order of exploration, and so every count, is deterministic.
//! Not here: depth-first search (stateright's `spawn_dfs` serves `Search::Dfs`), symmetry.

use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use stateright::actor::Actor;
use stateright::{Expectation, Model};

use super::system::{ActorSystem, SystemAction, SystemState};

/// What a search found.
pub struct Outcome {
    /// Successor states generated (with repeats).
    pub states: usize,
    /// Distinct states.
    pub unique: usize,
    /// Depth of the deepest level explored.
    pub max_depth: usize,
    /// For each property that was decided (violated, reached, or not eventually true): its
    /// index in `model.properties()`, the actions from the initial state, and the last state.
    pub discoveries: Vec<(usize, Vec<SystemAction>, SystemState)>,
    /// Stopped early at a failure.
    pub stopped: bool,
}

/// Visited fingerprints (0 = empty slot), linear probing from the home slot
/// `fp * capacity >> 64` (any capacity, no modulo). How states were reached is kept apart
/// (`Search::trail`): the table is zeroed whenever it grows, and only fingerprints need random
/// access.
struct Table {
    fps: Vec<AtomicU64>,
}

impl Table {
    fn new(capacity: usize) -> Self {
        let mut fps = Vec::with_capacity(capacity.max(1));
        fps.resize_with(capacity.max(1), || AtomicU64::new(0));
        Self { fps }
    }

    fn home(&self, fp: u64) -> usize {
        ((u128::from(fp) * self.fps.len() as u128) >> 64) as usize
    }

    fn after(&self, i: usize) -> usize {
        if i + 1 == self.fps.len() {
            0
        } else {
            i + 1
        }
    }

    /// Loads the home slots of `fps` back to back: independent loads, so their cache misses
    /// overlap, and the probes that follow find the slots cached (a prefetch without
    /// `unsafe`).
    fn touch(&self, fps: impl Iterator<Item = u64>) {
        let mut sink = 0;
        for fp in fps {
            sink ^= self.fps[self.home(fp)].load(Ordering::Relaxed);
        }
        std::hint::black_box(sink);
    }

    /// Inserts `fp`; false if it was there.
    fn insert(&self, fp: u64) -> bool {
        let mut i = self.home(fp);
        loop {
            match self.fps[i].compare_exchange(0, fp, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(x) if x == fp => return false,
                Err(_) => i = self.after(i),
            }
        }
    }

    fn grown(self, capacity: usize) -> Self {
        let t = Self::new(capacity);
        for fp in self.fps {
            let fp = fp.into_inner();
            if fp != 0 {
                t.insert(fp);
            }
        }
        t
    }
}

/// A level of the search: encoded states back to back, the `Eventually` properties not yet
/// satisfied on each one's tree path (one bit each), and how each was reached: its parent's
/// index in the level before and the index of the action taken there.
#[derive(Default)]
struct Frontier {
    words: Vec<u32>,
    ends: Vec<usize>,
    ebits: Vec<u64>,
    steps: Steps,
}

/// How the states of a level were reached (kept for every level: counterexamples walk back).
#[derive(Default)]
struct Steps {
    parent: Vec<u32>,
    action: Vec<u16>,
}

impl Frontier {
    fn push(&mut self, words: &[u32], (parent, action): (u32, u16), ebits: u64) {
        self.words.extend_from_slice(words);
        self.ends.push(self.words.len());
        self.ebits.push(ebits);
        self.steps.parent.push(parent);
        self.steps.action.push(action);
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, i: usize) -> (&[u32], u64) {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        (&self.words[start..self.ends[i]], self.ebits[i])
    }

    fn append(&mut self, other: &Frontier) {
        let base = self.words.len();
        self.words.extend_from_slice(&other.words);
        self.ends.extend(other.ends.iter().map(|e| e + base));
        self.ebits.extend_from_slice(&other.ebits);
        self.steps.parent.extend_from_slice(&other.steps.parent);
        self.steps.action.extend_from_slice(&other.steps.action);
    }

    /// Empties it, keeping its memory for the next use (except the steps, which the trail
    /// keeps).
    fn clear(&mut self) {
        self.words.clear();
        self.ends.clear();
        self.ebits.clear();
        self.steps.parent.clear();
        self.steps.action.clear();
    }
}

type Condition<A, C, H> = fn(&ActorSystem<A, C, H>, &SystemState) -> bool;

struct Search<'a, A: Actor, C, H> {
    model: &'a ActorSystem<A, C, H>,
    properties: Vec<(Expectation, Condition<A, C, H>)>,
    table: Table,
    /// For every level so far, how each of its states was reached: counterexamples walk back
    /// along it (6 bytes a state).
    trail: Vec<Steps>,
    /// Decided properties: (property, level, index in the level).
    found: Mutex<Vec<(usize, usize, usize)>>,
    /// Bit `i`: property `i` is decided (a `Sometimes` goal then needs no more evaluation).
    decided: AtomicU64,
    failed: AtomicBool,
}

/// States a batch takes from the frontier.
const BATCH: usize = 1 << 16;
/// Successors fingerprinted, and their slots loaded, before the first is probed.
const WINDOW: usize = 16;
/// The table grows before a batch could fill it beyond this share...
const MAX_LOAD: f64 = 0.75;
/// ...to a size at which it would be filled to this share.
const GROWN_LOAD: f64 = 0.5;

/// Explores `model` breadth-first with `threads` threads; `progress` gets the distinct state
/// count after every batch.
pub fn bfs<A, C, H>(
    model: &ActorSystem<A, C, H>,
    threads: usize,
    mut progress: impl FnMut(usize),
) -> Outcome
where
    A: Actor + Sync,
    A::State: Hash + Eq + Send + Sync,
    A::Msg: Hash + Eq + Send + Sync,
    A::Timer: Hash + Eq + Send + Sync,
    C: Sync,
    H: Clone + Hash + Eq + Send + Sync,
{
    let (mut search, eventually) = Search::new(model);
    let (mut unique, mut generated, mut depth) = (0usize, 0usize, 0usize);
    // Most actions of a state so far (a guess before the first batch).
    let mut widest = 64;
    let mut level = Frontier::default();
    for s in model.init_states() {
        let fp = s.fingerprint();
        if model.within_boundary(&s) && search.table.insert(fp) {
            unique += 1;
            level.push(s.words(), (0, 0), eventually);
        }
    }
    let threads = threads.max(1);
    // Buffers kept from level to level and batch to batch: freeing and refaulting them costs
    // more than the search itself on large models.
    let mut next = Frontier::default();
    let mut outs: Vec<Frontier> = (0..threads).map(|_| Frontier::default()).collect();
    while level.len() > 0 && !search.failed.load(Ordering::Relaxed) {
        let here = search.trail.len();
        search.trail.push(std::mem::take(&mut level.steps));
        depth += 1;
        next.clear();
        let mut at = 0;
        while at < level.len() && !search.failed.load(Ordering::Relaxed) {
            let batch = at..(at + BATCH).min(level.len());
            at = batch.end;
            search.make_room(unique + batch.len() * (widest + 1));
            let results = search.expand_batch(&level, here, batch, threads, &mut outs);
            widest = 0;
            for ((g, w), out) in results.into_iter().zip(outs.iter_mut()) {
                unique += out.len();
                generated += g;
                widest = widest.max(w);
                next.append(out);
                out.clear();
            }
            progress(unique);
        }
        std::mem::swap(&mut level, &mut next);
    }
    search.outcome(unique, generated, depth)
}

impl<'a, A, C, H> Search<'a, A, C, H>
where
    A: Actor + Sync,
    A::State: Hash + Eq + Send + Sync,
    A::Msg: Hash + Eq + Send + Sync,
    A::Timer: Hash + Eq + Send + Sync,
    C: Sync,
    H: Clone + Hash + Eq + Send + Sync,
{
    /// A search of `model` with nothing visited, and the bits of its `Eventually` properties.
    fn new(model: &'a ActorSystem<A, C, H>) -> (Self, u64) {
        let properties = model.properties();
        assert!(properties.len() <= 64, "at most 64 properties");
        let eventually: u64 = properties
            .iter()
            .enumerate()
            .filter(|(_, p)| p.expectation == Expectation::Eventually)
            .fold(0, |m, (i, _)| m | 1 << i);
        let search = Search {
            model,
            properties: properties
                .into_iter()
                .map(|p| (p.expectation, p.condition))
                .collect(),
            table: Table::new(1 << 10),
            trail: Vec::new(),
            found: Mutex::new(Vec::new()),
            decided: AtomicU64::new(0),
            failed: AtomicBool::new(false),
        };
        (search, eventually)
    }

    /// Grows the table if `most` distinct states could fill it beyond [`MAX_LOAD`].
    fn make_room(&mut self, most: usize) {
        if most as f64 > self.table.fps.len() as f64 * MAX_LOAD {
            let cap = (most as f64 / GROWN_LOAD) as usize;
            self.table = std::mem::replace(&mut self.table, Table::new(1)).grown(cap);
        }
    }

    /// Expands `batch` of `level` on `threads` threads into `outs`: each part's [`expand`] result.
    fn expand_batch(
        &self,
        level: &Frontier,
        here: usize,
        batch: std::ops::Range<usize>,
        threads: usize,
        outs: &mut [Frontier],
    ) -> Vec<(usize, usize)> {
        let per = batch.len().div_ceil(threads);
        let ranges = batch
            .clone()
            .step_by(per)
            .map(|a| a..(a + per).min(batch.end));
        std::thread::scope(|scope| {
            let (s, l) = (self, level);
            let mut work = ranges.zip(outs.iter_mut());
            let mine = work.next().expect("a non-empty batch");
            let handles: Vec<_> = work
                .map(|(r, out)| scope.spawn(move || expand(s, l, here, r, out)))
                .collect();
            // This thread takes a part too, then waits for the others.
            let mut results = vec![expand(s, l, here, mine.0, mine.1)];
            results.extend(
                handles
                    .into_iter()
                    .map(|h| h.join().expect("checker thread")),
            );
            results
        })
    }

    /// What the search found, the decided properties' paths replayed from the trail.
    fn outcome(self, unique: usize, generated: usize, depth: usize) -> Outcome {
        let found = self.found.into_inner().expect("found lock");
        let discoveries = found
            .iter()
            .map(|&(p, at, i)| {
                let (actions, last) = replay(self.model, &self.trail, at, i);
                (p, actions, last)
            })
            .collect();
        Outcome {
            states: generated,
            unique,
            max_depth: depth.max(1) - 1,
            discoveries,
            stopped: self.failed.into_inner(),
        }
    }
}

/// Checks and expands the states of `range` in `level` (level number `here`), adding the new
/// successors to `next`; returns the number of successors generated and the most actions a
/// state had.
fn expand<A, C, H>(
    sh: &Search<'_, A, C, H>,
    level: &Frontier,
    here: usize,
    range: std::ops::Range<usize>,
    next: &mut Frontier,
) -> (usize, usize)
where
    A: Actor,
    A::State: Hash + Eq,
    A::Msg: Hash + Eq,
    A::Timer: Hash + Eq,
    H: Clone + Hash + Eq,
{
    let model = sh.model;
    let mut actions = Vec::new();
    let (mut generated, mut widest) = (0, 0);
    let mut state = SystemState::default();
    // Successors awaiting their probe, with the fingerprint, (parent, action) and ebits of
    // each.
    let mut window: Vec<SystemState> = (0..WINDOW * 4).map(|_| SystemState::default()).collect();
    type Pending = Vec<(u64, (u32, u16), u64)>;
    let mut pending: Pending = Vec::new();
    let flush = |window: &[SystemState], pending: &mut Pending, next: &mut Frontier| {
        sh.table.touch(pending.iter().map(|p| p.0));
        for (s, (fp, step, ebits)) in window.iter().zip(pending.drain(..)) {
            if sh.table.insert(fp) {
                next.push(s.words(), step, ebits);
            }
        }
    };
    for at in range {
        if sh.failed.load(Ordering::Relaxed) {
            break;
        }
        let (words, mut ebits) = level.get(at);
        state.load(words);
        let decided = sh.decided.load(Ordering::Relaxed);
        for (i, (expectation, condition)) in sh.properties.iter().enumerate() {
            if *expectation == Expectation::Sometimes && decided & 1 << i != 0 {
                continue;
            }
            let holds = condition(model, &state);
            match expectation {
                Expectation::Always if !holds => record(sh, i, (here, at), true),
                Expectation::Sometimes if holds => record(sh, i, (here, at), false),
                Expectation::Eventually if holds => ebits &= !(1 << i),
                _ => {}
            }
        }
        let mut terminal = true;
        model.actions(&state, &mut actions);
        widest = widest.max(actions.len());
        assert!(actions.len() <= usize::from(u16::MAX), "too many actions");
        for (index, action) in actions.drain(..).enumerate() {
            if pending.len() == window.len() {
                window.push(SystemState::default());
            }
            let succ = &mut window[pending.len()];
            if !model.successor_into(&state, action, succ) || !model.within_boundary(succ) {
                continue;
            }
            terminal = false;
            generated += 1;
            pending.push((succ.fingerprint(), (at as u32, index as u16), ebits));
        }
        if pending.len() >= WINDOW {
            flush(&window, &mut pending, next);
        }
        if terminal && ebits != 0 {
            for i in (0..64).filter(|i| ebits & 1 << i != 0) {
                record(sh, i, (here, at), true);
            }
        }
    }
    flush(&window, &mut pending, next);
    (generated, widest)
}

/// Records the first discovery of property `i`, at a state (level, index); a failure stops
/// the search.
fn record<A: Actor, C, H>(
    sh: &Search<'_, A, C, H>,
    i: usize,
    (level, index): (usize, usize),
    failure: bool,
) {
    let mut found = sh.found.lock().expect("found lock");
    if found.iter().all(|(p, ..)| *p != i) {
        found.push((i, level, index));
        sh.decided.fetch_or(1 << i, Ordering::Relaxed);
        if failure {
            sh.failed.store(true, Ordering::Relaxed);
        }
    }
}

/// The actions from the initial state to the state at `index` of level `level`, found by
/// walking the trail back to the initial state and replaying the recorded action indices, and
/// that state. (A model's actions come in a fixed order, and its steps are functions of the
/// state: see `system::memo`.)
fn replay<A, C, H>(
    model: &ActorSystem<A, C, H>,
    trail: &[Steps],
    level: usize,
    index: usize,
) -> (Vec<SystemAction>, SystemState)
where
    A: Actor,
    A::State: Hash + Eq,
    A::Msg: Hash + Eq,
    A::Timer: Hash + Eq,
    H: Clone + Hash + Eq,
{
    let mut picks = Vec::new();
    let mut at = index;
    for l in (1..=level).rev() {
        picks.push(usize::from(trail[l].action[at]));
        at = trail[l].parent[at] as usize;
    }
    picks.reverse();
    let mut state = model.init_states().swap_remove(at);
    let mut actions = Vec::new();
    let mut candidates = Vec::new();
    for pick in picks {
        model.actions(&state, &mut candidates);
        let action = candidates[pick];
        candidates.clear();
        state = model
            .next_state(&state, action)
            .expect("a recorded step replays");
        actions.push(action);
    }
    (actions, state)
}
