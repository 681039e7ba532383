//! The resources of a flow-model cluster and where a chunk's replicas live: resource ids for
//! every storage node's NIC (each direction), every client's NIC, every SSD and the fabric
//! core; the chain table built per disk index, as 3FS builds it (one table over the nodes,
//! replicated over each node's SSDs).
//!
//! Scenarios may add resources of their own after these (`add`: a task's CPU), so nothing
//! here assumes which resource is last.
//!
//! Not here: what flows over them (the scenarios).

use t3fs_scenario::chain_table::ChainTable;
use t3fs_scenario::rng::Rng;

use super::hardware::Hardware;

/// A cluster laid out as resources.
#[derive(Clone, Debug)]
pub struct Layout {
    /// Storage nodes.
    pub storage: u32,
    /// Client nodes.
    pub clients: u32,
    /// SSDs per storage node.
    pub disks: u32,
    /// The chain table of one disk index (chain -> nodes).
    pub table: ChainTable,
    /// Capacities, bytes per second, by resource id.
    pub caps: Vec<f64>,
    /// The fabric core's resource, if the fabric is oversubscribed.
    core: Option<u32>,
}

impl Layout {
    /// Lays out `hw` with `storage` nodes, `clients` clients and `table`; `background` is the
    /// share of each storage NIC (both directions) other traffic takes.
    pub fn new(
        hw: &Hardware,
        storage: u32,
        clients: u32,
        table: ChainTable,
        background: f64,
    ) -> Self {
        let disks = hw.storage.ssds;
        let s_nic = hw.nic_payload(&hw.storage) * (1.0 - background);
        let c_nic = hw.nic_payload(&hw.client);
        let mut caps = Vec::new();
        caps.extend(std::iter::repeat_n(s_nic, storage as usize * 2));
        caps.extend(std::iter::repeat_n(c_nic, clients as usize * 2));
        caps.extend(std::iter::repeat_n(
            hw.storage.ssd_bytes,
            (storage * disks) as usize,
        ));
        let core = (hw.oversubscription > 1.0).then(|| {
            caps.push(f64::from(storage) * s_nic / hw.oversubscription);
            caps.len() as u32 - 1
        });
        Self {
            storage,
            clients,
            disks,
            table,
            caps,
            core,
        }
    }

    /// The fabric core's capacity, if the fabric is oversubscribed.
    pub fn core_capacity(&self) -> Option<f64> {
        self.core.map(|c| self.caps[c as usize])
    }

    /// Adds a resource of `capacity` bytes per second (a scenario's own: a task's CPU); its id.
    pub fn add(&mut self, capacity: f64) -> u32 {
        self.caps.push(capacity);
        self.caps.len() as u32 - 1
    }

    /// Storage node `s`'s NIC, sending.
    pub fn storage_out(&self, s: u32) -> u32 {
        s
    }
    /// Storage node `s`'s NIC, receiving.
    pub fn storage_in(&self, s: u32) -> u32 {
        self.storage + s
    }
    /// Client `c`'s NIC, receiving.
    pub fn client_in(&self, c: u32) -> u32 {
        2 * self.storage + c
    }
    /// Client `c`'s NIC, sending.
    pub fn client_out(&self, c: u32) -> u32 {
        2 * self.storage + self.clients + c
    }
    /// SSD `d` of storage node `s`.
    pub fn ssd(&self, s: u32, d: u32) -> u32 {
        2 * self.storage + 2 * self.clients + s * self.disks + d
    }

    /// The path of bytes read from SSD `d` of node `s` to client `c`.
    pub fn read_path(&self, s: u32, d: u32, c: u32) -> Vec<u32> {
        let mut p = vec![self.ssd(s, d), self.storage_out(s)];
        p.extend(self.core);
        p.push(self.client_in(c));
        p
    }

    /// The path of bytes client `c` writes to chain `k`, as chain replication moves them:
    /// client → head, then each replica forwards to the next, every replica writing its SSD.
    /// The fabric core, if any, is listed once (a path lists a resource once), so the model
    /// counts one core crossing per write, not one per hop.
    pub fn write_path(&self, c: u32, k: u32) -> Vec<u32> {
        let (nodes, d) = self.chain(k);
        let mut p = vec![self.client_out(c)];
        p.extend(self.core);
        let mut prev: Option<u32> = None;
        for &n in nodes {
            if let Some(from) = prev {
                p.push(self.storage_out(from));
            }
            p.extend([self.storage_in(n), self.ssd(n, d)]);
            prev = Some(n);
        }
        p
    }

    /// The path of bytes copied from SSD `d` of node `from` to the same SSD of node `to`.
    pub fn copy_path(&self, from: u32, to: u32, d: u32) -> Vec<u32> {
        let mut p = vec![self.ssd(from, d), self.storage_out(from)];
        p.extend(self.core);
        p.push(self.storage_in(to));
        p.push(self.ssd(to, d));
        p
    }

    /// Chains over all disk indexes.
    pub fn chains(&self) -> u32 {
        self.table.chains.len() as u32 * self.disks
    }

    /// A chunk's home drawn from `rng`: a chain at random and one of its replicas other than
    /// `except` at random (CRAQ reads any serving replica): (node, disk index).
    pub fn random_replica(&self, rng: &mut Rng, except: Option<u32>) -> (u32, u32) {
        loop {
            let (nodes, disk) = self.chain(rng.below(u64::from(self.chains())) as u32);
            let alive: Vec<u32> = nodes
                .iter()
                .copied()
                .filter(|&n| Some(n) != except)
                .collect();
            if !alive.is_empty() {
                return (alive[rng.below(alive.len() as u64) as usize], disk);
            }
        }
    }

    /// Chain `k`'s nodes and its disk index.
    pub fn chain(&self, k: u32) -> (&[u32], u32) {
        let per = self.table.chains.len() as u32;
        (&self.table.chains[(k % per) as usize], k / per)
    }
}
