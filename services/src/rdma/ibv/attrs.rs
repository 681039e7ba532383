//! The translations between the seam's plain data and libibverbs' structures: access flags,
//! completion statuses and opcodes, and the attributes of each queue-pair transition.

use rdma_sys::*;

use super::{IbvDevice, State};
use crate::rdma::verbs::{
    Access, ConnectAttrs, QpNum, QpState, Sge, VerbsError, WcOpcode, WcStatus, WorkCompletion,
};

pub(super) fn access_bits(a: Access) -> u32 {
    let mut bits = 0;
    for (ours, theirs) in [
        (
            Access::LOCAL_WRITE,
            ibv_access_flags::IBV_ACCESS_LOCAL_WRITE,
        ),
        (
            Access::REMOTE_WRITE,
            ibv_access_flags::IBV_ACCESS_REMOTE_WRITE,
        ),
        (
            Access::REMOTE_READ,
            ibv_access_flags::IBV_ACCESS_REMOTE_READ,
        ),
    ] {
        if a.allows(ours) {
            bits |= theirs.0;
        }
    }
    bits
}

/// The scatter entry of a request.
pub(super) fn sge_of(s: Sge) -> ibv_sge {
    ibv_sge {
        addr: s.addr,
        length: s.len,
        lkey: s.lkey,
    }
}

pub(super) fn status_of(s: ibv_wc_status::Type) -> WcStatus {
    use ibv_wc_status::*;
    match s {
        IBV_WC_SUCCESS => WcStatus::Success,
        IBV_WC_LOC_LEN_ERR => WcStatus::LocLenErr,
        IBV_WC_LOC_PROT_ERR => WcStatus::LocProtErr,
        IBV_WC_REM_ACCESS_ERR => WcStatus::RemAccessErr,
        IBV_WC_REM_INV_REQ_ERR => WcStatus::RemInvReqErr,
        IBV_WC_RNR_RETRY_EXC_ERR => WcStatus::RnrRetryExcErr,
        IBV_WC_RETRY_EXC_ERR => WcStatus::RetryExcErr,
        IBV_WC_WR_FLUSH_ERR => WcStatus::WrFlushErr,
        other => WcStatus::Other(other),
    }
}

pub(super) fn opcode_of(o: ibv_wc_opcode::Type) -> WcOpcode {
    use ibv_wc_opcode::*;
    match o {
        IBV_WC_SEND => WcOpcode::Send,
        IBV_WC_RDMA_WRITE => WcOpcode::RdmaWrite,
        IBV_WC_RDMA_READ => WcOpcode::RdmaRead,
        // IBV_WC_RECV and IBV_WC_RECV_RDMA_WITH_IMM.
        _ => WcOpcode::Recv,
    }
}

pub(super) fn completion(wc: &ibv_wc) -> WorkCompletion {
    let imm = (wc.wc_flags & ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0)
        // SAFETY: the flag says the union holds immediate data.
        .then(|| u32::from_be(unsafe { wc.imm_data_invalidated_rkey_union.imm_data }));
    WorkCompletion {
        wr_id: wc.wr_id,
        status: status_of(wc.status),
        opcode: opcode_of(wc.opcode),
        byte_len: wc.byte_len,
        imm,
        qp: QpNum(wc.qp_num),
    }
}

impl IbvDevice {
    /// The attributes and mask of the move to `to` (verbs' required attributes per state).
    pub(super) fn transition(
        &self,
        st: &State,
        to: QpState,
        attrs: Option<ConnectAttrs>,
        rnr: u8,
    ) -> Result<(ibv_qp_attr, ibv_qp_attr_mask), VerbsError> {
        use ibv_qp_attr_mask as m;
        // SAFETY: zeroed is a valid ibv_qp_attr (plain data).
        let mut a: ibv_qp_attr = unsafe { std::mem::zeroed() };
        let mask = match to {
            QpState::Reset => {
                a.qp_state = ibv_qp_state::IBV_QPS_RESET;
                m::IBV_QP_STATE
            }
            QpState::Error => {
                a.qp_state = ibv_qp_state::IBV_QPS_ERR;
                m::IBV_QP_STATE
            }
            QpState::Init => {
                a.qp_state = ibv_qp_state::IBV_QPS_INIT;
                a.port_num = self.port;
                a.qp_access_flags = access_bits(
                    Access::LOCAL_WRITE
                        .union(Access::REMOTE_WRITE)
                        .union(Access::REMOTE_READ),
                );
                m::IBV_QP_STATE | m::IBV_QP_PKEY_INDEX | m::IBV_QP_PORT | m::IBV_QP_ACCESS_FLAGS
            }
            QpState::Rtr => {
                let c = attrs.ok_or_else(|| VerbsError::Invalid("RTR needs the peer".into()))?;
                a.qp_state = ibv_qp_state::IBV_QPS_RTR;
                a.path_mtu = st.mtu;
                a.dest_qp_num = c.remote.qpn.0;
                a.rq_psn = c.remote.psn;
                a.max_dest_rd_atomic = st.rd_atomic;
                // 12: 0.64 ms, the usual receiver-not-ready back-off.
                a.min_rnr_timer = 12;
                a.ah_attr.is_global = 1;
                a.ah_attr.grh.dgid.raw = c.remote.gid.to_be_bytes();
                a.ah_attr.grh.sgid_index = self.gid_index;
                a.ah_attr.grh.hop_limit = 64;
                a.ah_attr.dlid = c.remote.lid;
                a.ah_attr.port_num = self.port;
                m::IBV_QP_STATE
                    | m::IBV_QP_AV
                    | m::IBV_QP_PATH_MTU
                    | m::IBV_QP_DEST_QPN
                    | m::IBV_QP_RQ_PSN
                    | m::IBV_QP_MAX_DEST_RD_ATOMIC
                    | m::IBV_QP_MIN_RNR_TIMER
            }
            QpState::Rts => {
                a.qp_state = ibv_qp_state::IBV_QPS_RTS;
                a.sq_psn = 0;
                // 14: about 67 ms per transport retry, 7 retries before RetryExcErr.
                a.timeout = 14;
                a.retry_cnt = 7;
                a.rnr_retry = rnr;
                a.max_rd_atomic = st.rd_atomic;
                m::IBV_QP_STATE
                    | m::IBV_QP_TIMEOUT
                    | m::IBV_QP_RETRY_CNT
                    | m::IBV_QP_RNR_RETRY
                    | m::IBV_QP_SQ_PSN
                    | m::IBV_QP_MAX_QP_RD_ATOMIC
            }
        };
        Ok((a, mask))
    }
}
