//! Wire messages of the KV service and of address publication.
//!
//! A `kv` process serves the embedded engine to every node on a host: a node's `IoOp::Kv`
//! becomes a [`KvReq`] and its completion the matching [`KvReply`] (same `id`). mgmtd publishes
//! server addresses in [`NodeAddrs`] next to routing info, so a client that knows only mgmtd's
//! address finds every storage and meta node. Not here: the engine (t3fs-real) or retries (the
//! machines' own: a lost reply is a timeout, and a lost commit reply is `CommitUnknown`).

use crate::ids::NodeId;
use crate::kv::{CommitReq, KeyRange, KvDone, KvError, KvOp, KvVersion, Mutation};
use crate::limits::LIST_LEN_MAX;
use crate::wire_struct;

use super::codec::{decode_list, encode_list, DecodeError, Decoder, Encoder, Wire};

/// Node → kv: run one KV step.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct KvReq {
    /// Caller-chosen id, echoed in the reply.
    pub id: u64,
    /// The step.
    pub op: KvOp,
}

/// kv → node: the outcome of [`KvReq`] `id`.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct KvReply {
    /// The request's id.
    pub id: u64,
    /// The outcome.
    pub result: Result<KvDone, KvError>,
}

/// mgmtd → anyone: the address every server listens on (`host:port`).
#[derive(Clone, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct NodeAddrs {
    /// Addresses by node, in node order.
    pub addrs: Vec<(NodeId, String)>,
    /// The meta servers among them (clients send namespace requests there).
    pub meta: Vec<NodeId>,
}

wire_struct!(KvReq { id, op });
wire_struct!(KvReply { id, result });
wire_struct!(KeyRange { begin, end });
wire_struct!(CommitReq {
    read_version,
    read_conflicts,
    mutations
});

impl Wire for KvVersion {
    fn encode(&self, enc: &mut Encoder) {
        self.0.encode(enc);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(Self(Wire::decode(dec)?))
    }
}

impl Wire for Vec<KeyRange> {
    fn encode(&self, enc: &mut Encoder) {
        encode_list(enc, self);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        decode_list(dec)
    }
}

impl Wire for Vec<Mutation> {
    fn encode(&self, enc: &mut Encoder) {
        encode_list(enc, self);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        decode_list(dec)
    }
}

impl Wire for Mutation {
    fn encode(&self, enc: &mut Encoder) {
        match self {
            Self::Set(k, v) => {
                enc.u8(0);
                k.encode(enc);
                v.encode(enc);
            }
            Self::Clear(k) => {
                enc.u8(1);
                k.encode(enc);
            }
            Self::ClearRange(r) => {
                enc.u8(2);
                r.encode(enc);
            }
        }
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(match dec.u8()? {
            0 => Self::Set(Wire::decode(dec)?, Wire::decode(dec)?),
            1 => Self::Clear(Wire::decode(dec)?),
            2 => Self::ClearRange(Wire::decode(dec)?),
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}

/// Key-value pairs of a range read.
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

fn encode_pairs(enc: &mut Encoder, pairs: &[(Vec<u8>, Vec<u8>)]) {
    enc.len(pairs.len());
    for (k, v) in pairs {
        k.encode(enc);
        v.encode(enc);
    }
}

fn decode_pairs(dec: &mut Decoder<'_>) -> Result<Pairs, DecodeError> {
    let n = dec.len(LIST_LEN_MAX, 8)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push((Wire::decode(dec)?, Wire::decode(dec)?));
    }
    Ok(out)
}

impl Wire for KvOp {
    fn encode(&self, enc: &mut Encoder) {
        match self {
            Self::Read { at, keys, ranges } => {
                enc.u8(0);
                at.encode(enc);
                enc.len(keys.len());
                for k in keys {
                    k.encode(enc);
                }
                enc.len(ranges.len());
                for (r, limit) in ranges {
                    r.encode(enc);
                    limit.encode(enc);
                }
            }
            Self::Commit(c) => {
                enc.u8(1);
                c.encode(enc);
            }
        }
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(match dec.u8()? {
            0 => {
                let at = Wire::decode(dec)?;
                let n = dec.len(LIST_LEN_MAX, 4)?;
                let mut keys = Vec::with_capacity(n);
                for _ in 0..n {
                    keys.push(Wire::decode(dec)?);
                }
                let n = dec.len(LIST_LEN_MAX, 12)?;
                let mut ranges = Vec::with_capacity(n);
                for _ in 0..n {
                    ranges.push((Wire::decode(dec)?, Wire::decode(dec)?));
                }
                Self::Read { at, keys, ranges }
            }
            1 => Self::Commit(Wire::decode(dec)?),
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}

impl Wire for KvDone {
    fn encode(&self, enc: &mut Encoder) {
        match self {
            Self::Read {
                version,
                values,
                ranges,
            } => {
                enc.u8(0);
                version.encode(enc);
                enc.len(values.len());
                for v in values {
                    v.encode(enc);
                }
                enc.len(ranges.len());
                for r in ranges {
                    encode_pairs(enc, r);
                }
            }
            Self::Committed(v) => {
                enc.u8(1);
                v.encode(enc);
            }
        }
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(match dec.u8()? {
            0 => {
                let version = Wire::decode(dec)?;
                let n = dec.len(LIST_LEN_MAX, 1)?;
                let mut values = Vec::with_capacity(n);
                for _ in 0..n {
                    values.push(Wire::decode(dec)?);
                }
                let n = dec.len(LIST_LEN_MAX, 4)?;
                let mut ranges = Vec::with_capacity(n);
                for _ in 0..n {
                    ranges.push(decode_pairs(dec)?);
                }
                Self::Read {
                    version,
                    values,
                    ranges,
                }
            }
            1 => Self::Committed(Wire::decode(dec)?),
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}

impl Wire for KvError {
    fn encode(&self, enc: &mut Encoder) {
        enc.u8(match self {
            Self::Conflict => 0,
            Self::CommitUnknown => 1,
            Self::TooOld => 2,
            Self::Unavailable => 3,
            Self::NoSpace => 4,
        });
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(match dec.u8()? {
            0 => Self::Conflict,
            1 => Self::CommitUnknown,
            2 => Self::TooOld,
            3 => Self::Unavailable,
            4 => Self::NoSpace,
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}

impl Wire for Result<KvDone, KvError> {
    fn encode(&self, enc: &mut Encoder) {
        match self {
            Ok(d) => {
                enc.u8(0);
                d.encode(enc);
            }
            Err(e) => {
                enc.u8(1);
                e.encode(enc);
            }
        }
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(match dec.u8()? {
            0 => Ok(Wire::decode(dec)?),
            1 => Err(Wire::decode(dec)?),
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}

impl Wire for NodeAddrs {
    fn encode(&self, enc: &mut Encoder) {
        enc.len(self.addrs.len());
        for (n, a) in &self.addrs {
            n.encode(enc);
            a.as_bytes().to_vec().encode(enc);
        }
        encode_list(enc, &self.meta);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        let n = dec.len(LIST_LEN_MAX, 8)?;
        let mut addrs = Vec::with_capacity(n);
        for _ in 0..n {
            let node = Wire::decode(dec)?;
            let bytes: Vec<u8> = Wire::decode(dec)?;
            let a = String::from_utf8(bytes).map_err(|_| DecodeError::Invalid)?;
            addrs.push((node, a));
        }
        let meta = decode_list(dec)?;
        Ok(Self { addrs, meta })
    }
}

#[cfg(test)]
mod tests {
    use crate::kv::{CommitReq, KeyRange, KvDone, KvError, KvOp, KvVersion, Mutation};
    use crate::msg::Msg;

    fn round_trip(m: Msg) {
        let bytes = m.encode();
        assert_eq!(Msg::decode(&bytes).unwrap(), m);
        for cut in 0..bytes.len() {
            assert!(Msg::decode(&bytes[..cut]).is_err(), "truncated at {cut}");
        }
    }

    #[test]
    fn kv_messages_round_trip_and_reject_truncation() {
        round_trip(Msg::KvReq(super::KvReq {
            id: 7,
            op: KvOp::Read {
                at: Some(KvVersion(3)),
                keys: vec![b"a".to_vec()],
                ranges: vec![(KeyRange::prefix(b"ch"), 10)],
            },
        }));
        round_trip(Msg::KvReq(super::KvReq {
            id: 8,
            op: KvOp::Commit(CommitReq {
                read_version: KvVersion(4),
                read_conflicts: vec![KeyRange::single(b"k")],
                mutations: vec![
                    Mutation::Set(b"k".to_vec(), b"v".to_vec()),
                    Mutation::Clear(b"x".to_vec()),
                    Mutation::ClearRange(KeyRange::prefix(b"y")),
                ],
            }),
        }));
        round_trip(Msg::KvReply(super::KvReply {
            id: 7,
            result: Ok(KvDone::Read {
                version: KvVersion(3),
                values: vec![None, Some(b"v".to_vec())],
                ranges: vec![vec![(b"a".to_vec(), b"b".to_vec())]],
            }),
        }));
        for (id, e) in [
            KvError::Conflict,
            KvError::CommitUnknown,
            KvError::TooOld,
            KvError::Unavailable,
            KvError::NoSpace,
        ]
        .into_iter()
        .enumerate()
        {
            round_trip(Msg::KvReply(super::KvReply {
                id: 9 + id as u64,
                result: Err(e),
            }));
        }
        round_trip(Msg::NodeAddrs(super::NodeAddrs {
            addrs: vec![(crate::ids::NodeId(1), "127.0.0.1:9000".into())],
            meta: vec![crate::ids::NodeId(1)],
        }));
    }
}
