//! Connection management over the TCP transport (what rdma_cm does on hardware): the dialer
//! sends `Connect` with its queue pair's endpoint, its registered region and its channel
//! sizes; the acceptor makes a queue pair of the same sizes, connects it and answers `Accept`
//! with its own; a node that does not speak RDMA answers `Refuse` (the TCP transport does, on
//! seeing the magic), and the dialer then sends that peer its frames over TCP.
//!
//! These frames travel on the TCP connection, so they are authenticated by its handshake. They
//! start with [`MAGIC`], which no codec frame starts with. Decoding never panics.
//!
//! Not here: the state each frame moves (`link.rs`).

use crate::rdma::verbs::{MrInfo, QpEndpoint, QpNum};

/// First bytes of every connection-management frame.
pub(crate) const MAGIC: &[u8; 8] = b"T3RDMA\x00\x01";

/// A connection-management frame.
#[derive(Clone, Debug, Eq, PartialEq)]
pub(crate) enum Ctl {
    /// The dialer's offer for connection `conn`.
    Connect {
        conn: u64,
        endpoint: QpEndpoint,
        region: Region,
        slots: u32,
        slot_bytes: u32,
    },
    /// The acceptor's answer to connection `conn`.
    Accept {
        conn: u64,
        endpoint: QpEndpoint,
        region: Region,
    },
    /// This node does not speak RDMA: use TCP.
    Refuse { conn: u64 },
}

/// A peer's registered region: where its frames are pulled from and pushed to.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) struct Region {
    pub(crate) addr: u64,
    pub(crate) len: u64,
    pub(crate) rkey: u32,
}

impl Region {
    /// Whether the region is usable: two halves, its end inside the address space.
    pub(crate) fn fits(&self) -> bool {
        self.len >= 2 && self.addr.checked_add(self.len).is_some()
    }
}

impl From<MrInfo> for Region {
    fn from(m: MrInfo) -> Self {
        Self {
            addr: m.addr,
            len: m.len,
            rkey: m.rkey,
        }
    }
}

/// Whether `frame` is a connection-management frame.
pub(crate) fn is_ctl(frame: &[u8]) -> bool {
    frame.starts_with(MAGIC)
}

fn endpoint(out: &mut Vec<u8>, e: QpEndpoint) {
    out.extend_from_slice(&e.gid.to_be_bytes());
    out.extend_from_slice(&e.lid.to_be_bytes());
    out.extend_from_slice(&e.qpn.0.to_be_bytes());
    out.extend_from_slice(&e.psn.to_be_bytes());
}

fn region(out: &mut Vec<u8>, r: Region) {
    out.extend_from_slice(&r.addr.to_be_bytes());
    out.extend_from_slice(&r.len.to_be_bytes());
    out.extend_from_slice(&r.rkey.to_be_bytes());
}

impl Ctl {
    /// The frame's bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        match *self {
            Self::Connect {
                conn,
                endpoint: e,
                region: r,
                slots,
                slot_bytes,
            } => {
                out.push(1);
                out.extend_from_slice(&conn.to_be_bytes());
                endpoint(&mut out, e);
                region(&mut out, r);
                out.extend_from_slice(&slots.to_be_bytes());
                out.extend_from_slice(&slot_bytes.to_be_bytes());
            }
            Self::Accept {
                conn,
                endpoint: e,
                region: r,
            } => {
                out.push(2);
                out.extend_from_slice(&conn.to_be_bytes());
                endpoint(&mut out, e);
                region(&mut out, r);
            }
            Self::Refuse { conn } => {
                out.push(3);
                out.extend_from_slice(&conn.to_be_bytes());
            }
        }
        out
    }

    /// Decodes a frame that [`is_ctl`]; `None` if it is malformed.
    pub(crate) fn decode(frame: &[u8]) -> Option<Self> {
        let mut r = Reader(frame.strip_prefix(MAGIC)?);
        let kind = r.n::<1>()?[0];
        let conn = u64::from_be_bytes(r.n()?);
        let ctl = match kind {
            1 => Self::Connect {
                conn,
                endpoint: r.endpoint()?,
                region: r.region()?,
                slots: u32::from_be_bytes(r.n()?),
                slot_bytes: u32::from_be_bytes(r.n()?),
            },
            2 => Self::Accept {
                conn,
                endpoint: r.endpoint()?,
                region: r.region()?,
            },
            3 => Self::Refuse { conn },
            _ => return None,
        };
        r.0.is_empty().then_some(ctl)
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn n<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (a, b) = self.0.split_at_checked(N)?;
        self.0 = b;
        a.try_into().ok()
    }
    fn endpoint(&mut self) -> Option<QpEndpoint> {
        Some(QpEndpoint {
            gid: u128::from_be_bytes(self.n()?),
            lid: u16::from_be_bytes(self.n()?),
            qpn: QpNum(u32::from_be_bytes(self.n()?)),
            psn: u32::from_be_bytes(self.n()?),
        })
    }
    fn region(&mut self) -> Option<Region> {
        Some(Region {
            addr: u64::from_be_bytes(self.n()?),
            len: u64::from_be_bytes(self.n()?),
            rkey: u32::from_be_bytes(self.n()?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_damaged_ones_are_refused() {
        let e = QpEndpoint {
            gid: 0xfe80 << 112 | 7,
            lid: 3,
            qpn: QpNum(17),
            psn: 99,
        };
        let region = Region {
            addr: 0x1000,
            len: 8 << 20,
            rkey: 42,
        };
        for c in [
            Ctl::Connect {
                conn: 5,
                endpoint: e,
                region,
                slots: 64,
                slot_bytes: 65536,
            },
            Ctl::Accept {
                conn: 5,
                endpoint: e,
                region,
            },
            Ctl::Refuse { conn: 9 },
        ] {
            let b = c.encode();
            assert!(is_ctl(&b));
            assert_eq!(Ctl::decode(&b), Some(c));
            for cut in 0..b.len() {
                assert_eq!(Ctl::decode(&b[..cut]), None, "cut at {cut}");
            }
            let mut long = b.clone();
            long.push(0);
            assert_eq!(Ctl::decode(&long), None);
        }
        let mut bad = Ctl::Refuse { conn: 1 }.encode();
        bad[8] = 9;
        assert_eq!(Ctl::decode(&bad), None);
    }
}
