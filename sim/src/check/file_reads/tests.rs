//! The file-read checker on hand-made logs: each rule with a log it must accept and one it
//! must reject.

use super::*;
use crate::history::file_io::{Answer, Call, CallKey};
use t3fs_core::ids::InodeId;

const F: InodeId = InodeId(9);

/// A log being built: `start` leaves a call in flight; `write`, `cut` (in flight too) and `read`
/// record one call each, the write and the read answered at once.
struct Log {
    io: FileIo,
    next: u64,
}

impl Log {
    fn new() -> Self {
        Self {
            io: FileIo::default(),
            next: 0,
        }
    }
    fn start(&mut self, call: Call) -> CallKey {
        self.next += 1;
        let key = (0, 0, self.next);
        self.io.invoke(key, call);
        key
    }
    /// A write of `payload(req, 64)` at `offset`, acknowledged.
    fn write(&mut self, offset: u64, req: u64) -> CallKey {
        let k = self.start(Call::Write {
            inode: F,
            offset,
            req,
            len: 64,
        });
        self.io.answer(k, Answer::Done);
        k
    }
    fn cut(&mut self, from: u64, to: u64) -> CallKey {
        self.start(Call::Cut { inode: F, from, to })
    }
    fn read(&mut self, offset: u64, data: &[u8]) {
        let k = self.start(Call::Read { inode: F, offset });
        self.io.answer(k, Answer::Read(data));
    }
}

/// `len` bytes of file `F` at 0 as written by write `req` of 64 bytes at `at`, zeros
/// elsewhere.
fn image(len: usize, at: usize, req: u64) -> Vec<u8> {
    let mut v = vec![0u8; len];
    v[at..at + 64].copy_from_slice(&payload(req, 64));
    v
}

#[test]
fn reads_must_return_zeros_or_written_bytes_at_their_offsets() {
    let mut l = Log::new();
    l.write(100, 7);
    l.read(0, &image(200, 100, 7));
    assert!(check(&l.io).is_ok(), "zeros and the write's bytes");
    // The same bytes one offset later: misplaced (and the acknowledged byte at 100 lost).
    let mut shifted = vec![0u8; 200];
    shifted[101..165].copy_from_slice(&payload(7, 64));
    l.read(0, &shifted);
    assert!(check(&l.io)
        .unwrap_err()
        .contains("returned zero at byte 100"));
    // With the write still in flight the zero is fine, the misplaced bytes are not.
    let mut m = Log::new();
    m.start(Call::Write {
        inode: F,
        offset: 100,
        req: 7,
        len: 64,
    });
    m.read(0, &shifted);
    let e = check(&m.io).unwrap_err();
    assert!(
        e.ends_with("at byte 101, which no write to the file put there"),
        "{e}"
    );
    // Another file's read of the same bytes is not explained either.
    l.io.reads.pop();
    let k = l.start(Call::Read {
        inode: InodeId(10),
        offset: 0,
    });
    l.io.answer(k, Answer::Read(&image(200, 100, 7)));
    assert!(check(&l.io).is_err());
}

#[test]
fn a_read_cannot_see_a_write_invoked_after_it_answered() {
    let mut l = Log::new();
    let read = l.start(Call::Read {
        inode: F,
        offset: 0,
    });
    l.io.answer(read, Answer::Read(&image(100, 0, 3)));
    l.write(0, 3);
    assert!(check(&l.io).unwrap_err().contains("no write"));
}

#[test]
fn a_zero_where_an_acknowledged_write_was_is_a_lost_write() {
    let mut l = Log::new();
    l.write(0, 5);
    l.read(0, &[0u8; 64]);
    let e = check(&l.io).unwrap_err();
    // Byte 0 of payload(5, 64) is 5, so the first byte read as zero is byte 0.
    assert!(
        e.contains("returned zero at byte 0") && e.contains("acknowledged write is lost"),
        "{e}"
    );
}

#[test]
fn zeros_a_write_may_not_have_reached_yet_are_holes() {
    // The write is still in flight when the read begins.
    let mut l = Log::new();
    let w = l.start(Call::Write {
        inode: F,
        offset: 0,
        req: 5,
        len: 64,
    });
    l.read(0, &[0u8; 64]);
    l.io.answer(w, Answer::Done);
    assert!(check(&l.io).is_ok());
    // A failed write stays unknown: zeros are fine, and so are its bytes.
    let mut l = Log::new();
    let w = l.start(Call::Write {
        inode: F,
        offset: 0,
        req: 5,
        len: 64,
    });
    l.io.answer(w, Answer::Failed);
    l.read(0, &[0u8; 64]);
    l.read(0, &image(64, 0, 5));
    assert!(check(&l.io).is_ok(), "{:?}", check(&l.io));
}

#[test]
fn a_truncate_between_the_write_and_the_read_explains_a_zero() {
    // Acknowledged truncate step after the write, covering the bytes.
    let mut l = Log::new();
    l.write(0, 5);
    let c = l.cut(0, 1 << 20);
    l.io.answer(c, Answer::Done);
    l.read(0, &[0u8; 64]);
    assert!(check(&l.io).is_ok(), "{:?}", check(&l.io));
    // A truncate step still in flight during the read may have cut them too.
    let mut l = Log::new();
    l.write(0, 5);
    let c = l.cut(0, 1 << 20);
    l.read(0, &[0u8; 64]);
    l.io.answer(c, Answer::Done);
    assert!(check(&l.io).is_ok());
    // An unacknowledged one (failed, or its client died) may land any time later.
    let mut l = Log::new();
    let c = l.cut(0, 1 << 20);
    l.io.answer(c, Answer::Failed);
    l.write(0, 5);
    l.read(0, &[0u8; 64]);
    assert!(check(&l.io).is_ok());
}

#[test]
fn a_truncate_that_cannot_have_cut_the_byte_does_not_explain_a_zero() {
    // Acknowledged before the write was invoked: the write landed after it.
    let mut l = Log::new();
    let c = l.cut(0, 1 << 20);
    l.io.answer(c, Answer::Done);
    l.write(0, 5);
    l.read(0, &[0u8; 64]);
    assert!(check(&l.io)
        .unwrap_err()
        .contains("acknowledged write is lost"));
    // Invoked after the read answered.
    let mut l = Log::new();
    l.write(0, 5);
    l.read(0, &[0u8; 64]);
    l.cut(0, 1 << 20);
    assert!(check(&l.io).is_err());
    // Cutting only past the bytes read (a truncate to 64 keeps [0, 64)).
    let mut l = Log::new();
    l.write(0, 5);
    let c = l.cut(64, 1 << 20);
    l.io.answer(c, Answer::Done);
    l.read(0, &[0u8; 64]);
    assert!(check(&l.io).is_err());
    // An acknowledged cut before the latest covering write does not excuse it, even if it
    // came after an earlier one.
    let mut l = Log::new();
    l.write(0, 5);
    let c = l.cut(0, 1 << 20);
    l.io.answer(c, Answer::Done);
    l.write(0, 6);
    l.read(0, &[0u8; 64]);
    assert!(check(&l.io).is_err());
}

#[test]
fn a_zero_in_a_writes_own_payload_is_not_a_loss() {
    // Request ids of namespace calls have the top bit set and small counters: their
    // payloads start with zero bytes.
    let req = (1 << 63) | 3;
    let p = payload(req, 64);
    let z = p.iter().position(|b| *b == 0).expect("a zero byte");
    let mut l = Log::new();
    l.write(0, req);
    let mut read = p.clone();
    read.truncate(z + 1);
    l.read(0, &read);
    assert!(check(&l.io).is_ok(), "{:?}", check(&l.io));
    // But a zero where the payload has data is still a loss.
    let nz = p.iter().position(|b| *b != 0).expect("a data byte");
    let mut read = p;
    read[nz] = 0;
    l.read(0, &read);
    assert!(check(&l.io).is_err());
}
