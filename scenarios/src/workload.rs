//! Workload generators shared by simulated and real runs: what each client does next, and the
//! self-describing payloads that let a checker tell a real value from garbage.
//!
//! Each write stores a whole register value at offset 0 of a chunk: 8 bytes of value id
//! (little-endian, never 0) followed by bytes derived from the id. A read therefore returns a
//! hole, exactly one written value, or something no client wrote (silent corruption).
//! Invariant: value ids are unique per run (client index in the high bits). Not here: how an
//! operation is executed or checked.

use core::time::Duration;

use crate::rng::Rng;
use crate::schema::Workload;

/// One client operation on one chunk of the workload.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Op {
    /// Write value `value` to chunk `chunk`.
    Write {
        /// Chunk index in `0..workload.chunks`.
        chunk: u32,
        /// Unique value id.
        value: u64,
    },
    /// Read chunk `chunk`.
    Read {
        /// Chunk index.
        chunk: u32,
    },
}

/// A client's operation stream.
#[derive(Clone, Debug)]
pub struct Generator {
    w: Workload,
    rng: Rng,
    client: u32,
    issued: u64,
}

impl Generator {
    /// The stream of client `client`, drawn from `rng`.
    pub fn new(w: &Workload, client: u32, rng: Rng) -> Self {
        Self {
            w: w.clone(),
            rng,
            client,
            issued: 0,
        }
    }

    /// The next operation, or `None` when the client's budget is spent.
    pub fn next_op(&mut self) -> Option<Op> {
        if self.w.ops_per_client.is_some_and(|n| self.issued >= n) {
            return None;
        }
        self.issued += 1;
        if self.w.prefill && self.issued <= u64::from(self.w.chunks) {
            return Some(Op::Write {
                chunk: (self.issued - 1) as u32,
                value: (u64::from(self.client) + 1) << 40 | self.issued,
            });
        }
        let chunk = self.rng.below(u64::from(self.w.chunks)) as u32;
        if self.rng.chance(self.w.read_fraction) {
            Some(Op::Read { chunk })
        } else {
            Some(Op::Write {
                chunk,
                value: (u64::from(self.client) + 1) << 40 | self.issued,
            })
        }
    }

    /// Think time before the next operation.
    pub fn think(&mut self) -> Duration {
        self.rng.duration(self.w.think.clone())
    }

    /// Operations issued so far.
    pub fn issued(&self) -> u64 {
        self.issued
    }
}

/// What a read returned, decoded.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Payload {
    /// Nothing was ever written (a hole: empty or all zeros).
    Hole,
    /// Exactly the bytes of this value.
    Value(u64),
    /// Bytes no writer produced.
    Garbage,
}

const K1: u64 = 0x9E37_79B9_7F4A_7C15;
const K2: u64 = 0xBF58_476D_1CE4_E5B9;

/// Filler word `k` (bytes `8k..8k+8`, little-endian, `k >= 1`) of `value`'s payload:
/// `value·K1 + k·K2`, wrapping. One addition per 8 bytes: payloads are built on every simulated
/// write and checked on every read, so the filler is on the simulator's hot path (a byte-wise
/// one cost a tenth of its time, a multiply-xorshift per word 3%). Exactness does not need a
/// mix: a read is compared word by word, so any changed byte changes its word and is `Garbage`;
/// and since K1 is odd, two values' payloads differ in every word by `(v1 - v2)·K1 ≠ 0`, so a
/// payload torn between two writes is `Garbage` too. (The definition `filler_words` steps
/// through; tests hold them equal.)
#[cfg(test)]
fn filler_word(value: u64, k: u64) -> u64 {
    value.wrapping_mul(K1).wrapping_add(k.wrapping_mul(K2))
}

/// The filler words of `value` from word 1 on (stepping by addition, the same words).
fn filler_words(value: u64) -> impl Iterator<Item = u64> {
    let mut x = value.wrapping_mul(K1);
    core::iter::repeat_with(move || {
        x = x.wrapping_add(K2);
        x
    })
}

/// The bytes of value `value` (`size >= 8`): the value, then filler words (the last one cut to
/// the size).
pub fn payload(value: u64, size: u32) -> Vec<u8> {
    let mut v = vec![0u8; (size as usize).max(8)];
    v[..8].copy_from_slice(&value.to_le_bytes());
    let mut words = v[8..].chunks_exact_mut(8);
    let mut fill = filler_words(value);
    for (dst, w) in (&mut words).zip(&mut fill) {
        dst.copy_from_slice(&w.to_le_bytes());
    }
    let rest = words.into_remainder();
    let last = fill.next().unwrap_or(0).to_le_bytes();
    rest.copy_from_slice(&last[..rest.len()]);
    v
}

/// Decodes read bytes.
pub fn decode_payload(data: &[u8]) -> Payload {
    // Bytes whose first word is not zero are no hole: the whole scan is skipped then (every
    // intact read).
    let zero = |b: &[u8]| b.iter().all(|b| *b == 0);
    if zero(&data[..data.len().min(8)]) && zero(data) {
        return Payload::Hole;
    }
    if data.len() < 8 {
        return Payload::Garbage;
    }
    let value = u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
    let mut words = data[8..].chunks_exact(8);
    let mut fill = filler_words(value);
    // Differences are or-ed together, without an early exit: a read is almost always intact.
    let mut diff = (&mut words).zip(&mut fill).fold(0, |d, (got, w)| {
        d | (u64::from_le_bytes(got.try_into().expect("8 bytes")) ^ w)
    });
    let rest = words.remainder();
    let last = fill.next().unwrap_or(0).to_le_bytes();
    diff |= u64::from(rest != &last[..rest.len()]);
    if value == 0 || diff != 0 {
        return Payload::Garbage;
    }
    Payload::Value(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_the_value_then_its_filler_words() {
        for value in [1, 7, 42 << 40 | 7, u64::MAX] {
            for size in [8, 9, 15, 16, 17, 4096, 5003] {
                let p = payload(value, size);
                assert_eq!(p.len(), size as usize);
                assert_eq!(p[..8], value.to_le_bytes());
                for (k, w) in p[8..].chunks(8).enumerate() {
                    let want = filler_word(value, k as u64 + 1).to_le_bytes();
                    assert_eq!(w, &want[..w.len()], "value {value} size {size} word {k}");
                }
                assert_eq!(decode_payload(&p), Payload::Value(value));
                // Every single byte changed is seen, in the tail word too.
                for i in [8, size as usize / 2, size as usize - 1]
                    .into_iter()
                    .filter(|&i| i >= 8 && i < size as usize)
                {
                    let mut bad = p.clone();
                    bad[i] ^= 0x10;
                    assert_eq!(
                        decode_payload(&bad),
                        Payload::Garbage,
                        "size {size} byte {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn two_values_payloads_differ_in_every_word_so_a_torn_one_is_garbage() {
        let (a, b) = (payload(1 << 40 | 3, 4096), payload(2 << 40 | 3, 4096));
        for (x, y) in a.chunks(8).zip(b.chunks(8)) {
            assert_ne!(x, y);
        }
        let mut torn = a.clone();
        torn[2048..].copy_from_slice(&b[2048..]);
        assert_eq!(decode_payload(&torn), Payload::Garbage);
    }

    #[test]
    fn payloads_round_trip_and_corruption_is_garbage() {
        let p = payload(42 << 40 | 7, 64);
        assert_eq!(decode_payload(&p), Payload::Value(42 << 40 | 7));
        let mut bad = p.clone();
        bad[30] ^= 1;
        assert_eq!(decode_payload(&bad), Payload::Garbage);
        assert_eq!(decode_payload(&[0; 16]), Payload::Hole);
        assert_eq!(decode_payload(&[]), Payload::Hole);
        // A zero first word is a hole only if every byte after it is zero too.
        let mut late = [0u8; 24];
        late[20] = 1;
        assert_eq!(decode_payload(&late), Payload::Garbage);
        assert_eq!(decode_payload(&[0, 3]), Payload::Garbage);
    }

    #[test]
    fn generator_respects_budget_and_ids_are_unique() {
        let w = Workload {
            chunks: 3,
            write_size: 16,
            read_fraction: 0.3,
            think: Duration::ZERO..Duration::from_millis(1),
            ops_per_client: Some(50),
            prefill: false,
        };
        let mut g = Generator::new(&w, 2, Rng::new(9));
        let ops: Vec<Op> = core::iter::from_fn(|| g.next_op()).collect();
        assert_eq!(ops.len(), 50);
        let mut ids: Vec<u64> = ops
            .iter()
            .filter_map(|o| match o {
                Op::Write { value, .. } => Some(*value),
                Op::Read { .. } => None,
            })
            .collect();
        let n = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), n);
        assert!(n > 20 && n < 50, "read fraction honoured: {n} writes");
    }
}
