//! What code outside the world may read of the shared simulation state, and the few things it
//! may ask of it: the clock and the run's figures (trace hash, events), its records for the
//! checkers and the report (histories, notes, samples, the chain timeline, reachability), the
//! audit's findings; recording a note and ending the workload. Every field of `Sim` is private
//! to the world, so a runner, a report or a test cannot change a run behind the machines'
//! backs, and the world may reorganise its state without touching them.
//!
//! Invariant: reading never draws from a generator, schedules or hashes anything, so a caller
//! cannot change a run's trace by looking at it. Not here: the world's own use of the state
//! (mod.rs and the step files), the world's methods over its nodes (`World`).

use std::collections::BTreeMap;

use t3fs_core::kv::mem::MemKv;
use t3fs_core::routing::ChainInfo;
use t3fs_core::time::Instant;

use super::{Note, Reach, Sim};
use crate::history::file_io::FileIo;
use crate::history::ns::NsHistory;
use crate::history::History;

impl Sim {
    /// Simulated time now.
    pub fn now(&self) -> Instant {
        self.queue.now()
    }

    /// The running hash of every event so far: what the determinism tests compare.
    pub fn trace_hash(&self) -> u64 {
        self.trace
    }

    /// Events processed so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The chunk workload's history.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// The namespace history.
    pub fn ns_history(&self) -> &NsHistory {
        &self.ns_history
    }

    /// What the namespace judge reads: the namespace history, the file data log, and the KV
    /// holding the final tree (mutable because reading it runs transactions).
    pub fn namespace_evidence(&mut self) -> (&NsHistory, &FileIo, &mut MemKv) {
        (&self.ns_history, &self.file_io, &mut self.kv.kv)
    }

    /// Notable events, in the order they happened.
    pub fn notes(&self) -> &[Note] {
        &self.notes
    }

    /// Halts machines reported (assertion-like conditions), by reason.
    pub fn halts(&self) -> &[String] {
        &self.halts
    }

    /// Fault classes injected and §2.6.1 rows exercised.
    pub fn reach(&self) -> &Reach {
        &self.reach
    }

    /// Counter totals at every whole simulated second (`SAMPLE_NS`).
    pub fn samples(&self) -> &[(u64, BTreeMap<String, u64>)] {
        &self.samples
    }

    /// Every chain published, with its simulated time, in publication order.
    pub fn chain_timeline(&self) -> &[(u64, ChainInfo)] {
        &self.audit.timeline
    }

    /// The first chain invariant violation the audit saw, else the KV's first, if any.
    pub fn violation(&self) -> Option<&str> {
        self.audit.violation.as_deref().or(self.kv.violation())
    }

    /// Chain publications the audit checked.
    pub fn routing_changes(&self) -> u64 {
        self.audit.routing_changes
    }

    /// KV commits (each checked by the KV's own audit).
    pub fn kv_commits(&self) -> u64 {
        self.kv.counters.commits
    }

    /// Whether the world prints one line per event.
    pub fn logging(&self) -> bool {
        self.log
    }

    /// The BUGGIFY sites enabled for this run.
    pub fn buggify_sites(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.buggify.enabled().copied()
    }

    /// Records a notable event (for `events.jsonl`, the report's timeline and the log).
    pub fn note(&mut self, kind: &'static str, node: &str, what: String) {
        let at = self.now().0;
        self.notes.push(Note {
            at,
            kind,
            node: node.to_string(),
            what,
        });
    }

    /// Ends the safety phase's workload: clients issue no new operations (a namespace writer
    /// still closes what it holds).
    pub fn stop_workload(&mut self) {
        self.workload_stopped = true;
    }
}
