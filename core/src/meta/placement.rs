//! Chunk placement of new files (3FS §4.2): a file pins a chain table version and a
//! `ChainRange{base, stripe, seed}`; chunk `k` lives on chain `table[(list[k mod stripe] − 1)
//! mod len]` where `list` is `[base, base+1, …, base+stripe−1]` shuffled by `seed`. Resolving the
//! range once gives the client's [`FileLayout`], so reads and writes find their chains without
//! asking meta. New files take consecutive, stripe-aligned ranges round-robin.
//!
//! Invariants: the shuffle is a pure function of (list, seed), pinned by a test vector, so a
//! layout written today resolves identically forever (3FS had to pin its seeds after std
//! shuffles changed between compilers, issue #368); a stripe never exceeds its table, so a
//! file's stripe chains are distinct. Not here: dynamic stripe growth and per-directory
//! allocation counters.

use std::collections::BTreeMap;

use crate::ids::ChainId;
use crate::layout::FileLayout;
pub use crate::wire::{ChainRange, DirLayout, Layout};

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Fisher–Yates driven by SplitMix64 from `seed`: defined here, not by a library, so it never
/// changes under a file's feet.
pub fn shuffle(list: &mut [u32], seed: u64) {
    let mut s = seed;
    for i in (1..list.len()).rev() {
        let j = (splitmix(&mut s) % (i as u64 + 1)) as usize;
        list.swap(i, j);
    }
}

impl ChainRange {
    /// The client layout of a file with this range over `table` (the pinned version's chains).
    /// `None` if the range does not fit the table or the chunk size is zero.
    pub fn resolve(&self, table: &[ChainId], chunk_size: u32) -> Option<FileLayout> {
        let len = table.len() as u32;
        if chunk_size == 0 || self.stripe == 0 || self.stripe > len || self.base == 0 {
            return None;
        }
        let mut list: Vec<u32> = (0..self.stripe).map(|i| self.base + i).collect();
        shuffle(&mut list, self.seed);
        let chains = list
            .into_iter()
            .map(|index| table[((index - 1) % len) as usize])
            .collect();
        Some(FileLayout { chunk_size, chains })
    }
}

impl DirLayout {
    /// Whether 3FS would accept it.
    pub fn valid(&self) -> bool {
        self.chunk_size.is_power_of_two()
            && (4096..=64 << 20).contains(&self.chunk_size)
            && self.stripe >= 1
    }

    /// The layout of a file created under it, from the server's `allocated` one (its base and
    /// seed) over a chain table of `table_len` chains.
    pub fn apply(&self, allocated: Layout, table_len: u32) -> Layout {
        let stripe = self.stripe.clamp(1, table_len.max(1));
        let range = ChainRange {
            stripe,
            ..allocated.range
        };
        Layout::new(self.chunk_size, range)
    }
}

/// A shuffle seed derived from a request's identity (deterministic: no RNG in machines).
pub fn seed_of(client: u64, request: u64) -> u64 {
    let mut x = client.rotate_left(32) ^ request;
    splitmix(&mut x)
}

/// A new file starts on this many chains of its stripe (3FS: min(16, stripe)).
pub const DYN_STRIPE_INITIAL: u32 = 16;

impl Layout {
    /// A new file's layout over `range`.
    pub fn new(chunk_size: u32, range: ChainRange) -> Self {
        Self {
            chunk_size,
            range,
            dyn_stripe: DYN_STRIPE_INITIAL.min(range.stripe),
        }
    }

    /// The client's view: chunk k's chain is `chains[k mod stripe]` (`None` for a table
    /// shorter than the stripe or a malformed range).
    pub fn file_layout(&self, table: &[ChainId]) -> Option<FileLayout> {
        self.range.resolve(table, self.chunk_size)
    }

    /// The chains of `fl` (this layout resolved) the file may have chunks on: the first
    /// `dyn_stripe` of its stripe. Length queries and GC visit only these.
    pub fn used_chains(&self, fl: &FileLayout) -> Vec<ChainId> {
        let n = (self.dyn_stripe as usize).clamp(1, fl.chains.len());
        fl.chains[..n].to_vec()
    }

    /// Grows the dynamic stripe by doubling until it covers chunk index `chunk` (or the whole
    /// stripe); true if it grew.
    pub fn extend_stripe(&mut self, chunk: u64) -> bool {
        let want = (chunk + 1).min(u64::from(self.range.stripe)) as u32;
        let before = self.dyn_stripe;
        while self.dyn_stripe < want {
            self.dyn_stripe = (self.dyn_stripe.max(1) * 2).min(self.range.stripe);
        }
        self.dyn_stripe != before
    }
}

/// Round-robin choice of base indexes for new files, per (table, stripe) (3FS's per-server
/// `ChainAllocator`); the caller supplies the seed (derived from the request by the meta server).
#[derive(Clone, Debug, Default, Eq, Hash, PartialEq)]
pub struct ChainAllocator {
    next: BTreeMap<(u32, u32), u32>,
}

impl ChainAllocator {
    /// The range of the next file striped over `stripe` chains of a table of `table_len`
    /// chains; `None` if the stripe does not fit.
    pub fn allocate(
        &mut self,
        table: u32,
        table_version: u32,
        table_len: u32,
        stripe: u32,
        seed: u64,
    ) -> Option<ChainRange> {
        if stripe == 0 || stripe > table_len {
            return None;
        }
        let next = self.next.entry((table, stripe)).or_insert(0);
        let base = *next % table_len + 1;
        *next = (*next + stripe) % table_len;
        Some(ChainRange {
            table,
            table_version,
            base,
            stripe,
            seed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn the_shuffle_is_pinned() {
        // If this vector changes, every existing file's chunks move: never update it casually.
        let mut l: Vec<u32> = (1..=8).collect();
        shuffle(&mut l, 42);
        let mut again: Vec<u32> = (1..=8).collect();
        shuffle(&mut again, 42);
        assert_eq!(l, again);
        assert_eq!(
            l.iter().copied().collect::<BTreeSet<_>>().len(),
            8,
            "a permutation"
        );
        assert_eq!(l, PINNED);
    }

    const PINNED: [u32; 8] = [4, 2, 7, 3, 5, 1, 8, 6];

    #[test]
    fn ranges_resolve_to_distinct_chains_and_allocation_goes_round_robin() {
        let table: Vec<ChainId> = (1..=10).map(ChainId).collect();
        let mut alloc = ChainAllocator::default();
        let bases: Vec<u32> = (0..6)
            .map(|s| alloc.allocate(1, 3, 10, 4, s).unwrap().base)
            .collect();
        assert_eq!(bases, [1, 5, 9, 3, 7, 1], "stripe-sized steps, wrapping");
        for s in 0..50 {
            let r = alloc.allocate(1, 3, 10, 4, s).unwrap();
            let l = r.resolve(&table, 1 << 20).unwrap();
            let distinct: BTreeSet<_> = l.chains.iter().collect();
            assert_eq!(distinct.len(), 4, "{r:?}");
            // Chunk k's chain is the same whoever resolves it.
            assert_eq!(l, r.resolve(&table, 1 << 20).unwrap());
        }
        assert_eq!(
            alloc.allocate(1, 3, 10, 11, 0),
            None,
            "a stripe wider than the table"
        );
        let bad = ChainRange {
            table: 1,
            table_version: 3,
            base: 1,
            stripe: 4,
            seed: 0,
        };
        assert_eq!(bad.resolve(&table[..3], 1 << 20), None);
    }
}
