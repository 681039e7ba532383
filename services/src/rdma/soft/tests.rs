//! The software provider keeps the rules of verbs: each test breaks one and checks the status
//! hardware gives, or checks that a legal sequence moves the bytes.

use super::super::verbs::*;
use super::{SoftDevice, SoftFabric};

const RW: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ);

/// One end of a connection: its device, protection domain, completion queue and queue pair.
struct End {
    dev: SoftDevice,
    pd: PdId,
    cq: CqId,
    qp: QpNum,
}

impl End {
    fn new(dev: &SoftDevice, caps: QpCaps, cq_depth: u32) -> End {
        let pd = dev.alloc_pd().unwrap();
        let cq = dev.create_cq(cq_depth).unwrap();
        let qp = dev.create_qp(pd, cq, cq, caps).unwrap();
        End {
            dev: dev.clone(),
            pd,
            cq,
            qp,
        }
    }

    fn mr(&self, len: u64, access: Access) -> MrInfo {
        self.dev.reg_mr(self.pd, len, access).unwrap()
    }

    fn poll(&self) -> Vec<WorkCompletion> {
        self.dev.poll_cq(self.cq, 64).unwrap()
    }

    fn statuses(&self) -> Vec<(u64, WcStatus)> {
        self.poll().iter().map(|w| (w.wr_id, w.status)).collect()
    }

    fn send(&self, wr_id: u64, sge: Sge, op: SendOp) {
        self.dev
            .post_send(self.qp, SendWr { wr_id, op, sge })
            .unwrap();
    }

    fn recv(&self, wr_id: u64, sge: Sge) {
        self.dev.post_recv(self.qp, RecvWr { wr_id, sge }).unwrap();
    }

    fn state_is_error(&self) -> bool {
        // A send on a failed queue pair completes with a flush error.
        let mr = self.mr(8, Access::LOCAL_WRITE);
        self.send(999, mr.sge(0, 8), SendOp::Send { imm: None });
        self.poll()
            .last()
            .is_some_and(|w| w.status == WcStatus::WrFlushErr)
    }
}

const CAPS: QpCaps = QpCaps {
    max_send_wr: 16,
    max_recv_wr: 16,
};

/// Two devices on one fabric with a connected queue pair each.
fn pair(rnr_retry: u8, caps: QpCaps, cq_depth: u32) -> (End, End) {
    let f = SoftFabric::new();
    let (a, b) = (f.device("soft-a"), f.device("soft-b"));
    let (a, b) = (End::new(&a, caps, cq_depth), End::new(&b, caps, cq_depth));
    connect(&a, &b, rnr_retry);
    (a, b)
}

fn connect(a: &End, b: &End, rnr_retry: u8) {
    let (ea, eb) = (a.dev.endpoint(a.qp).unwrap(), b.dev.endpoint(b.qp).unwrap());
    for (end, remote) in [(a, eb), (b, ea)] {
        let d = &end.dev;
        d.modify_qp(end.qp, QpState::Init, None).unwrap();
        let attrs = ConnectAttrs { remote, rnr_retry };
        d.modify_qp(end.qp, QpState::Rtr, Some(attrs)).unwrap();
        d.modify_qp(end.qp, QpState::Rts, None).unwrap();
    }
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
}

#[test]
fn a_send_lands_in_the_posted_receive_with_its_immediate() {
    let (a, b) = pair(RNR_FOREVER, CAPS, 64);
    let (src, dst) = (a.mr(64, Access::LOCAL_WRITE), b.mr(64, Access::LOCAL_WRITE));
    a.dev.write_local(src.lkey, 0, b"hello").unwrap();
    b.recv(7, dst.sge(0, 64));
    a.send(1, src.sge(0, 5), SendOp::Send { imm: Some(42) });
    let got = b.poll();
    assert_eq!(got.len(), 1);
    let wc = got[0];
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (7, WcStatus::Success, WcOpcode::Recv)
    );
    assert_eq!((wc.byte_len, wc.imm), (5, Some(42)));
    let mut out = [0u8; 5];
    b.dev.read_local(dst.lkey, 0, &mut out).unwrap();
    assert_eq!(&out, b"hello");
    assert_eq!(a.statuses(), [(1, WcStatus::Success)]);
}

#[test]
fn one_sided_writes_and_reads_move_a_mebibyte_without_the_peer_seeing_a_completion() {
    let (a, b) = pair(RNR_FOREVER, CAPS, 64);
    let n = 1 << 20;
    let (local, remote) = (a.mr(n, Access::LOCAL_WRITE), b.mr(n, RW));
    let data = pattern(n as usize, 1);
    a.dev.write_local(local.lkey, 0, &data).unwrap();
    let write = SendOp::Write {
        remote_addr: remote.addr,
        rkey: remote.rkey,
    };
    a.send(1, local.sge(0, n as u32), write);
    let mut seen = vec![0; n as usize];
    b.dev.read_local(remote.lkey, 0, &mut seen).unwrap();
    assert!(seen == data, "the peer's region holds the written bytes");
    // The peer changes its bytes; a READ brings them over.
    let back = pattern(n as usize, 2);
    b.dev.write_local(remote.lkey, 0, &back).unwrap();
    let read = SendOp::Read {
        remote_addr: remote.addr,
        rkey: remote.rkey,
    };
    a.send(2, local.sge(0, n as u32), read);
    a.dev.read_local(local.lkey, 0, &mut seen).unwrap();
    assert!(seen == back, "the local region holds the read bytes");
    let wcs = a.poll();
    let ops: Vec<_> = wcs
        .iter()
        .map(|w| (w.opcode, w.status, w.byte_len))
        .collect();
    assert_eq!(
        ops,
        [
            (WcOpcode::RdmaWrite, WcStatus::Success, n as u32),
            (WcOpcode::RdmaRead, WcStatus::Success, n as u32)
        ]
    );
    assert!(
        b.poll().is_empty(),
        "one-sided operations complete only at the initiator"
    );
}

#[test]
fn one_sided_accesses_outside_the_rules_fail_with_remote_access_errors() {
    // Each case: what the peer registered (or did), and the access attempted.
    type Case = (&'static str, fn(&End) -> (u64, u32));
    let cases: [Case; 5] = [
        ("an lkey as the rkey", |b| {
            let m = b.mr(4096, RW);
            (m.addr, m.lkey)
        }),
        ("past the region's end", |b| {
            let m = b.mr(4096, RW);
            (m.addr + 4000, m.rkey)
        }),
        ("a region without remote write", |b| {
            let m = b.mr(4096, Access::REMOTE_READ);
            (m.addr, m.rkey)
        }),
        ("a region of another protection domain", |b| {
            let pd = b.dev.alloc_pd().unwrap();
            let m = b.dev.reg_mr(pd, 4096, RW).unwrap();
            (m.addr, m.rkey)
        }),
        ("a deregistered region", |b| {
            let m = b.mr(4096, RW);
            b.dev.dereg_mr(m.lkey).unwrap();
            (m.addr, m.rkey)
        }),
    ];
    for (what, target) in cases {
        let (a, b) = pair(RNR_FOREVER, CAPS, 64);
        let src = a.mr(4096, Access::LOCAL_WRITE);
        let (remote_addr, rkey) = target(&b);
        a.send(1, src.sge(0, 200), SendOp::Write { remote_addr, rkey });
        a.send(2, src.sge(0, 8), SendOp::Send { imm: None });
        assert_eq!(
            a.statuses(),
            [(1, WcStatus::RemAccessErr), (2, WcStatus::WrFlushErr)],
            "{what}: the failed request, then the one behind it flushed"
        );
        assert!(a.state_is_error(), "{what}: the queue pair is in Error");
    }
}

#[test]
fn local_buffers_must_lie_in_a_region_with_the_right_to_be_written() {
    let (a, b) = pair(RNR_FOREVER, CAPS, 64);
    let remote = b.mr(4096, RW);
    let ro = a.mr(4096, Access::default());
    let read = SendOp::Read {
        remote_addr: remote.addr,
        rkey: remote.rkey,
    };
    a.send(1, ro.sge(0, 16), read);
    assert_eq!(
        a.statuses(),
        [(1, WcStatus::LocProtErr)],
        "READ into a read-only region"
    );
    let (a, _b) = pair(RNR_FOREVER, CAPS, 64);
    let mr = a.mr(4096, Access::LOCAL_WRITE);
    a.send(1, mr.sge(4090, 16), SendOp::Send { imm: None });
    assert_eq!(
        a.statuses(),
        [(1, WcStatus::LocProtErr)],
        "a buffer past the region"
    );
}

#[test]
fn a_send_waits_for_a_receive_and_gives_up_after_its_rnr_retries() {
    let (a, b) = pair(2, CAPS, 64);
    let (src, dst) = (a.mr(64, Access::LOCAL_WRITE), b.mr(64, Access::LOCAL_WRITE));
    a.send(1, src.sge(0, 8), SendOp::Send { imm: None });
    a.dev.fabric().tick();
    assert!(a.poll().is_empty(), "receiver not ready: the send waits");
    b.recv(5, dst.sge(0, 64));
    assert_eq!(
        a.statuses(),
        [(1, WcStatus::Success)],
        "the receive lets it go"
    );
    assert_eq!(b.statuses(), [(5, WcStatus::Success)]);
    // No receive this time: two retries, then the queue pair fails, in order.
    a.send(2, src.sge(0, 8), SendOp::Send { imm: None });
    a.send(3, src.sge(0, 8), SendOp::Send { imm: None });
    a.dev.fabric().tick();
    assert!(a.poll().is_empty(), "one retry spent, one left");
    a.dev.fabric().tick();
    assert_eq!(
        a.statuses(),
        [(2, WcStatus::RnrRetryExcErr), (3, WcStatus::WrFlushErr)]
    );
    // rnr_retry 0: the first refusal fails it; 7: it never gives up.
    let (a, _b) = pair(0, CAPS, 64);
    let src = a.mr(64, Access::LOCAL_WRITE);
    a.send(1, src.sge(0, 8), SendOp::Send { imm: None });
    assert_eq!(a.statuses(), [(1, WcStatus::RnrRetryExcErr)]);
    let (a, b) = pair(RNR_FOREVER, CAPS, 64);
    let (src, dst) = (a.mr(64, Access::LOCAL_WRITE), b.mr(64, Access::LOCAL_WRITE));
    a.send(1, src.sge(0, 8), SendOp::Send { imm: None });
    for _ in 0..100 {
        a.dev.fabric().tick();
    }
    assert!(a.poll().is_empty());
    b.recv(1, dst.sge(0, 8));
    assert_eq!(a.statuses(), [(1, WcStatus::Success)]);
}

#[test]
fn requests_behind_a_waiting_send_run_after_it_in_order() {
    let (a, b) = pair(RNR_FOREVER, CAPS, 64);
    let (src, dst) = (a.mr(64, Access::LOCAL_WRITE), b.mr(64, RW));
    a.dev.write_local(src.lkey, 0, &[9; 64]).unwrap();
    a.send(1, src.sge(0, 8), SendOp::Send { imm: None });
    let write = SendOp::Write {
        remote_addr: dst.addr + 32,
        rkey: dst.rkey,
    };
    a.send(2, src.sge(0, 8), write);
    let mut seen = [0u8; 8];
    b.dev.read_local(dst.lkey, 32, &mut seen).unwrap();
    assert_eq!(seen, [0; 8], "the WRITE waits behind the SEND");
    b.recv(1, dst.sge(0, 8));
    b.dev.read_local(dst.lkey, 32, &mut seen).unwrap();
    assert_eq!(seen, [9; 8]);
    assert_eq!(
        a.statuses(),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
}

#[test]
fn queues_hold_their_depth_until_completions_are_polled() {
    let caps = QpCaps {
        max_send_wr: 4,
        max_recv_wr: 2,
    };
    let (a, b) = pair(RNR_FOREVER, caps, 64);
    let (src, dst) = (a.mr(64, Access::LOCAL_WRITE), b.mr(64, Access::LOCAL_WRITE));
    let send = |id| SendWr {
        wr_id: id,
        op: SendOp::Send { imm: None },
        sge: src.sge(0, 8),
    };
    for id in 0..4 {
        a.dev.post_send(a.qp, send(id)).unwrap();
    }
    assert_eq!(a.dev.post_send(a.qp, send(4)), Err(VerbsError::QueueFull));
    b.recv(0, dst.sge(0, 8));
    b.recv(1, dst.sge(8, 8));
    let third = RecvWr {
        wr_id: 2,
        sge: dst.sge(16, 8),
    };
    assert_eq!(b.dev.post_recv(b.qp, third), Err(VerbsError::QueueFull));
    // Completed but not polled still holds the slots.
    assert_eq!(a.dev.post_send(a.qp, send(4)), Err(VerbsError::QueueFull));
    assert_eq!(a.poll().len(), 2);
    assert_eq!(b.poll().len(), 2);
    a.dev.post_send(a.qp, send(4)).unwrap();
    b.dev.post_recv(b.qp, third).unwrap();
}

#[test]
fn a_receive_shorter_than_the_send_fails_both_sides() {
    let (a, b) = pair(RNR_FOREVER, CAPS, 64);
    let (src, dst) = (a.mr(64, Access::LOCAL_WRITE), b.mr(64, Access::LOCAL_WRITE));
    b.recv(1, dst.sge(0, 4));
    b.recv(2, dst.sge(4, 4));
    a.send(1, src.sge(0, 8), SendOp::Send { imm: None });
    assert_eq!(a.statuses(), [(1, WcStatus::RemInvReqErr)]);
    assert_eq!(
        b.statuses(),
        [(1, WcStatus::LocLenErr), (2, WcStatus::WrFlushErr)]
    );
    assert!(a.state_is_error() && b.state_is_error());
}

#[test]
fn an_overflowing_completion_queue_is_unusable() {
    let (a, b) = pair(RNR_FOREVER, CAPS, 2);
    let (src, dst) = (a.mr(64, Access::LOCAL_WRITE), b.mr(64, RW));
    for id in 0..3 {
        let w = SendOp::Write {
            remote_addr: dst.addr,
            rkey: dst.rkey,
        };
        a.send(id, src.sge(0, 8), w);
    }
    assert_eq!(a.dev.poll_cq(a.cq, 8), Err(VerbsError::CqOverrun(a.cq)));
}

#[test]
fn losing_the_connection_fails_both_queue_pairs_and_a_new_one_works_after_healing() {
    let f = SoftFabric::new();
    let (da, db) = (f.device("soft-a"), f.device("soft-b"));
    let (a, b) = (End::new(&da, CAPS, 64), End::new(&db, CAPS, 64));
    connect(&a, &b, RNR_FOREVER);
    let (src, dst) = (a.mr(64, Access::LOCAL_WRITE), b.mr(64, Access::LOCAL_WRITE));
    // Mid-transfer: a SEND waits for a receive when the link is cut.
    a.send(1, src.sge(0, 8), SendOp::Send { imm: None });
    a.send(2, src.sge(0, 8), SendOp::Send { imm: None });
    f.cut(&da, &db);
    assert_eq!(
        a.statuses(),
        [(1, WcStatus::RetryExcErr), (2, WcStatus::WrFlushErr)]
    );
    b.recv(9, dst.sge(0, 8));
    assert_eq!(b.statuses(), [(9, WcStatus::WrFlushErr)]);
    // A new connection over the cut link fails at its first request; healed, it works.
    let (a2, b2) = (End::new(&da, CAPS, 64), End::new(&db, CAPS, 64));
    connect(&a2, &b2, RNR_FOREVER);
    let src2 = a2.mr(64, Access::LOCAL_WRITE);
    a2.send(1, src2.sge(0, 8), SendOp::Send { imm: None });
    assert_eq!(a2.statuses(), [(1, WcStatus::RetryExcErr)]);
    f.heal(&da, &db);
    let (a3, b3) = (End::new(&da, CAPS, 64), End::new(&db, CAPS, 64));
    connect(&a3, &b3, RNR_FOREVER);
    let (s3, d3) = (
        a3.mr(64, Access::LOCAL_WRITE),
        b3.mr(64, Access::LOCAL_WRITE),
    );
    b3.recv(1, d3.sge(0, 8));
    a3.send(1, s3.sge(0, 8), SendOp::Send { imm: None });
    assert_eq!(a3.statuses(), [(1, WcStatus::Success)]);
    // The peer's process dies: everything of it is gone, and the survivor's queue pair fails.
    b3.recv(2, d3.sge(0, 8));
    f.kill(&db);
    assert!(a3.state_is_error());
    assert!(matches!(db.alloc_pd(), Err(VerbsError::NoDevice(_))));
}

#[test]
fn queue_pairs_move_only_in_the_verbs_order() {
    let f = SoftFabric::new();
    let d = f.device("soft-a");
    let e = End::new(&d, CAPS, 8);
    let mr = e.mr(64, Access::LOCAL_WRITE);
    let wr = SendWr {
        wr_id: 1,
        op: SendOp::Send { imm: None },
        sge: mr.sge(0, 8),
    };
    let invalid = |state| Err(VerbsError::InvalidState { qp: e.qp, state });
    assert_eq!(
        d.modify_qp(e.qp, QpState::Rts, None),
        invalid(QpState::Reset)
    );
    let rwr = RecvWr {
        wr_id: 1,
        sge: mr.sge(0, 8),
    };
    assert_eq!(d.post_recv(e.qp, rwr), invalid(QpState::Reset));
    d.modify_qp(e.qp, QpState::Init, None).unwrap();
    assert_eq!(d.post_send(e.qp, wr), invalid(QpState::Init));
    assert!(matches!(
        d.modify_qp(e.qp, QpState::Rtr, None),
        Err(VerbsError::Invalid(_))
    ));
    d.post_recv(e.qp, rwr).unwrap();
    d.modify_qp(e.qp, QpState::Error, None).unwrap();
    assert_eq!(
        e.statuses(),
        [(1, WcStatus::WrFlushErr)],
        "moving to Error flushes"
    );
    d.modify_qp(e.qp, QpState::Reset, None).unwrap();
    d.destroy_qp(e.qp).unwrap();
    assert_eq!(
        d.endpoint(e.qp),
        Err(VerbsError::NoSuchObject("queue pair"))
    );
}
