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

fn filler(value: u64, i: usize) -> u8 {
    let x = value
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(i as u64)
        .wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x >> 56) as u8
}

/// The bytes of value `value` (`size >= 8`).
pub fn payload(value: u64, size: u32) -> Vec<u8> {
    let mut v = value.to_le_bytes().to_vec();
    v.extend((8..size as usize).map(|i| filler(value, i)));
    v
}

/// Decodes read bytes.
pub fn decode_payload(data: &[u8]) -> Payload {
    if data.iter().all(|b| *b == 0) {
        return Payload::Hole;
    }
    if data.len() < 8 {
        return Payload::Garbage;
    }
    let value = u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
    if value == 0
        || data
            .iter()
            .enumerate()
            .skip(8)
            .any(|(i, b)| *b != filler(value, i))
    {
        return Payload::Garbage;
    }
    Payload::Value(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_corruption_is_garbage() {
        let p = payload(42 << 40 | 7, 64);
        assert_eq!(decode_payload(&p), Payload::Value(42 << 40 | 7));
        let mut bad = p.clone();
        bad[30] ^= 1;
        assert_eq!(decode_payload(&bad), Payload::Garbage);
        assert_eq!(decode_payload(&[0; 16]), Payload::Hole);
        assert_eq!(decode_payload(&[]), Payload::Hole);
    }

    #[test]
    fn generator_respects_budget_and_ids_are_unique() {
        let w = Workload {
            chunks: 3,
            write_size: 16,
            read_fraction: 0.3,
            think: Duration::ZERO..Duration::from_millis(1),
            ops_per_client: Some(50),
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
