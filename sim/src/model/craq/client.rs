//! The CRAQ model's clients: each runs its script (`CraqConfig::script`) through the client
//! machine, one operation at a time, and marks every operation boundary in the history.
//!
//! Invariant: a client whose operation failed stops its script, leaving that operation open in
//! the history (its outcome is unknown). Not here: the history recorder (`history.rs`).

use stateright::actor::{Id, Out};
use t3fs_core::client::{Client, ClientCall, ClientConfig, ClientRet};
use t3fs_core::ids::{ClientId, NodeId, RequestId};
use t3fs_core::machine::{Event, EventOf};

use super::actor::{ClientState, CraqNode};
use super::{layout, CraqConfig, CraqMsg, CraqTimer, ScriptOp, CHUNK};
use crate::model::adapter;

pub(super) fn client_cfg(cfg: &CraqConfig, node: NodeId) -> ClientConfig {
    let mut c = ClientConfig::new(node, ClientId(node.0));
    c.retries_max = cfg.client_retries;
    c.channels = 1;
    c.io_timeout = None;
    c.refresh_interval = None;
    if cfg.mgmtd {
        c.mgmtd = Some(NodeId(0));
    }
    c
}

/// The address of history markers: beyond every actor, so stateright never delivers them.
fn history_sink() -> Id {
    Id::from(usize::MAX)
}

/// Runs one client machine step and continues the script with whatever it returned.
pub(super) fn client_step(
    id: Id,
    c: &mut ClientState,
    script: &[ScriptOp],
    event: Event<Client>,
    o: &mut Out<CraqNode>,
) {
    let effects = adapter::step(id, &mut c.client, Some(event), o, CraqTimer::Client);
    finish_ops(id, c, script, effects.returns, o);
}

/// Starts script operation `index` (if any) and marks the boundary in the history.
pub(super) fn start_op(
    id: Id,
    c: &mut ClientState,
    script: &[ScriptOp],
    index: usize,
    returned: Option<(usize, ClientRet)>,
    o: &mut Out<CraqNode>,
) {
    let invoked = (index < script.len()).then_some(index);
    // Sent to no actor: the recorder sees it when it is sent, and it is never delivered, so it
    // adds no step (on FIFO links a delivery is always a step) and no interleaving.
    o.send(history_sink(), CraqMsg::History { returned, invoked });
    let Some(index) = invoked else { return };
    c.running = Some(index);
    let call = match script[index] {
        ScriptOp::Write(v) => ClientCall::Write {
            inode: CHUNK.inode,
            layout: layout(),
            offset: 0,
            data: vec![v],
        },
        ScriptOp::Read => ClientCall::Read {
            inode: CHUNK.inode,
            layout: layout(),
            offset: 0,
            len: 1,
        },
    };
    let event = EventOf::Call {
        req: RequestId(index as u64 + 1),
        call,
    };
    client_step(id, c, script, event, o);
}

fn finish_ops(
    id: Id,
    c: &mut ClientState,
    script: &[ScriptOp],
    returns: Vec<(RequestId, ClientRet)>,
    o: &mut Out<CraqNode>,
) {
    for (_req, ret) in returns {
        let index = c
            .running
            .take()
            .expect("a return answers the running operation");
        // Which replica served a read is for the simulator's Appendix B attribution; the
        // model's history has no use for it, and carried in the history message it would
        // split otherwise equal states.
        let ret = match ret {
            ClientRet::Read { data, versions, .. } => ClientRet::Read {
                data,
                versions,
                served: Vec::new(),
            },
            ret => ret,
        };
        if matches!(ret, ClientRet::Failed { .. } | ClientRet::Rejected(_)) {
            // The outcome is unknown: the operation stays open in the history and the script
            // stops (a thread may not start another operation while one is open).
            c.stopped = true;
            return;
        }
        start_op(id, c, script, index + 1, Some((index, ret)), o);
    }
}
