//! CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum 3FS uses end to end (§3.7).
//!
//! Clients checksum every write payload, replicas verify it before applying, chunks carry a
//! whole-chunk CRC compared along the chain and returned with reads. A table-driven software
//! implementation keeps t3fs-core free of dependencies; real drivers may swap in a hardware one
//! as long as it agrees with this module's test vectors.

const POLY: u32 = 0x82F6_3B78;

const TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
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
        table[i] = crc;
        i += 1;
    }
    table
};

/// Extends a running CRC32C (`crc` of earlier bytes, 0 for none) with `data`.
pub fn extend(crc: u32, data: &[u8]) -> u32 {
    let mut c = !crc;
    for &b in data {
        c = TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// CRC32C of `data`.
pub fn checksum(data: &[u8]) -> u32 {
    extend(0, data)
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
    fn extend_equals_whole() {
        let data = b"chain replication with apportioned queries";
        let (a, b) = data.split_at(17);
        assert_eq!(extend(checksum(a), b), checksum(data));
    }
}
