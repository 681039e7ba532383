//! A frame in flight: a message's encoded head and, beside it, its bulk payload (write data,
//! replacement content, read data), as the real transports send them (`Msg::encode_split`: TCP
//! writes the two parts back to back, RDMA reads the bulk part from the sender's buffer).
//!
//! Every message still crosses the real wire codec: the head is encoded at the sender and
//! decoded at the receiver, and the bulk part is put back into the decoded message's payload
//! slot exactly as the real receivers do (`Msg::decode_with`). What the split saves is copying
//! up to a chunk of bytes into each frame and reading them again for a fresh checksum at each
//! hop: the payload travels as the sender's own immutable buffer, so its CRC32C, computed once,
//! is the same value every receiver would compute from the same bytes.
//!
//! Invariant: `len()` is the size of the single-buffer frame (`Msg::encode`) of the same
//! message, so the network and resource models see the bytes a real link carries. Not here:
//! the network's fate of a frame (net.rs), the trace hash (mod.rs).

use t3fs_core::msg::Msg;
use t3fs_core::payload::Payload;
use t3fs_core::wire::codec::DecodeError;

/// An encoded message on the simulated network.
#[derive(Clone, Debug)]
pub struct Frame {
    /// The message's encoding with its payload slot empty.
    pub head: Vec<u8>,
    /// The payload taken out of the slot (`None` for messages without one).
    pub bulk: Option<Payload>,
}

impl Frame {
    /// Encodes `msg` for the network.
    pub fn encode(msg: Msg) -> Self {
        let (head, bulk) = msg.encode_split();
        Self { head, bulk }
    }

    /// Decodes the message at the receiver; a malformed head is an error, never a panic.
    pub fn decode(&self) -> Result<Msg, DecodeError> {
        Msg::decode_with(&self.head, self.bulk.clone())
    }

    /// Bytes on the wire: the head and the bulk part together.
    pub fn len(&self) -> usize {
        self.head.len() + self.bulk.as_ref().map_or(0, |b| b.len())
    }

    /// Whether the frame carries no bytes at all (never, for an encoded message).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use t3fs_core::testing::read_reply as reply;

    #[test]
    fn a_frame_is_as_long_as_the_single_buffer_encoding_and_decodes_to_the_message() {
        for m in [reply(vec![7; 5000]), reply(Vec::new()), Msg::SpaceInfo] {
            let f = Frame::encode(m.clone());
            assert_eq!(f.len(), m.clone().encode().len());
            assert_eq!(f.decode(), Ok(m));
        }
    }

    #[test]
    fn the_bulk_part_is_the_senders_buffer_not_a_copy() {
        let m = reply(vec![1; 4096]);
        let data = m.payload().cloned().expect("a payload");
        let f = Frame::encode(m);
        let got = f.decode().expect("decodes");
        let got = got.payload().expect("a payload");
        assert!(core::ptr::eq(got.as_ptr(), data.as_ptr()));
    }

    #[test]
    fn a_malformed_head_is_an_error() {
        let mut f = Frame::encode(reply(vec![1; 10]));
        f.head.truncate(3);
        assert!(f.decode().is_err());
    }
}
