//! The software verbs provider: devices of one in-process fabric that keep the rules hardware
//! enforces, so that the RDMA transport's tests meet the failures real verbs give.
//!
//! Rules kept: a work request's local buffer must lie in a region of the queue pair's
//! protection domain (and that region must allow local writes when the request writes it); a
//! one-sided access must name a peer region by its rkey, in the peer queue pair's protection
//! domain, inside the region and with the right (remote read or write), else it completes
//! `RemAccessErr`; a SEND needs a receive posted on the peer, else it waits as receiver-not-
//! ready and is retried on each [`SoftFabric::tick`] (the RNR timer) until the peer posts one
//! or the queue pair's `rnr_retry` is spent (7: without end); a receive shorter than the SEND
//! fails both sides; requests on one queue pair run and complete in the order posted, and a
//! blocked one holds back those behind it; queues hold at most their depth of requests not yet
//! polled; a completion queue that overflows is unusable; a failed request moves its queue
//! pair to Error, where everything queued completes `WrFlushErr`.
//!
//! Connection loss ([`SoftFabric::cut`], [`SoftFabric::kill`]) fails every queue pair that
//! spans it at once, as a keepalive would notice: queued requests complete `RetryExcErr` (the
//! first) and `WrFlushErr`. Requests run when posted (or when an RNR wait ends), under one
//! lock for the whole fabric: there is no clock, so a run is a function of its calls.
//!
//! Not here: hardware timing, bandwidth and concurrency (the performance model's business),
//! and the real provider (rdma-sys, behind the `rdma` feature).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use super::verbs::{
    Access, ConnectAttrs, CqId, MrInfo, PdId, QpCaps, QpEndpoint, QpNum, QpState, RecvWr, SendWr,
    Verbs, VerbsError, WcOpcode, WcStatus, WorkCompletion,
};
use world::{dev_id, in_region, wc_of_recv, wc_of_send, Cq, Dev, Mr, Qp, World};

pub mod remote;
#[cfg(test)]
mod tests;
mod wire;
mod world;

/// One fabric of software devices.
#[derive(Default)]
pub struct SoftFabric {
    world: Mutex<World>,
}

impl SoftFabric {
    /// A new, empty fabric.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// A new device on the fabric.
    pub fn device(self: &Arc<Self>, name: &str) -> SoftDevice {
        let mut w = self.lock();
        w.devices.push(Dev {
            name: name.to_string(),
            next_qpn: 1,
            next_addr: 0x1000_0000,
            ..Dev::default()
        });
        SoftDevice {
            fabric: self.clone(),
            gid: w.devices.len() as u64 - 1,
        }
    }

    fn lock(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The RNR timer fires: every send blocked on an empty peer is retried once.
    pub fn tick(&self) {
        let mut w = self.lock();
        let blocked: Vec<(u64, u32)> = w.all_qps().collect();
        for (gid, qpn) in blocked {
            w.run(gid, qpn, true);
        }
    }

    /// How many SENDs met a peer with no receive posted (flow control should keep it 0).
    pub fn rnr_waits(&self) -> u64 {
        self.lock().rnr_waits
    }

    /// Cuts the link between devices `a` and `b`: every queue pair spanning it fails.
    pub fn cut(&self, a: &SoftDevice, b: &SoftDevice) {
        let mut w = self.lock();
        w.cut.insert((a.gid.min(b.gid), a.gid.max(b.gid)));
        w.fail_spanning(|x, y| (x.min(y), x.max(y)) == (a.gid.min(b.gid), a.gid.max(b.gid)));
    }

    /// Restores the link between `a` and `b` (failed queue pairs stay failed).
    pub fn heal(&self, a: &SoftDevice, b: &SoftDevice) {
        self.lock()
            .cut
            .remove(&(a.gid.min(b.gid), a.gid.max(b.gid)));
    }

    /// Device `d` dies (its process crashed): its objects vanish, its peers' queue pairs fail.
    pub fn kill(&self, d: &SoftDevice) {
        let mut w = self.lock();
        let dev = &mut w.devices[d.gid as usize];
        dev.dead = true;
        dev.qps.clear();
        dev.mrs.clear();
        dev.rkeys.clear();
        dev.events.clear();
        w.fail_spanning(|x, y| x == d.gid || y == d.gid);
    }
}

/// One device of a [`SoftFabric`].
#[derive(Clone)]
pub struct SoftDevice {
    fabric: Arc<SoftFabric>,
    gid: u64,
}

impl SoftDevice {
    /// Its index on the fabric (what its endpoints' gid says).
    pub fn index(&self) -> u64 {
        self.gid
    }

    /// The fabric it is on.
    pub fn fabric(&self) -> &Arc<SoftFabric> {
        &self.fabric
    }
}

impl Verbs for SoftDevice {
    fn name(&self) -> String {
        self.fabric.lock().devices[self.gid as usize].name.clone()
    }

    fn alloc_pd(&self) -> Result<PdId, VerbsError> {
        let mut w = self.fabric.lock();
        let d = w.dev(self.gid)?;
        d.pds += 1;
        Ok(PdId(d.pds))
    }

    fn reg_mr(&self, pd: PdId, len: u64, access: Access) -> Result<MrInfo, VerbsError> {
        let mut w = self.fabric.lock();
        let key = w.next_key;
        w.next_key += 2;
        // Distinct numbers, so that an lkey passed as an rkey is refused as it would be.
        let (lkey, rkey) = (key + 1, key + 2);
        let d = w.dev(self.gid)?;
        if pd.0 == 0 || pd.0 > d.pds {
            return Err(VerbsError::NoSuchObject("protection domain"));
        }
        let size = usize::try_from(len).map_err(|_| VerbsError::Invalid("region size".into()))?;
        let addr = d.next_addr;
        // Regions never share an address, and a gap between them catches off-by-one accesses.
        d.next_addr += len.next_multiple_of(4096) + 4096;
        d.mrs.insert(
            lkey,
            Mr {
                pd,
                addr,
                access,
                rkey,
                bytes: vec![0; size],
            },
        );
        d.rkeys.insert(rkey, lkey);
        Ok(MrInfo {
            addr,
            len,
            lkey,
            rkey,
        })
    }

    fn dereg_mr(&self, lkey: u32) -> Result<(), VerbsError> {
        let mut w = self.fabric.lock();
        let d = w.dev(self.gid)?;
        let mr = d
            .mrs
            .remove(&lkey)
            .ok_or(VerbsError::NoSuchObject("memory region"))?;
        d.rkeys.remove(&mr.rkey);
        Ok(())
    }

    fn write_local(&self, lkey: u32, offset: u64, data: &[u8]) -> Result<(), VerbsError> {
        let mut w = self.fabric.lock();
        let mr = w
            .dev(self.gid)?
            .mrs
            .get_mut(&lkey)
            .ok_or(VerbsError::NoSuchObject("memory region"))?;
        let at = in_region(0, mr.bytes.len(), offset, data.len() as u64)
            .ok_or_else(|| VerbsError::Invalid("outside the region".into()))?;
        mr.bytes[at..at + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn read_local(&self, lkey: u32, offset: u64, out: &mut [u8]) -> Result<(), VerbsError> {
        let mut w = self.fabric.lock();
        let mr = w
            .dev(self.gid)?
            .mrs
            .get(&lkey)
            .ok_or(VerbsError::NoSuchObject("memory region"))?;
        let at = in_region(0, mr.bytes.len(), offset, out.len() as u64)
            .ok_or_else(|| VerbsError::Invalid("outside the region".into()))?;
        out.copy_from_slice(&mr.bytes[at..at + out.len()]);
        Ok(())
    }

    fn create_cq(&self, depth: u32) -> Result<CqId, VerbsError> {
        let mut w = self.fabric.lock();
        let d = w.dev(self.gid)?;
        d.cqs.push(Cq {
            depth,
            entries: VecDeque::new(),
            overrun: false,
        });
        Ok(CqId(d.cqs.len() as u32 - 1))
    }

    fn create_qp(
        &self,
        pd: PdId,
        send_cq: CqId,
        recv_cq: CqId,
        caps: QpCaps,
    ) -> Result<QpNum, VerbsError> {
        let mut w = self.fabric.lock();
        let d = w.dev(self.gid)?;
        if pd.0 == 0 || pd.0 > d.pds {
            return Err(VerbsError::NoSuchObject("protection domain"));
        }
        for cq in [send_cq, recv_cq] {
            if cq.0 as usize >= d.cqs.len() {
                return Err(VerbsError::NoSuchObject("completion queue"));
            }
        }
        let qpn = d.next_qpn;
        d.next_qpn += 1;
        d.qps.insert(
            qpn,
            Qp {
                pd,
                send_cq,
                recv_cq,
                caps,
                state: QpState::Reset,
                peer: None,
                sq: VecDeque::new(),
                rq: VecDeque::new(),
                send_unpolled: 0,
                recv_unpolled: 0,
            },
        );
        Ok(QpNum(qpn))
    }

    fn endpoint(&self, qp: QpNum) -> Result<QpEndpoint, VerbsError> {
        let mut w = self.fabric.lock();
        w.qp(self.gid, qp)?;
        Ok(QpEndpoint {
            gid: u128::from(self.gid),
            lid: 0,
            qpn: qp,
            psn: 0,
        })
    }

    fn modify_qp(
        &self,
        qp: QpNum,
        to: QpState,
        attrs: Option<ConnectAttrs>,
    ) -> Result<(), VerbsError> {
        use QpState::{Error, Init, Reset, Rtr, Rts};
        let mut w = self.fabric.lock();
        let q = w.qp(self.gid, qp)?;
        match (q.state, to) {
            (Reset, Init) | (Rtr, Rts) => q.state = to,
            (Init, Rtr) => {
                let a = attrs.ok_or_else(|| VerbsError::Invalid("RTR needs the peer".into()))?;
                q.peer = Some(a);
                q.state = Rtr;
            }
            (Error, Reset) => {
                q.state = Reset;
                q.peer = None;
            }
            (_, Error) => w.fail(self.gid, qp.0, WcStatus::WrFlushErr),
            (state, _) => return Err(VerbsError::InvalidState { qp, state }),
        }
        Ok(())
    }

    fn post_recv(&self, qp: QpNum, wr: RecvWr) -> Result<(), VerbsError> {
        let mut w = self.fabric.lock();
        let q = w.qp(self.gid, qp)?;
        if q.recv_unpolled >= q.caps.max_recv_wr {
            return Err(VerbsError::QueueFull);
        }
        match q.state {
            QpState::Reset => return Err(VerbsError::InvalidState { qp, state: q.state }),
            QpState::Error => {
                q.recv_unpolled += 1;
                let cq = q.recv_cq;
                let wc = wc_of_recv(wr.wr_id, WcStatus::WrFlushErr, 0, None, qp);
                w.complete(self.gid, cq, wc);
                return Ok(());
            }
            _ => {}
        }
        q.recv_unpolled += 1;
        q.rq.push_back(wr);
        // A SEND waiting on this receive goes now.
        if let Some(p) = q.peer {
            w.run(dev_id(p.remote), p.remote.qpn.0, false);
        }
        Ok(())
    }

    fn post_send(&self, qp: QpNum, wr: SendWr) -> Result<(), VerbsError> {
        let mut w = self.fabric.lock();
        let q = w.qp(self.gid, qp)?;
        if q.send_unpolled >= q.caps.max_send_wr {
            return Err(VerbsError::QueueFull);
        }
        match q.state {
            QpState::Rts => {}
            QpState::Error => {
                q.send_unpolled += 1;
                let cq = q.send_cq;
                w.complete(self.gid, cq, wc_of_send(&wr, WcStatus::WrFlushErr, qp));
                return Ok(());
            }
            state => return Err(VerbsError::InvalidState { qp, state }),
        }
        q.send_unpolled += 1;
        q.sq.push_back((wr, None));
        w.run(self.gid, qp.0, false);
        Ok(())
    }

    fn poll_cq(&self, cq: CqId, max: usize) -> Result<Vec<WorkCompletion>, VerbsError> {
        let mut w = self.fabric.lock();
        let d = w.dev(self.gid)?;
        let c = d
            .cqs
            .get_mut(cq.0 as usize)
            .ok_or(VerbsError::NoSuchObject("completion queue"))?;
        if c.overrun {
            return Err(VerbsError::CqOverrun(cq));
        }
        let got: Vec<_> = c.entries.drain(..max.min(c.entries.len())).collect();
        for wc in &got {
            // The slot of a polled request is free again.
            if let Some(q) = d.qps.get_mut(&wc.qp.0) {
                match wc.opcode {
                    WcOpcode::Recv => q.recv_unpolled = q.recv_unpolled.saturating_sub(1),
                    _ => q.send_unpolled = q.send_unpolled.saturating_sub(1),
                }
            }
        }
        Ok(got)
    }

    fn destroy_qp(&self, qp: QpNum) -> Result<(), VerbsError> {
        let mut w = self.fabric.lock();
        w.dev(self.gid)?
            .qps
            .remove(&qp.0)
            .map(|_| ())
            .ok_or(VerbsError::NoSuchObject("queue pair"))
    }

    fn on_completion(&self, wake: Arc<dyn Fn() + Send + Sync>) -> bool {
        let mut w = self.fabric.lock();
        match w.dev(self.gid) {
            Ok(d) => {
                d.events.push(wake);
                true
            }
            Err(_) => false,
        }
    }
}
