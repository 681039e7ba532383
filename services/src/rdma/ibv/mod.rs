//! The verbs provider on real RDMA hardware, through rdma-sys (libibverbs), behind the `rdma`
//! feature: one opened device port, its objects kept by the numbers the seam hands out, every
//! call under one lock (libibverbs objects may be used from any thread).
//!
//! Connections are reliable-connected queue pairs addressed by GID (`is_global`, so RoCE v2
//! and InfiniBand alike), at the port's active MTU, with 16 outstanding RDMA READs each way
//! or the device's limit if lower. Memory regions are page-aligned allocations owned here and
//! freed after deregistration.
//!
//! Compiled in CI (`cargo check --features rdma`) and reviewed, not yet run on hardware: no
//! machine this project has used had an RDMA device. Not here: rdma_cm (endpoints travel over
//! the TCP side channel), completion channels, on-demand paging.
#![allow(unsafe_code)]

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::BTreeMap;
use std::ffi::CStr;
use std::sync::{Mutex, MutexGuard};

use rdma_sys::*;

use super::verbs::{
    Access, ConnectAttrs, CqId, MrInfo, PdId, QpCaps, QpEndpoint, QpNum, QpState, RecvWr, SendOp,
    SendWr, Verbs, VerbsError, WorkCompletion, RNR_FOREVER,
};

use attrs::{access_bits, completion, sge_of};

mod attrs;
#[cfg(test)]
mod tests;

/// Where the kernel lists RDMA devices.
pub const SYSFS: &str = "/sys/class/infiniband";

/// Outstanding RDMA READs per queue pair, at most.
const RD_ATOMIC: i32 = 16;

/// The RDMA devices the kernel lists, or why there are none.
pub fn devices() -> Result<Vec<String>, VerbsError> {
    let names: Vec<String> = std::fs::read_dir(SYSFS)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    if names.is_empty() {
        return Err(VerbsError::NoDevice(format!(
            "no device found under {SYSFS} (no RDMA NIC, or its driver is not loaded)"
        )));
    }
    Ok(names)
}

/// One opened port of an RDMA device.
pub struct IbvDevice {
    name: String,
    port: u8,
    gid_index: u8,
    st: Mutex<State>,
}

struct Region {
    mr: *mut ibv_mr,
    buf: *mut u8,
    layout: Layout,
}

struct State {
    ctx: *mut ibv_context,
    gid: u128,
    lid: u16,
    mtu: ibv_mtu::Type,
    rd_atomic: u8,
    pds: Vec<*mut ibv_pd>,
    mrs: BTreeMap<u32, Region>,
    cqs: Vec<*mut ibv_cq>,
    qps: BTreeMap<u32, (*mut ibv_qp, u8)>,
}

// SAFETY: the raw pointers are libibverbs objects, usable from any thread; every access goes
// through the device's mutex, and regions' buffers are only touched under it by this side.
unsafe impl Send for State {}

fn os_err(what: &str) -> VerbsError {
    VerbsError::Device(format!("{what}: {}", std::io::Error::last_os_error()))
}

fn rc_err(what: &str, rc: i32) -> VerbsError {
    match rc {
        libc::ENOMEM => VerbsError::QueueFull,
        _ => VerbsError::Device(format!("{what}: {}", std::io::Error::from_raw_os_error(rc))),
    }
}

impl IbvDevice {
    /// Opens device `name` (the first one when None) at `port` (from 1) with GID `gid_index`.
    pub fn open(name: Option<&str>, port: u8, gid_index: u8) -> Result<Self, VerbsError> {
        devices()?;
        let mut n = 0;
        // SAFETY: the list is freed below; the context outlives it (libibverbs allows this).
        let (ctx, dev_name) = unsafe {
            let list = ibv_get_device_list(&mut n);
            if list.is_null() {
                return Err(os_err("ibv_get_device_list"));
            }
            let found = (0..n.max(0) as usize)
                .map(|k| *list.add(k))
                .map(|d| (d, CStr::from_ptr(ibv_get_device_name(d)).to_string_lossy()))
                .find(|(_, dn)| name.is_none_or(|want| want == dn))
                .map(|(d, dn)| (d, dn.into_owned()));
            let opened = found.map(|(d, dn)| (ibv_open_device(d), dn));
            ibv_free_device_list(list);
            match opened {
                Some((ctx, dn)) if !ctx.is_null() => (ctx, dn),
                Some(_) => return Err(os_err("ibv_open_device")),
                None => {
                    return Err(VerbsError::NoDevice(format!(
                        "{} not among the devices under {SYSFS}",
                        name.unwrap_or("any device")
                    )))
                }
            }
        };
        let st = Self::query(ctx, port, gid_index).inspect_err(|_| {
            // SAFETY: opened above, not shared yet.
            unsafe { ibv_close_device(ctx) };
        })?;
        Ok(Self {
            name: dev_name,
            port,
            gid_index,
            st: Mutex::new(st),
        })
    }

    /// The port's addresses and limits.
    fn query(ctx: *mut ibv_context, port: u8, gid_index: u8) -> Result<State, VerbsError> {
        // SAFETY: plain-data out-parameters of an open context.
        unsafe {
            let mut pa: ibv_port_attr = std::mem::zeroed();
            if ___ibv_query_port(ctx, port, &mut pa) != 0 {
                return Err(os_err("ibv_query_port"));
            }
            let mut gid: ibv_gid = std::mem::zeroed();
            if ibv_query_gid(ctx, port, i32::from(gid_index), &mut gid) != 0 {
                return Err(os_err("ibv_query_gid"));
            }
            let mut da: ibv_device_attr = std::mem::zeroed();
            if ibv_query_device(ctx, &mut da) != 0 {
                return Err(os_err("ibv_query_device"));
            }
            let rd = RD_ATOMIC
                .min(da.max_qp_rd_atom)
                .min(da.max_qp_init_rd_atom)
                .max(1);
            Ok(State {
                ctx,
                gid: u128::from_be_bytes(gid.raw),
                lid: pa.lid,
                mtu: pa.active_mtu,
                rd_atomic: rd as u8,
                pds: Vec::new(),
                mrs: BTreeMap::new(),
                cqs: Vec::new(),
                qps: BTreeMap::new(),
            })
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    fn pd(&self, pd: PdId) -> Result<*mut ibv_pd, VerbsError> {
        let k = (pd.0 as usize).wrapping_sub(1);
        self.pds
            .get(k)
            .copied()
            .ok_or(VerbsError::NoSuchObject("protection domain"))
    }

    fn cq(&self, cq: CqId) -> Result<*mut ibv_cq, VerbsError> {
        self.cqs
            .get(cq.0 as usize)
            .copied()
            .ok_or(VerbsError::NoSuchObject("completion queue"))
    }

    fn qp(&self, qp: QpNum) -> Result<(*mut ibv_qp, u8), VerbsError> {
        self.qps
            .get(&qp.0)
            .copied()
            .ok_or(VerbsError::NoSuchObject("queue pair"))
    }

    /// The bytes [offset, offset + len) of region `lkey`.
    fn span(&self, lkey: u32, offset: u64, len: usize) -> Result<*mut u8, VerbsError> {
        let r = self
            .mrs
            .get(&lkey)
            .ok_or(VerbsError::NoSuchObject("memory region"))?;
        let end = offset.checked_add(len as u64);
        if end.is_none_or(|e| e > r.layout.size() as u64) {
            return Err(VerbsError::Invalid("outside the region".into()));
        }
        // SAFETY: in bounds, checked above.
        Ok(unsafe { r.buf.add(offset as usize) })
    }
}

impl Verbs for IbvDevice {
    fn name(&self) -> String {
        format!("{}:{}/gid{}", self.name, self.port, self.gid_index)
    }

    fn alloc_pd(&self) -> Result<PdId, VerbsError> {
        let mut st = self.lock();
        // SAFETY: an open context.
        let pd = unsafe { ibv_alloc_pd(st.ctx) };
        if pd.is_null() {
            return Err(os_err("ibv_alloc_pd"));
        }
        st.pds.push(pd);
        Ok(PdId(st.pds.len() as u32))
    }

    fn reg_mr(&self, pd: PdId, len: u64, access: Access) -> Result<MrInfo, VerbsError> {
        let mut st = self.lock();
        let pd = st.pd(pd)?;
        let size = usize::try_from(len).map_err(|_| VerbsError::Invalid("region size".into()))?;
        let layout = Layout::from_size_align(size.max(1), 4096)
            .map_err(|e| VerbsError::Invalid(e.to_string()))?;
        // SAFETY: a non-zero layout; the buffer is freed only after deregistration.
        let buf = unsafe { alloc_zeroed(layout) };
        if buf.is_null() {
            return Err(VerbsError::Device("out of memory".into()));
        }
        // SAFETY: `buf` holds `size` bytes and outlives the registration.
        let mr = unsafe { ibv_reg_mr(pd, buf.cast(), size, access_bits(access) as i32) };
        if mr.is_null() {
            let e = os_err("ibv_reg_mr");
            // SAFETY: allocated above with `layout`, never registered.
            unsafe { dealloc(buf, layout) };
            return Err(e);
        }
        // SAFETY: a registered region.
        let (lkey, rkey) = unsafe { ((*mr).lkey, (*mr).rkey) };
        st.mrs.insert(lkey, Region { mr, buf, layout });
        Ok(MrInfo {
            addr: buf as u64,
            len,
            lkey,
            rkey,
        })
    }

    fn dereg_mr(&self, lkey: u32) -> Result<(), VerbsError> {
        let mut st = self.lock();
        let r = st
            .mrs
            .remove(&lkey)
            .ok_or(VerbsError::NoSuchObject("memory region"))?;
        // SAFETY: registered here; freed only once the device no longer uses it.
        let rc = unsafe { ibv_dereg_mr(r.mr) };
        if rc != 0 {
            // Still registered: keep the memory (a leak, not a use after free).
            return Err(rc_err("ibv_dereg_mr", rc));
        }
        // SAFETY: allocated with this layout in reg_mr, deregistered above.
        unsafe { dealloc(r.buf, r.layout) };
        Ok(())
    }

    fn write_local(&self, lkey: u32, offset: u64, data: &[u8]) -> Result<(), VerbsError> {
        let st = self.lock();
        let at = st.span(lkey, offset, data.len())?;
        // SAFETY: `at` has room for `data` (span checked it); the regions do not overlap it.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), at, data.len()) };
        Ok(())
    }

    fn read_local(&self, lkey: u32, offset: u64, out: &mut [u8]) -> Result<(), VerbsError> {
        let st = self.lock();
        let at = st.span(lkey, offset, out.len())?;
        // SAFETY: `at` holds `out.len()` bytes (span checked it).
        unsafe { std::ptr::copy_nonoverlapping(at, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    fn create_cq(&self, depth: u32) -> Result<CqId, VerbsError> {
        let mut st = self.lock();
        let n = i32::try_from(depth).map_err(|_| VerbsError::Invalid("depth".into()))?;
        // SAFETY: an open context; no channel, vector 0.
        let cq = unsafe { ibv_create_cq(st.ctx, n, std::ptr::null_mut(), std::ptr::null_mut(), 0) };
        if cq.is_null() {
            return Err(os_err("ibv_create_cq"));
        }
        st.cqs.push(cq);
        Ok(CqId(st.cqs.len() as u32 - 1))
    }

    fn create_qp(
        &self,
        pd: PdId,
        send_cq: CqId,
        recv_cq: CqId,
        caps: QpCaps,
    ) -> Result<QpNum, VerbsError> {
        let mut st = self.lock();
        let (pd, scq, rcq) = (st.pd(pd)?, st.cq(send_cq)?, st.cq(recv_cq)?);
        // SAFETY: zeroed is a valid ibv_qp_init_attr (null pointers, zero counts).
        let mut init: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        init.send_cq = scq;
        init.recv_cq = rcq;
        init.cap = ibv_qp_cap {
            max_send_wr: caps.max_send_wr,
            max_recv_wr: caps.max_recv_wr,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        init.qp_type = ibv_qp_type::IBV_QPT_RC;
        // Every request is signaled: the seam has no unsignaled ones.
        init.sq_sig_all = 1;
        // SAFETY: pd and cqs are live objects of this context.
        let qp = unsafe { ibv_create_qp(pd, &mut init) };
        if qp.is_null() {
            return Err(os_err("ibv_create_qp"));
        }
        // SAFETY: a created queue pair.
        let qpn = unsafe { (*qp).qp_num };
        st.qps.insert(qpn, (qp, RNR_FOREVER));
        Ok(QpNum(qpn))
    }

    fn endpoint(&self, qp: QpNum) -> Result<QpEndpoint, VerbsError> {
        let st = self.lock();
        st.qp(qp)?;
        Ok(QpEndpoint {
            gid: st.gid,
            lid: st.lid,
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
        let mut st = self.lock();
        let (q, rnr) = st.qp(qp)?;
        let (mut a, mask) = self.transition(&st, to, attrs, rnr)?;
        // SAFETY: a live queue pair and a filled attribute block for `mask`.
        let rc = unsafe { ibv_modify_qp(q, &mut a, mask.0 as i32) };
        if rc != 0 {
            return Err(rc_err("ibv_modify_qp", rc));
        }
        if let Some(c) = attrs {
            st.qps.insert(qp.0, (q, c.rnr_retry));
        }
        Ok(())
    }

    fn post_recv(&self, qp: QpNum, wr: RecvWr) -> Result<(), VerbsError> {
        let st = self.lock();
        let (q, _) = st.qp(qp)?;
        let mut sge = sge_of(wr.sge);
        let mut w = ibv_recv_wr {
            wr_id: wr.wr_id,
            next: std::ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: the request and its list live until the call returns (the provider copies
        // them into the queue); the buffer is registered memory named by its lkey.
        let rc = unsafe { ibv_post_recv(q, &mut w, &mut bad) };
        if rc != 0 {
            return Err(rc_err("ibv_post_recv", rc));
        }
        Ok(())
    }

    fn post_send(&self, qp: QpNum, wr: SendWr) -> Result<(), VerbsError> {
        let st = self.lock();
        let (q, _) = st.qp(qp)?;
        let mut sge = sge_of(wr.sge);
        // SAFETY: zeroed is a valid ibv_send_wr (null pointers, no flags).
        let mut w: ibv_send_wr = unsafe { std::mem::zeroed() };
        w.wr_id = wr.wr_id;
        w.sg_list = &mut sge;
        w.num_sge = 1;
        w.send_flags = ibv_send_flags::IBV_SEND_SIGNALED.0;
        w.opcode = match wr.op {
            SendOp::Send { imm: None } => ibv_wr_opcode::IBV_WR_SEND,
            SendOp::Send { imm: Some(imm) } => {
                w.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
                ibv_wr_opcode::IBV_WR_SEND_WITH_IMM
            }
            SendOp::Write { remote_addr, rkey } => {
                w.wr.rdma = rdma_t { remote_addr, rkey };
                ibv_wr_opcode::IBV_WR_RDMA_WRITE
            }
            SendOp::Read { remote_addr, rkey } => {
                w.wr.rdma = rdma_t { remote_addr, rkey };
                ibv_wr_opcode::IBV_WR_RDMA_READ
            }
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: as in post_recv.
        let rc = unsafe { ibv_post_send(q, &mut w, &mut bad) };
        if rc != 0 {
            return Err(rc_err("ibv_post_send", rc));
        }
        Ok(())
    }

    fn poll_cq(&self, cq: CqId, max: usize) -> Result<Vec<WorkCompletion>, VerbsError> {
        let st = self.lock();
        let c = st.cq(cq)?;
        let n = i32::try_from(max.min(256)).unwrap_or(256);
        // SAFETY: zeroed completions are plain data the provider overwrites.
        let mut wcs: Vec<ibv_wc> = (0..n).map(|_| unsafe { std::mem::zeroed() }).collect();
        // SAFETY: room for `n` completions.
        let got = unsafe { ibv_poll_cq(c, n, wcs.as_mut_ptr()) };
        if got < 0 {
            return Err(VerbsError::CqOverrun(cq));
        }
        Ok(wcs[..got as usize].iter().map(completion).collect())
    }

    fn destroy_qp(&self, qp: QpNum) -> Result<(), VerbsError> {
        let mut st = self.lock();
        let (q, _) = st.qp(qp)?;
        // SAFETY: a live queue pair, forgotten below.
        let rc = unsafe { ibv_destroy_qp(q) };
        if rc != 0 {
            return Err(rc_err("ibv_destroy_qp", rc));
        }
        st.qps.remove(&qp.0);
        Ok(())
    }
}

impl Drop for IbvDevice {
    fn drop(&mut self) {
        let st = self.st.get_mut().unwrap_or_else(|e| e.into_inner());
        // SAFETY: every object was made on this context and is destroyed once, children first.
        unsafe {
            for (q, _) in st.qps.values() {
                ibv_destroy_qp(*q);
            }
            for r in st.mrs.values() {
                if ibv_dereg_mr(r.mr) == 0 {
                    dealloc(r.buf, r.layout);
                }
            }
            for cq in &st.cqs {
                ibv_destroy_cq(*cq);
            }
            for pd in &st.pds {
                ibv_dealloc_pd(*pd);
            }
            ibv_close_device(st.ctx);
        }
    }
}
