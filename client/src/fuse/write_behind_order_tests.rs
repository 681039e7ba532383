//! Write-behind's ordering, backpressure and error reporting without a cluster or `/dev/fuse`:
//! the in-memory backend (gated_backend.rs) holds every write until the test releases it, so a
//! test decides which piece lands when and checks what reached storage in which order (the
//! module invariants).

use super::super::gated_backend::{file16, run_tasks, runtime, Gated};
use super::*;

/// A handle on a file of 16-byte chunks with `window` pieces in flight.
fn handle(window: usize) -> Arc<WriteBehind> {
    WriteBehind::new(file16(), window)
}

#[test]
fn an_overlapping_write_waits_for_the_earlier_one_and_lands_after_it() {
    let rt = runtime();
    let sink = Gated::new(rt.handle().clone(), &[]);
    let wb = handle(4);
    rt.block_on(async {
        wb.write(&sink, 0, b"AAAA".to_vec()).await.unwrap(); // Nothing in flight: sent.
        wb.write(&sink, 2, b"BBBB".to_vec()).await.unwrap(); // Overlaps A: buffered.
        wb.write(&sink, 20, b"CC".to_vec()).await.unwrap(); // B is taken out, C buffered.
        let (w, s) = (wb.clone(), sink.clone());
        let drain = tokio::spawn(async move { w.drain(&s).await });
        run_tasks().await;
        // A and C (which overlaps nothing) are at storage; B waits for A.
        assert_eq!(sink.started(), [0, 20]);
        sink.release(20);
        run_tasks().await;
        assert_eq!(sink.started(), [0, 20], "B still waits for A");
        sink.release(2); // Releasing B first changes nothing: it has not been sent.
        run_tasks().await;
        assert_eq!(sink.landed(), [20]);
        sink.release(0);
        run_tasks().await;
        assert_eq!(sink.landed(), [20, 0, 2], "B landed after A");
        // Each landing was reported (the mount forgets the file's readahead there), and the
        // failed or unreleased ones are not.
        assert_eq!(*lock(&sink.reported), [20, 0, 2]);
        assert_eq!(drain.await.unwrap().map_err(|e| e.code()), Ok(22));
    });
    assert_eq!(&lock(&sink.bytes)[..6], b"AABBBB", "the later write wins");
}

#[test]
fn a_full_window_holds_the_writer_until_a_piece_lands() {
    let rt = runtime();
    let sink = Gated::new(rt.handle().clone(), &[]);
    let wb = handle(1);
    rt.block_on(async {
        wb.write(&sink, 0, b"a".to_vec()).await.unwrap(); // In flight: 1 of 1.
        wb.write(&sink, 32, b"b".to_vec()).await.unwrap(); // Buffered.
        let (w, s) = (wb.clone(), sink.clone());
        // A third write sends the buffer: two in flight, over the window.
        let third = tokio::spawn(async move { w.write(&s, 64, b"c".to_vec()).await });
        run_tasks().await;
        assert_eq!(sink.started(), [0, 32]);
        assert!(
            !third.is_finished(),
            "the writer waits while the window is full"
        );
        sink.release(0);
        run_tasks().await;
        assert!(third.is_finished());
        third.await.unwrap().unwrap();
        sink.release(32);
        sink.release(64);
        assert_eq!(wb.drain(&sink).await.map_err(|e| e.code()), Ok(65));
    });
}

#[test]
fn a_failed_piece_refuses_the_next_write_and_the_drain_then_clears_it() {
    let rt = runtime();
    let sink = Gated::new(rt.handle().clone(), &[0]);
    let wb = handle(4);
    rt.block_on(async {
        wb.write(&sink, 0, b"lost".to_vec()).await.unwrap(); // Accepted: it fails later.
        sink.release(0);
        run_tasks().await;
        // The next write is refused with the pending failure, as the kernel reports a
        // writeback error to the writer.
        let refused = wb.write(&sink, 4, b"x".to_vec()).await;
        assert_eq!(refused.map_err(|e| e.code()), Err(libc::EIO));
        assert!(
            lock(&sink.reported).is_empty(),
            "a failed piece is not reported landed"
        );
        assert_eq!(wb.drain(&sink).await.map_err(|e| e.code()), Err(libc::EIO));
        // Taken by the drain: the handle writes again.
        wb.write(&sink, 16, b"ok".to_vec()).await.unwrap();
        sink.release(16);
        assert_eq!(wb.drain(&sink).await.map_err(|e| e.code()), Ok(18));
    });
}

#[test]
fn synchronous_mode_answers_a_write_only_after_it_landed() {
    let rt = runtime();
    let sink = Gated::new(rt.handle().clone(), &[]);
    let wb = handle(0);
    rt.block_on(async {
        let (w, s) = (wb.clone(), sink.clone());
        let write = tokio::spawn(async move { w.write(&s, 0, b"sync".to_vec()).await });
        run_tasks().await;
        assert_eq!(sink.started(), [0]);
        assert!(
            !write.is_finished(),
            "not answered before the chain committed it"
        );
        assert_eq!(wb.acked(), 0);
        sink.release(0);
        write.await.unwrap().unwrap();
        assert_eq!((wb.accepted(), wb.acked()), (4, 4));
    });
}
