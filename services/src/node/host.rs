//! The tokio driver's [`Host`]: sends go to the TCP transport, timers become tokio sleeps
//! that post `(timer, generation)` back to the node's loop, chunk I/O goes to the target's store
//! thread, KV steps go to the `kv` service (or an in-process engine on a blocking thread), and
//! returns go to the waiting caller.
//!
//! Invariant: every submitted I/O gets exactly one completion posted to the loop: the store's or
//! KV service's answer, or for KV a timeout answer (`Unavailable` for reads, `CommitUnknown` for
//! commits); whichever arrives second finds the id gone from the in-flight table and is dropped.
//! Not here: the loop itself (mod.rs) or what an answer means.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::jitter::Jitter;

use tokio::sync::mpsc::UnboundedSender;

use t3fs_core::chunk::ChunkOp;
use t3fs_core::ids::{IoId, NodeId, RequestId, TargetId};
use t3fs_core::kv::{KvEngine, KvError, KvOp};
use t3fs_core::machine::{HaltReason, IoResult};
use t3fs_core::msg::kv::KvReq;
use t3fs_core::msg::Msg;
use t3fs_core::node::{AnyRet, AnyTimer, Host};

use crate::chunk_store::StoreHandle;
use crate::transport::Transport;

use super::stats::IoStats;

/// How long a KV step may stay unanswered before the driver answers it with a failure.
pub const KV_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a node's KV steps go.
#[derive(Clone)]
pub enum KvBackend {
    /// The node uses no KV (storage, clients).
    None,
    /// The `kv` service node.
    Remote(NodeId),
    /// An engine in this process, run on tokio's blocking pool (etcd, tests).
    Engine(Arc<Mutex<Box<dyn KvEngine + Send>>>),
}

/// The channels and handles a step's actions go to.
pub struct RealHost<'a> {
    pub me: NodeId,
    pub transport: &'a Transport,
    pub loopback: &'a UnboundedSender<Msg>,
    pub timers: &'a UnboundedSender<(AnyTimer, u64)>,
    pub io: &'a UnboundedSender<(IoId, IoResult)>,
    pub stores: &'a BTreeMap<TargetId, StoreHandle>,
    pub kv: &'a KvBackend,
    pub jitter: &'a mut Jitter,
    /// KV engine steps run on this task rather than the blocking pool (see `NodeEnv`).
    pub inline_io: bool,
    pub stats: &'a mut IoStats,
    pub returns: Vec<(RequestId, AnyRet)>,
    pub halted: Option<HaltReason>,
}

impl Host for RealHost<'_> {
    fn send(&mut self, to: NodeId, msg: Msg) {
        if to == self.me {
            let _ = self.loopback.send(msg);
            return;
        }
        // Best effort, as the protocol assumes: a full queue or an unknown peer drops the
        // message and the transport counts it.
        let _ = self.transport.try_send(to, msg);
    }

    fn set_timer(&mut self, timer: AnyTimer, gen: u64, after: Range<Duration>) -> u64 {
        let d = self.jitter.pick(after);
        let tx = self.timers.clone();
        tokio::spawn(async move {
            tokio::time::sleep(d).await;
            let _ = tx.send((timer, gen));
        });
        0 // A stale fire is refused by the generation; nothing to cancel.
    }

    fn submit_chunk(&mut self, id: IoId, target: TargetId, op: ChunkOp) {
        self.stats.submitted(id, op.kind());
        match self.stores.get(&target) {
            Some(s) => s.submit(id, op),
            None => {
                // A machine addressed a target this node does not host: answer as a failed
                // medium rather than leave the I/O hanging.
                let r = Err(t3fs_core::chunk::ChunkError::Failed);
                let _ = self.io.send((id, IoResult::Chunk(r)));
            }
        }
    }

    fn submit_kv(&mut self, id: IoId, op: KvOp) {
        let commit = matches!(op, KvOp::Commit(_));
        self.stats
            .submitted(id, if commit { "kv_commit" } else { "kv_read" });
        let io = self.io.clone();
        match self.kv {
            KvBackend::None => {
                let _ = io.send((id, IoResult::Kv(Err(KvError::Unavailable))));
            }
            KvBackend::Remote(node) => {
                let msg = Msg::KvReq(KvReq { id: id.0, op });
                let _ = self.transport.try_send(*node, msg);
                let failure = if commit {
                    KvError::CommitUnknown
                } else {
                    KvError::Unavailable
                };
                tokio::spawn(async move {
                    tokio::time::sleep(KV_TIMEOUT).await;
                    let _ = io.send((id, IoResult::Kv(Err(failure))));
                });
            }
            KvBackend::Engine(e) => {
                let e = e.clone();
                let run = move || {
                    let r = match e.lock() {
                        Ok(mut g) => t3fs_core::kv::execute(g.as_mut(), op),
                        Err(_) => Err(KvError::Unavailable),
                    };
                    let _ = io.send((id, IoResult::Kv(r)));
                };
                if self.inline_io {
                    run();
                } else {
                    tokio::task::spawn_blocking(run);
                }
            }
        }
    }

    fn returned(&mut self, req: RequestId, ret: AnyRet) {
        self.returns.push((req, ret));
    }

    fn halted(&mut self, reason: HaltReason) {
        self.halted = Some(reason);
    }

    /// Debug builds (the tests) check after every step; release builds skip the check, whose
    /// whole-state scans would cost a service O(chunks) per message.
    fn check_invariants(&self) -> bool {
        cfg!(debug_assertions)
    }
}
