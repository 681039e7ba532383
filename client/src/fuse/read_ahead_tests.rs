//! Readahead without a cluster or `/dev/fuse`: the in-memory backend (gated_backend.rs) counts
//! the reads that reach storage, so a test sees which reads were answered from units.

use super::super::gated_backend::{file16, run_tasks, runtime, Gated};
use super::*;

/// 64 bytes of storage, each its own offset.
fn storage() -> Vec<u8> {
    (0..64).collect()
}

#[test]
fn a_sequential_reader_is_answered_from_whole_chunk_units_read_ahead() {
    let rt = runtime();
    let sink = Gated::holding(rt.handle().clone(), &storage());
    let ra = ReadAhead::new(file16(), 32);
    rt.block_on(async {
        assert_eq!(ra.read(&sink, 0, 4, 64).await.unwrap(), [0, 1, 2, 3]);
        // The units from the read's chunk to 32 bytes past its end, whole chunks at once.
        assert_eq!(sink.reads(), [(0, 16), (16, 16), (32, 16)]);
        // The next reads are answered from them: nothing more reaches storage.
        assert_eq!(
            ra.read(&sink, 4, 8, 64).await.unwrap(),
            (4..12).collect::<Vec<u8>>()
        );
        assert_eq!(ra.read(&sink, 12, 4, 64).await.unwrap(), [12, 13, 14, 15]);
        assert_eq!(sink.reads().len(), 3);
        // Past the units the reader keeps going: the window moves with it, never past the end.
        assert_eq!(
            ra.read(&sink, 16, 16, 64).await.unwrap(),
            (16..32).collect::<Vec<u8>>()
        );
        run_tasks().await; // The new unit's read runs on its own task.
        assert_eq!(sink.reads(), [(0, 16), (16, 16), (32, 16), (48, 16)]);
    });
}

#[test]
fn the_last_unit_stops_at_the_end_of_the_file() {
    let rt = runtime();
    let sink = Gated::holding(rt.handle().clone(), &storage());
    let ra = ReadAhead::new(file16(), 64);
    rt.block_on(async {
        // A 56-byte file: the window would reach 68; the units stop at 56, the last one short.
        ra.read(&sink, 0, 4, 56).await.unwrap();
        assert_eq!(sink.reads(), [(0, 16), (16, 16), (32, 16), (48, 8)]);
        let tail = ra.read(&sink, 48, 8, 56).await.unwrap();
        assert_eq!(tail, (48..56).collect::<Vec<u8>>());
        assert_eq!(
            sink.reads().len(),
            4,
            "the short unit answers the read at the end"
        );
    });
}

#[test]
fn a_reader_that_jumps_reads_directly_and_starts_no_units() {
    let rt = runtime();
    let sink = Gated::holding(rt.handle().clone(), &storage());
    let ra = ReadAhead::new(file16(), 32);
    rt.block_on(async {
        assert_eq!(ra.read(&sink, 40, 4, 64).await.unwrap(), [40, 41, 42, 43]);
        assert_eq!(sink.reads(), [(40, 4)], "one direct read, nothing ahead");
    });
}

#[test]
fn after_forget_a_reader_sees_what_was_written_since_the_units_were_read() {
    let rt = runtime();
    let sink = Gated::holding(rt.handle().clone(), &storage());
    let ra = ReadAhead::new(file16(), 32);
    rt.block_on(async {
        ra.read(&sink, 0, 4, 64).await.unwrap();
        // This mount writes bytes 4..8 (write-behind would call forget).
        lock(&sink.bytes)[4..8].copy_from_slice(b"new!");
        let stale = ra.read(&sink, 4, 4, 64).await.unwrap();
        assert_eq!(
            stale,
            [4, 5, 6, 7],
            "without forget the unit answers (as the test shows)"
        );
        ra.forget();
        assert_eq!(ra.read(&sink, 8, 4, 64).await.unwrap(), [8, 9, 10, 11]);
        assert_eq!(ra.read(&sink, 4, 4, 64).await.unwrap(), b"new!");
    });
}

#[test]
fn a_window_of_zero_reads_every_request_directly() {
    let rt = runtime();
    let sink = Gated::holding(rt.handle().clone(), &storage());
    let ra = ReadAhead::new(file16(), 0);
    rt.block_on(async {
        ra.read(&sink, 0, 4, 64).await.unwrap();
        ra.read(&sink, 4, 4, 64).await.unwrap();
        assert_eq!(sink.reads(), [(0, 4), (4, 4)]);
    });
}
