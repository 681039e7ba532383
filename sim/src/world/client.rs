//! The workload driver of a client node: turns the scenario's operation stream into client
//! calls (one at a time, with think time) and records every invocation and response in the
//! run's history for the checkers.
//!
//! Chunk `k` of the workload is chunk `k` of inode 1, whose layout stripes chunks over every
//! chain; each write replaces the register value held at offset 0. A call that fails (or whose
//! client crashes) stays open in the history: its effect is unknown. Not here: the checks
//! (check/).

use t3fs_core::client::{ClientCall, ClientRet};
use t3fs_core::ids::{ChainId, RequestId};
use t3fs_core::layout::FileLayout;
use t3fs_scenario::workload::{decode_payload, payload, Generator, Op};

use crate::history::{History, OpKind};

/// The inode every workload chunk belongs to.
pub const WORKLOAD_INODE: u64 = 1;

/// Per-client workload state.
pub struct Driver {
    /// The operation stream.
    pub gen: Generator,
    /// The running call: request id, operation and its history index.
    pub running: Option<(RequestId, Op, usize)>,
    /// Next request id.
    pub next_req: u64,
    /// Bytes per write (the layout's chunk size).
    pub size: u32,
    /// Chains of the workload file's layout.
    pub chains: Vec<ChainId>,
}

impl Driver {
    fn layout(&self) -> FileLayout {
        FileLayout {
            chunk_size: self.size,
            chains: self.chains.clone(),
        }
    }

    /// The call for `op`, recording its invocation.
    pub fn invoke(
        &mut self,
        client: u32,
        op: Op,
        history: &mut History,
    ) -> (RequestId, ClientCall) {
        self.next_req += 1;
        let req = RequestId(self.next_req);
        let (chunk, kind, call) = match op {
            Op::Write { chunk, value } => (
                chunk,
                OpKind::Write(value),
                ClientCall::Write {
                    inode: t3fs_core::ids::InodeId(WORKLOAD_INODE),
                    layout: self.layout(),
                    offset: u64::from(chunk) * u64::from(self.size),
                    data: payload(value, self.size),
                },
            ),
            Op::Read { chunk } => (
                chunk,
                OpKind::Read(None),
                ClientCall::Read {
                    inode: t3fs_core::ids::InodeId(WORKLOAD_INODE),
                    layout: self.layout(),
                    offset: u64::from(chunk) * u64::from(self.size),
                    len: u64::from(self.size),
                },
            ),
        };
        let index = history.invoke(client, chunk, kind);
        self.running = Some((req, op, index));
        (req, call)
    }

    /// Records the answer to `req`; returns false if it answered nothing running.
    pub fn complete(&mut self, req: RequestId, ret: &ClientRet, history: &mut History) -> bool {
        let Some((running, op, index)) = self.running else {
            return false;
        };
        if running != req {
            return false;
        }
        self.running = None;
        match (op, ret) {
            (Op::Write { .. }, ClientRet::Updated { .. }) => history.ret(index, None),
            (Op::Read { .. }, ClientRet::Read { data, served, .. }) => {
                // A workload read covers one chunk, so one replica served it.
                history.served(index, served.first().copied());
                history.ret(index, Some(decode_payload(data)))
            }
            // Failed or rejected: the outcome is unknown; the operation stays open.
            _ => history.fail(index),
        }
        true
    }
}
