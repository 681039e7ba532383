//! Write-behind for one open file handle. A write is answered once the handle has accepted it:
//! up to `window` chunk writes run on their chains at once, and a write that arrives while
//! others are in flight is coalesced with the one before it when it continues it (one buffer, up
//! to the end of its chunk), so sequential small writes reach storage as whole-chunk writes and
//! sequential large ones are pipelined. `drain` (what flush, fsync and release wait for) sends
//! what is buffered, waits for every write in flight and reports the first failure, as the
//! kernel reports writeback errors at fsync and close; `settle` (what reads and truncates of the
//! file wait for) does the same without taking the failure, which stays for the writer's next
//! write, flush or fsync.
//!
//! Invariants: two pieces whose ranges overlap are never in flight at once, and the later one is
//! sent after the earlier one landed, so the chain applies them in the order they were written;
//! a buffer never spans two chunks; a write returns only when at most `window` pieces are in
//! flight, besides the one buffered.
//! With `window` 0 every write is sent at once and answered after its chain committed it (the
//! mount's synchronous mode). Not here: the length meta is told (fs.rs), reads (read_ahead.rs).
//!
//! Pieces go to a [`Backend`] (backend.rs): the mount's, or in the unit tests an in-memory one
//! whose writes land when a test says, so the ordering above is checked without a cluster.

use std::sync::{Arc, Mutex};

use fuser::Errno;
use tokio::sync::watch;

use super::backend::{lock, Backend};
use super::errno::errno;
use crate::client::File;

/// How many of `len` bytes written at `offset` a file of at most `max` bytes takes: all, or
/// those below `max` (a short write, as Linux's `generic_write_checks` makes of a write that
/// reaches the largest file size), or EFBIG when not one fits. A write of nothing takes nothing
/// anywhere.
pub(super) fn fitting(offset: u64, len: usize, max: u64) -> Result<usize, Errno> {
    if len == 0 {
        return Ok(0);
    }
    let room = max
        .checked_sub(offset)
        .filter(|&r| r > 0)
        .ok_or(Errno::EFBIG)?;
    Ok(usize::try_from(room).map_or(len, |r| r.min(len)))
}

/// Bytes at one offset, on their way to the chain.
struct Piece {
    seq: u64,
    offset: u64,
    data: Vec<u8>,
}

impl Piece {
    fn end(&self) -> u64 {
        self.offset + self.data.len() as u64
    }
}

#[derive(Default)]
struct State {
    /// The buffer that later writes may continue.
    pending: Option<Piece>,
    /// (seq, start, end) of every piece taken from the buffer and not yet landed.
    flying: Vec<(u64, u64, u64)>,
    next_seq: u64,
    /// The first failure since the last drain.
    error: Option<Errno>,
    /// The end of the writes accepted since the last truncate (the size this mount reports).
    accepted: u64,
    /// The end of the writes that landed since the last truncate (the length meta is told).
    acked: u64,
    /// Writes of at least one byte asked of the handle (landed or not, truncates aside).
    writes: u64,
    /// How many of them meta was told of: a length report (flush's sync) covering them
    /// succeeded, so it moved the file's mtime and ctime and knows where they end.
    reported: u64,
}

/// One handle's write-behind.
pub(super) struct WriteBehind {
    file: File,
    window: usize,
    chunk: u64,
    st: Mutex<State>,
    /// Bumped whenever a piece lands.
    landed: watch::Sender<u64>,
}

impl WriteBehind {
    /// Write-behind for `file` with at most `window` pieces in flight (0: synchronous writes).
    pub fn new(file: File, window: usize) -> Arc<Self> {
        let chunk = u64::from(file.layout.chunk_size.max(1));
        Arc::new(Self {
            file,
            window,
            chunk,
            st: Mutex::default(),
            landed: watch::channel(0).0,
        })
    }

    /// The end of the writes accepted since the last truncate.
    pub fn accepted(&self) -> u64 {
        lock(&self.st).accepted
    }

    /// How many writes the handle was asked so far (a mark for [`Self::reported`]).
    pub fn writes(&self) -> u64 {
        lock(&self.st).writes
    }

    /// A length report covering the first `upto` writes succeeded.
    pub fn reported(&self, upto: u64) {
        let mut st = lock(&self.st);
        st.reported = st.reported.max(upto);
    }

    /// Every write asked of the handle was reported to meta (none asked, or flush reported
    /// them): its close has nothing to tell.
    pub fn all_reported(&self) -> bool {
        let st = lock(&self.st);
        st.reported == st.writes
    }

    /// Accepts `data` at `offset`; answers when it is buffered or sent (after its chain
    /// committed it in the synchronous mode), or with the handle's pending failure.
    pub async fn write<S: Backend>(
        self: &Arc<Self>,
        s: &Arc<S>,
        offset: u64,
        data: Vec<u8>,
    ) -> Result<(), Errno> {
        let end = offset + data.len() as u64;
        if !data.is_empty() {
            lock(&self.st).writes += 1;
        }
        if self.window == 0 {
            let r = s.write(&self.file, offset, data).await;
            if r.is_ok() {
                s.landed(&self.file);
            }
            let mut st = lock(&self.st);
            r.map_err(|e| errno(&e))?;
            st.accepted = st.accepted.max(end);
            st.acked = st.acked.max(end);
            return Ok(());
        }
        let ready = {
            let mut st = lock(&self.st);
            if let Some(e) = st.error {
                return Err(e);
            }
            st.accepted = st.accepted.max(end);
            self.accept(&mut st, offset, data)
        };
        for p in ready {
            self.send(s, p);
        }
        // Backpressure: the writer waits while the window is full.
        self.wait_until(|st| st.flying.len() <= self.window).await;
        Ok(())
    }

    /// Adds a write to the buffer; returns the pieces to send now.
    fn accept(&self, st: &mut State, offset: u64, mut data: Vec<u8>) -> Vec<Piece> {
        let mut ready = Vec::new();
        let len = data.len() as u64;
        // Bytes from `end` to the end of its chunk.
        let room = |end: u64| (self.chunk - end % self.chunk) as usize;
        let continues = st
            .pending
            .as_ref()
            .is_some_and(|p| p.end() == offset && (p.offset / self.chunk) == (offset / self.chunk));
        let rest = if continues {
            let p = st.pending.as_mut().expect("checked");
            let n = room(p.end()).min(data.len());
            p.data.extend_from_slice(&data[..n]);
            data.split_off(n)
        } else {
            ready.extend(self.take(st));
            let rest = data.split_off(room(offset).min(data.len()));
            st.pending = Some(Piece {
                seq: 0,
                offset,
                data,
            });
            rest
        };
        if !rest.is_empty() {
            // The buffer reached its chunk's end: it goes, the rest starts the next chunk.
            ready.extend(self.take(st));
            let off = offset + len - rest.len() as u64;
            ready.extend(self.accept(st, off, rest));
            return ready;
        }
        let p = st.pending.as_ref().expect("just set");
        let chunk_full = p.end().is_multiple_of(self.chunk);
        if chunk_full || (st.flying.is_empty() && ready.is_empty()) {
            ready.extend(self.take(st));
        }
        ready
    }

    /// Takes the buffer out to be sent, registering its range in flight.
    fn take(&self, st: &mut State) -> Option<Piece> {
        let mut p = st.pending.take()?;
        st.next_seq += 1;
        p.seq = st.next_seq;
        st.flying.push((p.seq, p.offset, p.end()));
        Some(p)
    }

    /// Sends `p` (taken, so registered in flight) once no earlier overlapping piece is.
    fn send<S: Backend>(self: &Arc<Self>, s: &Arc<S>, p: Piece) {
        let (me, s) = (self.clone(), s.clone());
        s.runtime().clone().spawn(async move {
            let (start, end) = (p.offset, p.end());
            me.wait_until(|st| {
                !st.flying
                    .iter()
                    .any(|&(q, a, b)| q < p.seq && a < end && start < b)
            })
            .await;
            let r = s.write(&me.file, p.offset, p.data).await;
            if r.is_ok() {
                s.landed(&me.file);
            }
            let next = {
                let mut st = lock(&me.st);
                st.flying.retain(|&(q, ..)| q != p.seq);
                match r {
                    Ok(()) => st.acked = st.acked.max(end),
                    Err(e) => {
                        st.error.get_or_insert(errno(&e));
                    }
                }
                if st.flying.is_empty() {
                    me.take(&mut st)
                } else {
                    None
                }
            };
            me.landed.send_modify(|n| *n += 1);
            if let Some(p) = next {
                me.send(&s, p);
            }
        });
    }

    /// Waits until `ready` holds of the state (checked again after every landing).
    async fn wait_until(&self, ready: impl Fn(&State) -> bool) {
        loop {
            let mut rx = self.landed.subscribe();
            if ready(&lock(&self.st)) {
                return;
            }
            let _ = rx.changed().await;
        }
    }

    /// Sends the buffer and waits until nothing is in flight; the failure, if any, stays.
    pub async fn settle<S: Backend>(self: &Arc<Self>, s: &Arc<S>) {
        let p = self.take(&mut lock(&self.st));
        if let Some(p) = p {
            self.send(s, p);
        }
        self.wait_until(|st| st.flying.is_empty() && st.pending.is_none())
            .await;
    }

    /// [`Self::settle`], then the first failure since the last drain (taken), else the end of
    /// the writes that landed since the last truncate.
    pub async fn drain<S: Backend>(self: &Arc<Self>, s: &Arc<S>) -> Result<u64, Errno> {
        self.settle(s).await;
        let mut st = lock(&self.st);
        match st.error.take() {
            Some(e) => Err(e),
            None => Ok(st.acked),
        }
    }

    /// The end of the writes that landed since the last truncate.
    pub fn acked(&self) -> u64 {
        lock(&self.st).acked
    }

    /// After a truncate (settled first): the ends count from the new truncate version.
    pub fn truncated(&self) {
        let mut st = lock(&self.st);
        st.accepted = 0;
        st.acked = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::super::gated_backend::file16;
    use super::*;

    /// A handle on a file of 16-byte chunks (what is sent is only computed, never sent).
    fn handle(window: usize) -> Arc<WriteBehind> {
        WriteBehind::new(file16(), window)
    }

    /// Feeds writes to `accept`; (offset, len) of each piece it would send, in order, and the
    /// state after.
    fn feed(wb: &WriteBehind, st: &mut State, writes: &[(u64, usize)]) -> Vec<(u64, usize)> {
        let mut sent = Vec::new();
        for &(offset, len) in writes {
            for p in wb.accept(st, offset, vec![offset as u8; len]) {
                sent.push((p.offset, p.data.len()));
            }
        }
        sent
    }

    #[test]
    fn the_first_write_goes_at_once_and_later_sequential_ones_coalesce_up_to_the_chunk_end() {
        let wb = handle(4);
        let mut st = State::default();
        // Nothing in flight: the first write is sent at once.
        assert_eq!(feed(&wb, &mut st, &[(0, 4)]), [(0, 4)]);
        // While it flies, the rest of the chunk is buffered, then sent whole when full.
        assert_eq!(feed(&wb, &mut st, &[(4, 4), (8, 4)]), []);
        assert_eq!(feed(&wb, &mut st, &[(12, 4)]), [(4, 12)]);
        // A write across a chunk boundary is split: the first part completes no buffer here
        // (nothing pending), and the buffer never spans two chunks.
        assert_eq!(feed(&wb, &mut st, &[(16, 20)]), [(16, 16)]);
        assert_eq!(
            st.pending.as_ref().map(|p| (p.offset, p.data.len())),
            Some((32, 4))
        );
        assert_eq!(st.flying.len(), 3);
    }

    #[test]
    fn a_write_that_does_not_continue_the_buffer_sends_the_buffer_first() {
        let wb = handle(4);
        let mut st = State::default();
        assert_eq!(feed(&wb, &mut st, &[(0, 2)]), [(0, 2)]);
        assert_eq!(feed(&wb, &mut st, &[(2, 2)]), []);
        // A seek backwards: the buffer goes out, the new write is buffered behind it.
        assert_eq!(feed(&wb, &mut st, &[(1, 1)]), [(2, 2)]);
        let p = st.pending.as_ref().expect("buffered");
        assert_eq!((p.offset, p.data.clone()), (1, vec![1]));
        // Sequence numbers order the pieces as written; overlapping ones wait for earlier ones.
        let seqs: Vec<_> = st.flying.iter().map(|f| f.0).collect();
        assert_eq!(seqs, [1, 2]);
    }

    #[test]
    fn a_write_reaching_the_largest_file_is_cut_short_and_one_past_it_is_efbig() {
        let max = (1u64 << 52) - (1 << 20);
        // Errno has no PartialEq: compare codes.
        let fit = |offset: u64, len: usize| fitting(offset, len, max).map_err(|e| e.code());
        let efbig = Err(libc::EFBIG);
        assert_eq!(fit(0, 4096), Ok(4096));
        assert_eq!(fit(max - 8192, 4096), Ok(4096));
        assert_eq!(fit(max - 4096, 4096), Ok(4096));
        assert_eq!(fit(max - 100, 4096), Ok(100));
        assert_eq!(fit(max, 4096), efbig);
        assert_eq!(fit((1 << 52) + 5, 1), efbig);
        assert_eq!(fit(u64::MAX, 1), efbig);
        assert_eq!(fit(u64::MAX, 0), Ok(0));
        // What it lets through the layout splits: never a wrapped chunk index.
        let wb = handle(0);
        let max16 = wb.file.layout.size_max();
        assert_eq!(max16, 16 * u64::from(u32::MAX));
        let n = fitting(max16 - 3, 10, max16).map_err(|e| e.code()).unwrap();
        let spans = wb
            .file
            .layout
            .split(wb.file.inode, max16 - 3, n as u64)
            .unwrap();
        assert_eq!(spans.len(), 1);
        assert_eq!(
            (spans[0].chunk.index, spans[0].offset, spans[0].len),
            (u32::MAX - 1, 13, 3)
        );
    }

    #[test]
    fn coalesced_bytes_are_the_bytes_written() {
        let wb = handle(4);
        let mut st = State::default();
        let _ = wb.accept(&mut st, 0, vec![9; 1]);
        let _ = wb.accept(&mut st, 1, b"abc".to_vec());
        let _ = wb.accept(&mut st, 4, b"de".to_vec());
        let p = wb.take(&mut st).expect("buffered");
        assert_eq!((p.offset, p.data), (1, b"abcde".to_vec()));
        assert!(st.pending.is_none());
    }
}

#[cfg(test)]
#[path = "write_behind_order_tests.rs"]
mod order_tests;
