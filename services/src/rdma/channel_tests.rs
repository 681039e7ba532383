//! The message channel on the software provider: round trips, flow control that never lets a
//! SEND meet a peer without a receive (the fabric counts those), windows of one without
//! deadlock, one-sided payloads of 1 MiB, refusals, and connection loss.

use std::sync::Arc;

use super::channel::{Channel, ChannelConfig, ChannelError};
use super::soft::{SoftDevice, SoftFabric};
use super::verbs::{Verbs, WcStatus};

/// Two connected channels on one fabric, and their devices.
fn pair(cfg: ChannelConfig) -> (Channel, Channel, SoftDevice, SoftDevice) {
    let f = SoftFabric::new();
    let (da, db) = (f.device("soft-a"), f.device("soft-b"));
    let (mut a, ea) = Channel::new(Arc::new(da.clone()) as Arc<dyn Verbs>, cfg).unwrap();
    let (mut b, eb) = Channel::new(Arc::new(db.clone()) as Arc<dyn Verbs>, cfg).unwrap();
    a.connect(eb).unwrap();
    b.connect(ea).unwrap();
    (a, b, da, db)
}

fn small(slots: u32) -> ChannelConfig {
    ChannelConfig {
        slots,
        slot_bytes: 256,
        bulk_bytes: 2 << 20,
    }
}

#[test]
fn a_message_goes_and_its_answer_comes_back() {
    let (mut a, mut b, _, _) = pair(small(8));
    a.send(b"ping").unwrap();
    b.poll().unwrap();
    assert_eq!(b.recv().as_deref(), Some(&b"ping"[..]));
    b.send(b"pong").unwrap();
    a.poll().unwrap();
    assert_eq!(a.recv().as_deref(), Some(&b"pong"[..]));
    assert_eq!(a.recv(), None);
}

/// Polls both sides until each has received `n` messages; panics if they stop moving.
fn exchange(a: &mut Channel, b: &mut Channel, n: usize) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    for _ in 0..100_000 {
        a.poll().unwrap();
        b.poll().unwrap();
        got_a.extend(std::iter::from_fn(|| a.recv()));
        got_b.extend(std::iter::from_fn(|| b.recv()));
        if got_a.len() >= n && got_b.len() >= n {
            return (got_a, got_b);
        }
    }
    panic!(
        "stalled: a got {}, b got {}, waiting {} and {}",
        got_a.len(),
        got_b.len(),
        a.waiting(),
        b.waiting()
    );
}

#[test]
fn a_writer_ahead_of_its_reader_waits_for_credits_and_every_message_arrives_in_order() {
    let (mut a, mut b, da, _) = pair(small(4));
    let msgs: Vec<Vec<u8>> = (0..40u32).map(|i| i.to_be_bytes().to_vec()).collect();
    for m in &msgs {
        a.send(m).unwrap();
    }
    assert_eq!(a.waiting(), 37, "a window of 3: the rest wait for credits");
    let mut got = Vec::new();
    for _ in 0..1000 {
        b.poll().unwrap();
        a.poll().unwrap();
        got.extend(std::iter::from_fn(|| b.recv()));
        if got.len() == msgs.len() {
            break;
        }
    }
    assert_eq!(got, msgs);
    assert_eq!(
        da.fabric().rnr_waits(),
        0,
        "a SEND met an empty receive queue"
    );
}

#[test]
fn both_sides_flooding_through_a_window_of_one_do_not_deadlock() {
    for slots in [2, 3, 5] {
        let (mut a, mut b, da, _) = pair(small(slots));
        let msgs: Vec<Vec<u8>> = (0..60u32).map(|i| i.to_le_bytes().to_vec()).collect();
        for m in &msgs {
            a.send(m).unwrap();
            b.send(m).unwrap();
        }
        let (got_a, got_b) = exchange(&mut a, &mut b, msgs.len());
        assert_eq!(
            (got_a, got_b),
            (msgs.clone(), msgs.clone()),
            "slots {slots}"
        );
        assert_eq!(da.fabric().rnr_waits(), 0, "slots {slots}");
    }
}

#[test]
fn a_message_longer_than_a_slot_is_refused_whole_and_an_empty_one_is_data() {
    let (mut a, mut b, _, _) = pair(small(4));
    assert_eq!(a.send(&[0; 257]), Err(ChannelError::TooLarge(257)));
    a.send(&[0; 256]).unwrap();
    a.send(&[]).unwrap();
    b.poll().unwrap();
    assert_eq!(b.recv().map(|m| m.len()), Some(256));
    assert_eq!(b.recv(), Some(Vec::new()));
}

#[test]
fn payloads_move_one_sided_and_a_wrong_key_fails_the_channel_for_good() {
    let (a, mut b, _, _) = pair(small(4));
    let n = 1 << 20;
    let data: Vec<u8> = (0..n).map(|i| (i % 253) as u8).collect();
    a.put_bulk(0, &data).unwrap();
    // Storage pulls the client's write buffer ...
    let (addr, rkey) = (a.bulk().addr, a.bulk().rkey);
    b.read_remote(0, n as u32, addr, rkey).unwrap();
    let mut seen = vec![0; n];
    b.get_bulk(0, &mut seen).unwrap();
    assert!(seen == data);
    // ... and pushes read data into it.
    b.put_bulk(0, &[7; 4096]).unwrap();
    b.write_remote(0, 4096, addr + 8192, rkey).unwrap();
    a.get_bulk(8192, &mut seen[..4096]).unwrap();
    assert_eq!(&seen[..4096], &[7; 4096]);
    assert_eq!(
        b.read_remote(0, 64, addr, rkey ^ 0x55),
        Err(ChannelError::Lost(WcStatus::RemAccessErr))
    );
    assert_eq!(
        b.send(b"x"),
        Err(ChannelError::Lost(WcStatus::RemAccessErr))
    );
}

#[test]
fn a_lost_connection_fails_both_ends() {
    let (mut a, mut b, da, db) = pair(small(4));
    a.send(b"before").unwrap();
    da.fabric().cut(&da, &db);
    assert!(matches!(a.poll(), Err(ChannelError::Lost(_))));
    assert!(matches!(b.poll(), Err(ChannelError::Lost(_))));
    assert!(matches!(a.send(b"after"), Err(ChannelError::Lost(_))));
}
