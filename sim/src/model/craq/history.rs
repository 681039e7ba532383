//! The CRAQ model's history: the linearizability tester over a chunk register plus the facts
//! the other properties need (acknowledged writes and their versions, retries, failovers),
//! recorded from the clients' `History` markers and retried writes at the step they happen.

use stateright::actor::{Envelope, Id};
use stateright::semantics::register::{Register, RegisterOp, RegisterRet};
use stateright::semantics::{ConsistencyTester, LinearizabilityTester};
use std::collections::BTreeMap;
use t3fs_core::client::ClientRet;
use t3fs_core::ids::{ChainVersion, ChunkVersion};
use t3fs_core::msg::Msg;

use super::{CraqConfig, CraqMsg, ScriptOp};

/// Model history: the linearizability tester plus facts for the other properties.
#[derive(Clone, Debug, Hash, PartialEq)]
pub struct CraqHistory {
    /// Client operations on the chunk register (value 0 = never written).
    pub lin: LinearizabilityTester<Id, Register<u8>>,
    /// Acknowledged writes: value → committed version.
    pub acked: BTreeMap<u8, ChunkVersion>,
    /// Clients whose running write has been re-sent.
    pub retrying: Vec<Id>,
    /// A retried write was acknowledged.
    pub retried_write_acked: bool,
    /// A write was acknowledged with a commit chain version above 1 (after a failover).
    pub acked_after_failover: bool,
}

impl Default for CraqHistory {
    fn default() -> Self {
        Self {
            lin: LinearizabilityTester::new(Register(0)),
            acked: BTreeMap::new(),
            retrying: Vec::new(),
            retried_write_acked: false,
            acked_after_failover: false,
        }
    }
}

pub(super) fn record_out(
    cfg: &CraqConfig,
    history: &CraqHistory,
    env: Envelope<&CraqMsg>,
) -> Option<CraqHistory> {
    match env.msg {
        CraqMsg::History { returned, invoked } => {
            let mut h = history.clone();
            let script = cfg.script(cfg.client_index(env.src));
            if let Some((index, ret)) = returned {
                match ret {
                    ClientRet::Updated { results } => {
                        let _ = h.lin.on_return(env.src, RegisterRet::WriteOk);
                        if let (Some((_, r)), Some(ScriptOp::Write(v))) =
                            (results.first(), script.get(*index))
                        {
                            if r.commit_chain_version > ChainVersion(1) {
                                h.acked_after_failover = true;
                            }
                            h.acked.insert(*v, r.commit_version);
                        }
                        if h.retrying.contains(&env.src) {
                            h.retried_write_acked = true;
                        }
                    }
                    ClientRet::Read { data, .. } => {
                        let _ = h.lin.on_return(
                            env.src,
                            RegisterRet::ReadOk(data.first().copied().unwrap_or(0)),
                        );
                    }
                    _ => {}
                }
            }
            h.retrying.retain(|&c| c != env.src);
            if let Some(op) = invoked.and_then(|i| script.get(i)) {
                let op = match op {
                    ScriptOp::Write(v) => RegisterOp::Write(*v),
                    ScriptOp::Read => RegisterOp::Read,
                };
                let _ = h.lin.on_invoke(env.src, op);
            }
            Some(h)
        }
        CraqMsg::Wire(Msg::Write(req)) if req.retry > 0 && !history.retrying.contains(&env.src) => {
            let mut h = history.clone();
            h.retrying.push(env.src);
            Some(h)
        }
        _ => None,
    }
}
