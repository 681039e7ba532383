//! The bulk payload of a message (write data, replacement content, read data) taken out of it
//! and put back, so that a transport can send and receive it as a separate part, straight from
//! and into its own buffer, instead of copying it through the encoded frame.
//!
//! Invariant: `decode_split(encode_split(m)) == m` for every message (the head is the message's
//! ordinary encoding with the payload emptied). A bulk part given to a message without a
//! payload slot, or whose slot is not empty in the head, is malformed input: an error, never a
//! panic. Not here: the framing that carries the two parts (the real transport's).

use crate::chunk::UpdateKind;
use crate::payload::Payload;

use super::codec::DecodeError;
use super::Msg;

impl Msg {
    /// The message's payload slot (write data, replacement content, read data), if it has one.
    pub fn payload(&self) -> Option<&Payload> {
        match self {
            Self::Write(u) | Self::Update(u) => match &u.kind {
                UpdateKind::Write { data, .. } | UpdateKind::Replace { data } => Some(data),
                _ => None,
            },
            Self::ReadReply(r) => Some(&r.data),
            _ => None,
        }
    }

    /// [`Msg::payload`], to take or fill the slot.
    fn payload_mut(&mut self) -> Option<&mut Payload> {
        match self {
            Self::Write(u) | Self::Update(u) => match &mut u.kind {
                UpdateKind::Write { data, .. } | UpdateKind::Replace { data } => Some(data),
                _ => None,
            },
            Self::ReadReply(r) => Some(&mut r.data),
            _ => None,
        }
    }

    /// Encodes the message as a head and its bulk payload (`None` when it has no payload slot,
    /// so that the many small messages allocate nothing for one). A write's payload is shared
    /// with the message it came from, not copied.
    pub fn encode_split(mut self) -> (Vec<u8>, Option<Payload>) {
        let bulk = self.payload_mut().map(std::mem::take);
        (self.encode(), bulk)
    }

    /// Decodes a message from the two parts [`Msg::encode_split`] made.
    pub fn decode_split(head: &[u8], bulk: Vec<u8>) -> Result<Self, DecodeError> {
        Self::decode_with(head, Some(bulk.into()))
    }

    /// [`Msg::decode_split`] with the bulk part as a payload (shared, not copied); an empty or
    /// absent bulk part leaves the decoded slot as the head has it.
    pub fn decode_with(head: &[u8], bulk: Option<Payload>) -> Result<Self, DecodeError> {
        let mut msg = Self::decode(head)?;
        let Some(bulk) = bulk.filter(|b| !b.is_empty()) else {
            return Ok(msg);
        };
        match msg.payload_mut() {
            Some(slot) if slot.is_empty() => *slot = bulk,
            _ => return Err(DecodeError::Invalid),
        }
        Ok(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::read_reply as reply;

    #[test]
    fn split_round_trips_and_moves_the_payload_out_of_the_head() {
        let m = reply(vec![7; 5000]);
        let (head, bulk) = m.clone().encode_split();
        let bulk = bulk.map(Payload::into_vec).unwrap_or_default();
        assert_eq!(bulk.len(), 5000);
        assert!(head.len() < 100, "the head carries no payload");
        assert_eq!(Msg::decode_split(&head, bulk), Ok(m));
        let none = Msg::SpaceInfo;
        let (head, bulk) = none.clone().encode_split();
        let bulk = bulk.map(Payload::into_vec).unwrap_or_default();
        assert!(bulk.is_empty());
        assert_eq!(Msg::decode_split(&head, bulk), Ok(none));
    }

    #[test]
    fn a_bulk_part_without_a_slot_for_it_is_malformed() {
        let (head, _) = Msg::SpaceInfo.encode_split();
        assert_eq!(Msg::decode_split(&head, vec![1]), Err(DecodeError::Invalid));
        let full = reply(vec![1, 2]).encode();
        assert_eq!(Msg::decode_split(&full, vec![3]), Err(DecodeError::Invalid));
    }
}
