//! Online consistency checks of the model's one-register history, kept as small summaries in
//! the model state instead of the whole history.
//!
//! Why: a recorded history remembers the real-time order of every operation, so two runs that
//! reach the same cluster state through differently timed operations are different model
//! states, although no future read can tell them apart. These summaries keep only what decides
//! the verdict of every extension of the history, so such states merge.
//!
//! - [`Lin`] (linearizability): the set of *configurations* of every linearization of the
//!   history so far: the register's value and, for each client's running operation, whether it
//!   has taken effect and what it returned. Invoking an operation closes the set under letting
//!   any running operation take effect; a return keeps the configurations in which the returning
//!   operation took effect with exactly that result. The history is linearizable iff the set is
//!   not empty (the just-in-time linearization search of Lowe's testing tools, run online).
//! - [`Regular`] (regularity, as `crate::check::regular` defines it): a read may return a write
//!   that overlaps it, or a completed write that no later-invoked completed write superseded
//!   before the read started, or the initial value while no write has completed. The summary
//!   holds the completed writes not yet superseded, and for each running write the writes that
//!   had completed when it started (they are superseded once it completes).
//!
//! Values are 0 (never written) to 15; each client has at most one operation running; an
//! operation whose client gave up stays running forever (it may take effect at any later
//! time). The unit tests compare both summaries with the simulator's offline checkers on every
//! small history. Not here: several registers, values above 15.

use std::fmt::Write as _;

/// Most clients a summary tracks.
pub const MAX_CLIENTS: usize = 4;
/// Bitmask of values: bit `v` for value `v`.
pub type Values = u16;

/// A register operation.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum Op {
    /// Write this value.
    Write(u8),
    /// Read.
    Read,
}

/// What an operation returned.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum Ret {
    /// The write was acknowledged.
    Written,
    /// The read returned this value.
    Read(u8),
}

/// Either summary, chosen by the consistency the model promises.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub enum Register {
    /// Linearizability.
    Lin(Lin),
    /// Regularity.
    Regular(Regular),
}

impl Register {
    /// Client `k` starts `op`.
    pub fn invoke(&mut self, k: usize, op: Op) {
        match self {
            Self::Lin(l) => l.invoke(k, op),
            Self::Regular(r) => r.invoke(k, op),
        }
    }

    /// Client `k`'s running operation returned `ret`; `Err` explains why no allowed order of
    /// the history returns that.
    pub fn ret(&mut self, k: usize, ret: Ret) -> Result<(), String> {
        match self {
            Self::Lin(l) => l.ret(k, ret),
            Self::Regular(r) => r.ret(k, ret),
        }
    }

    /// The property's name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Lin(_) => "linearizable",
            Self::Regular(_) => "regular",
        }
    }
}

/// Marks a running operation that has not taken effect in a configuration.
const NOT_YET: u8 = 0xFF;
/// Marks a running write that has taken effect.
const WROTE: u8 = 0xFE;

/// One linearization state: the register's value and the effect of each running operation
/// (`NOT_YET`, `WROTE`, or the value a read returned).
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
struct Config {
    value: u8,
    effect: [u8; MAX_CLIENTS],
}

/// Linearizability summary.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct Lin {
    running: [Option<Op>; MAX_CLIENTS],
    /// Sorted, without repeats, closed under letting a running operation take effect.
    configs: Vec<Config>,
}

impl Default for Lin {
    fn default() -> Self {
        Self {
            running: [None; MAX_CLIENTS],
            configs: vec![Config {
                value: 0,
                effect: [NOT_YET; MAX_CLIENTS],
            }],
        }
    }
}

impl Lin {
    fn invoke(&mut self, k: usize, op: Op) {
        self.running[k] = Some(op);
        let mut i = 0;
        while i < self.configs.len() {
            let c = self.configs[i];
            for (j, op) in self.running.iter().enumerate() {
                let Some(op) = op else { continue };
                if c.effect[j] != NOT_YET {
                    continue;
                }
                let mut next = c;
                match *op {
                    Op::Write(v) => {
                        next.value = v;
                        next.effect[j] = WROTE;
                    }
                    Op::Read => next.effect[j] = c.value,
                }
                if !self.configs.contains(&next) {
                    self.configs.push(next);
                }
            }
            i += 1;
        }
        self.configs.sort_unstable();
    }

    fn ret(&mut self, k: usize, ret: Ret) -> Result<(), String> {
        let want = match ret {
            Ret::Written => WROTE,
            Ret::Read(v) => v,
        };
        let possible: Values = self
            .configs
            .iter()
            .filter(|c| c.effect[k] != NOT_YET && c.effect[k] != WROTE)
            .fold(0, |m, c| m | 1 << c.effect[k]);
        self.configs.retain(|c| c.effect[k] == want);
        for c in &mut self.configs {
            c.effect[k] = NOT_YET;
        }
        self.configs.sort_unstable();
        self.configs.dedup();
        self.running[k] = None;
        if !self.configs.is_empty() {
            return Ok(());
        }
        Err(match ret {
            Ret::Written => "a write was acknowledged that no order of the history allows".into(),
            Ret::Read(v) => format!(
                "a read returned {v}; linearizable orders allow {}",
                show(possible)
            ),
        })
    }
}

/// A running operation in the regularity summary.
#[derive(Clone, Copy, Debug, Eq, Hash, PartialEq)]
enum Running {
    Idle,
    /// A write and the current writes when it started.
    Write(u8, Values),
    /// A read and the values it may return so far.
    Read(Values),
}

/// Regularity summary.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct Regular {
    /// Completed writes not superseded (bit 0: the initial value, until a write completes).
    current: Values,
    running: [Running; MAX_CLIENTS],
}

impl Default for Regular {
    fn default() -> Self {
        Self {
            current: 1,
            running: [Running::Idle; MAX_CLIENTS],
        }
    }
}

impl Regular {
    fn invoke(&mut self, k: usize, op: Op) {
        match op {
            Op::Write(v) => {
                // Every running read may return it: they overlap.
                for r in &mut self.running {
                    if let Running::Read(allowed) = r {
                        *allowed |= 1 << v;
                    }
                }
                self.running[k] = Running::Write(v, self.current);
            }
            Op::Read => {
                let overlapping = self.running.iter().fold(0, |m, r| match r {
                    Running::Write(v, _) => m | 1 << v,
                    _ => m,
                });
                self.running[k] = Running::Read(self.current | overlapping);
            }
        }
    }

    fn ret(&mut self, k: usize, ret: Ret) -> Result<(), String> {
        let running = std::mem::replace(&mut self.running[k], Running::Idle);
        match (running, ret) {
            (Running::Write(v, before), Ret::Written) => {
                // Writes completed before it started are superseded now.
                self.current = (self.current & !before) | 1 << v;
                Ok(())
            }
            (Running::Read(allowed), Ret::Read(v)) if allowed & 1 << v != 0 => Ok(()),
            (Running::Read(allowed), Ret::Read(v)) => Err(format!(
                "a read returned {v}; a regular register allows {}",
                show(allowed)
            )),
            (running, ret) => panic!("{ret:?} answers {running:?}"),
        }
    }
}

fn show(values: Values) -> String {
    let mut s = String::from("{");
    for v in (0..16).filter(|v| values & 1 << v != 0) {
        let _ = write!(s, "{}{v}", if s.len() > 1 { ", " } else { "" });
    }
    s.push('}');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::linearizability::{self, Interval, RegOp};
    use crate::check::regular;

    /// Every history of two clients, each running `script` (a write of its own value, then
    /// reads), with every interleaving of invocations and returns and every read result in
    /// 0..=2: the summaries agree with the offline checkers on every prefix.
    #[test]
    fn summaries_agree_with_offline_checkers() {
        let mut checked = 0;
        explore(&mut Vec::new(), [0, 0], &mut checked);
        assert!(checked > 10_000, "{checked} histories");
    }

    // Client k runs Write(k + 1), Read, Read. Events: (client, returned?, read result).
    const SCRIPT: usize = 3;

    fn explore(events: &mut Vec<(usize, Option<u8>)>, done: [usize; 2], checked: &mut usize) {
        *checked += 1;
        let (offline_lin, offline_reg) = offline(events);
        let (mut lin, mut reg) = (
            Register::Lin(Lin::default()),
            Register::Regular(Regular::default()),
        );
        let (mut lin_ok, mut reg_ok) = (true, true);
        let mut step = [0usize; 2];
        for &(k, ret) in events.iter() {
            match ret {
                None => {
                    let op = if step[k] == 0 {
                        Op::Write(k as u8 + 1)
                    } else {
                        Op::Read
                    };
                    lin.invoke(k, op);
                    reg.invoke(k, op);
                }
                Some(r) => {
                    let ret = if step[k] == 0 {
                        Ret::Written
                    } else {
                        Ret::Read(r)
                    };
                    lin_ok &= lin.ret(k, ret).is_ok();
                    reg_ok &= reg.ret(k, ret).is_ok();
                    step[k] += 1;
                }
            }
        }
        assert_eq!(lin_ok, offline_lin, "linearizability of {events:?}");
        assert_eq!(reg_ok, offline_reg, "regularity of {events:?}");
        if !offline_reg {
            return; // Extensions of a violation stay violations; prune.
        }
        for k in 0..2 {
            let open = events.iter().filter(|e| e.0 == k).count() % 2 == 1;
            if !open && done[k] < SCRIPT {
                events.push((k, None));
                explore(events, done, checked);
                events.pop();
            } else if open {
                let mut next = done;
                next[k] += 1;
                let results: &[u8] = if done[k] == 0 { &[0] } else { &[0, 1, 2] };
                for &r in results {
                    events.push((k, Some(r)));
                    explore(events, next, checked);
                    events.pop();
                }
            }
        }
    }

    fn offline(events: &[(usize, Option<u8>)]) -> (bool, bool) {
        let mut ops: Vec<Interval> = Vec::new();
        let mut open: [Option<usize>; 2] = [None; 2];
        let mut step = [0usize; 2];
        for (t, &(k, ret)) in events.iter().enumerate() {
            let t = t as u64 + 1;
            match ret {
                None => {
                    let op = if step[k] == 0 {
                        RegOp::Write(k as u64 + 1)
                    } else {
                        RegOp::Read(None)
                    };
                    open[k] = Some(ops.len());
                    ops.push(Interval {
                        op,
                        call: t,
                        ret: u64::MAX,
                        origin: ops.len(),
                    });
                }
                Some(r) => {
                    let i = open[k].take().expect("open op");
                    ops[i].ret = t;
                    if let RegOp::Read(_) = ops[i].op {
                        ops[i].op = RegOp::Read((r > 0).then_some(u64::from(r)));
                    }
                    step[k] += 1;
                }
            }
        }
        // An open read has no result: drop it (it constrains nothing).
        ops.retain(|o| !(o.ret == u64::MAX && matches!(o.op, RegOp::Read(_))));
        let lin = linearizability::check(&ops, 1 << 20) == linearizability::Outcome::Ok;
        (lin, regular::check(&ops).is_ok())
    }
}
