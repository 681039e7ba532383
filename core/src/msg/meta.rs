//! Client ↔ meta server messages: one namespace request and its answer.
//!
//! A request carries the client's identity and request id: the pair keys the meta server's
//! idempotency record, so a retry (to the same or another meta server) is answered, never
//! applied twice. Not here: the operations themselves (`meta::request`).

use crate::ids::{ClientId, RequestId};
use crate::wire::{MetaOp, MetaResult};
use crate::wire_struct;

/// Client → any meta server.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct MetaReq {
    /// The asking client.
    pub client: ClientId,
    /// Its request id, the same on every retry.
    pub request: RequestId,
    /// The user it acts for (permission checks, owner of what it creates).
    pub user: crate::wire::User,
    /// The operation.
    pub op: MetaOp,
}
wire_struct!(MetaReq {
    client,
    request,
    user,
    op
});

/// Meta server → client.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct MetaReply {
    /// The request answered.
    pub request: RequestId,
    /// Its result.
    pub result: MetaResult,
}
wire_struct!(MetaReply { request, result });
