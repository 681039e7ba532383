//! GraySort's records and their validator, in the format of sortbenchmark.org's gensort and
//! valsort (version 1.5, ASCII records: `gensort -a`): 100-byte records whose first 10 bytes are
//! the key. Record `n` comes from the n+1-th number of gensort's 128-bit linear congruential
//! generator (X' = a·X + c mod 2^128 from X = 0; a jump of n steps is computed by squaring, so
//! any range of rows is generated independently, as gensort's `-b` does):
//!
//! - bytes 0..10: the key, base-95 digits (printable ASCII from ' ') of the number's high 64
//!   bits, least significant first, then two of its low 64 bits;
//! - bytes 10..12: two spaces; 12..44: the record number as 32 upper-case hex digits;
//! - bytes 44..46: two spaces; 46..98: the low 52 bits of the number as 13 hex digits, each
//!   written four times; 98..100: "\r\n".
//!
//! The validator is valsort's: keys in non-decreasing order across every file in the order
//! given, the record count, duplicate keys, and the order-independent checksum (the 128-bit sum
//! of each record's CRC-32), which equals the input's exactly when the output holds the same
//! multiset of records (up to CRC collisions).
//!
//! Invariant: generation is a pure function of the record number. Not here: sorting (the
//! smallpond pipeline, python/bench/graysort.py). The gensort binary installs from neither
//! Debian nor PyPI, so the records are held to gensort -a's first records as projects that sort
//! them quote them (the tests pin records 0, 1 and 5).

use std::io::{Read, Write};
use std::path::Path;

/// Bytes per record.
pub const RECORD: usize = 100;
/// Bytes of the key.
pub const KEY: usize = 10;

const A: u128 = 0x2360_ed05_1fc6_5da4_4385_df64_9fcc_f645;
const C: u128 = 0x4a69_6d47_7261_7952_4950_2020_2020_2001;

/// The generator's state after `n` steps from 0. The n-fold map is composed of the 2^k-fold
/// maps of n's set bits (powers of one map commute), each the square of the one before.
fn jump(mut n: u128) -> u128 {
    let mut x = 0u128;
    let (mut m, mut a) = (A, C);
    while n > 0 {
        if n & 1 == 1 {
            x = x.wrapping_mul(m).wrapping_add(a);
        }
        a = a.wrapping_mul(m).wrapping_add(a);
        m = m.wrapping_mul(m);
        n >>= 1;
    }
    x
}

fn hex(d: u64) -> u8 {
    let d = (d & 0xF) as u8;
    if d >= 10 {
        b'A' + d - 10
    } else {
        b'0' + d
    }
}

/// Record `row` into `out`, given the generator's number for it.
fn ascii_record(rand: u128, row: u128, out: &mut [u8; RECORD]) {
    let (hi, lo) = ((rand >> 64) as u64, rand as u64);
    let mut t = hi;
    for b in out.iter_mut().take(8) {
        *b = b' ' + (t % 95) as u8;
        t /= 95;
    }
    out[8] = b' ' + (lo % 95) as u8;
    out[9] = b' ' + (lo / 95 % 95) as u8;
    out[10] = b' ';
    out[11] = b' ';
    for i in 0..32 {
        out[12 + i] = hex((row >> (4 * (31 - i))) as u64);
    }
    out[44] = b' ';
    out[45] = b' ';
    for i in 0..13 {
        let d = hex(lo >> (48 - 4 * i));
        out[46 + 4 * i..50 + 4 * i].fill(d);
    }
    out[98] = b'\r';
    out[99] = b'\n';
}

/// Records `start..start + count`, one after another, to `w`; their summary.
pub fn generate(w: &mut impl Write, start: u128, count: u64) -> std::io::Result<Summary> {
    let mut x = jump(start);
    let mut sum = Summary::default();
    let mut buf = Vec::with_capacity(RECORD * 10_000);
    let mut rec = [0u8; RECORD];
    for k in 0..count {
        x = x.wrapping_mul(A).wrapping_add(C);
        ascii_record(x, start + u128::from(k), &mut rec);
        sum.add(&rec);
        buf.extend_from_slice(&rec);
        if buf.len() >= RECORD * 10_000 {
            w.write_all(&buf)?;
            buf.clear();
        }
    }
    w.write_all(&buf)?;
    Ok(sum)
}

/// What valsort reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Records seen.
    pub records: u64,
    /// The 128-bit sum of every record's CRC-32 (order-independent).
    pub checksum: u128,
    /// Adjacent records with equal keys.
    pub duplicates: u64,
    /// Records whose key is less than the one before.
    pub unordered: u64,
    /// The first of them (its index in the whole sequence).
    pub first_unordered: Option<u64>,
    /// The last key seen.
    last: Option<[u8; KEY]>,
}

impl Summary {
    fn add(&mut self, rec: &[u8]) {
        let key: [u8; KEY] = rec[..KEY].try_into().expect("10 bytes");
        if let Some(prev) = self.last {
            if key < prev {
                self.unordered += 1;
                self.first_unordered.get_or_insert(self.records);
            } else if key == prev {
                self.duplicates += 1;
            }
        }
        self.last = Some(key);
        self.records += 1;
        self.checksum = self.checksum.wrapping_add(u128::from(crc32fast::hash(rec)));
    }

    /// The records are in order.
    pub fn ordered(&self) -> bool {
        self.unordered == 0
    }

    /// valsort's lines.
    pub fn text(&self) -> String {
        let mut s = format!(
            "Records: {}\nChecksum: {:x}\nDuplicate keys: {}\n",
            self.records, self.checksum, self.duplicates
        );
        match self.first_unordered {
            None => s.push_str("SUCCESS - all records are in order\n"),
            Some(i) => s.push_str(&format!(
                "ERROR - there are {} unordered records (the first is record {i})\n",
                self.unordered
            )),
        }
        s
    }
}

/// valsort over `files` read one after another as one sequence (partition order).
pub fn validate(files: &[impl AsRef<Path>]) -> Result<Summary, String> {
    let mut sum = Summary::default();
    let mut buf = vec![0u8; RECORD * 10_000];
    for f in files {
        let p = f.as_ref();
        let mut r = std::fs::File::open(p).map_err(|e| format!("{}: {e}", p.display()))?;
        let mut carry = 0usize;
        loop {
            let n = r
                .read(&mut buf[carry..])
                .map_err(|e| format!("{}: {e}", p.display()))?;
            if n == 0 {
                break;
            }
            let have = carry + n;
            let whole = have / RECORD * RECORD;
            for rec in buf[..whole].chunks_exact(RECORD) {
                sum.add(rec);
            }
            buf.copy_within(whole..have, 0);
            carry = have - whole;
        }
        if carry != 0 {
            return Err(format!(
                "{}: {carry} bytes after the last whole {RECORD}-byte record",
                p.display()
            ));
        }
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumping_ahead_equals_stepping() {
        let mut x = 0u128;
        for n in 0..300u128 {
            assert_eq!(jump(n), x, "step {n}");
            x = x.wrapping_mul(A).wrapping_add(C);
        }
    }

    #[test]
    fn records_are_ascii_with_their_number_and_split_ranges_match_one_range() {
        let mut whole = Vec::new();
        let s = generate(&mut whole, 0, 1000).unwrap();
        let mut parts = Vec::new();
        let a = generate(&mut parts, 0, 400).unwrap();
        let b = generate(&mut parts, 400, 600).unwrap();
        assert_eq!(whole, parts);
        assert_eq!(a.checksum.wrapping_add(b.checksum), s.checksum);
        let r7 = &whole[7 * RECORD..8 * RECORD];
        assert!(r7[..KEY].iter().all(|c| (b' '..=b'~').contains(c)));
        assert_eq!(&r7[12..44], b"00000000000000000000000000000007");
        assert_eq!(&r7[98..], b"\r\n");
        // gensort -a's own first records, byte for byte.
        assert_eq!(
            &whole[..RECORD - 2],
            &b"AsfAGHM5om  00000000000000000000000000000000  0000222200002222000022220000222200002222000000001111"[..]
        );
        assert_eq!(
            &whole[RECORD..2 * RECORD - 2],
            &b"~sHd0jDv6X  00000000000000000000000000000001  77779999444488885555CCCC777755555555BBBB666644446666"[..]
        );
        assert_eq!(&whole[5 * RECORD..5 * RECORD + KEY], b"*}-Wz1;TD-");
    }

    #[test]
    fn the_validator_finds_disorder_and_missing_or_altered_records() {
        let dir = std::env::temp_dir().join(format!("t3fs-valsort-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut data = Vec::new();
        let input = generate(&mut data, 0, 500).unwrap();
        let mut recs: Vec<&[u8]> = data.chunks_exact(RECORD).collect();
        recs.sort_by(|a, b| a[..KEY].cmp(&b[..KEY]));
        let sorted: Vec<u8> = recs.concat();
        let (p1, p2) = (dir.join("part-0.dat"), dir.join("part-1.dat"));
        std::fs::write(&p1, &sorted[..200 * RECORD]).unwrap();
        std::fs::write(&p2, &sorted[200 * RECORD..]).unwrap();
        let out = validate(&[&p1, &p2]).unwrap();
        assert!(out.ordered());
        assert_eq!((out.records, out.checksum), (input.records, input.checksum));
        // Partitions in the wrong order: unordered at the boundary.
        let swapped = validate(&[&p2, &p1]).unwrap();
        assert_eq!(swapped.first_unordered, Some(300));
        // A record altered (its payload, not its key): same order, another checksum.
        let mut bad = sorted.clone();
        bad[50 * RECORD + 60] ^= 1;
        std::fs::write(&p1, &bad[..200 * RECORD]).unwrap();
        let altered = validate(&[&p1, &p2]).unwrap();
        assert!(altered.ordered());
        assert_ne!(altered.checksum, input.checksum);
        // A torn record is an error.
        std::fs::write(&p1, &sorted[..200 * RECORD - 3]).unwrap();
        assert!(validate(&[&p1, &p2]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
