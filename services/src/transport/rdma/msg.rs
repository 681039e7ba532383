//! The messages a connection's channel carries (each one SEND into one slot):
//!
//! - `Inline`: a frame with no bulk part whose head fits a slot, carried whole;
//! - `Pull` (dialer → acceptor): a frame staged in the dialer's region at `addr` (head, then
//!   bulk) for the acceptor to RDMA READ, as a 3FS storage service pulls a client's write
//!   buffer; the acceptor answers `Release` once it has the bytes;
//! - `Pushed` (acceptor → dialer): a frame the acceptor has RDMA WRITTEN into the dialer's
//!   landing range at `off` just before this SEND (RC order puts the bytes first), as 3FS
//!   pushes read data into a client's buffer; the dialer answers `Return` once it took them;
//! - `Release`, `Return`: give the staged or landing extent back to its allocator;
//! - `Ready` (dialer → acceptor, first): the dialer's queue pair is connected, so the acceptor
//!   may send (before it, the acceptor's sends could reach a queue pair not yet ready).
//!
//! Fields are big-endian after a one-byte kind. Decoding never panics.

/// One channel message.
#[derive(Clone, Debug, Eq, PartialEq)]
pub(crate) enum ChMsg {
    Inline(Vec<u8>),
    Pull {
        id: u32,
        addr: u64,
        head: u32,
        bulk: u32,
    },
    Pushed {
        off: u64,
        head: u32,
        bulk: u32,
    },
    Release(u32),
    Return(u64),
    Ready,
}

impl ChMsg {
    /// Bytes of an `Inline` message's header.
    pub(crate) const INLINE_HEADER: usize = 1;

    /// An `Inline` message's bytes, straight from the frame's head (one copy).
    pub(crate) fn encode_inline(head: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::INLINE_HEADER + head.len());
        out.push(0);
        out.extend_from_slice(head);
        out
    }

    /// The message's bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24);
        match self {
            Self::Inline(head) => return Self::encode_inline(head),
            Self::Pull {
                id,
                addr,
                head,
                bulk,
            } => {
                out.push(1);
                out.extend_from_slice(&id.to_be_bytes());
                out.extend_from_slice(&addr.to_be_bytes());
                out.extend_from_slice(&head.to_be_bytes());
                out.extend_from_slice(&bulk.to_be_bytes());
            }
            Self::Pushed { off, head, bulk } => {
                out.push(2);
                out.extend_from_slice(&off.to_be_bytes());
                out.extend_from_slice(&head.to_be_bytes());
                out.extend_from_slice(&bulk.to_be_bytes());
            }
            Self::Release(id) => {
                out.push(3);
                out.extend_from_slice(&id.to_be_bytes());
            }
            Self::Return(off) => {
                out.push(4);
                out.extend_from_slice(&off.to_be_bytes());
            }
            Self::Ready => out.push(5),
        }
        out
    }

    /// Decodes a message; `None` if malformed.
    pub(crate) fn decode(b: &[u8]) -> Option<Self> {
        let (&kind, rest) = b.split_first()?;
        if kind == 0 {
            return Some(Self::Inline(rest.to_vec()));
        }
        let u32_at = |i: usize| Some(u32::from_be_bytes(rest.get(i..i + 4)?.try_into().ok()?));
        let u64_at = |i: usize| Some(u64::from_be_bytes(rest.get(i..i + 8)?.try_into().ok()?));
        let (msg, len) = match kind {
            1 => (
                Self::Pull {
                    id: u32_at(0)?,
                    addr: u64_at(4)?,
                    head: u32_at(12)?,
                    bulk: u32_at(16)?,
                },
                20,
            ),
            2 => (
                Self::Pushed {
                    off: u64_at(0)?,
                    head: u32_at(8)?,
                    bulk: u32_at(12)?,
                },
                16,
            ),
            3 => (Self::Release(u32_at(0)?), 4),
            4 => (Self::Return(u64_at(0)?), 8),
            5 => (Self::Ready, 0),
            _ => return None,
        };
        (rest.len() == len).then_some(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::ChMsg;

    #[test]
    fn messages_round_trip_and_damaged_ones_are_refused() {
        for m in [
            ChMsg::Inline(b"head".to_vec()),
            ChMsg::Inline(Vec::new()),
            ChMsg::Pull {
                id: 7,
                addr: 0x1000_0000,
                head: 40,
                bulk: 1 << 20,
            },
            ChMsg::Pushed {
                off: 4096,
                head: 40,
                bulk: 4096,
            },
            ChMsg::Release(7),
            ChMsg::Return(4096),
            ChMsg::Ready,
        ] {
            let b = m.encode();
            assert_eq!(ChMsg::decode(&b), Some(m.clone()));
            if !matches!(m, ChMsg::Inline(_) | ChMsg::Ready) {
                assert_eq!(ChMsg::decode(&b[..b.len() - 1]), None);
                let mut long = b.clone();
                long.push(0);
                assert_eq!(ChMsg::decode(&long), None);
            }
        }
        assert_eq!(ChMsg::decode(&[]), None);
        assert_eq!(ChMsg::decode(&[9, 0, 0, 0, 0]), None);
    }
}
