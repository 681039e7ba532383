//! Length-delimited framing of a byte stream: a `u32` big-endian payload length, then the
//! payload (one opaque frame; for t3fs, one `Msg` encoded by the core codec).
//!
//! Invariants:
//! - a length over the limit is refused as soon as its 4 bytes arrive, before any buffer is
//!   grown for it, so a peer cannot make a connection's read buffer exceed about twice
//!   `frame_max` plus one read chunk (the buffer grows like a `Vec`);
//! - an inbound payload is split off the read buffer and frozen (`BytesMut::split_to`), never
//!   copied; an outbound payload goes to the socket from the caller's `Bytes` by vectored
//!   writes, with only the 4-byte prefixes of a batch gathered into one small buffer;
//! - malformed input is an error value, never a panic.
//!
//! Inbound frames share their read buffer's allocation: a frame kept long after it arrived keeps
//! that buffer (up to one read chunk of neighbours) alive. Receivers decode and drop promptly.
//!
//! Not here: what a frame means (the caller decodes it), authentication (`handshake.rs`), and
//! which connection a frame goes to (`tcp.rs`).

use std::io::{self, IoSlice};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Bytes of the length prefix.
pub(crate) const LEN_BYTES: usize = 4;
/// The read buffer grows by at least this much per read, so small frames are read in batches.
const READ_CHUNK: usize = 64 * 1024;
/// Most buffers handed to one `write_vectored` call (Linux accepts 1024).
const IOV_MAX: usize = 64;

/// Why a stream stopped yielding frames.
#[derive(Debug)]
pub(crate) enum FrameError {
    /// A length prefix announced a frame over the limit.
    Oversized,
    /// The stream ended inside a frame.
    Truncated,
    /// The socket failed.
    Io,
}

/// Reads frames from a stream into one growing buffer.
#[derive(Debug)]
pub(crate) struct FrameReader<R> {
    inner: R,
    buf: BytesMut,
    frame_max: usize,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// A reader refusing frames over `frame_max` payload bytes.
    pub(crate) fn new(inner: R, frame_max: usize) -> Self {
        Self {
            inner,
            buf: BytesMut::new(),
            frame_max,
        }
    }

    /// The next frame; `Ok(None)` when the stream ends cleanly between frames.
    pub(crate) async fn next(&mut self) -> Result<Option<Bytes>, FrameError> {
        loop {
            let want = match self.buf.get(..LEN_BYTES) {
                Some(prefix) => {
                    let len = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
                    if u64::from(len) > self.frame_max as u64 {
                        return Err(FrameError::Oversized);
                    }
                    let whole = LEN_BYTES + len as usize;
                    if self.buf.len() >= whole {
                        self.buf.advance(LEN_BYTES);
                        return Ok(Some(self.buf.split_to(len as usize).freeze()));
                    }
                    whole
                }
                None => LEN_BYTES,
            };
            // Grow only to what the announced (already checked) frame needs, or one chunk.
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
}

/// Writes `frames` as one batch, each preceded by its length prefix, with as few syscalls as
/// the kernel allows. Every frame must already be within the limit and fit a `u32`.
///
/// On error the batch may be partly written; the caller drops the connection.
pub(crate) async fn write_batch<W: AsyncWrite + Unpin>(
    out: &mut W,
    frames: &[Bytes],
) -> io::Result<()> {
    let mut prefixes = BytesMut::with_capacity(frames.len() * LEN_BYTES);
    for f in frames {
        let len = u32::try_from(f.len()).map_err(|_| io::ErrorKind::InvalidInput)?;
        prefixes.extend_from_slice(&len.to_be_bytes());
    }
    let mut prefixes = prefixes.freeze();
    // Interleave prefix and payload; every part is a cheap `Bytes` handle.
    let mut parts: Vec<Bytes> = Vec::with_capacity(frames.len() * 2);
    for f in frames {
        parts.push(prefixes.split_to(LEN_BYTES));
        if !f.is_empty() {
            parts.push(f.clone());
        }
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

    #[tokio::test]
    async fn frames_round_trip_and_limits_hold() {
        let (mut a, b) = tokio::io::duplex(64);
        let frames: Vec<Bytes> = (0..50u8)
            .map(|i| Bytes::from(vec![i; i as usize * 7]))
            .collect();
        let sent = frames.clone();
        let w = tokio::spawn(async move {
            write_batch(&mut a, &sent).await.unwrap();
            // Then a prefix over the limit.
            a.write_all(&1001u32.to_be_bytes()).await.unwrap();
        });
        let mut r = FrameReader::new(b, 1000);
        for f in &frames {
            assert_eq!(r.next().await.unwrap().as_ref(), Some(f));
        }
        assert!(matches!(r.next().await, Err(FrameError::Oversized)));
        w.await.unwrap();
    }

    #[tokio::test]
    async fn truncated_frame_is_an_error_and_clean_end_is_none() {
        let (mut a, b) = tokio::io::duplex(64);
        a.write_all(&10u32.to_be_bytes()).await.unwrap();
        a.write_all(b"abc").await.unwrap();
        drop(a);
        let mut r = FrameReader::new(b, 1000);
        assert!(matches!(r.next().await, Err(FrameError::Truncated)));
        let (a, b) = tokio::io::duplex(64);
        drop(a);
        assert!(matches!(FrameReader::new(b, 10).next().await, Ok(None)));
    }
}
