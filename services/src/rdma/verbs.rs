//! The verbs seam: the few ibverbs objects and calls the RDMA transport uses, as one trait
//! ([`Verbs`]) with plain-data arguments, so that the transport runs unchanged on the software
//! provider (`soft.rs`, every test) and on real hardware (rdma-sys, behind the `rdma` feature).
//!
//! The shapes follow libibverbs: a protection domain scopes memory regions and queue pairs; a
//! memory region has a local key (`lkey`, for this host's work requests) and a remote key
//! (`rkey`, handed to the peer for one-sided access) and the access rights given at
//! registration; a reliable-connected queue pair moves Reset → Init → RTR → RTS (and to Error
//! on any failure, where every queued request completes with a flush error); work requests
//! complete on completion queues, in order per queue pair, and their slots free when the
//! completion is polled. Addresses are the region's own (`MrInfo::addr` + offset), as verbs
//! uses virtual addresses; the software provider gives each region a synthetic base.
//!
//! Not here: shared receive queues, scatter lists longer than one entry, atomics, immediate
//! data on RDMA WRITE, unsignaled requests; completion events only as a callback
//! ([`Verbs::on_completion`]), which the hardware provider does not offer yet (it is polled).

/// Access rights of a memory region (bits, as `ibv_access_flags`).
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq, Ord, PartialOrd, Hash)]
pub struct Access(pub u32);

impl Access {
    /// The local host may write the region through work requests (receives, READ targets).
    pub const LOCAL_WRITE: Access = Access(1);
    /// Peers may RDMA WRITE into the region with its rkey.
    pub const REMOTE_WRITE: Access = Access(2);
    /// Peers may RDMA READ from the region with its rkey.
    pub const REMOTE_READ: Access = Access(4);

    /// Both sets of rights.
    pub const fn union(self, o: Access) -> Access {
        Access(self.0 | o.0)
    }

    /// Whether every right of `o` is in `self`.
    pub const fn allows(self, o: Access) -> bool {
        self.0 & o.0 == o.0
    }
}

/// A protection domain.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Ord, PartialOrd, Hash)]
pub struct PdId(pub u32);

/// A completion queue.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Ord, PartialOrd, Hash)]
pub struct CqId(pub u32);

/// A queue pair number (unique on its device).
#[derive(Clone, Copy, Debug, Eq, PartialEq, Ord, PartialOrd, Hash)]
pub struct QpNum(pub u32);

/// A registered memory region.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct MrInfo {
    /// The address of its first byte.
    pub addr: u64,
    /// Its length in bytes.
    pub len: u64,
    /// The key this host's work requests name it by.
    pub lkey: u32,
    /// The key a peer's one-sided requests name it by.
    pub rkey: u32,
}

impl MrInfo {
    /// The scatter entry of `len` bytes at `offset` into the region.
    pub fn sge(&self, offset: u64, len: u32) -> Sge {
        Sge {
            addr: self.addr + offset,
            len,
            lkey: self.lkey,
        }
    }
}

/// One local buffer of a work request (a scatter/gather entry).
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct Sge {
    /// Its first byte.
    pub addr: u64,
    /// Its length.
    pub len: u32,
    /// The key of the region it lies in.
    pub lkey: u32,
}

/// What a send work request does.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum SendOp {
    /// A two-sided SEND into the peer's next posted receive, with optional immediate data.
    Send {
        /// Immediate data delivered with the receive's completion.
        imm: Option<u32>,
    },
    /// One-sided: the local buffer is written at `remote_addr` of the peer's region `rkey`.
    Write {
        /// Where in the peer's region.
        remote_addr: u64,
        /// The peer region's remote key.
        rkey: u32,
    },
    /// One-sided: the peer's bytes at `remote_addr` of region `rkey` land in the local buffer.
    Read {
        /// Where in the peer's region.
        remote_addr: u64,
        /// The peer region's remote key.
        rkey: u32,
    },
}

/// A send work request.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct SendWr {
    /// The caller's id, returned in its completion.
    pub wr_id: u64,
    /// What it does.
    pub op: SendOp,
    /// The local buffer (source of SEND and WRITE, target of READ).
    pub sge: Sge,
}

/// A receive work request: a buffer for the peer's next SEND.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct RecvWr {
    /// The caller's id, returned in its completion.
    pub wr_id: u64,
    /// The buffer.
    pub sge: Sge,
}

/// How a work request ended (`ibv_wc_status`).
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum WcStatus {
    /// Done.
    Success,
    /// A receive buffer was shorter than the SEND it got.
    LocLenErr,
    /// A local buffer was outside its region, in another protection domain, or lacked the
    /// local-write right it needed.
    LocProtErr,
    /// The peer refused a one-sided access: unknown rkey, another protection domain, outside
    /// the region, or without the right.
    RemAccessErr,
    /// The peer could not take a SEND (its receive buffer was too short).
    RemInvReqErr,
    /// The peer had no receive posted for as many retries as the queue pair allows.
    RnrRetryExcErr,
    /// The peer did not answer: the connection is lost.
    RetryExcErr,
    /// Not executed: the queue pair was in the error state.
    WrFlushErr,
    /// Another `ibv_wc_status` (hardware only), by number.
    Other(u32),
}

/// Which kind of request a completion is for.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum WcOpcode {
    /// A SEND.
    Send,
    /// An RDMA WRITE.
    RdmaWrite,
    /// An RDMA READ.
    RdmaRead,
    /// A receive.
    Recv,
}

/// A work completion. As in verbs, `opcode` and `byte_len` are meaningful only when `status`
/// is `Success`: a caller keeps its own record of what each `wr_id` was.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct WorkCompletion {
    /// The request's id.
    pub wr_id: u64,
    /// How it ended.
    pub status: WcStatus,
    /// What it was.
    pub opcode: WcOpcode,
    /// Bytes received (receives) or moved.
    pub byte_len: u32,
    /// Immediate data of the SEND a receive got.
    pub imm: Option<u32>,
    /// The queue pair it belongs to.
    pub qp: QpNum,
}

/// A queue pair's state (`ibv_qp_state`, the ones an RC connection passes through).
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum QpState {
    /// Created; nothing may be posted.
    Reset,
    /// Receives may be posted.
    Init,
    /// Ready to receive: connected to its peer.
    Rtr,
    /// Ready to send.
    Rts,
    /// Failed: every request completes with [`WcStatus::WrFlushErr`].
    Error,
}

/// Queue depths of a queue pair.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct QpCaps {
    /// Send requests posted and not yet polled, at most.
    pub max_send_wr: u32,
    /// Receive requests posted and not yet polled, at most.
    pub max_recv_wr: u32,
}

/// What a peer needs to connect to a queue pair (exchanged out of band, over TCP or rdma_cm).
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct QpEndpoint {
    /// The port's global id (the 128-bit GID on hardware; the device's index in software).
    pub gid: u128,
    /// The port's local id (InfiniBand; 0 on RoCE and in software).
    pub lid: u16,
    /// The queue pair.
    pub qpn: QpNum,
    /// The first packet sequence number.
    pub psn: u32,
}

/// `rnr_retry` that never gives up (as in verbs).
pub const RNR_FOREVER: u8 = 7;

/// Attributes of the move to RTR: the peer, and how often to retry.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct ConnectAttrs {
    /// The peer's queue pair.
    pub remote: QpEndpoint,
    /// Retries when the peer has no receive posted (7: without end, as in verbs).
    pub rnr_retry: u8,
}

/// Why a verbs call failed (the call itself; failed work requests complete with a status).
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum VerbsError {
    /// No RDMA device: what is missing, for the operator.
    NoDevice(String),
    /// The object does not exist (destroyed, or never made).
    NoSuchObject(&'static str),
    /// The queue pair is not in a state that allows the call.
    InvalidState {
        /// The queue pair.
        qp: QpNum,
        /// Its state.
        state: QpState,
    },
    /// A queue is full (`ENOMEM` from `ibv_post_send`/`ibv_post_recv`).
    QueueFull,
    /// The completion queue overflowed: completions were lost, the queue is unusable.
    CqOverrun(CqId),
    /// A bad argument.
    Invalid(String),
    /// The device failed the call (its errno text).
    Device(String),
}

impl std::fmt::Display for VerbsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoDevice(m) => write!(f, "no RDMA device: {m}"),
            Self::NoSuchObject(o) => write!(f, "no such {o}"),
            Self::InvalidState { qp, state } => write!(f, "queue pair {} is {state:?}", qp.0),
            Self::QueueFull => f.write_str("work queue full"),
            Self::CqOverrun(cq) => write!(f, "completion queue {} overran", cq.0),
            Self::Invalid(m) => write!(f, "invalid: {m}"),
            Self::Device(m) => write!(f, "device: {m}"),
        }
    }
}

impl std::error::Error for VerbsError {}

/// The verbs one RDMA device offers, as the transport uses them. Calls never block: work
/// requests are posted, and their completions polled.
pub trait Verbs: Send + Sync {
    /// The device's name (`mlx5_0`, `soft-a`).
    fn name(&self) -> String;
    /// A new protection domain.
    fn alloc_pd(&self) -> Result<PdId, VerbsError>;
    /// Allocates `len` zeroed bytes and registers them in `pd` with `access`.
    fn reg_mr(&self, pd: PdId, len: u64, access: Access) -> Result<MrInfo, VerbsError>;
    /// Deregisters the region `lkey` and frees its memory; its rkey stops working.
    fn dereg_mr(&self, lkey: u32) -> Result<(), VerbsError>;
    /// The host writes `data` into region `lkey` at `offset` (a CPU store, not a request).
    fn write_local(&self, lkey: u32, offset: u64, data: &[u8]) -> Result<(), VerbsError>;
    /// The host reads region `lkey` at `offset` into `out`.
    fn read_local(&self, lkey: u32, offset: u64, out: &mut [u8]) -> Result<(), VerbsError>;
    /// A completion queue of `depth` entries.
    fn create_cq(&self, depth: u32) -> Result<CqId, VerbsError>;
    /// A reliable-connected queue pair in `pd`, in state Reset.
    fn create_qp(
        &self,
        pd: PdId,
        send_cq: CqId,
        recv_cq: CqId,
        caps: QpCaps,
    ) -> Result<QpNum, VerbsError>;
    /// What a peer needs to connect to `qp`.
    fn endpoint(&self, qp: QpNum) -> Result<QpEndpoint, VerbsError>;
    /// Moves `qp` to `to`; RTR needs the peer (`attrs`). Only the verbs order is allowed
    /// (Reset → Init → RTR → RTS, any → Error, Error → Reset).
    fn modify_qp(
        &self,
        qp: QpNum,
        to: QpState,
        attrs: Option<ConnectAttrs>,
    ) -> Result<(), VerbsError>;
    /// Posts a receive buffer.
    fn post_recv(&self, qp: QpNum, wr: RecvWr) -> Result<(), VerbsError>;
    /// Posts a send work request (RTS only).
    fn post_send(&self, qp: QpNum, wr: SendWr) -> Result<(), VerbsError>;
    /// Up to `max` completions of `cq`, oldest first.
    fn poll_cq(&self, cq: CqId, max: usize) -> Result<Vec<WorkCompletion>, VerbsError>;
    /// Destroys `qp`; its requests are dropped without completions.
    fn destroy_qp(&self, qp: QpNum) -> Result<(), VerbsError>;
    /// Asks for `wake` to run whenever a completion lands on any of this device's queues (a
    /// completion channel's event, coalesced: one call may stand for many completions, and a
    /// poll must follow). False if the device has no events (the caller polls).
    fn on_completion(&self, wake: std::sync::Arc<dyn Fn() + Send + Sync>) -> bool {
        let _ = wake;
        false
    }
}
