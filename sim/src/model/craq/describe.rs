//! Readable counterexamples for the CRAQ model: one line per step in 3FS nouns, and a summary
//! of every node's final state.

use stateright::actor::Id;
use t3fs_core::machine::IoOp;
use t3fs_core::msg::Msg;

use super::{CraqModel, CraqModelState, CraqMsg, CraqState, CraqTimer, CHUNK};
use crate::model::describe::{describe_msg, describe_op};
use crate::model::system::SystemAction;

/// One line per model step, in 3FS nouns, for counterexamples.
pub fn describe_action(model: &CraqModel, action: &SystemAction) -> String {
    let n = |id: Id| format!("n{}", usize::from(id));
    match model.resolve(action) {
        Ok(e) => {
            let (src, dst) = (e.src, e.dst);
            match &e.msg {
                CraqMsg::Wire(m) => format!("{} -> {}: {}", n(src), n(dst), describe_msg(m)),
                CraqMsg::Io {
                    op: IoOp::Chunk { target, op },
                    ..
                } => format!("{}: disk {target} completes {}", n(dst), describe_op(op)),
                CraqMsg::Io {
                    op: IoOp::Kv(t3fs_core::kv::KvOp::Commit(c)),
                    ..
                } => format!(
                    "{}: KV commit in flight lands ({} mutations)",
                    n(dst),
                    c.mutations.len()
                ),
                CraqMsg::Io {
                    op: IoOp::Kv(op), ..
                } => format!("{}: kv completes {op:?}", n(dst)),
                CraqMsg::Lapsed { target, clock } => format!(
                    "{} learns {target}'s leases lapsed (its clock reached {clock}): its heartbeat deadline may now expire",
                    n(dst)
                ),
                CraqMsg::Failed(t) if usize::from(dst) == 0 => format!(
                    "{} learns {t} crashed (oracle: re-orders at once; mgmtd: its heartbeat deadline may now expire)",
                    n(dst)
                ),
                CraqMsg::Failed(_) => String::new(),
                CraqMsg::Restarted(t) => {
                    format!("mgmtd actor notes {t} restarted (its deadline lapses)")
                }
                CraqMsg::History { .. } => format!("{}: (history marker, no effect)", n(dst)),
            }
        }
        Err((id, t)) => match t {
            CraqTimer::FailStop => format!("{}: FAIL-STOP (crash)", n(*id)),
            CraqTimer::Restart => {
                format!(
                    "{}: RESTART from disk (reports OFFLINE until marked down)",
                    n(*id)
                )
            }
            CraqTimer::Mgmtd(t) => format!("{}: mgmtd timer {t:?} fires", n(*id)),
            CraqTimer::Begin => format!("{}: the reader begins its read", n(*id)),
            CraqTimer::LeaseLapse => format!(
                "{}: LEASE LAPSE (time passes: its clock moves past every lease; it heartbeats)",
                n(*id)
            ),
            CraqTimer::Storage(t) => format!("{}: timer {t:?} fires", n(*id)),
            CraqTimer::Client(t) => format!("{}: client timer {t:?} fires", n(*id)),
        },
    }
}

/// A summary of the replicas and clients in a state, printed after a counterexample.
pub fn describe_state(model: &CraqModel, state: &CraqModelState) -> Vec<String> {
    let mut lines = Vec::new();
    for (i, s) in model.actor_states(state).enumerate() {
        match s {
            CraqState::Oracle(r) => lines.push(format!(
                "n{i} oracle: {}",
                describe_msg(&Msg::Routing(r.clone()))
            )),
            CraqState::Mgmtd(m) => lines.push(format!(
                "n{i} mgmtd: {}{}",
                m.machine
                    .routing()
                    .map(|r| describe_msg(&Msg::Routing(r.clone())))
                    .unwrap_or_else(|| "not primary".into()),
                m.audit
                    .as_ref()
                    .map(|a| format!(" CHAIN INVARIANT BROKEN: {a}"))
                    .unwrap_or_default()
            )),
            CraqState::Storage(st) => {
                let chunk = st.store.chunks().get(&CHUNK).map(|c| {
                    format!(
                        "committed {} data={:?} chain {}{}",
                        c.committed,
                        c.data,
                        c.chain_version,
                        c.pending
                            .as_ref()
                            .map(|(v, d)| format!(", pending {v} data={d:?}"))
                            .unwrap_or_default()
                    )
                });
                let local: Vec<String> = st
                    .node
                    .targets()
                    .map(|t| format!("{}:{:?}", t.id, t.local_state))
                    .collect();
                lines.push(format!(
                    "n{i} storage{}{} [{}{}]: {} committed values {:?}{}{}",
                    if st.halted { " (HALTED)" } else { "" },
                    if model.cfg.storage_lease {
                        format!(" clock {} routing {}", st.clock, st.node.routing().version)
                    } else {
                        String::new()
                    },
                    local.join(" "),
                    if st.node.booting() { " booting" } else { "" },
                    chunk.unwrap_or_else(|| "no chunk".into()),
                    (0..16)
                        .filter(|v| st.committed & 1 << v != 0)
                        .collect::<Vec<u8>>(),
                    st.applied_twice
                        .map(|v| format!(" VALUE {v} COMMITTED TWICE"))
                        .unwrap_or_default(),
                    st.regression
                        .as_ref()
                        .map(|r| format!(" REGRESSION: {r}"))
                        .unwrap_or_default()
                ));
            }
            CraqState::Client(c) => lines.push(format!(
                "n{i} client: running op {:?}{}",
                c.running,
                if c.stopped {
                    ", stopped after a failed op"
                } else {
                    ""
                }
            )),
        }
    }
    let h = model.history(state);
    lines.push(format!(
        "history: {}; highest acknowledged version {}",
        h.violation.as_deref().unwrap_or("consistent so far"),
        h.acked.map_or("none".into(), |v| v.to_string())
    ));
    lines
}
