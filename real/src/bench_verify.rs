//! fio's `verify` for `bench io`: every block written carries a header naming its block and a
//! generation, and the same generation at its end, over a fill shared by all blocks. Reads are
//! checked as they return (right block, intact header and trailer, fill unchanged), and at the
//! end every block is read back and its generation held to the writes the run saw: the final
//! value of a block may come from the last acknowledged write or from any write that was not
//! over before that one began (concurrent, failed or unanswered), never from a write that
//! finished before an acknowledged write to the same block was issued. That is what "an
//! acknowledged write is never lost" means for one register, checked on a real cluster.
//!
//! Invariant: generation 0 is the layout written before the run; generations of a run are
//! unique per (job, I/O). Not here: issuing the I/O (bench_io.rs).

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// Bytes of the header (block, generation) at the start of a block.
const HEADER: usize = 16;
/// Bytes of the trailer (generation) at the end.
const TRAILER: usize = 8;
/// The smallest block that can carry both.
pub const MIN_BS: u64 = (HEADER + TRAILER) as u64 * 2;

/// The fill every block shares (pseudo-random, so that a block of zeros or of another file's
/// bytes never passes).
pub fn base(bs: u64) -> Vec<u8> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    (0..bs)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Block `block` at generation `gen`.
pub fn stamp(base: &[u8], block: u64, gen: u64) -> Vec<u8> {
    let mut v = base.to_vec();
    if v.len() >= MIN_BS as usize {
        v[..8].copy_from_slice(&block.to_le_bytes());
        v[8..16].copy_from_slice(&gen.to_le_bytes());
        let n = v.len();
        v[n - TRAILER..].copy_from_slice(&gen.to_le_bytes());
    }
    v
}

/// The generation of `data` read from `block`, or what is wrong with it.
pub fn decode(data: &[u8], base: &[u8], block: u64) -> Result<u64, String> {
    let n = base.len();
    if data.len() != n {
        return Err(format!(
            "block {block}: read {} bytes, expected {n}",
            data.len()
        ));
    }
    let word = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes"));
    let (b, gen, tail) = (word(0), word(8), word(n - TRAILER));
    if b != block {
        return Err(format!("block {block}: holds block {b}'s data"));
    }
    if gen != tail {
        return Err(format!(
            "block {block}: torn (header generation {gen:#x}, trailer {tail:#x})"
        ));
    }
    if data[HEADER..n - TRAILER] != base[HEADER..n - TRAILER] {
        return Err(format!(
            "block {block}: fill corrupted (generation {gen:#x})"
        ));
    }
    Ok(gen)
}

#[derive(Default)]
struct BlockLog {
    /// Generation → when its write returned (`None`: failed or unanswered, may still apply).
    writes: HashMap<u64, Option<Instant>>,
    /// The latest start of an acknowledged write.
    last_acked_invoke: Option<Instant>,
}

/// What the verification found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Reads checked as they returned.
    pub reads_checked: u64,
    /// Blocks read back at the end.
    pub blocks_checked: u64,
    /// Problems (the first 20), each naming its file and block.
    pub problems: Vec<String>,
    /// How many problems in all.
    pub problem_count: u64,
}

impl Outcome {
    /// No problem found.
    pub fn ok(&self) -> bool {
        self.problem_count == 0
    }
}

/// Every write and read of a run, by (file, block).
#[derive(Default)]
pub struct Ledger {
    blocks: BTreeMap<(usize, u64), BlockLog>,
    out: Outcome,
}

impl Ledger {
    fn problem(&mut self, file: usize, what: String) {
        self.out.problem_count += 1;
        if self.out.problems.len() < 20 {
            self.out.problems.push(format!("file {file}: {what}"));
        }
    }

    /// A write of `gen` (never 0: the layout is implied) to `block` issued at `invoke`; `acked`
    /// is when it was acknowledged.
    pub fn wrote(
        &mut self,
        file: usize,
        block: u64,
        gen: u64,
        invoke: Instant,
        acked: Option<Instant>,
    ) {
        let log = self.blocks.entry((file, block)).or_default();
        log.writes.insert(gen, acked);
        if acked.is_some() {
            log.last_acked_invoke = log.last_acked_invoke.max(Some(invoke));
        }
    }

    /// A read of `block` returned `data` during the run.
    pub fn read(&mut self, file: usize, block: u64, data: &[u8], base: &[u8]) {
        self.out.reads_checked += 1;
        if let Err(e) = decode(data, base, block) {
            self.problem(file, format!("read during the run: {e}"));
        }
    }

    /// The final read-back of `block`.
    pub fn final_value(&mut self, file: usize, block: u64, data: &[u8], base: &[u8]) {
        self.out.blocks_checked += 1;
        let gen = match decode(data, base, block) {
            Ok(g) => g,
            Err(e) => return self.problem(file, format!("final read: {e}")),
        };
        let log = self.blocks.entry((file, block)).or_default();
        let lost = match (gen, log.writes.get(&gen)) {
            (0, _) => log.last_acked_invoke.is_some(),
            (_, None) => {
                let what = format!("block {block}: holds generation {gen:#x}, never written");
                return self.problem(file, what);
            }
            (_, Some(ret)) => matches!((ret, log.last_acked_invoke), (Some(r), Some(a)) if *r < a),
        };
        if lost {
            let what = format!(
                "block {block}: holds generation {gen:#x}, older than an acknowledged write"
            );
            self.problem(file, what);
        }
    }

    /// The findings.
    pub fn outcome(&self) -> Outcome {
        self.out.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_stamped_block_decodes_and_damage_is_named() {
        let b = base(4096);
        let mut d = stamp(&b, 7, 0x1_0000_0005);
        assert_eq!(decode(&d, &b, 7), Ok(0x1_0000_0005));
        assert!(decode(&d, &b, 8).unwrap_err().contains("block 7's data"));
        d[4095] ^= 1;
        assert!(decode(&d, &b, 7).unwrap_err().contains("torn"));
        let mut d = stamp(&b, 7, 3);
        d[100] ^= 1;
        assert!(decode(&d, &b, 7).unwrap_err().contains("fill"));
    }

    #[test]
    fn a_value_older_than_an_acknowledged_write_is_a_loss_and_a_concurrent_one_is_not() {
        let b = base(64);
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut l = Ledger::default();
        // Write 1 is over at 10 ms; write 2 starts at 20 ms and is acknowledged.
        l.wrote(0, 0, 1, at(0), Some(at(10)));
        l.wrote(0, 0, 2, at(20), Some(at(30)));
        l.final_value(0, 0, &stamp(&b, 0, 2), &b);
        assert!(l.outcome().ok());
        l.final_value(0, 0, &stamp(&b, 0, 1), &b);
        assert_eq!(l.outcome().problem_count, 1, "generation 1 lost write 2");
        // Write 3 overlaps write 4: either may be last.
        let mut l = Ledger::default();
        l.wrote(0, 1, 3, at(0), Some(at(50)));
        l.wrote(0, 1, 4, at(10), Some(at(20)));
        l.final_value(0, 1, &stamp(&b, 1, 3), &b);
        // A failed write may apply late; the layout (generation 0) may not survive an ack.
        l.wrote(0, 2, 5, at(0), None);
        l.final_value(0, 2, &stamp(&b, 2, 5), &b);
        assert!(l.outcome().ok(), "{:?}", l.outcome());
        l.final_value(0, 1, &stamp(&b, 1, 0), &b);
        assert_eq!(l.outcome().problem_count, 1);
        // A block the run never wrote keeps the layout, and that is no loss.
        let mut l = Ledger::default();
        l.final_value(0, 9, &stamp(&b, 9, 0), &b);
        assert!(l.outcome().ok(), "{:?}", l.outcome());
    }
}
