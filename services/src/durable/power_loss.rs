//! What the engines' power-loss suites share (test-only): their random source, a seeded
//! xorshift, so that a failing seed replays exactly, and how much of a file's unsynced appends
//! WalKv's suite lets a crash keep. The suites themselves stay beside their engines
//! (`chunk_store::power_loss`, `wal_kv::power_loss`): what they check is each engine's contract.
//!
//! Invariants: the same seed gives the same numbers, as each suite's own generator did before
//! this layer was shared (same seed mixing, same shifts), so every seed still runs the
//! workload and the power failure it ran.
//!
//! Not here: the lazy file system (`lazy_fs.rs`), workloads and checks.

/// A seeded xorshift generator.
pub(crate) struct XorShift(u64);

impl XorShift {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// How much of `n` unsynced bytes a crash keeps: none, some, or all.
    pub(crate) fn torn(&mut self, n: usize) -> usize {
        match self.below(3) {
            0 => 0,
            1 => self.below(n as u64 + 1) as usize,
            _ => n,
        }
    }
}
