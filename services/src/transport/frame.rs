//! Framing of a byte stream: an 8-byte prefix (the head's length and the bulk part's length,
//! `u32` big-endian each), then the head (one `Msg` encoded by the core codec, payload emptied)
//! and the bulk part (the message's payload, `Msg::encode_split`; empty for most messages).
//!
//! Invariants:
//! - lengths whose sum is over the limit are refused as soon as the 8 bytes arrive, before any
//!   buffer is grown for them, so a peer cannot make a connection's buffers exceed about twice
//!   `frame_max` plus one read chunk;
//! - a head is split off the read buffer and frozen (`BytesMut::split_to`), never copied; a
//!   bulk part is read from the socket straight into a buffer of its own, never past its end
//!   (a chunk-sized part into a pooled vector, `vec_pool.rs`; only the few bytes of it already
//!   read ahead with the head are copied), so a 1 MiB payload crosses user
//!   space without a copy either way; an outbound frame goes to the socket from the caller's
//!   `Bytes` by vectored writes, with only the prefixes of a batch gathered into one buffer;
//! - [`FrameReader::next`] is cancel-safe: a partly read frame stays in the reader;
//! - malformed input is an error value, never a panic.
//!
//! Inbound heads share their read buffer's allocation: a head kept long after it arrived keeps
//! that buffer (up to one read chunk of neighbours) alive. Receivers decode and drop promptly.
//!
//! Not here: what a frame means (the caller decodes it), authentication (`handshake.rs`), and
//! which connection a frame goes to (`tcp.rs`).

use std::io::{self, IoSlice};

use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::Frame;
use crate::vec_pool::VecPool;

/// Bytes of the prefix: the head's length, then the bulk part's.
pub(crate) const PREFIX_BYTES: usize = 8;
/// The read buffer grows by at least this much per read, so small frames are read in batches.
const READ_CHUNK: usize = 64 * 1024;
/// Most buffers handed to one `write_vectored` call (Linux accepts 1024).
const IOV_MAX: usize = 64;

/// Why a stream stopped yielding frames.
#[derive(Debug)]
pub(crate) enum FrameError {
    /// A prefix announced a frame over the limit.
    Oversized,
    /// The stream ended inside a frame.
    Truncated,
    /// The socket failed.
    Io,
}

/// Reads frames from a stream: heads into one growing buffer, bulk parts into their own.
#[derive(Debug)]
pub(crate) struct FrameReader<R> {
    inner: R,
    buf: BytesMut,
    frame_max: usize,
    /// A frame whose head is read and whose bulk part (of the given length) is being read.
    part: Option<(Bytes, Vec<u8>, usize)>,
    /// Where bulk parts' vectors come from (a chunk's are reused once their payload is dropped).
    pool: Arc<VecPool>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// A reader refusing frames over `frame_max` bytes (head and bulk together).
    pub(crate) fn new(inner: R, frame_max: usize, pool: Arc<VecPool>) -> Self {
        Self {
            inner,
            buf: BytesMut::new(),
            frame_max,
            part: None,
            pool,
        }
    }

    /// The next frame's head and bulk part; `Ok(None)` when the stream ends cleanly between
    /// frames.
    pub(crate) async fn next(&mut self) -> Result<Option<(Bytes, Vec<u8>)>, FrameError> {
        loop {
            if let Some((_, bulk, want)) = &mut self.part {
                if bulk.len() < *want {
                    // Straight into the bulk buffer, no further than the part's end (a pooled
                    // vector may have more room).
                    let missing = *want - bulk.len();
                    match self.inner.read_buf(&mut bulk.limit(missing)).await {
                        Ok(0) => return Err(FrameError::Truncated),
                        Ok(_) => continue,
                        Err(_) => return Err(FrameError::Io),
                    }
                }
                let (head, bulk, _) = self.part.take().expect("checked");
                return Ok(Some((head, bulk)));
            }
            let want = match self.buf.get(..PREFIX_BYTES) {
                Some(prefix) => {
                    let word = |i: usize| {
                        u32::from_be_bytes([prefix[i], prefix[i + 1], prefix[i + 2], prefix[i + 3]])
                    };
                    let (head, bulk) = (word(0) as usize, word(4) as usize);
                    if head.saturating_add(bulk) > self.frame_max {
                        return Err(FrameError::Oversized);
                    }
                    if self.buf.len() >= PREFIX_BYTES + head {
                        self.start_bulk(head, bulk);
                        continue;
                    }
                    PREFIX_BYTES + head
                }
                None => PREFIX_BYTES,
            };
            // Grow only to what the announced (already checked) head needs, or one chunk.
            let missing = want - self.buf.len();
            self.buf.reserve(missing.max(READ_CHUNK));
            match self.inner.read_buf(&mut self.buf).await {
                Ok(0) if self.buf.is_empty() => return Ok(None),
                Ok(0) => return Err(FrameError::Truncated),
                Ok(_) => {}
                Err(_) => return Err(FrameError::Io),
            }
        }
    }

    /// The prefix and the head are buffered: splits them off and starts the bulk part with
    /// what of it was read ahead.
    fn start_bulk(&mut self, head: usize, bulk: usize) {
        self.buf.advance(PREFIX_BYTES);
        let head = self.buf.split_to(head).freeze();
        let ahead = self.buf.len().min(bulk);
        let mut part = self.pool.take(bulk);
        part.extend_from_slice(&self.buf[..ahead]);
        self.buf.advance(ahead);
        self.part = Some((head, part, bulk));
    }
}

/// Writes `frames` as one batch, each preceded by its prefix, with as few syscalls as the
/// kernel allows. Every frame must already be within the limit and its parts fit a `u32`.
///
/// On error the batch may be partly written; the caller drops the connection.
pub(crate) async fn write_batch<W: AsyncWrite + Unpin>(
    out: &mut W,
    frames: &[Frame],
) -> io::Result<()> {
    let mut prefixes = BytesMut::with_capacity(frames.len() * PREFIX_BYTES);
    for f in frames {
        for part in [&f.head, &f.bulk] {
            let len = u32::try_from(part.len()).map_err(|_| io::ErrorKind::InvalidInput)?;
            prefixes.extend_from_slice(&len.to_be_bytes());
        }
    }
    let mut prefixes = prefixes.freeze();
    // Interleave prefixes and parts; every part is a cheap `Bytes` handle.
    let mut parts: Vec<Bytes> = Vec::with_capacity(frames.len() * 3);
    for f in frames {
        parts.push(prefixes.split_to(PREFIX_BYTES));
        parts.extend(
            [&f.head, &f.bulk]
                .into_iter()
                .filter(|p| !p.is_empty())
                .cloned(),
        );
    }
    let mut first = 0;
    while first < parts.len() {
        let slices: Vec<IoSlice<'_>> = parts[first..]
            .iter()
            .take(IOV_MAX)
            .map(|p| IoSlice::new(p))
            .collect();
        let mut n = out.write_vectored(&slices).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while n > 0 {
            let p = &mut parts[first];
            let k = n.min(p.len());
            p.advance(k);
            n -= k;
            if p.is_empty() {
                first += 1;
            }
        }
    }
    out.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pools parts of 129 to 256 bytes, so that some frames below land in roomier vectors.
    fn pool() -> Arc<VecPool> {
        Arc::new(VecPool::new(256))
    }

    fn prefix(head: u32, bulk: u32) -> [u8; 8] {
        let mut p = [0; 8];
        p[..4].copy_from_slice(&head.to_be_bytes());
        p[4..].copy_from_slice(&bulk.to_be_bytes());
        p
    }

    #[tokio::test]
    async fn frames_round_trip_and_limits_hold() {
        let (mut a, b) = tokio::io::duplex(64);
        let frames: Vec<Frame> = (0..50u8)
            .map(|i| Frame {
                head: Bytes::from(vec![i; i as usize * 7]),
                bulk: Bytes::from(vec![!i; (i as usize % 4) * 150]),
            })
            .collect();
        let sent = frames.clone();
        let w = tokio::spawn(async move {
            write_batch(&mut a, &sent).await.unwrap();
            // Then a prefix whose parts are over the limit together.
            a.write_all(&prefix(500, 501)).await.unwrap();
        });
        let mut r = FrameReader::new(b, 1000, pool());
        let mut roomier = 0;
        for f in &frames {
            let (head, bulk) = r.next().await.unwrap().expect("a frame");
            // A part read into a roomier pooled vector stops at its end: the next frame's bytes
            // stay for the next frame.
            assert_eq!((&head, &bulk[..]), (&f.head, &f.bulk[..]));
            match bulk.capacity() {
                256 if bulk.len() == 150 => roomier += 1,
                cap => assert_eq!(cap, bulk.len(), "an unpooled part has its exact size"),
            }
        }
        assert!(roomier > 0, "some parts went into pooled vectors");
        assert!(matches!(r.next().await, Err(FrameError::Oversized)));
        w.await.unwrap();
    }

    #[tokio::test]
    async fn truncated_frame_is_an_error_and_clean_end_is_none() {
        for (p, rest) in [(prefix(10, 0), &b"abc"[..]), (prefix(2, 10), &b"abcd"[..])] {
            let (mut a, b) = tokio::io::duplex(64);
            a.write_all(&p).await.unwrap();
            a.write_all(rest).await.unwrap();
            drop(a);
            let mut r = FrameReader::new(b, 1000, pool());
            assert!(matches!(r.next().await, Err(FrameError::Truncated)));
        }
        let (a, b) = tokio::io::duplex(64);
        drop(a);
        assert!(matches!(
            FrameReader::new(b, 10, pool()).next().await,
            Ok(None)
        ));
    }
}
