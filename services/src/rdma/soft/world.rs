//! The software fabric's state and how it runs work requests: the rules of verbs (module doc
//! of `soft`) are checked here, each failure completing the request with the status hardware
//! gives and moving its queue pair to Error. Not here: the verbs calls (`mod.rs`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::super::verbs::RNR_FOREVER;
use super::super::verbs::{
    Access, ConnectAttrs, CqId, PdId, QpCaps, QpEndpoint, QpNum, QpState, RecvWr, SendOp, SendWr,
    Sge, VerbsError, WcOpcode, WcStatus, WorkCompletion,
};

#[derive(Default)]
pub(super) struct World {
    pub(super) devices: Vec<Dev>,
    /// Device pairs (lower gid first) whose link is cut.
    pub(super) cut: BTreeSet<(u64, u64)>,
    /// SENDs that met a peer with no receive posted (each wait counted once).
    pub(super) rnr_waits: u64,
    pub(super) next_key: u32,
}

#[derive(Default)]
pub(super) struct Dev {
    pub(super) name: String,
    pub(super) dead: bool,
    pub(super) pds: u32,
    /// Regions by lkey.
    pub(super) mrs: BTreeMap<u32, Mr>,
    /// lkey by rkey.
    pub(super) rkeys: BTreeMap<u32, u32>,
    pub(super) cqs: Vec<Cq>,
    pub(super) qps: BTreeMap<u32, Qp>,
    pub(super) next_qpn: u32,
    pub(super) next_addr: u64,
    /// Called on every completion of this device (`Verbs::on_completion`).
    pub(super) events: Vec<std::sync::Arc<dyn Fn() + Send + Sync>>,
}

pub(super) struct Mr {
    pub(super) pd: PdId,
    pub(super) addr: u64,
    pub(super) access: Access,
    pub(super) rkey: u32,
    pub(super) bytes: Vec<u8>,
}

pub(super) struct Cq {
    pub(super) depth: u32,
    pub(super) entries: VecDeque<WorkCompletion>,
    pub(super) overrun: bool,
}

pub(super) struct Qp {
    pub(super) pd: PdId,
    pub(super) send_cq: CqId,
    pub(super) recv_cq: CqId,
    pub(super) caps: QpCaps,
    pub(super) state: QpState,
    pub(super) peer: Option<ConnectAttrs>,
    /// Send requests not yet run, each with its RNR retries left once it met an empty peer.
    pub(super) sq: VecDeque<(SendWr, Option<u8>)>,
    pub(super) rq: VecDeque<RecvWr>,
    pub(super) send_unpolled: u32,
    pub(super) recv_unpolled: u32,
}

/// Where a request's bytes are: device, lkey and offset in the region.
pub(super) type Place = (u64, u32, usize);

impl World {
    pub(super) fn dev(&mut self, gid: u64) -> Result<&mut Dev, VerbsError> {
        match self.devices.get_mut(gid as usize) {
            Some(d) if !d.dead => Ok(d),
            _ => Err(VerbsError::NoDevice(format!("soft device {gid} is gone"))),
        }
    }

    pub(super) fn qp(&mut self, gid: u64, qpn: QpNum) -> Result<&mut Qp, VerbsError> {
        self.dev(gid)?
            .qps
            .get_mut(&qpn.0)
            .ok_or(VerbsError::NoSuchObject("queue pair"))
    }

    pub(super) fn all_qps(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.devices
            .iter()
            .enumerate()
            .flat_map(|(g, d)| d.qps.keys().map(move |q| (g as u64, *q)))
    }

    /// Fails every live queue pair whose (own device, peer device) `spans` says.
    pub(super) fn fail_spanning(&mut self, spans: impl Fn(u64, u64) -> bool) {
        let hit: Vec<(u64, u32)> = self
            .all_qps()
            .filter(|&(g, q)| {
                let qp = &self.devices[g as usize].qps[&q];
                qp.peer.is_some_and(|p| spans(g, dev_id(p.remote)))
                    && matches!(qp.state, QpState::Rtr | QpState::Rts)
            })
            .collect();
        for (g, q) in hit {
            self.fail(g, q, WcStatus::RetryExcErr);
        }
    }

    /// Completes `wc` on `cq` of device `gid` (lost, and the queue unusable, when full).
    pub(super) fn complete(&mut self, gid: u64, cq: CqId, wc: WorkCompletion) {
        let Ok(d) = self.dev(gid) else { return };
        let c = &mut d.cqs[cq.0 as usize];
        if c.entries.len() >= c.depth as usize {
            c.overrun = true;
        } else {
            c.entries.push_back(wc);
        }
        // Wakers only signal (they never call back into the fabric), so running them under
        // the fabric's lock cannot deadlock.
        for wake in &d.events {
            wake();
        }
    }

    /// Moves queue pair `qpn` to Error: its head send completes `head`, the rest of its
    /// sends and all its receives `WrFlushErr`.
    pub(super) fn fail(&mut self, gid: u64, qpn: u32, head: WcStatus) {
        let Ok(qp) = self.qp(gid, QpNum(qpn)) else {
            return;
        };
        qp.state = QpState::Error;
        let (send_cq, recv_cq) = (qp.send_cq, qp.recv_cq);
        let sends: Vec<_> = qp.sq.drain(..).map(|(wr, _)| wr).collect();
        let recvs: Vec<_> = qp.rq.drain(..).collect();
        for (k, wr) in sends.into_iter().enumerate() {
            let status = if k == 0 { head } else { WcStatus::WrFlushErr };
            let wc = wc_of_send(&wr, status, QpNum(qpn));
            self.complete(gid, send_cq, wc);
        }
        for wr in recvs {
            let wc = wc_of_recv(wr.wr_id, WcStatus::WrFlushErr, 0, None, QpNum(qpn));
            self.complete(gid, recv_cq, wc);
        }
    }

    /// Checks a local buffer of a request on (`gid`, its queue pair in `pd`): its place.
    fn local(&self, gid: u64, pd: PdId, sge: &Sge, write: bool) -> Option<Place> {
        let mr = self.devices[gid as usize].mrs.get(&sge.lkey)?;
        let ok = mr.pd == pd && (!write || mr.access.allows(Access::LOCAL_WRITE));
        let at = in_region(mr.addr, mr.bytes.len(), sge.addr, u64::from(sge.len))?;
        ok.then_some((gid, sge.lkey, at))
    }

    /// Checks a one-sided access to the peer's region `rkey`: its place.
    fn remote(
        &self,
        peer: QpEndpoint,
        rkey: u32,
        addr: u64,
        len: u32,
        right: Access,
    ) -> Option<Place> {
        let d = self.devices.get(dev_id(peer) as usize)?;
        let pd = d.qps.get(&peer.qpn.0)?.pd;
        let lkey = *d.rkeys.get(&rkey)?;
        let mr = &d.mrs[&lkey];
        let at = in_region(mr.addr, mr.bytes.len(), addr, u64::from(len))?;
        (mr.pd == pd && mr.access.allows(right)).then_some((dev_id(peer), lkey, at))
    }

    fn copy(&mut self, from: Place, to: Place, len: usize) {
        let src = self.devices[from.0 as usize].mrs[&from.1].bytes[from.2..from.2 + len].to_vec();
        let dst = self.devices[to.0 as usize]
            .mrs
            .get_mut(&to.1)
            .expect("checked");
        dst.bytes[to.2..to.2 + len].copy_from_slice(&src);
    }

    /// Whether the peer of a queue pair on `gid` is reachable and connected back to it.
    fn reachable(&self, gid: u64, qpn: u32, peer: QpEndpoint) -> bool {
        let Some(d) = self.devices.get(dev_id(peer) as usize) else {
            return false;
        };
        let back = d.qps.get(&peer.qpn.0).is_some_and(|q| {
            matches!(q.state, QpState::Rtr | QpState::Rts)
                && q.peer
                    .is_some_and(|p| dev_id(p.remote) == gid && p.remote.qpn.0 == qpn)
        });
        !d.dead
            && back
            && !self
                .cut
                .contains(&(gid.min(dev_id(peer)), gid.max(dev_id(peer))))
    }

    /// Runs queue pair (`gid`, `qpn`)'s sends in order until one blocks or the queue empties;
    /// `timer`: an RNR timer fired (a blocked SEND spends a retry).
    pub(super) fn run(&mut self, gid: u64, qpn: u32, timer: bool) {
        loop {
            let Ok(qp) = self.qp(gid, QpNum(qpn)) else {
                return;
            };
            if qp.state != QpState::Rts {
                return;
            }
            let Some(&(wr, rnr_left)) = qp.sq.front() else {
                return;
            };
            let (pd, cq, peer) = (qp.pd, qp.send_cq, qp.peer.expect("RTS has a peer"));
            if !self.reachable(gid, qpn, peer.remote) {
                return self.fail(gid, qpn, WcStatus::RetryExcErr);
            }
            let reads = matches!(wr.op, SendOp::Read { .. });
            let Some(local) = self.local(gid, pd, &wr.sge, reads) else {
                return self.fail(gid, qpn, WcStatus::LocProtErr);
            };
            let len = wr.sge.len;
            let status = match wr.op {
                SendOp::Write { remote_addr, rkey } => {
                    match self.remote(peer.remote, rkey, remote_addr, len, Access::REMOTE_WRITE) {
                        Some(at) => {
                            self.copy(local, at, len as usize);
                            WcStatus::Success
                        }
                        None => WcStatus::RemAccessErr,
                    }
                }
                SendOp::Read { remote_addr, rkey } => {
                    match self.remote(peer.remote, rkey, remote_addr, len, Access::REMOTE_READ) {
                        Some(at) => {
                            self.copy(at, local, len as usize);
                            WcStatus::Success
                        }
                        None => WcStatus::RemAccessErr,
                    }
                }
                SendOp::Send { imm } => match self.deliver(peer.remote, local, len, imm) {
                    Some(s) => s,
                    None => {
                        // Receiver not ready: wait for a receive or the RNR timer.
                        if rnr_left.is_none() {
                            self.rnr_waits += 1;
                        }
                        let left = match (rnr_left, timer) {
                            (None, _) => peer.rnr_retry,
                            (Some(n), true) if n != RNR_FOREVER => n.saturating_sub(1),
                            (Some(n), _) => n,
                        };
                        if left == 0 && (rnr_left.is_some() || peer.rnr_retry == 0) {
                            return self.fail(gid, qpn, WcStatus::RnrRetryExcErr);
                        }
                        let qp = self.qp(gid, QpNum(qpn)).expect("present");
                        qp.sq[0].1 = Some(left);
                        return;
                    }
                },
            };
            if status != WcStatus::Success {
                return self.fail(gid, qpn, status);
            }
            self.qp(gid, QpNum(qpn)).expect("present").sq.pop_front();
            self.complete(gid, cq, wc_of_send(&wr, status, QpNum(qpn)));
        }
    }

    /// Delivers a SEND of `len` bytes at `from` into the peer's next receive: the sender's
    /// status, or None when no receive is posted.
    fn deliver(
        &mut self,
        peer: QpEndpoint,
        from: Place,
        len: u32,
        imm: Option<u32>,
    ) -> Option<WcStatus> {
        let qp = self.qp(dev_id(peer), peer.qpn).ok()?;
        let rwr = qp.rq.pop_front()?;
        let (pd, cq) = (qp.pd, qp.recv_cq);
        let to = self.local(dev_id(peer), pd, &rwr.sge, true);
        let (recv_status, send_status) = match to {
            None => (WcStatus::LocProtErr, WcStatus::RemInvReqErr),
            Some(_) if rwr.sge.len < len => (WcStatus::LocLenErr, WcStatus::RemInvReqErr),
            Some(to) => {
                self.copy(from, to, len as usize);
                (WcStatus::Success, WcStatus::Success)
            }
        };
        let n = if recv_status == WcStatus::Success {
            len
        } else {
            0
        };
        self.complete(
            dev_id(peer),
            cq,
            wc_of_recv(rwr.wr_id, recv_status, n, imm, peer.qpn),
        );
        if recv_status != WcStatus::Success {
            self.fail(dev_id(peer), peer.qpn.0, WcStatus::WrFlushErr);
        }
        Some(send_status)
    }
}

/// The offset of [addr, addr + len) in a region at `base` of `size` bytes, if inside.
pub(super) fn in_region(base: u64, size: usize, addr: u64, len: u64) -> Option<usize> {
    let off = addr.checked_sub(base)?;
    (off.checked_add(len)? <= size as u64).then_some(off as usize)
}

pub(super) fn wc_of_send(wr: &SendWr, status: WcStatus, qp: QpNum) -> WorkCompletion {
    let opcode = match wr.op {
        SendOp::Send { .. } => WcOpcode::Send,
        SendOp::Write { .. } => WcOpcode::RdmaWrite,
        SendOp::Read { .. } => WcOpcode::RdmaRead,
    };
    let byte_len = if status == WcStatus::Success {
        wr.sge.len
    } else {
        0
    };
    WorkCompletion {
        wr_id: wr.wr_id,
        status,
        opcode,
        byte_len,
        imm: None,
        qp,
    }
}

pub(super) fn wc_of_recv(
    wr_id: u64,
    status: WcStatus,
    n: u32,
    imm: Option<u32>,
    qp: QpNum,
) -> WorkCompletion {
    WorkCompletion {
        wr_id,
        status,
        opcode: WcOpcode::Recv,
        byte_len: n,
        imm,
        qp,
    }
}

/// The device an endpoint names (its gid is the device's index).
pub(super) fn dev_id(e: QpEndpoint) -> u64 {
    u64::try_from(e.gid).unwrap_or(u64::MAX)
}
