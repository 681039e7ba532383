//! The KV service's fault layer: what a real run injects into the embedded KV that every
//! mgmtd and meta server commits through, as the simulator's KV faults do. The service becomes
//! unavailable (every request answered `Unavailable`, nothing run), commits fail with spurious
//! conflicts (nothing written), or commits are answered `CommitUnknown`, half of them applied
//! and half not. Set as a whole, [`KvFaults`], through the kv node's control endpoint
//! (`PUT /kv?QUERY`, metrics.rs, authenticated by the cluster token).
//!
//! Invariant: a fault never breaks the KV contract: a conflict writes nothing, an unknown commit
//! is either applied or not, an unavailable engine runs nothing. Not here: the service
//! (kv_service.rs) or which faults a scenario sets when (scenario_run).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use t3fs_core::kv::KvOp;

use crate::fault_query::{flag, pairs, rate};

/// The KV service's faults.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KvFaults {
    /// Every request is answered `Unavailable`.
    pub unavailable: bool,
    /// Probability that a commit fails with a spurious conflict.
    pub conflict: f64,
    /// Probability that a commit is answered `CommitUnknown`.
    pub commit_unknown: f64,
}

/// What happens to one request.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum KvFate {
    /// Runs and is answered as usual.
    Run,
    /// Answered `Unavailable` without running.
    Unavailable,
    /// A commit answered `Conflict` without running.
    Conflict,
    /// A commit that runs and is answered `CommitUnknown`.
    UnknownApplied,
    /// A commit answered `CommitUnknown` without running.
    UnknownDropped,
}

impl KvFaults {
    /// The control endpoint's query string (`unavailable=0&conflict=0.1&commit_unknown=0`).
    pub fn to_query(&self) -> String {
        format!(
            "unavailable={}&conflict={}&commit_unknown={}",
            u8::from(self.unavailable),
            self.conflict,
            self.commit_unknown
        )
    }

    /// Parses [`to_query`](Self::to_query)'s text; every key must be known and every value valid.
    pub fn parse(query: &str) -> Result<Self, String> {
        let mut f = Self::default();
        for pair in pairs(query) {
            let (k, v) = pair?;
            match k {
                "unavailable" => f.unavailable = flag(k, v)?,
                "conflict" => f.conflict = rate(k, v)?,
                "commit_unknown" => f.commit_unknown = rate(k, v)?,
                _ => return Err(format!("unknown key `{k}`")),
            }
        }
        Ok(f)
    }
}

/// The live faults of a KV service.
#[derive(Debug, Default)]
pub struct KvFaultLayer {
    on: AtomicBool,
    state: Mutex<KvFaults>,
}

impl KvFaultLayer {
    /// Replaces the faults.
    pub fn set(&self, f: KvFaults) {
        let on = f != KvFaults::default();
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = f;
        self.on.store(on, Ordering::SeqCst);
    }

    /// The faults now.
    pub fn get(&self) -> KvFaults {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The fate of `op`, drawn from three 64-bit random words.
    pub fn fate(&self, op: &KvOp, bits: [u64; 3]) -> KvFate {
        if !self.on.load(Ordering::Relaxed) {
            return KvFate::Run;
        }
        let f = self.get();
        let unit = |b: u64| (b >> 11) as f64 / (1u64 << 53) as f64;
        if f.unavailable {
            return KvFate::Unavailable;
        }
        if !matches!(op, KvOp::Commit(_)) {
            return KvFate::Run;
        }
        if f.conflict > 0.0 && unit(bits[0]) < f.conflict {
            return KvFate::Conflict;
        }
        if f.commit_unknown > 0.0 && unit(bits[1]) < f.commit_unknown {
            return if bits[2] & 1 == 0 {
                KvFate::UnknownApplied
            } else {
                KvFate::UnknownDropped
            };
        }
        KvFate::Run
    }
}

/// The KV faults at `/kv`.
impl crate::fault_query::FaultResource for KvFaultLayer {
    fn describe(&self) -> String {
        format!("{}\n", self.get().to_query())
    }
    fn put(&self, query: &str) -> Result<String, String> {
        let f = KvFaults::parse(query)?;
        tracing::warn!("KV faults set: {}", f.to_query());
        self.set(f);
        Ok(self.describe())
    }
}

#[cfg(test)]
mod tests {
    use t3fs_core::kv::{CommitReq, KeyRange};

    use super::*;

    #[test]
    fn fates_follow_the_faults_and_reads_only_fail_when_unavailable() {
        let l = KvFaultLayer::default();
        let commit = KvOp::Commit(CommitReq::default());
        let read = KvOp::Read {
            at: None,
            keys: Vec::new(),
            ranges: vec![(KeyRange::prefix(b""), 1)],
        };
        let low = [0u64; 3]; // Every draw is the smallest: any positive rate fires.
        assert_eq!(l.fate(&commit, low), KvFate::Run);
        l.set(KvFaults {
            conflict: 0.5,
            ..KvFaults::default()
        });
        assert_eq!(l.fate(&commit, low), KvFate::Conflict);
        assert_eq!(l.fate(&read, low), KvFate::Run);
        l.set(KvFaults {
            commit_unknown: 0.5,
            ..KvFaults::default()
        });
        assert_eq!(l.fate(&commit, low), KvFate::UnknownApplied);
        assert_eq!(l.fate(&commit, [0, 0, 1]), KvFate::UnknownDropped);
        l.set(KvFaults {
            unavailable: true,
            ..KvFaults::default()
        });
        assert_eq!(l.fate(&read, low), KvFate::Unavailable);
        let f = KvFaults {
            unavailable: true,
            conflict: 0.25,
            commit_unknown: 0.125,
        };
        assert_eq!(KvFaults::parse(&f.to_query()), Ok(f));
        assert!(KvFaults::parse("conflict=2").is_err());
        assert!(KvFaults::parse("unavailable=yes").is_err());
        assert!(KvFaults::parse("x=1").is_err());
    }
}
