//! The chunk metadata dump of a running cluster (3FS `admin_cli dump-chunkmeta`): ask every
//! storage node for the committed version, length and checksum of every chunk on each of its
//! targets (`Msg::DumpChunkMeta`, answered from the storage machine's cached metadata, no I/O),
//! over the cluster's own transport and so authenticated by the cluster token. A node answers
//! a page of at most `CHUNK_META_PAGE_MAX` chunks at a time; the dump asks each node again
//! with the cursor of its last page until the node says it is done.
//!
//! Invariant: a node that does not answer within the timeout makes the whole dump an error
//! naming it, never a partial dump passed off as complete. Blocking: it runs its own small
//! runtime, so call it from a plain thread. Not here: comparing replicas (the CLI hands the
//! dump to the simulator's agreement check).

use std::collections::BTreeMap;
use std::time::Duration;

use t3fs_core::ids::{NodeId, TargetId};
use t3fs_core::msg::{ChunkSum, Msg};

use crate::cluster::NodeEntry;
use t3fs_services::transport::{Transport, TransportConfig};

/// Per target, its committed chunks in chunk order.
pub type Dump = BTreeMap<TargetId, Vec<ChunkSum>>;

/// The node id the dumping tool connects as (outside the plan's and the clients' ranges).
const DUMPER: NodeId = NodeId((1 << 30) + 11);

/// Dumps every storage node of the cluster whose nodes are `nodes`; `timeout` bounds the wait.
pub fn dump(nodes: &[NodeEntry], timeout: Duration) -> Result<Dump, String> {
    let storage: Vec<&NodeEntry> = nodes.iter().filter(|n| n.role == "storage").collect();
    let token = storage
        .first()
        .map(|n| n.cfg.cluster.token.clone())
        .ok_or("the cluster has no storage nodes")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async move {
        let (t, mut inbound) = Transport::start(TransportConfig::new(DUMPER, None, &token))
            .await
            .map_err(|e| e.to_string())?;
        let mut waiting: BTreeMap<NodeId, String> = BTreeMap::new();
        for n in &storage {
            let addr = n
                .cfg
                .node
                .listen
                .parse()
                .map_err(|e| format!("{}: {e}", n.name))?;
            let id = NodeId(n.cfg.node.id.into());
            t.set_addr(id, addr);
            waiting.insert(id, n.name.clone());
        }
        for id in waiting.keys() {
            let _ = t.send(*id, Msg::DumpChunkMeta { cursor: None }).await;
        }
        let mut out = Dump::new();
        let collect = async {
            while let Some(mut inb) = inbound.recv().await {
                let Ok(Msg::ChunkMetaDump(d)) = t.decode(&mut inb) else {
                    continue;
                };
                if !waiting.contains_key(&d.node) {
                    continue;
                }
                // A target cut short by a page comes again with the rest in the next one.
                for x in d.targets {
                    out.entry(x.target).or_default().extend(x.chunks);
                }
                match d.next {
                    Some(cursor) => {
                        let _ = t
                            .send(
                                d.node,
                                Msg::DumpChunkMeta {
                                    cursor: Some(cursor),
                                },
                            )
                            .await;
                    }
                    None => {
                        waiting.remove(&d.node);
                    }
                }
                if waiting.is_empty() {
                    break;
                }
            }
        };
        // Out of time: `waiting` still names the nodes that did not answer.
        let _ = tokio::time::timeout(timeout, collect).await;
        t.shutdown().await;
        if waiting.is_empty() {
            Ok(out)
        } else {
            Err(format!(
                "no dump from {} within {timeout:?}",
                waiting.values().cloned().collect::<Vec<_>>().join(", ")
            ))
        }
    })
}
