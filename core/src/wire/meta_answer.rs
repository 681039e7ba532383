//! Meta answers: what a successful request returns ([`MetaAnswer`]), the result type of one
//! request ([`MetaResult`]) and their wire encoding.
//!
//! Invariant: a listing page and a batch stat decode at most the bounds the server answers
//! with (`DIR_LIST_PAGE_MAX`, [`BATCH_STAT_MAX`]), so a hostile peer cannot make a client
//! allocate beyond them. Not here: building answers (`meta::request`).

use super::args::BATCH_STAT_MAX;
use super::codec::{decode_list_max, encode_list, DecodeError, Decoder, Encoder, Wire};
use super::inode::{DirEntry, Inode};
use super::meta_error::MetaError;
use crate::limits::DIR_LIST_PAGE_MAX;

/// A successful answer.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum MetaAnswer {
    /// The inode the request found or made.
    Inode(Inode),
    /// A listing page: names and entries in name order.
    Entries(Vec<(Vec<u8>, DirEntry)>),
    /// Done (remove, rename).
    Done,
    /// A batch stat: one result per path, in request order.
    Stats(Vec<Result<Inode, MetaError>>),
    /// statFs.
    StatFs(FsStat),
}

/// statFs's answer: raw bytes over every target (each replica counts).
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct FsStat {
    /// Capacity.
    pub capacity: u64,
    /// Committed chunk data.
    pub used: u64,
    /// Capacity not used.
    pub free: u64,
}
crate::wire_struct!(FsStat {
    capacity,
    used,
    free
});

/// The answer to one request.
pub type MetaResult = Result<MetaAnswer, MetaError>;

/// A listing row on the wire.
#[derive(Clone, Debug, Eq, PartialEq)]
struct Row(Vec<u8>, DirEntry);

impl Wire for Row {
    fn encode(&self, enc: &mut Encoder) {
        self.0.encode(enc);
        self.1.encode(enc);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(Self(Wire::decode(dec)?, Wire::decode(dec)?))
    }
}

impl Wire for MetaAnswer {
    fn encode(&self, enc: &mut Encoder) {
        match self {
            Self::Inode(i) => {
                enc.u8(0);
                i.encode(enc);
            }
            Self::Entries(rows) => {
                enc.u8(1);
                let rows: Vec<Row> = rows
                    .iter()
                    .map(|(n, e)| Row(n.clone(), e.clone()))
                    .collect();
                encode_list(enc, &rows);
            }
            Self::Done => enc.u8(2),
            Self::StatFs(s) => {
                enc.u8(4);
                s.encode(enc);
            }
            Self::Stats(rs) => {
                enc.u8(3);
                enc.len(rs.len());
                for r in rs {
                    match r {
                        Ok(i) => {
                            enc.u8(0);
                            i.encode(enc);
                        }
                        Err(e) => {
                            enc.u8(1);
                            e.encode(enc);
                        }
                    }
                }
            }
        }
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(match dec.u8()? {
            0 => Self::Inode(Wire::decode(dec)?),
            // A page: the server answers at most `DIR_LIST_PAGE_MAX` names.
            1 => Self::Entries(
                decode_list_max::<Row>(dec, DIR_LIST_PAGE_MAX)?
                    .into_iter()
                    .map(|r| (r.0, r.1))
                    .collect(),
            ),
            2 => Self::Done,
            4 => Self::StatFs(Wire::decode(dec)?),
            3 => {
                let n = dec.len(BATCH_STAT_MAX as u32, 2)?;
                let mut rs = Vec::with_capacity(n);
                for _ in 0..n {
                    rs.push(match dec.u8()? {
                        0 => Ok(Wire::decode(dec)?),
                        1 => Err(Wire::decode(dec)?),
                        t => return Err(DecodeError::UnknownTag(t)),
                    });
                }
                Self::Stats(rs)
            }
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}

impl Wire for MetaResult {
    fn encode(&self, enc: &mut Encoder) {
        match self {
            Ok(a) => {
                enc.u8(0);
                a.encode(enc);
            }
            Err(e) => {
                enc.u8(1);
                e.encode(enc);
            }
        }
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        match dec.u8()? {
            0 => Ok(Ok(Wire::decode(dec)?)),
            1 => Ok(Err(Wire::decode(dec)?)),
            t => Err(DecodeError::UnknownTag(t)),
        }
    }
}
