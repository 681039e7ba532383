//! The CRAQ model's history: an online consistency summary of the chunk register (see
//! `consistency.rs`) plus the few facts the other properties need, recorded from the clients'
//! `History` markers and retried writes at the step they happen.
//!
//! Invariant: the history holds nothing a property does not read, so runs that differ only in
//! forgotten detail are one model state: of the acknowledged writes only the highest commit
//! version is kept (the durability property compares it with the replicas), and the
//! reachability facts are *events* of the step that entered the state (cleared by the next
//! step, see `super::begin_step`), not sticky flags that would split every later state in two.

use stateright::actor::Envelope;
use t3fs_core::client::ClientRet;
use t3fs_core::ids::{ChainVersion, ChunkVersion};
use t3fs_core::msg::Msg;
use t3fs_core::storage::ReadMode;

use super::consistency::{Lin, Op, Register, Regular, Ret};
use super::{CraqConfig, CraqMsg, ScriptOp};

/// Model history.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct CraqHistory {
    /// The consistency summary: linearizability under reject-dirty reads, regularity under
    /// committed reads (3FS §3.3: a read may see a commit at one replica, then miss it at
    /// another that has not committed yet).
    pub register: Register,
    /// The first operation no allowed order explains (the property then fails).
    pub violation: Option<String>,
    /// The highest commit version of an acknowledged write.
    pub acked: Option<ChunkVersion>,
    /// Bit `k`: client `k`'s running write has been re-sent.
    pub retrying: u8,
    /// Event of the last step: a retried write was acknowledged.
    pub retried_write_acked: bool,
    /// Event of the last step: a write was acknowledged with a commit chain version above 1
    /// (after a failover).
    pub acked_after_failover: bool,
}

impl CraqHistory {
    /// The empty history of a model with `cfg`'s read mode.
    pub fn new(cfg: &CraqConfig) -> Self {
        Self {
            register: match cfg.read_mode {
                ReadMode::RejectDirty => Register::Lin(Lin::default()),
                ReadMode::Committed if cfg.strict_reads => Register::Lin(Lin::default()),
                ReadMode::Committed => Register::Regular(Regular::default()),
            },
            violation: None,
            acked: None,
            retrying: 0,
            retried_write_acked: false,
            acked_after_failover: false,
        }
    }

    /// Clears the events of the previous step.
    pub(super) fn begin_step(&mut self) {
        self.retried_write_acked = false;
        self.acked_after_failover = false;
    }
}

pub(super) fn record_out(
    cfg: &CraqConfig,
    history: &CraqHistory,
    env: Envelope<&CraqMsg>,
) -> Option<CraqHistory> {
    // Only clients send markers and `Write` requests (replicas forward with `Update`).
    let k = cfg.client_index(env.src)?;
    match env.msg {
        CraqMsg::History { returned, invoked } => {
            let mut h = history.clone();
            let script = cfg.script(k);
            if let Some((index, ret)) = returned {
                let ret = match (ret, script.get(*index)) {
                    (ClientRet::Updated { results }, Some(ScriptOp::Write(_))) => {
                        if let Some((_, r)) = results.first() {
                            if r.commit_chain_version > ChainVersion(1) {
                                h.acked_after_failover = true;
                            }
                            h.acked = h.acked.max(Some(r.commit_version));
                        }
                        if h.retrying & 1 << k != 0 {
                            h.retried_write_acked = true;
                        }
                        Some(Ret::Written)
                    }
                    (ClientRet::Read { data, .. }, Some(ScriptOp::Read)) => {
                        Some(Ret::Read(data.first().copied().unwrap_or(0)))
                    }
                    _ => None,
                };
                if let Some(ret) = ret {
                    if let Err(why) = h.register.ret(k, ret) {
                        h.violation
                            .get_or_insert_with(|| format!("n{}: {why}", usize::from(env.src)));
                    }
                }
            }
            h.retrying &= !(1 << k);
            if let Some(op) = invoked.and_then(|i| script.get(i)) {
                h.register.invoke(
                    k,
                    match op {
                        ScriptOp::Write(v) => Op::Write(*v),
                        ScriptOp::Read => Op::Read,
                    },
                );
            }
            Some(h)
        }
        CraqMsg::Wire(Msg::Write(req)) if req.retry > 0 && history.retrying & 1 << k == 0 => {
            let mut h = history.clone();
            h.retrying |= 1 << k;
            Some(h)
        }
        _ => None,
    }
}
