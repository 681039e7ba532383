//! The hardware provider on this host: a loopback run where a device exists, else the message
//! that names what is missing.

use super::*;
use crate::rdma::verbs::{RecvWr, SendOp, SendWr, WcStatus, RNR_FOREVER};

/// On a host without RDMA devices, opening fails with a message naming what is missing;
/// with one, two queue pairs of the device connected to each other move a SEND, a WRITE
/// and a READ (the hardware run of the provider).
#[test]
fn a_device_opens_and_loops_back_or_its_absence_is_named() {
    let d = match IbvDevice::open(None, 1, 0) {
        Err(VerbsError::NoDevice(m)) => {
            assert!(m.contains(SYSFS), "{m}");
            assert!(devices().is_err());
            return;
        }
        Err(e) => panic!("a device is listed but does not open: {e}"),
        Ok(d) => d,
    };
    let caps = QpCaps {
        max_send_wr: 8,
        max_recv_wr: 8,
    };
    let pd = d.alloc_pd().unwrap();
    let cq = d.create_cq(64).unwrap();
    let (a, b) = (
        d.create_qp(pd, cq, cq, caps).unwrap(),
        d.create_qp(pd, cq, cq, caps).unwrap(),
    );
    for (me, peer) in [(a, b), (b, a)] {
        let remote = d.endpoint(peer).unwrap();
        d.modify_qp(me, QpState::Init, None).unwrap();
        let c = ConnectAttrs {
            remote,
            rnr_retry: RNR_FOREVER,
        };
        d.modify_qp(me, QpState::Rtr, Some(c)).unwrap();
        d.modify_qp(me, QpState::Rts, None).unwrap();
    }
    let rw = Access::LOCAL_WRITE
        .union(Access::REMOTE_WRITE)
        .union(Access::REMOTE_READ);
    let (src, dst) = (
        d.reg_mr(pd, 1 << 20, rw).unwrap(),
        d.reg_mr(pd, 1 << 20, rw).unwrap(),
    );
    let data: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
    d.write_local(src.lkey, 0, &data).unwrap();
    let wait = |n: usize| {
        let mut got = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while got.len() < n && std::time::Instant::now() < deadline {
            got.extend(d.poll_cq(cq, 16).unwrap());
        }
        assert!(got.iter().all(|w| w.status == WcStatus::Success), "{got:?}");
        assert_eq!(got.len(), n);
    };
    d.post_recv(
        b,
        RecvWr {
            wr_id: 1,
            sge: dst.sge(0, 64),
        },
    )
    .unwrap();
    let send = SendOp::Send { imm: Some(7) };
    d.post_send(
        a,
        SendWr {
            wr_id: 2,
            op: send,
            sge: src.sge(0, 64),
        },
    )
    .unwrap();
    wait(2);
    let write = SendOp::Write {
        remote_addr: dst.addr,
        rkey: dst.rkey,
    };
    d.post_send(
        a,
        SendWr {
            wr_id: 3,
            op: write,
            sge: src.sge(0, 1 << 20),
        },
    )
    .unwrap();
    wait(1);
    let mut seen = vec![0; 1 << 20];
    d.read_local(dst.lkey, 0, &mut seen).unwrap();
    assert!(seen == data);
    d.write_local(src.lkey, 0, &[0; 4096]).unwrap();
    let read = SendOp::Read {
        remote_addr: dst.addr,
        rkey: dst.rkey,
    };
    d.post_send(
        a,
        SendWr {
            wr_id: 4,
            op: read,
            sge: src.sge(0, 4096),
        },
    )
    .unwrap();
    wait(1);
    d.read_local(src.lkey, 0, &mut seen[..4096]).unwrap();
    assert!(seen[..4096] == data[..4096]);
}
