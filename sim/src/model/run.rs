//! Runs a stateright model to completion and turns the result into a verdict: counts, speed,
//! PASS/FAIL, and for every failed property a numbered, readable counterexample.
//!
//! A property fails if an `Always` property has a counterexample or a `Sometimes` property was
//! never reached (an unreachable "sometimes" means the model is too weak to test anything).

use std::hash::Hash;
use std::time::{Duration, Instant};

use stateright::{Checker, Expectation, Model};

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

/// Checks `model` exhaustively (BFS) with `threads` threads. `progress` is called about every
/// 200 ms with the unique state count; `describe` renders one step; `summarize` a final state.
pub fn check<M>(
    model: M,
    threads: usize,
    progress: impl FnMut(usize),
    describe: impl Fn(&M::Action) -> String,
    summarize: impl Fn(&M::State) -> Vec<String>,
) -> Verdict
where
    M: Model + Send + Sync + 'static,
    M::State: Clone + std::fmt::Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + std::fmt::Debug + PartialEq + Send + Sync + 'static,
{
    check_with(model, threads, Search::Bfs, progress, describe, summarize)
}

/// [`check`] with a choice of search.
pub fn check_with<M>(
    model: M,
    threads: usize,
    search: Search,
    mut progress: impl FnMut(usize),
    describe: impl Fn(&M::Action) -> String,
    summarize: impl Fn(&M::State) -> Vec<String>,
) -> Verdict
where
    M: Model + Send + Sync + 'static,
    M::State: Clone + std::fmt::Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + std::fmt::Debug + PartialEq + Send + Sync + 'static,
{
    let properties: Vec<(&'static str, Expectation)> = model
        .properties()
        .into_iter()
        .map(|p| (p.name, p.expectation))
        .collect();
    let start = Instant::now();
    // Stop at the first violated property: a broken variant's state space can be far larger than
    // the correct protocol's, and one counterexample is the verdict.
    let builder = model
        .checker()
        .threads(threads.max(1))
        .finish_when(stateright::HasDiscoveries::AnyFailures);
    let checker = match search {
        Search::Bfs => wait(builder.spawn_bfs(), &mut progress),
        Search::Dfs => wait(builder.spawn_dfs(), &mut progress),
    };
    let elapsed = start.elapsed();
    let stopped_early = checker.discoveries().keys().any(|name| {
        properties
            .iter()
            .any(|(n, e)| n == name && *e != Expectation::Sometimes)
    });
    let mut failures = Vec::new();
    let mut passed = Vec::new();
    for (name, expectation) in properties {
        let discovery = checker.discovery(name);
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
            (expectation, Some(path)) => {
                let final_state = summarize(path.last_state());
                let steps = path.into_actions().iter().map(&describe).collect();
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
    Verdict {
        states: checker.state_count(),
        unique_states: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        elapsed,
        failures,
        passed,
        complete: !stopped_early,
    }
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
