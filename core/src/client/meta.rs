//! The client's namespace calls: a `ClientCall::Meta` (or `MetaAs`, for another user) becomes
//! one `MetaReq` to a meta server, re-sent on timeout or on a retryable answer, to the next
//! meta server each time.
//!
//! Meta servers are stateless and interchangeable (§4), so any of them may take a retry. The
//! request id stays the same on every retry: the servers' idempotency record makes a mutating
//! request take effect at most once, whichever server commits it. Retryable answers are the
//! KV's own failures (`Kv(_)`) but `Kv(NoSpace)`, which cannot succeed until space is freed;
//! POSIX-style errors are final. After `meta_attempts_max` sends
//! the call returns `Kv(CommitUnknown)`: its effect is unknown, never assumed absent.
//! Not here: which paths to ask about (the caller's), caching of inodes or entries.

use crate::ids::RequestId;
use crate::kv::KvError;
use crate::machine::{ActionOf, Outbox};
use crate::msg::meta::{MetaReply, MetaReq};
use crate::msg::Msg;
use crate::wire::MetaError;
use crate::wire::User;
use crate::wire::{MetaOp, MetaResult};

use super::{Client, ClientRet, ClientTimer};

/// A namespace call in progress.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub(super) struct MetaCall {
    op: MetaOp,
    /// The user the request acts for.
    user: User,
    sends: u32,
}

impl Client {
    pub(super) fn on_meta_call(
        &mut self,
        req: RequestId,
        op: MetaOp,
        user: User,
        out: &mut Outbox<Self>,
    ) {
        if self.cfg.meta.is_empty() {
            let ret = ClientRet::Meta(
                Err(MetaError::Invalid("invalid argument")),
                Default::default(),
            );
            return out.push(ActionOf::Return { req, ret });
        }
        self.meta_calls.insert(req, MetaCall { op, user, sends: 0 });
        self.send_meta(req, out);
    }

    /// Sends (or re-sends) call `req` to the next meta server and arms its timeout.
    pub(super) fn send_meta(&mut self, req: RequestId, out: &mut Outbox<Self>) {
        let Some(call) = self.meta_calls.get_mut(&req) else {
            return;
        };
        if call.sends >= self.cfg.meta_attempts_max {
            self.meta_calls.remove(&req);
            out.push(ActionOf::CancelTimer(ClientTimer::Meta(req)));
            let ret = ClientRet::Meta(
                Err(MetaError::Kv(KvError::CommitUnknown)),
                Default::default(),
            );
            return out.push(ActionOf::Return { req, ret });
        }
        if call.sends > 0 {
            self.counters.0.meta_retries += 1;
        }
        // Requests about one inode start at its owner (§4.6: rendezvous hashing over the meta
        // servers, so one server sees all of an inode's length updates); others spread by
        // request id. Each retry moves to the next server.
        let n = self.cfg.meta.len() as u64;
        let first = match call.op.inode() {
            Some(inode) => owner_index(inode, &self.cfg.meta) as u64,
            None => req.0,
        };
        let to = self.cfg.meta[((first + u64::from(call.sends)) % n) as usize];
        call.sends += 1;
        let msg = Msg::MetaReq(MetaReq {
            client: self.cfg.client,
            request: req,
            user: call.user,
            op: call.op.clone(),
        });
        out.send(to, msg);
        out.set_timer(ClientTimer::Meta(req), self.cfg.meta_timeout.clone());
    }

    pub(super) fn on_meta_reply(&mut self, rep: MetaReply, out: &mut Outbox<Self>) {
        if !self.meta_calls.contains_key(&rep.request) {
            return; // A duplicate, or the answer to an attempt we gave up on.
        }
        let req = rep.request;
        if retryable(&rep.result) {
            // Back off, then try the next server (the timer re-sends).
            return out.set_timer(ClientTimer::Meta(req), self.cfg.retry_wait.clone());
        }
        self.meta_calls.remove(&req);
        out.push(ActionOf::CancelTimer(ClientTimer::Meta(req)));
        out.push(ActionOf::Return {
            req,
            ret: ClientRet::Meta(rep.result, rep.dirs),
        });
    }
}

/// The owner of `inode` among `servers`: the highest rendezvous hash of (inode, server).
pub fn owner_index(inode: crate::ids::InodeId, servers: &[crate::ids::NodeId]) -> usize {
    let score = |s: crate::ids::NodeId| {
        let mut x = inode.0 ^ s.0.rotate_left(32) ^ 0x9e37_79b9_7f4a_7c15;
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    };
    (0..servers.len())
        .max_by_key(|&i| (score(servers[i]), i))
        .unwrap_or(0)
}

fn retryable(r: &MetaResult) -> bool {
    matches!(r, Err(MetaError::Kv(e)) if *e != KvError::NoSpace)
}
