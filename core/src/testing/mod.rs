//! Reference implementations and conformance suites (feature `testing`).
//!
//! [`MemChunkStore`] is the in-memory reference chunk store: the simulator's disk model wraps it
//! and the model checker embeds it. [`chunk_store_suite`] is the contract every chunk store must
//! pass (file, io_uring and simulated stores run it in `tests/`). [`kv_suite`] is the same for KV
//! engines. Not for production use.

mod chunk_store_suite;
mod damage;
mod kv_suite;
mod mem_chunk_store;

pub use chunk_store_suite::chunk_store_suite;
pub use kv_suite::kv_suite;
pub use mem_chunk_store::{MemChunk, MemChunkStore};

use crate::ids::{ChainId, ChainVersion, ChunkId, ChunkVersion, NodeId, RequestId};
use crate::ids::{RoutingVersion, TargetId};
use crate::msg::{Msg, ReadReply, Status};
use crate::routing::{ChainInfo, ChainTarget, PublicState, RoutingInfo};

/// A read reply carrying `data`: the fixture of tests that split a message's payload from its
/// head.
pub fn read_reply(data: Vec<u8>) -> Msg {
    Msg::ReadReply(ReadReply {
        read_id: RequestId(4),
        chunk: ChunkId::new(1, 2),
        status: Status::Ok,
        data: data.into(),
        version: ChunkVersion(3),
        checksum: 9,
    })
}

/// Routing info with one chain `c1` at `chain_version` over `targets` (target id, public state),
/// where target `tN` lives on node `nN`: the fixture of handler tests.
pub fn one_chain_routing(
    version: u64,
    chain_version: u32,
    targets: &[(u32, PublicState)],
) -> RoutingInfo {
    let chain = ChainId(1);
    let mut r = RoutingInfo {
        version: RoutingVersion(version),
        ..RoutingInfo::default()
    };
    let list = targets
        .iter()
        .map(|&(t, state)| ChainTarget {
            target: TargetId(t),
            state,
        })
        .collect();
    r.chains.insert(
        chain,
        ChainInfo {
            chain,
            version: ChainVersion(chain_version),
            targets: list,
        },
    );
    for &(t, _) in targets {
        r.targets.insert(TargetId(t), NodeId(t.into()));
    }
    r
}

/// `x`'s hash under the standard library's hasher: tests that hold two types' hashes equal
/// (a payload and its bytes, a `VecMap` and a `BTreeMap`) compare these.
pub fn std_hash(x: &impl std::hash::Hash) -> u64 {
    use std::hash::Hasher;
    let mut h = std::hash::DefaultHasher::new();
    x.hash(&mut h);
    h.finish()
}
