//! Many byte ranges of one file in one call, resumable: each range is cut at chunk boundaries
//! into pieces, every piece is a chunk read of its own (checksummed by the replica and checked
//! by the client machine, which retries a bad or silent replica on another), and when a piece
//! still fails, only that piece is read again in the next round: a range resumes from the
//! chunk where it stopped, never from its start. The Python package's `File.read_ranges` and
//! fsspec's `cat_ranges` use it.
//!
//! Invariants: the answer holds each range's bytes in the order asked (holes read as zeros);
//! a piece is read again only after it failed; a failure that retrying cannot mend (a
//! namespace error, invalid input) ends the call at once; after [`READ_RANGE_ROUNDS`] rounds a
//! piece that still fails fails the call with its last error.
//!
//! Not here: whole files (`read_files.rs`), readahead (the Python package's window).

use std::future::Future;
use std::time::Duration;

use super::{Client, ClientError, File};

/// Rounds a failed piece is tried in, the first included.
pub const READ_RANGE_ROUNDS: u32 = 3;

/// Pieces one round sends at once: half the client's concurrent-call bound, leaving the rest
/// to other callers of the same client.
const PIECES_IN_FLIGHT: usize = t3fs_core::limits::CLIENT_CALLS_MAX / 2;

/// One chunk-aligned piece of a range.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct Piece {
    /// Which range it belongs to.
    pub range: usize,
    /// Its file offset.
    pub offset: u64,
    /// Its bytes.
    pub len: u64,
}

/// The ranges' bytes, and how many pieces had to be read again.
#[derive(Debug, Default)]
pub struct RangesRead {
    /// Each range's bytes, in the order asked.
    pub data: Vec<Vec<u8>>,
    /// Pieces read more than once (0 when nothing failed).
    pub resumed: usize,
}

/// `ranges` cut at multiples of `chunk_size`.
pub fn pieces_of(ranges: &[(u64, u64)], chunk_size: u64) -> Vec<Piece> {
    let mut out = Vec::new();
    for (range, &(offset, len)) in ranges.iter().enumerate() {
        let (mut at, end) = (offset, offset.saturating_add(len));
        while at < end {
            let stop = end.min((at / chunk_size + 1) * chunk_size);
            out.push(Piece {
                range,
                offset: at,
                len: stop - at,
            });
            at = stop;
        }
    }
    out
}

/// Whether another round may mend `e`: a chunk read that failed on every replica it tried
/// (timeouts, replicas leaving their chain) may succeed once routing moves on.
fn resumable(e: &ClientError) -> bool {
    matches!(e, ClientError::Failed(_))
}

/// Reads `ranges` with `read` (which reads a wave of pieces, each answered on its own),
/// rounds apart by `pause`, reading again only pieces that failed.
pub async fn read_ranges_with<R, Fut>(
    ranges: &[(u64, u64)],
    chunk_size: u64,
    mut read: R,
    pause: Duration,
) -> Result<RangesRead, ClientError>
where
    R: FnMut(Vec<Piece>) -> Fut,
    Fut: Future<Output = Vec<Result<Vec<u8>, ClientError>>>,
{
    let mut data: Vec<Vec<u8>> = vec![Vec::new(); ranges.len()];
    let mut pending = pieces_of(ranges, chunk_size);
    let mut resumed = 0;
    for round in 0..READ_RANGE_ROUNDS {
        if round > 0 {
            resumed += pending.len();
            tokio::time::sleep(pause * round).await;
        }
        let mut failed = Vec::new();
        let mut last = None;
        for wave in pending.chunks(PIECES_IN_FLIGHT) {
            for (piece, answer) in wave.iter().zip(read(wave.to_vec()).await) {
                match answer {
                    Ok(bytes) => place(&mut data, ranges, piece, bytes),
                    Err(e) if resumable(&e) => {
                        failed.push(*piece);
                        last = Some(e);
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        match last {
            None => return Ok(RangesRead { data, resumed }),
            Some(e) if round + 1 == READ_RANGE_ROUNDS => return Err(e),
            Some(_) => pending = failed,
        }
    }
    unreachable!("the last round returns")
}

/// Puts a piece's bytes in its range: a range of one piece takes them as they are (no copy);
/// a range of several is allocated at its first piece and filled piece by piece.
fn place(data: &mut [Vec<u8>], ranges: &[(u64, u64)], p: &Piece, mut bytes: Vec<u8>) {
    let (start, len) = ranges[p.range];
    bytes.resize(p.len as usize, 0);
    if p.offset == start && p.len == len {
        data[p.range] = bytes;
        return;
    }
    let out = &mut data[p.range];
    if out.is_empty() {
        *out = vec![0; len as usize];
    }
    let at = (p.offset - start) as usize;
    out[at..at + bytes.len()].copy_from_slice(&bytes);
}

impl Client {
    /// The bytes of each of `ranges` (offset, length) of `f`, in order, every chunk read in
    /// flight together; a chunk read that fails is retried alone (see the module docs).
    pub async fn read_ranges(
        &self,
        f: &File,
        ranges: &[(u64, u64)],
    ) -> Result<RangesRead, ClientError> {
        let chunk_size = u64::from(f.layout.chunk_size);
        let read =
            |wave: Vec<Piece>| self.read_each(f, wave.iter().map(|p| (p.offset, p.len)).collect());
        read_ranges_with(ranges, chunk_size, read, Duration::from_millis(200)).await
    }
}

#[cfg(test)]
mod tests;
