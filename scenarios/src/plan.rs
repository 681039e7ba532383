//! The cluster plan: which nodes exist, where every target lives, how chains are placed, the
//! rows mgmtd finds in the KV at first boot and the namespace root, shared by the simulator and
//! `t3fs cluster` so both build the same cluster from the same shape.
//!
//! Node ids are dense: mgmtd first, then storage, then clients, then meta servers (last, so a
//! cluster without meta keeps its ids). Target `t` of storage node `i` is
//! `TargetId(i * targets_per_node + t + 1)`; chain `k` takes `replicas` consecutive targets of
//! the slot-major order (slot 0 of every node, then slot 1, ...), so a chain's replicas sit on
//! distinct nodes whenever `replicas <= storage_nodes`.
//!
//! Not here: timeouts and their simulator-only scaling, planted bugs, addresses and processes
//! (the simulator's `Layout` and t3fs-real's cluster config build on this).

use std::collections::BTreeMap;

use t3fs_core::ids::{ChainId, ChainVersion, NodeId, RoutingVersion, TargetId};
use t3fs_core::kv::{KvEngine, KvError, Txn};
use t3fs_core::meta::server::LayoutPolicy;
use t3fs_core::mgmtd::store;
use t3fs_core::routing::{ChainInfo, RoutingInfo};

/// The numbers that decide a cluster's shape.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct Shape {
    /// mgmtd nodes.
    pub mgmtd: u32,
    /// Storage nodes.
    pub storage_nodes: u32,
    /// Targets per storage node.
    pub targets_per_node: u32,
    /// Replicas per chain.
    pub replicas: u32,
    /// Chains.
    pub chains: u32,
    /// Client nodes the plan reserves ids for (real clients take ids above every server).
    pub clients: u32,
    /// Meta servers.
    pub meta: u32,
}

impl From<&crate::Cluster> for Shape {
    fn from(c: &crate::Cluster) -> Self {
        Self {
            mgmtd: c.mgmtd,
            storage_nodes: c.storage_nodes,
            targets_per_node: c.targets_per_node,
            replicas: c.replicas,
            chains: c.chains,
            clients: c.clients,
            meta: c.meta,
        }
    }
}

impl Shape {
    /// Checks that the shape can be placed; the error names the field. Every product is taken
    /// in 64 bits (a u32 product of large fields once wrapped past the check), and every field
    /// stays within what the machines accept, so no later constructor asserts.
    pub fn validate(&self) -> Result<(), String> {
        if self.mgmtd == 0 {
            return Err("mgmtd: at least one mgmtd is needed".into());
        }
        let tpn_max = t3fs_core::limits::TARGETS_PER_NODE_MAX;
        if self.targets_per_node == 0 || self.targets_per_node as usize > tpn_max {
            return Err(format!(
                "targets_per_node: {} targets per node (use 1 to {tpn_max})",
                self.targets_per_node
            ));
        }
        if self.replicas == 0 || self.replicas > self.storage_nodes {
            return Err(format!(
                "replicas: {} replicas need as many storage nodes (have {})",
                self.replicas, self.storage_nodes
            ));
        }
        if self.replicas as usize > t3fs_core::limits::CHAIN_TARGETS_MAX {
            return Err(format!(
                "replicas: {} replicas per chain (at most {})",
                self.replicas,
                t3fs_core::limits::CHAIN_TARGETS_MAX
            ));
        }
        let nodes = [self.mgmtd, self.storage_nodes, self.clients, self.meta, 1]
            .iter()
            .map(|&n| u64::from(n))
            .sum::<u64>();
        if nodes >= SERVER_NODE_IDS {
            return Err(format!(
                "storage_nodes: {nodes} nodes in all; server node ids end at {SERVER_NODE_IDS}"
            ));
        }
        let slots = u64::from(self.storage_nodes) * u64::from(self.targets_per_node);
        let needed = u64::from(self.chains) * u64::from(self.replicas);
        if needed > slots {
            return Err(format!(
                "chains: {} chains of {} replicas need {needed} targets, the nodes have {slots}",
                self.chains, self.replicas
            ));
        }
        Ok(())
    }

    /// The most chains the targets hold at `replicas` each.
    pub fn max_chains(storage_nodes: u32, targets_per_node: u32, replicas: u32) -> u32 {
        let all = u64::from(storage_nodes) * u64::from(targets_per_node);
        u32::try_from(all / u64::from(replicas.max(1))).unwrap_or(u32::MAX)
    }
}

/// Server node ids (mgmtd, storage, meta, the kv service) lie below this; a plan of more nodes
/// is refused. Real clients take 64-bit ids with the top bit set (`t3fs_client::client`).
pub const SERVER_NODE_IDS: u64 = 1 << 24;

/// Chunk size and stripe of the files meta creates (the layout policy of chain table 1).
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct FileLayout {
    /// Chunk size in bytes.
    pub chunk_size: u32,
    /// Chains a file stripes over (at most the table's length).
    pub stripe: u32,
}

/// The static facts of a planned cluster.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The shape it was built from.
    pub shape: Shape,
    /// mgmtd node ids.
    pub mgmtd: Vec<NodeId>,
    /// Storage node ids.
    pub storage: Vec<NodeId>,
    /// Client node ids.
    pub clients: Vec<NodeId>,
    /// Meta server node ids.
    pub meta: Vec<NodeId>,
    /// Targets per storage node.
    pub targets_of: BTreeMap<NodeId, Vec<TargetId>>,
    /// The deployed routing (routing version 1, chain version 1, all SERVING).
    pub initial: RoutingInfo,
}

impl Plan {
    /// Plans `shape` (which [`Shape::validate`] accepts).
    pub fn new(shape: Shape) -> Self {
        let c = shape;
        // Ids are numbered in u64: validate bounds the counts, so the sums cannot wrap.
        let ids = |from: u32, n: u32| (0..n).map(move |i| NodeId(u64::from(from) + u64::from(i)));
        let mgmtd: Vec<NodeId> = ids(0, c.mgmtd).collect();
        let storage: Vec<NodeId> = ids(c.mgmtd, c.storage_nodes).collect();
        let clients: Vec<NodeId> = ids(c.mgmtd + c.storage_nodes, c.clients).collect();
        let first_meta = c.mgmtd + c.storage_nodes + c.clients;
        let meta: Vec<NodeId> = ids(first_meta, c.meta).collect();
        let tid = |i: u32, t: u32| TargetId(i * c.targets_per_node + t + 1);
        let mut targets_of = BTreeMap::new();
        let mut routing = RoutingInfo {
            version: RoutingVersion(1),
            ..RoutingInfo::default()
        };
        for (i, n) in storage.iter().enumerate() {
            let ts: Vec<TargetId> = (0..c.targets_per_node).map(|t| tid(i as u32, t)).collect();
            for t in &ts {
                routing.targets.insert(*t, *n);
            }
            targets_of.insert(*n, ts);
        }
        let order: Vec<TargetId> = (0..c.targets_per_node)
            .flat_map(|t| (0..c.storage_nodes).map(move |i| tid(i, t)))
            .collect();
        let mut chains = Vec::new();
        for k in 0..c.chains {
            let start = (k * c.replicas) as usize;
            let members = &order[start..start + c.replicas as usize];
            let id = ChainId(k + 1);
            routing
                .chains
                .insert(id, ChainInfo::all_serving(id, ChainVersion(1), members));
            chains.push(id);
        }
        routing.chain_tables.insert((1, 1), chains);
        Self {
            shape,
            mgmtd,
            storage,
            clients,
            meta,
            targets_of,
            initial: routing,
        }
    }

    /// Every chain, in id order.
    pub fn chains(&self) -> Vec<ChainId> {
        self.initial.chains.keys().copied().collect()
    }

    /// Every server node id (mgmtd, storage, meta), in id order.
    pub fn servers(&self) -> Vec<NodeId> {
        let mut v: Vec<NodeId> = self.mgmtd.clone();
        v.extend(&self.storage);
        v.extend(&self.meta);
        v.sort();
        v
    }

    /// The layout policy meta gives new files: chain table 1, `f`'s chunk size, striped over up
    /// to `f.stripe` chains.
    pub fn layout_policy(&self, f: FileLayout) -> Option<LayoutPolicy> {
        self.initial
            .chain_tables
            .get(&(1, 1))
            .map(|chains| LayoutPolicy {
                table: 1,
                table_version: 1,
                chains: chains.clone(),
                chunk_size: f.chunk_size,
                stripe: (chains.len() as u32).min(f.stripe),
            })
    }

    /// Writes what mgmtd finds at first boot into `kv` (see [`seed_mgmtd`]).
    pub fn seed_mgmtd(&self, kv: &mut dyn KvEngine) -> Result<(), KvError> {
        seed_mgmtd(kv, &self.initial)
    }

    /// Writes the chain table rows (table 1, version 1) into `kv`, so that mgmtd's routing info
    /// carries the table clients resolve file layouts with. The simulator does not call it: its
    /// clients and meta servers take the table from the plan, and its traces predate the rows.
    pub fn seed_chain_tables(&self, kv: &mut dyn KvEngine) -> Result<(), KvError> {
        let mut t = Txn::new(kv);
        for ((table, version), chains) in &self.initial.chain_tables {
            t.set(
                &store::table_key(*table, *version),
                &store::encode_table(chains),
            );
        }
        t.commit().map(|_| ())
    }

    /// Creates the namespace root in `kv` (at time `now`, seconds).
    pub fn seed_namespace(kv: &mut dyn KvEngine, now: u64) -> Result<(), String> {
        t3fs_core::meta::transact(kv, |ns| ns.init(now)).map_err(|e| format!("{e:?}"))
    }

    /// Whether `kv` already holds a seeded cluster (the routing version row exists).
    pub fn is_seeded(kv: &mut dyn KvEngine) -> Result<bool, KvError> {
        let mut t = Txn::new(kv);
        Ok(t.get(store::ROUTING_VERSION_KEY)?.is_some())
    }
}

/// Writes what mgmtd finds at first boot (every chain of `routing`, the target rows and the
/// routing version, as an admin would have created them) into `kv`.
pub fn seed_mgmtd(kv: &mut dyn KvEngine, routing: &RoutingInfo) -> Result<(), KvError> {
    let mut t = Txn::new(kv);
    for c in routing.chains.values() {
        t.set(&store::chain_key(c.chain), &store::encode(c));
    }
    for (target, node) in &routing.targets {
        t.set(&store::target_key(*target), &store::encode(node));
    }
    t.set(
        store::ROUTING_VERSION_KEY,
        &store::encode(&routing.version.0),
    );
    t.commit().map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> Shape {
        Shape {
            mgmtd: 1,
            storage_nodes: 3,
            targets_per_node: 2,
            replicas: 3,
            chains: 2,
            clients: 1,
            meta: 1,
        }
    }

    #[test]
    fn replicas_of_a_chain_sit_on_distinct_nodes() {
        let p = Plan::new(shape());
        for c in p.initial.chains.values() {
            let mut nodes: Vec<NodeId> = c
                .targets
                .iter()
                .map(|t| p.initial.targets[&t.target])
                .collect();
            nodes.sort();
            nodes.dedup();
            assert_eq!(nodes.len(), 3);
        }
        assert_eq!(
            p.servers(),
            vec![NodeId(0), NodeId(1), NodeId(2), NodeId(3), NodeId(5)]
        );
    }

    #[test]
    fn impossible_shapes_name_the_field() {
        let mut s = shape();
        s.replicas = 4;
        assert!(s.validate().unwrap_err().starts_with("replicas"));
        let mut s = shape();
        s.chains = 3;
        assert!(s.validate().unwrap_err().starts_with("chains"));
        // Fields whose u32 product wraps are refused, not wrapped past the check.
        let huge = Shape {
            storage_nodes: 70_000,
            targets_per_node: 256,
            replicas: 3,
            chains: 1_431_655_766, // x 3 wraps a u32 to 2
            ..s
        };
        assert!(huge.validate().unwrap_err().starts_with("chains"));
        let wide = Shape {
            targets_per_node: 300,
            ..s
        };
        assert!(wide.validate().unwrap_err().starts_with("targets_per_node"));
        let many = Shape {
            storage_nodes: 1 << 24,
            chains: 1,
            ..s
        };
        assert!(many.validate().unwrap_err().starts_with("storage_nodes"));
        assert_eq!(Shape::max_chains(u32::MAX, 256, 1), u32::MAX);
    }

    #[test]
    fn seeding_is_seen() {
        let mut kv = t3fs_core::kv::mem::MemKv::new(64);
        assert!(!Plan::is_seeded(&mut kv).unwrap());
        Plan::new(shape()).seed_mgmtd(&mut kv).unwrap();
        Plan::seed_namespace(&mut kv, 0).unwrap();
        assert!(Plan::is_seeded(&mut kv).unwrap());
    }
}
