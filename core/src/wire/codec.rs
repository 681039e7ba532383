//! The versioned binary wire codec: every message, in the real services and in simulation.
//!
//! Frame layout (little-endian, byte-level table in `docs/wire.md`):
//!
//! | bytes | field |
//! | --- | --- |
//! | 2 | magic `0x33 0xF5` |
//! | 1 | codec version (currently 1) |
//! | 1 | message kind |
//! | … | body: fields in declaration order |
//!
//! Variable-length fields carry a `u32` length; lengths are checked against [`crate::limits`]
//! *before* anything is allocated. Decoding untrusted input returns a [`DecodeError`] and never
//! panics: the receiver drops the frame and counts it. This module does not frame a byte stream
//! (transports add a length prefix) and does not authenticate.

use core::fmt;

use crate::limits::{FRAME_BYTES_MAX, LIST_LEN_MAX, PAYLOAD_BYTES_MAX};
use crate::payload::Payload;

/// First two bytes of every frame.
pub const MAGIC: [u8; 2] = [0x33, 0xF5];
/// The codec version this build writes and reads.
pub const CODEC_VERSION: u8 = 1;

/// Why a frame could not be decoded.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum DecodeError {
    /// The frame ended inside a field.
    Truncated,
    /// The frame does not start with [`MAGIC`].
    BadMagic,
    /// The frame was written by a codec version this build does not read.
    UnsupportedVersion(u8),
    /// An enum tag (message kind or variant) is unknown.
    UnknownTag(u8),
    /// A length field exceeds its limit.
    TooLong(u32),
    /// A field's value is invalid (for example a bool other than 0 or 1).
    Invalid,
    /// Bytes remain after the message.
    TrailingBytes(usize),
    /// The whole frame exceeds [`FRAME_BYTES_MAX`].
    FrameTooLarge(usize),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated => write!(f, "frame truncated"),
            Self::BadMagic => write!(f, "bad magic"),
            Self::UnsupportedVersion(v) => write!(f, "unsupported codec version {v}"),
            Self::UnknownTag(t) => write!(f, "unknown tag {t}"),
            Self::TooLong(n) => write!(f, "length {n} exceeds limit"),
            Self::Invalid => write!(f, "invalid field value"),
            Self::TrailingBytes(n) => write!(f, "{n} trailing bytes"),
            Self::FrameTooLarge(n) => write!(f, "frame of {n} bytes exceeds limit"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Appends fields to a byte buffer.
#[derive(Debug, Default)]
pub struct Encoder {
    buf: Vec<u8>,
}

/// Bytes reserved up front: most frames without a payload fit.
const SMALL_FRAME: usize = 128;
/// Bytes reserved after a byte string for the fields that follow it.
const FIELDS_AFTER_BYTES: usize = 64;

impl Encoder {
    /// An empty encoder, with room for a frame without a payload.
    pub fn new() -> Self {
        Self {
            buf: Vec::with_capacity(SMALL_FRAME),
        }
    }
    /// Appends one byte.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    /// Appends a little-endian u32.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends a little-endian u64.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends a length-prefixed byte string.
    pub fn bytes(&mut self, v: &[u8]) {
        // Room for the fields that usually follow a payload too, so a chunk-sized frame grows
        // once instead of once for the payload and again, doubling, for a trailing checksum.
        self.buf.reserve(v.len() + 4 + FIELDS_AFTER_BYTES);
        self.len(v.len());
        self.buf.extend_from_slice(v);
    }
    /// Appends a length prefix. Encoding more than `u32::MAX` elements is a caller bug.
    pub fn len(&mut self, n: usize) {
        self.u32(u32::try_from(n).expect("length fits u32: callers respect limits.rs"));
    }
    /// The encoded bytes.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads fields from a byte slice with bounds checks.
#[derive(Debug)]
pub struct Decoder<'a> {
    buf: &'a [u8],
}

impl<'a> Decoder<'a> {
    /// A decoder over `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() < n {
            return Err(DecodeError::Truncated);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    /// Reads one byte.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    /// Reads a little-endian u32.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// Reads a little-endian u64.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    /// Reads a bool encoded as 0 or 1.
    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::Invalid),
        }
    }
    /// Reads a length prefix bounded by `max`, also checking that at least `len * min_elem_bytes`
    /// bytes remain, so that a forged length cannot cause a large allocation.
    pub fn len(&mut self, max: u32, min_elem_bytes: usize) -> Result<usize, DecodeError> {
        let n = self.u32()?;
        if n > max {
            return Err(DecodeError::TooLong(n));
        }
        let n = n as usize;
        if n.saturating_mul(min_elem_bytes) > self.buf.len() {
            return Err(DecodeError::Truncated);
        }
        Ok(n)
    }
    /// Reads a length-prefixed byte string of at most [`PAYLOAD_BYTES_MAX`] bytes.
    pub fn bytes(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.len(PAYLOAD_BYTES_MAX, 1)?;
        Ok(self.take(n)?.to_vec())
    }
    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }
}

/// A type with a wire encoding.
pub trait Wire: Sized {
    /// Appends `self`.
    fn encode(&self, enc: &mut Encoder);
    /// Reads a value; errors on malformed input, never panics.
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError>;
}

impl Wire for u8 {
    fn encode(&self, enc: &mut Encoder) {
        enc.u8(*self);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        dec.u8()
    }
}
impl Wire for u32 {
    fn encode(&self, enc: &mut Encoder) {
        enc.u32(*self);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        dec.u32()
    }
}
impl Wire for u64 {
    fn encode(&self, enc: &mut Encoder) {
        enc.u64(*self);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        dec.u64()
    }
}
impl Wire for bool {
    fn encode(&self, enc: &mut Encoder) {
        enc.u8(u8::from(*self));
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        dec.bool()
    }
}
impl Wire for Vec<u8> {
    fn encode(&self, enc: &mut Encoder) {
        enc.bytes(self);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        dec.bytes()
    }
}
/// Encoded exactly as the `Vec<u8>` it stands for.
impl Wire for Payload {
    fn encode(&self, enc: &mut Encoder) {
        enc.bytes(self);
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        dec.bytes().map(Payload::from)
    }
}
impl<T: Wire> Wire for Option<T> {
    fn encode(&self, enc: &mut Encoder) {
        match self {
            None => enc.u8(0),
            Some(v) => {
                enc.u8(1);
                v.encode(enc);
            }
        }
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        match dec.u8()? {
            0 => Ok(None),
            1 => Ok(Some(T::decode(dec)?)),
            t => Err(DecodeError::UnknownTag(t)),
        }
    }
}

/// A list of wire values (not bytes: byte strings use [`Encoder::bytes`]).
pub fn encode_list<T: Wire>(enc: &mut Encoder, items: &[T]) {
    enc.len(items.len());
    for item in items {
        item.encode(enc);
    }
}

/// Reads a list of at most [`LIST_LEN_MAX`] values, each at least one byte long.
pub fn decode_list<T: Wire>(dec: &mut Decoder<'_>) -> Result<Vec<T>, DecodeError> {
    decode_list_max(dec, LIST_LEN_MAX)
}

/// Reads a list of at most `max` values (a page), each at least one byte long; a longer one is
/// `TooLong` before anything is allocated.
pub fn decode_list_max<T: Wire>(dec: &mut Decoder<'_>, max: u32) -> Result<Vec<T>, DecodeError> {
    let n = dec.len(max, 1)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(T::decode(dec)?);
    }
    Ok(out)
}

/// Implements [`Wire`] for a struct by encoding its fields in order.
#[macro_export]
macro_rules! wire_struct {
    ($ty:ident { $($field:ident),* $(,)? }) => {
        impl $crate::wire::codec::Wire for $ty {
            fn encode(&self, enc: &mut $crate::wire::codec::Encoder) {
                $( $crate::wire::codec::Wire::encode(&self.$field, enc); )*
            }
            fn decode(
                dec: &mut $crate::wire::codec::Decoder<'_>,
            ) -> Result<Self, $crate::wire::codec::DecodeError> {
                Ok(Self { $( $field: $crate::wire::codec::Wire::decode(dec)?, )* })
            }
        }
    };
}

/// Implements [`Wire`] for a single-field newtype.
macro_rules! wire_newtype {
    ($($ty:ty),*) => {$(
        impl Wire for $ty {
            fn encode(&self, enc: &mut Encoder) {
                self.0.encode(enc);
            }
            fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
                Ok(Self(Wire::decode(dec)?))
            }
        }
    )*};
}

use crate::ids::*;
wire_newtype!(
    TargetId,
    ChainId,
    ChainVersion,
    ChunkVersion,
    RoutingVersion,
    ClientId,
    ChannelId,
    SeqNum,
    RequestId,
    IoId,
    InodeId
);
wire_struct!(ChunkId { inode, index });

/// The marker that says a node id does not fit 4 bytes and its 8 bytes follow.
const NODE_ID_WIDE: u32 = u32::MAX;

/// A node id takes 4 bytes when it is below `u32::MAX` (every server, which the plan numbers
/// from 0) and 4 + 8 when it is not (clients, whose ids are 64 random bits). Why not 8 always:
/// the short form is the one every frame, every persisted mgmtd row (a target's node, the
/// lease's primary) and every simulated trace was written with, so widening the id changes none
/// of them.
impl Wire for NodeId {
    fn encode(&self, enc: &mut Encoder) {
        match u32::try_from(self.0) {
            Ok(short) if short != NODE_ID_WIDE => enc.u32(short),
            _ => {
                enc.u32(NODE_ID_WIDE);
                enc.u64(self.0);
            }
        }
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        match dec.u32()? {
            // One id, one encoding: a wide form of an id the short form holds is refused.
            NODE_ID_WIDE => match dec.u64()? {
                wide if wide >= u64::from(NODE_ID_WIDE) => Ok(Self(wide)),
                _ => Err(DecodeError::Invalid),
            },
            short => Ok(Self(u64::from(short))),
        }
    }
}
wire_struct!(VersionedChain { chain, version });

/// Encodes a whole frame: header, then `kind` and `body`.
pub fn encode_frame(kind: u8, body: impl FnOnce(&mut Encoder)) -> Vec<u8> {
    let mut enc = Encoder::new();
    enc.buf.extend_from_slice(&MAGIC);
    enc.u8(CODEC_VERSION);
    enc.u8(kind);
    body(&mut enc);
    enc.finish()
}

/// Checks a frame's header and returns its kind and a decoder over the body.
pub fn decode_frame(frame: &[u8]) -> Result<(u8, Decoder<'_>), DecodeError> {
    frame_header(Decoder::new(frame))
}

fn frame_header(mut dec: Decoder<'_>) -> Result<(u8, Decoder<'_>), DecodeError> {
    let frame = dec.buf;
    if frame.len() > FRAME_BYTES_MAX as usize {
        return Err(DecodeError::FrameTooLarge(frame.len()));
    }
    let magic = [dec.u8()?, dec.u8()?];
    if magic != MAGIC {
        return Err(DecodeError::BadMagic);
    }
    let version = dec.u8()?;
    if version != CODEC_VERSION {
        return Err(DecodeError::UnsupportedVersion(version));
    }
    let kind = dec.u8()?;
    Ok((kind, dec))
}
