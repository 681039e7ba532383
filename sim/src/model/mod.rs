//! Stateright models of the t3fs machines (feature `model`).
//!
//! [`adapter`] turns any `t3fs_core::machine::Machine` into stateright actor steps: sends become
//! network messages (after a round trip through the real wire codec), timers become stateright
//! timers (which may fire at any moment, covering every timeout ordering), and `Io` actions
//! become self-messages executed against an in-state reference chunk store when delivered, so
//! disk completions interleave with deliveries and failures. [`system`] runs such actors as a
//! stateright model whose states are arrays of interned ids, each actor step computed once;
//! [`search`] is the breadth-first checker built for it. [`craq`] is the CRAQ model (also the
//! mgmtd model) with its properties; [`run`] checks a model and renders a verdict with a
//! readable counterexample.
//!
//! Not here: long randomized runs (the simulator's job) and liveness under fairness.

pub mod adapter;
pub mod craq;
pub mod describe;
pub mod run;
pub mod search;
pub mod system;
