//! CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum 3FS uses end to end (§3.7).
//!
//! Clients checksum every write payload, replicas verify it before applying, chunks carry a
//! whole-chunk CRC compared along the chain and returned with reads. [`extend`] uses the CPU's
//! CRC32C instruction when it has one (the `crc32c` crate detects it at run time); the
//! table-driven [`extend_software`] is the reference it is tested against, so the values (and
//! every trace hash built on them) are the same on every machine.

const POLY: u32 = 0x82F6_3B78;

/// Slicing-by-8 tables: `TABLES[0]` is the classic byte table; `TABLES[k][b]` is the CRC of
/// byte `b` followed by `k` zero bytes, so eight bytes fold in one step (about 5x the byte loop;
/// the simulator checksums every 4 KiB payload several times per write).
const TABLES: [[u32; 256]; 8] = {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
};

/// Extends a running CRC32C (`crc` of earlier bytes, 0 for none) with `data`.
pub fn extend(crc: u32, data: &[u8]) -> u32 {
    ::crc32c::crc32c_append(crc, data)
}

/// [`extend`] in portable software (slicing-by-8): the reference implementation.
pub fn extend_software(crc: u32, data: &[u8]) -> u32 {
    let mut c = !crc;
    let mut chunks = data.chunks_exact(8);
    for w in &mut chunks {
        let lo = c ^ u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        c = TABLES[7][(lo & 0xff) as usize]
            ^ TABLES[6][((lo >> 8) & 0xff) as usize]
            ^ TABLES[5][((lo >> 16) & 0xff) as usize]
            ^ TABLES[4][(lo >> 24) as usize]
            ^ TABLES[3][w[4] as usize]
            ^ TABLES[2][w[5] as usize]
            ^ TABLES[1][w[6] as usize]
            ^ TABLES[0][w[7] as usize];
    }
    for &b in chunks.remainder() {
        c = TABLES[0][((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// CRC32C of `data`.
pub fn checksum(data: &[u8]) -> u32 {
    extend(0, data)
}

/// The linear operator "append `n` zero bytes" on a CRC32C register, as a 32x32 matrix over
/// GF(2) (column `i` is the image of bit `i`). It turns the CRCs of two pieces into the CRC of
/// their concatenation without touching the bytes ([`Shift::combine`]): stores keep one CRC per
/// block and derive a chunk's or a range's CRC from them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shift([u32; 32]);

impl Shift {
    /// The identity (zero bytes).
    const IDENTITY: Self = {
        let mut m = [0u32; 32];
        let mut i = 0;
        while i < 32 {
            m[i] = 1 << i;
            i += 1;
        }
        Self(m)
    };

    /// One zero bit: the reflected register shifts right, folding in the polynomial.
    const BIT: Self = {
        let mut m = [0u32; 32];
        m[0] = POLY;
        let mut i = 1;
        while i < 32 {
            m[i] = 1 << (i - 1);
            i += 1;
        }
        Self(m)
    };

    /// The operator appending `n` zero bytes (computable at compile time).
    pub const fn zeros(n: u64) -> Self {
        // Square-and-multiply on the one-byte operator.
        let mut byte = Self::BIT;
        let mut k = 0;
        while k < 3 {
            byte = byte.then(byte);
            k += 1;
        }
        let mut acc = Self::IDENTITY;
        let mut n = n;
        while n > 0 {
            if n & 1 == 1 {
                acc = acc.then(byte);
            }
            byte = byte.then(byte);
            n >>= 1;
        }
        acc
    }

    /// `self`'s matrix applied to the register `v`.
    pub const fn apply(&self, mut v: u32) -> u32 {
        let mut out = 0;
        let mut i = 0;
        while v != 0 {
            if v & 1 == 1 {
                out ^= self.0[i];
            }
            v >>= 1;
            i += 1;
        }
        out
    }

    /// `self` followed by `next` (they commute: both are powers of one operator).
    const fn then(self, next: Self) -> Self {
        let mut m = [0u32; 32];
        let mut i = 0;
        while i < 32 {
            m[i] = next.apply(self.0[i]);
            i += 1;
        }
        Self(m)
    }

    /// The CRC32C of `a ++ b` from `crc(a)` and `crc(b)`, `self` being `zeros(b.len())`. The
    /// pre- and post-inversions of the two CRCs cancel (the operator is linear and the
    /// inversion of `a`'s register is carried through the zeros exactly as through `b`).
    pub const fn combine(&self, crc_a: u32, crc_b: u32) -> u32 {
        self.apply(crc_a) ^ crc_b
    }
}

/// The CRC32C of `a ++ b` from `crc(a)`, `crc(b)` and `b.len()` (O(log len) matrix products;
/// precompute a [`Shift`] when one length recurs).
pub fn combine(crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
    Shift::zeros(len_b).combine(crc_a, crc_b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        // RFC 3720 (iSCSI) appendix B.4 and the common "123456789" check value.
        assert_eq!(checksum(b"123456789"), 0xE306_9283);
        assert_eq!(checksum(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(checksum(&[0xffu8; 32]), 0x62A8_AB43);
        assert_eq!(checksum(b""), 0);
    }

    #[test]
    fn sliced_equals_bytewise() {
        // Every length 0..80 and alignment, against the plain bit-by-bit definition.
        let data: Vec<u8> = (0..80u32).map(|i| (i * 37 + 11) as u8).collect();
        let bitwise = |d: &[u8]| {
            let mut c = !0u32;
            for &b in d {
                c ^= u32::from(b);
                for _ in 0..8 {
                    c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
                }
            }
            !c
        };
        for start in 0..8 {
            for end in start..data.len() {
                assert_eq!(checksum(&data[start..end]), bitwise(&data[start..end]));
                assert_eq!(
                    extend_software(0, &data[start..end]),
                    bitwise(&data[start..end])
                );
            }
        }
    }

    #[test]
    fn hardware_equals_software() {
        let data: Vec<u8> = (0..70_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for (start, end) in [(0, 0), (0, 1), (3, 17), (1, 4096), (5, 65_537), (0, 70_000)] {
            let d = &data[start..end];
            assert_eq!(extend(0, d), extend_software(0, d), "{start}..{end}");
            assert_eq!(extend(0x1234_5678, d), extend_software(0x1234_5678, d));
        }
    }

    #[test]
    fn combine_equals_crc_of_the_concatenation() {
        let data: Vec<u8> = (0..20_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect();
        for split in [0, 1, 7, 4096, 4097, 12_288, 19_999, 20_000] {
            let (a, b) = data.split_at(split);
            let whole = checksum(&data);
            assert_eq!(
                combine(checksum(a), checksum(b), b.len() as u64),
                whole,
                "{split}"
            );
        }
        const BLOCK: Shift = Shift::zeros(4096);
        let blocks = data[..16_384].chunks(4096).map(checksum);
        let folded = blocks.reduce(|acc, c| BLOCK.combine(acc, c));
        assert_eq!(folded, Some(checksum(&data[..16_384])));
        assert_ne!(
            combine(1, 0, 4096),
            combine(0, 0, 4096),
            "the shift is not a no-op"
        );
    }

    #[test]
    fn extend_equals_whole() {
        let data = b"chain replication with apportioned queries";
        let (a, b) = data.split_at(17);
        assert_eq!(extend(checksum(a), b), checksum(data));
    }
}
