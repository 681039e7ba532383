//! Client ↔ meta server messages: one namespace request and its answer.
//!
//! A request carries the client's identity and request id: the pair keys the meta server's
//! idempotency record, so a retry (to the same or another meta server) is answered, never
//! applied twice. Not here: the operations themselves (`meta::request`).

use crate::ids::{ClientId, RequestId};
use crate::wire::codec::{decode_list_max, encode_list, DecodeError, Decoder, Encoder, Wire};
use crate::wire::{Inode, MetaOp, MetaResult};
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
    /// The directories its commit changed, as it left them.
    pub dirs: DirsChanged,
}
wire_struct!(MetaReply {
    request,
    result,
    dirs
});

/// The directories a request's commit changed (their new times and link counts), and the
/// commit's KV version, which orders them against other commits: a client may keep a
/// directory's attributes from the newest it saw (the FUSE mount answers the getattr the
/// kernel sends after every change in a directory from these). Empty for a request that
/// committed nothing, failed, or was answered from its idempotency record (the answer is the
/// record's, the directories as they are now are not). At most [`DIRS_CHANGED_MAX`] (a rename
/// changes two parents, the directory it moves and the one it replaces).
#[derive(Clone, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct DirsChanged {
    /// The commit's KV version (0 with no directories).
    pub version: u64,
    /// The directories.
    pub dirs: Vec<Inode>,
}

/// Directories one reply carries at most.
pub const DIRS_CHANGED_MAX: usize = 4;

impl Wire for DirsChanged {
    fn encode(&self, enc: &mut Encoder) {
        enc.u64(self.version);
        encode_list(enc, &self.dirs[..self.dirs.len().min(DIRS_CHANGED_MAX)]);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            version: dec.u64()?,
            dirs: decode_list_max(dec, DIRS_CHANGED_MAX as u32)?,
        })
    }
}
