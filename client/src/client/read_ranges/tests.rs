//! The resumable range reader against a scripted reader: which pieces each round reads, and
//! that the bytes come out whole and in order.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::time::Duration;

use super::*;

/// The byte at file offset `o` of the scripted file.
fn byte(o: u64) -> u8 {
    (o % 251) as u8
}

/// A reader of the scripted file that fails each piece whose offset is in `fail` as many times
/// as listed, recording every piece it was asked for, round by round.
struct Scripted {
    fail: RefCell<Vec<(u64, u32, ClientError)>>,
    rounds: RefCell<Vec<Vec<Piece>>>,
}

impl Scripted {
    fn new(fail: Vec<(u64, u32, ClientError)>) -> Self {
        Self {
            fail: RefCell::new(fail),
            rounds: RefCell::new(Vec::new()),
        }
    }

    fn read(&self, wave: Vec<Piece>) -> Vec<Result<Vec<u8>, ClientError>> {
        self.rounds.borrow_mut().push(wave.clone());
        wave.iter()
            .map(|p| {
                let mut fail = self.fail.borrow_mut();
                if let Some(f) = fail.iter_mut().find(|f| f.0 == p.offset && f.1 > 0) {
                    f.1 -= 1;
                    return Err(f.2.clone());
                }
                Ok((p.offset..p.offset + p.len).map(byte).collect())
            })
            .collect()
    }
}

fn expect(ranges: &[(u64, u64)]) -> Vec<Vec<u8>> {
    ranges
        .iter()
        .map(|&(o, n)| (o..o + n).map(byte).collect())
        .collect()
}

fn run(s: &Scripted, ranges: &[(u64, u64)], chunk: u64) -> Result<RangesRead, ClientError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(read_ranges_with(
        ranges,
        chunk,
        |w| std::future::ready(s.read(w)),
        Duration::from_millis(1),
    ))
}

#[test]
fn ranges_are_cut_at_chunk_boundaries() {
    let p = pieces_of(&[(10, 30), (64, 64), (5, 0)], 32);
    let got: Vec<_> = p.iter().map(|p| (p.range, p.offset, p.len)).collect();
    assert_eq!(got, vec![(0, 10, 22), (0, 32, 8), (1, 64, 32), (1, 96, 32)]);
}

#[test]
fn a_failed_piece_resumes_alone_and_the_bytes_come_out_whole() {
    // Hundreds of ranges over 4 KiB chunks, many crossing a chunk boundary; two pieces fail
    // once (one in the middle of a multi-chunk range) and one fails twice.
    let ranges: Vec<(u64, u64)> = (0..300)
        .map(|i| (i * 3001, 1000 + (i % 7) * 1500))
        .collect();
    let pieces = pieces_of(&ranges, 4096);
    let mid = pieces
        .iter()
        .find(|p| p.offset % 4096 == 0 && p.offset > ranges[p.range].0)
        .unwrap();
    let fail = |o| (o, 1, ClientError::Failed("chunk read timed out".into()));
    let s = Scripted::new(vec![
        fail(mid.offset),
        fail(pieces[5].offset),
        (
            pieces[200].offset,
            2,
            ClientError::Failed("no serving replica".into()),
        ),
    ]);
    let got = run(&s, &ranges, 4096).unwrap();
    assert_eq!(got.data, expect(&ranges));
    assert_eq!(got.resumed, 4, "3 pieces read again, one of them twice");
    let rounds = s.rounds.borrow();
    let first: usize = rounds
        .iter()
        .take_while(|w| w.len() > 3)
        .map(Vec::len)
        .sum();
    assert_eq!(
        first,
        pieces.len(),
        "the first round reads every piece once"
    );
    let again: BTreeSet<u64> = rounds
        .iter()
        .skip_while(|w| w.len() > 3)
        .flatten()
        .map(|p| p.offset)
        .collect();
    let want: BTreeSet<u64> = [mid.offset, pieces[5].offset, pieces[200].offset].into();
    assert_eq!(again, want, "later rounds read only the pieces that failed");
}

#[test]
fn a_piece_failing_every_round_fails_the_call_with_its_error() {
    let e = ClientError::Failed("every replica timed out".into());
    let s = Scripted::new(vec![(4096, u32::MAX, e.clone())]);
    assert_eq!(run(&s, &[(0, 10_000)], 4096).unwrap_err(), e);
    assert_eq!(s.rounds.borrow().len(), READ_RANGE_ROUNDS as usize);
}

#[test]
fn an_error_retrying_cannot_mend_ends_the_call_at_once() {
    let e = ClientError::Invalid("bad range".into());
    let s = Scripted::new(vec![(0, 1, e.clone())]);
    assert_eq!(run(&s, &[(0, 100)], 4096).unwrap_err(), e);
    assert_eq!(s.rounds.borrow().len(), 1);
}

#[test]
fn empty_ranges_stay_empty_and_nothing_is_read_again() {
    let s = Scripted::new(vec![]);
    let got = run(&s, &[(0, 0), (100, 50)], 4096).unwrap();
    assert_eq!(got.data, expect(&[(0, 0), (100, 50)]));
    assert_eq!(got.resumed, 0);
}
