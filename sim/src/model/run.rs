//! Runs an actor-system model to completion and turns the result into a verdict: counts, speed,
//! PASS/FAIL, and for every failed property a numbered, readable counterexample. Breadth-first
//! search is `super::search`; depth-first search is stateright's.
//!
//! A property fails if an `Always` property has a counterexample or a `Sometimes` property was
//! never reached (an unreachable "sometimes" means the model is too weak to test anything).

use std::hash::Hash;
use std::time::{Duration, Instant};

use stateright::actor::Actor;
use stateright::{Checker, Expectation, Model};

use super::system::{ActorSystem, SystemAction, SystemState};

/// Outcome of one model check.
#[derive(Clone, Debug)]
pub struct Verdict {
    /// States generated (with repeats).
    pub states: usize,
    /// Unique states.
    pub unique_states: usize,
    /// Maximum depth reached.
    pub max_depth: usize,
    /// Wall-clock time.
    pub elapsed: Duration,
    /// Failed properties with their counterexample steps (empty steps for unreached
    /// `Sometimes` properties).
    pub failures: Vec<PropertyFailure>,
    /// Properties that hold (when `complete`), or were not violated before the search stopped.
    pub passed: Vec<&'static str>,
    /// The whole state space was explored (false after stopping at the first failure).
    pub complete: bool,
    /// Distinct actor states, messages, timers and histories the states are built from, and
    /// actor steps computed (each once; see `system`).
    pub interned: [usize; 5],
}

/// One failed property.
#[derive(Clone, Debug)]
pub struct PropertyFailure {
    /// Property name.
    pub name: &'static str,
    /// Why it failed.
    pub kind: FailureKind,
    /// Counterexample: one line per step.
    pub steps: Vec<String>,
    /// Summary of the final state of the counterexample.
    pub final_state: Vec<String>,
}

/// How a property failed.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum FailureKind {
    /// An `Always` property was violated.
    Violated,
    /// A `Sometimes` property was never reached.
    Unreached,
    /// An `Eventually` property has a counterexample.
    NotEventually,
}

impl Verdict {
    /// Whether every property held.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// Unique states per second.
    pub fn states_per_sec(&self) -> f64 {
        self.unique_states as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// How the state space is searched.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
pub enum Search {
    /// Breadth-first: shortest counterexamples; memory holds every frontier state.
    #[default]
    Bfs,
    /// Depth-first: memory holds fingerprints and one path, so much larger models fit;
    /// counterexamples may be long.
    Dfs,
}

/// Checks `model` exhaustively (BFS) with `threads` threads. `progress` is called now and then
/// with the unique state count; `describe` renders one step; `summarize` a final state (both
/// given the model, which holds what states and actions refer to).
pub fn check<A, C, H>(
    model: ActorSystem<A, C, H>,
    threads: usize,
    progress: impl FnMut(usize),
    describe: impl Fn(&ActorSystem<A, C, H>, &SystemAction) -> String,
    summarize: impl Fn(&ActorSystem<A, C, H>, &SystemState) -> Vec<String>,
) -> Verdict
where
    A: Actor + Send + Sync + 'static,
    A::State: Hash + Eq + Send + Sync,
    A::Msg: Hash + Eq + Send + Sync,
    A::Timer: Hash + Eq + Send + Sync,
    C: Send + Sync + 'static,
    H: Clone + Hash + Eq + Send + Sync + 'static,
{
    check_with(model, threads, Search::Bfs, progress, describe, summarize)
}

/// [`check`] with a choice of search.
pub fn check_with<A, C, H>(
    model: ActorSystem<A, C, H>,
    threads: usize,
    search: Search,
    mut progress: impl FnMut(usize),
    describe: impl Fn(&ActorSystem<A, C, H>, &SystemAction) -> String,
    summarize: impl Fn(&ActorSystem<A, C, H>, &SystemState) -> Vec<String>,
) -> Verdict
where
    A: Actor + Send + Sync + 'static,
    A::State: Hash + Eq + Send + Sync,
    A::Msg: Hash + Eq + Send + Sync,
    A::Timer: Hash + Eq + Send + Sync,
    C: Send + Sync + 'static,
    H: Clone + Hash + Eq + Send + Sync + 'static,
{
    let properties: Vec<(&'static str, Expectation)> = model
        .properties()
        .into_iter()
        .map(|p| (p.name, p.expectation))
        .collect();
    let start = Instant::now();
    let found = match search {
        Search::Bfs => found_by_bfs(
            &model,
            threads,
            &properties,
            &mut progress,
            &describe,
            &summarize,
        ),
        Search::Dfs => found_by_dfs(
            model,
            threads,
            &properties,
            &mut progress,
            &describe,
            &summarize,
        ),
    };
    let elapsed = start.elapsed();
    let (failures, passed, stopped_early) = judge(properties, found.paths);
    Verdict {
        states: found.states,
        unique_states: found.unique,
        max_depth: found.max_depth,
        elapsed,
        failures,
        passed,
        complete: !stopped_early,
        interned: found.interned,
    }
}

/// Searches `model` breadth-first (`super::search`), rendering each decided property's path.
fn found_by_bfs<A, C, H>(
    model: &ActorSystem<A, C, H>,
    threads: usize,
    properties: &[(&'static str, Expectation)],
    progress: &mut impl FnMut(usize),
    describe: &impl Fn(&ActorSystem<A, C, H>, &SystemAction) -> String,
    summarize: &impl Fn(&ActorSystem<A, C, H>, &SystemState) -> Vec<String>,
) -> Found
where
    A: Actor + Send + Sync + 'static,
    A::State: Hash + Eq + Send + Sync,
    A::Msg: Hash + Eq + Send + Sync,
    A::Timer: Hash + Eq + Send + Sync,
    C: Send + Sync + 'static,
    H: Clone + Hash + Eq + Send + Sync + 'static,
{
    let o = super::search::bfs(model, threads, progress);
    let mut paths: Vec<Option<Rendered>> = properties.iter().map(|_| None).collect();
    for (i, actions, last) in o.discoveries {
        paths[i] = Some(render_path(model, &actions, &last, describe, summarize));
    }
    Found {
        states: o.states,
        unique: o.unique,
        max_depth: o.max_depth,
        paths,
        interned: model.interned(),
    }
}

/// Searches `model` depth-first (stateright's), rendering each decided property's path.
fn found_by_dfs<A, C, H>(
    model: ActorSystem<A, C, H>,
    threads: usize,
    properties: &[(&'static str, Expectation)],
    progress: &mut impl FnMut(usize),
    describe: &impl Fn(&ActorSystem<A, C, H>, &SystemAction) -> String,
    summarize: &impl Fn(&ActorSystem<A, C, H>, &SystemState) -> Vec<String>,
) -> Found
where
    A: Actor + Send + Sync + 'static,
    A::State: Hash + Eq + Send + Sync,
    A::Msg: Hash + Eq + Send + Sync,
    A::Timer: Hash + Eq + Send + Sync,
    C: Send + Sync + 'static,
    H: Clone + Hash + Eq + Send + Sync + 'static,
{
    // Stop at the first violated property: a broken variant's state space can be far
    // larger than the correct protocol's, and one counterexample is the verdict.
    let builder = model
        .checker()
        .threads(threads.max(1))
        .finish_when(stateright::HasDiscoveries::AnyFailures);
    let checker = wait(builder.spawn_dfs(), progress);
    let paths = properties
        .iter()
        .map(|(name, _)| {
            checker.discovery(name).map(|p| {
                let last = p.last_state().clone();
                let m = checker.model();
                render_path(m, &p.into_actions(), &last, describe, summarize)
            })
        })
        .collect();
    Found {
        states: checker.state_count(),
        unique: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        paths,
        interned: checker.model().interned(),
    }
}

/// Each property's verdict: the failures, the passes, and whether the search stopped early.
fn judge(
    properties: Vec<(&'static str, Expectation)>,
    paths: Vec<Option<Rendered>>,
) -> (Vec<PropertyFailure>, Vec<&'static str>, bool) {
    let stopped_early = properties
        .iter()
        .zip(&paths)
        .any(|((_, e), p)| p.is_some() && *e != Expectation::Sometimes);
    let mut failures = Vec::new();
    let mut passed = Vec::new();
    for ((name, expectation), discovery) in properties.into_iter().zip(paths) {
        match (expectation, discovery) {
            (Expectation::Always, None) | (Expectation::Sometimes, Some(_)) => passed.push(name),
            (Expectation::Eventually, None) => passed.push(name),
            // After an early stop, unreached "sometimes" goals say nothing: skip them.
            (Expectation::Sometimes, None) if stopped_early => {}
            (Expectation::Sometimes, None) => failures.push(PropertyFailure {
                name,
                kind: FailureKind::Unreached,
                steps: Vec::new(),
                final_state: Vec::new(),
            }),
            (expectation, Some((steps, final_state))) => {
                let kind = if expectation == Expectation::Always {
                    FailureKind::Violated
                } else {
                    FailureKind::NotEventually
                };
                failures.push(PropertyFailure {
                    name,
                    kind,
                    steps,
                    final_state,
                });
            }
        }
    }
    (failures, passed, stopped_early)
}

/// A counterexample's steps and final state, rendered.
type Rendered = (Vec<String>, Vec<String>);

fn render_path<M>(
    model: &M,
    actions: &[SystemAction],
    last: &SystemState,
    describe: &impl Fn(&M, &SystemAction) -> String,
    summarize: &impl Fn(&M, &SystemState) -> Vec<String>,
) -> Rendered {
    (
        actions.iter().map(|a| describe(model, a)).collect(),
        summarize(model, last),
    )
}

/// What either search found: counts, and per property the path that decided it.
struct Found {
    states: usize,
    unique: usize,
    max_depth: usize,
    paths: Vec<Option<Rendered>>,
    interned: [usize; 5],
}

/// Waits for a running checker, reporting progress about every 200 ms, and returns the
/// finished one (boxed: BFS and DFS checkers are different types).
fn wait<M: Model + 'static, C: Checker<M> + 'static>(
    checker: C,
    progress: &mut impl FnMut(usize),
) -> Box<dyn Checker<M>> {
    while !checker.is_done() {
        std::thread::sleep(Duration::from_millis(200));
        progress(checker.unique_state_count());
    }
    Box::new(checker.join())
}

/// Renders a verdict the way `t3fs check` prints it.
pub fn render(verdict: &Verdict) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "states explored: {}\nunique states:   {}\nmax depth:       {}\nseconds:         {:.2}\nstates/s:        {:.0}",
        verdict.states,
        verdict.unique_states,
        verdict.max_depth,
        verdict.elapsed.as_secs_f64(),
        verdict.states_per_sec()
    );
    let [actors, messages, timers, histories, steps] = verdict.interned;
    let _ = writeln!(
        s,
        "built from:      {actors} actor states, {messages} messages, {timers} timers, {histories} histories; {steps} actor steps run"
    );
    if !verdict.complete {
        let _ = writeln!(
            s,
            "search stopped at the first violation; \"ok\" below means not violated so far"
        );
    }
    for name in &verdict.passed {
        let _ = writeln!(s, "  ok    {name}");
    }
    for f in &verdict.failures {
        match f.kind {
            FailureKind::Unreached => {
                let _ = writeln!(
                    s,
                    "  FAIL  {}: never reached (the model cannot exercise it)",
                    f.name
                );
            }
            _ => {
                let _ = writeln!(
                    s,
                    "  FAIL  {}: counterexample in {} steps:",
                    f.name,
                    f.steps.len()
                );
                for (i, step) in f.steps.iter().enumerate() {
                    let _ = writeln!(s, "    {:>3}. {step}", i + 1);
                }
                let _ = writeln!(s, "    final state:");
                for line in &f.final_state {
                    let _ = writeln!(s, "      {line}");
                }
            }
        }
    }
    let _ = writeln!(s, "{}", if verdict.passed() { "PASS" } else { "FAIL" });
    s
}
