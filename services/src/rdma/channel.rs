//! A message channel over one reliable-connected queue pair: what the RDMA transport carries
//! its control frames on (3FS: requests and replies by SEND/RECV into pre-posted, registered
//! buffers), with credit-based flow control so that a SEND never meets a peer without a
//! receive posted, and one-sided READ and WRITE of a peer's registered memory for payloads.
//!
//! Flow control: each side posts `slots` receives of `slot_bytes` before connecting. A side
//! may have at most `slots - 1` data messages unreturned (its credits); the receiver reposts
//! each receive as it takes the message and returns the credits in the immediate data of its
//! next message (bits 0-29). When it owes half a window and has nothing to send, it sends a
//! credit-only message (bit 30) into the one receive kept back for that; the peer returns that
//! reserved slot with bit 31 of its next message. So the peer always has a receive for every
//! message sent: receiver-not-ready never happens, and a stalled reader stops its writer.
//!
//! Invariants: messages arrive whole and in order; a message longer than `slot_bytes` is
//! refused (`TooLarge`), never split; after any failed work request the channel is failed for
//! good (`Lost`) and says why. Not here: waking on completions (the caller polls), the frame
//! format and node addressing (the transport), more than one queue pair per peer.

use std::collections::VecDeque;
use std::sync::Arc;

use super::verbs::{
    Access, ConnectAttrs, CqId, MrInfo, PdId, QpCaps, QpEndpoint, QpNum, QpState, RecvWr, SendOp,
    SendWr, Verbs, VerbsError, WcOpcode, WcStatus, RNR_FOREVER,
};

/// Bit of the immediate data that returns the credit-only reserve.
const CTRL_BIT: u32 = 1 << 31;
/// Bit of the immediate data that marks a credit-only message (an empty message is data).
const CREDIT_ONLY: u32 = 1 << 30;
/// Bits of the immediate data that count returned credits.
const CREDITS: u32 = CREDIT_ONLY - 1;
/// wr_id tag of receives (the low bits are the slot).
const RECV: u64 = 1 << 40;
/// wr_id tag of one-sided operations (the low 32 bits are the caller's tag).
const ONE_SIDED: u64 = 2 << 40;
/// One-sided operations in flight per channel, at most (their room in the send queue).
pub const ONE_SIDED_MAX: u32 = 16;

/// Sizes of a channel.
#[derive(Clone, Copy, Debug)]
pub struct ChannelConfig {
    /// Receive buffers per side (the window is one less).
    pub slots: u32,
    /// Largest message.
    pub slot_bytes: u32,
    /// Bytes of the bounce region one-sided operations go through.
    pub bulk_bytes: u64,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        Self {
            slots: 64,
            slot_bytes: 64 << 10,
            bulk_bytes: 4 << 20,
        }
    }
}

/// Why a channel call failed.
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum ChannelError {
    /// The message is longer than a slot.
    TooLarge(usize),
    /// A work request failed: the connection is gone (the status says why).
    Lost(WcStatus),
    /// A verbs call failed.
    Verbs(VerbsError),
    /// The peer broke the protocol.
    Broken(&'static str),
}

impl From<VerbsError> for ChannelError {
    fn from(e: VerbsError) -> Self {
        Self::Verbs(e)
    }
}

/// One end of a channel.
pub struct Channel {
    dev: Arc<dyn Verbs>,
    cfg: ChannelConfig,
    qp: QpNum,
    cq: CqId,
    send: MrInfo,
    recv: MrInfo,
    bulk: MrInfo,
    free_send: Vec<u32>,
    credits: u32,
    reserve: bool,
    owed: u32,
    owe_reserve: bool,
    queued: VecDeque<Vec<u8>>,
    /// Received messages not yet taken: (slot, length); their receives are reposted when
    /// taken, so a reader that stops taking stops its writer.
    inbox: VecDeque<(u32, u32)>,
    /// The peer broke the protocol (returned credits it was never given).
    broken: Option<&'static str>,
    /// Tags of one-sided operations completed and not yet taken.
    one_sided_done: VecDeque<u32>,
    one_sided_busy: u32,
    failed: Option<WcStatus>,
}

impl Channel {
    /// A channel on `dev` with its receives posted; connect it with the peer's endpoint.
    pub fn new(dev: Arc<dyn Verbs>, cfg: ChannelConfig) -> Result<(Self, QpEndpoint), VerbsError> {
        if cfg.slots < 2 {
            return Err(VerbsError::Invalid(
                "a channel needs at least 2 slots".into(),
            ));
        }
        let pd: PdId = dev.alloc_pd()?;
        let cq = dev.create_cq(cfg.slots * 2 + 2 + ONE_SIDED_MAX)?;
        let caps = QpCaps {
            max_send_wr: cfg.slots + 1 + ONE_SIDED_MAX,
            max_recv_wr: cfg.slots,
        };
        let qp = dev.create_qp(pd, cq, cq, caps)?;
        let bytes = u64::from(cfg.slots) * u64::from(cfg.slot_bytes);
        let send = dev.reg_mr(pd, bytes, Access::default())?;
        let recv = dev.reg_mr(pd, bytes, Access::LOCAL_WRITE)?;
        let rights = Access::LOCAL_WRITE
            .union(Access::REMOTE_WRITE)
            .union(Access::REMOTE_READ);
        let bulk = dev.reg_mr(pd, cfg.bulk_bytes, rights)?;
        dev.modify_qp(qp, QpState::Init, None)?;
        let ch = Self {
            free_send: (0..cfg.slots).rev().collect(),
            credits: cfg.slots - 1,
            reserve: true,
            owed: 0,
            owe_reserve: false,
            queued: VecDeque::new(),
            inbox: VecDeque::new(),
            broken: None,
            one_sided_done: VecDeque::new(),
            one_sided_busy: 0,
            failed: None,
            dev,
            cfg,
            qp,
            cq,
            send,
            recv,
            bulk,
        };
        for s in 0..cfg.slots {
            ch.post_recv(s)?;
        }
        let me = ch.dev.endpoint(qp)?;
        Ok((ch, me))
    }

    /// Connects to the peer's endpoint (exchanged out of band).
    pub fn connect(&mut self, remote: QpEndpoint) -> Result<(), VerbsError> {
        // Never give up on an empty peer: flow control rules it out, so one means a bug, and
        // a hang is easier to see than a lost message.
        let attrs = ConnectAttrs {
            remote,
            rnr_retry: RNR_FOREVER,
        };
        self.dev.modify_qp(self.qp, QpState::Rtr, Some(attrs))?;
        self.dev.modify_qp(self.qp, QpState::Rts, None)
    }

    /// This side's registered bulk region: peers READ payloads from it and WRITE into it.
    pub fn bulk(&self) -> MrInfo {
        self.bulk
    }

    fn post_recv(&self, slot: u32) -> Result<(), VerbsError> {
        let sge = self.recv.sge(self.slot_offset(slot), self.cfg.slot_bytes);
        self.dev.post_recv(
            self.qp,
            RecvWr {
                wr_id: RECV | u64::from(slot),
                sge,
            },
        )
    }

    fn slot_offset(&self, slot: u32) -> u64 {
        u64::from(slot) * u64::from(self.cfg.slot_bytes)
    }

    fn check(&self) -> Result<(), ChannelError> {
        if let Some(why) = self.broken {
            return Err(ChannelError::Broken(why));
        }
        self.failed.map_or(Ok(()), |s| Err(ChannelError::Lost(s)))
    }

    /// Queues `msg`; it goes as soon as a credit allows (see [`Channel::poll`]).
    pub fn send(&mut self, msg: &[u8]) -> Result<(), ChannelError> {
        self.check()?;
        if msg.len() > self.cfg.slot_bytes as usize {
            return Err(ChannelError::TooLarge(msg.len()));
        }
        self.queued.push_back(msg.to_vec());
        self.flush()
    }

    /// Sends queued messages while credits and send slots last, then a credit-only message if
    /// half a window is owed.
    fn flush(&mut self) -> Result<(), ChannelError> {
        while self.credits > 0 && !self.free_send.is_empty() {
            let Some(msg) = self.queued.pop_front() else {
                break;
            };
            self.credits -= 1;
            self.post_send(&msg, 0)?;
        }
        // A credit-only message when half a window is owed and no data message carries it, or
        // when this side is stalled and holds the peer's reserve (the peer may be stalled on
        // it). Never merely to return the reserve: two idle sides would bounce it forever.
        let stalled = self.credits == 0 && !self.queued.is_empty();
        let half = self.owed >= (self.cfg.slots / 2).max(1);
        let owing = (half && (self.queued.is_empty() || stalled)) || (self.owe_reserve && stalled);
        if owing && self.reserve && !self.free_send.is_empty() {
            self.reserve = false;
            self.post_send(&[], CREDIT_ONLY)?;
        }
        Ok(())
    }

    fn post_send(&mut self, msg: &[u8], kind: u32) -> Result<(), ChannelError> {
        let slot = self.free_send.pop().expect("checked by the caller");
        let off = self.slot_offset(slot);
        self.dev.write_local(self.send.lkey, off, msg)?;
        let imm = self.owed | kind | if self.owe_reserve { CTRL_BIT } else { 0 };
        (self.owed, self.owe_reserve) = (0, false);
        let wr = SendWr {
            wr_id: u64::from(slot),
            op: SendOp::Send { imm: Some(imm) },
            sge: self.send.sge(off, msg.len() as u32),
        };
        self.dev.post_send(self.qp, wr)?;
        Ok(())
    }

    /// Takes completions: received messages to the inbox (reposted as they are taken), credits
    /// returned, send slots freed; then sends what waited for them.
    pub fn poll(&mut self) -> Result<(), ChannelError> {
        self.check()?;
        loop {
            let wcs = self.dev.poll_cq(self.cq, 64)?;
            if wcs.is_empty() {
                break;
            }
            for wc in wcs {
                if wc.status != WcStatus::Success {
                    // The first failure says why; the flushes behind it say nothing new.
                    self.failed.get_or_insert(wc.status);
                    continue;
                }
                if wc.wr_id & ONE_SIDED != 0 {
                    self.one_sided_busy -= 1;
                    self.one_sided_done.push_back(wc.wr_id as u32);
                } else if wc.opcode == WcOpcode::Recv {
                    self.received(wc.wr_id as u32, wc.byte_len, wc.imm.unwrap_or(0))?;
                } else {
                    self.free_send.push(wc.wr_id as u32);
                }
            }
        }
        self.check()?;
        self.flush()
    }

    fn received(&mut self, slot: u32, len: u32, imm: u32) -> Result<(), ChannelError> {
        let returned = imm & CREDITS;
        // The peer returns at most what it was sent; trusting more would overrun its receives.
        if returned > self.cfg.slots - 1 - self.credits {
            self.broken = Some("the peer returned credits it was never given");
            return self.check();
        }
        self.credits += returned;
        self.reserve |= imm & CTRL_BIT != 0;
        if imm & CREDIT_ONLY != 0 {
            // A credit-only message came into the reserved receive: return it.
            self.post_recv(slot)?;
            self.owe_reserve = true;
        } else {
            self.inbox.push_back((slot, len));
        }
        Ok(())
    }

    /// The next received message, oldest first.
    pub fn recv(&mut self) -> Option<Vec<u8>> {
        let (slot, len) = self.inbox.pop_front()?;
        let mut msg = vec![0; len as usize];
        let off = self.slot_offset(slot);
        if self.dev.read_local(self.recv.lkey, off, &mut msg).is_err() {
            self.broken
                .get_or_insert("a received message could not be read");
            return None;
        }
        // Its receive goes back now, and its credit with the next message (or a credit-only
        // one once half a window is owed).
        if self.post_recv(slot).is_err() {
            self.broken.get_or_insert("a receive could not be reposted");
        }
        self.owed += 1;
        Some(msg)
    }

    /// Messages queued for want of credits.
    pub fn waiting(&self) -> usize {
        self.queued.len()
    }

    /// One-sided: copies `len` bytes at `remote_addr` of the peer's region `rkey` into this
    /// side's bulk region at `offset` (a write's payload pulled by storage, as in 3FS), and
    /// waits for it (polling; see [`Channel::post_read`] for the form that does not wait).
    pub fn read_remote(
        &mut self,
        offset: u64,
        len: u32,
        remote_addr: u64,
        rkey: u32,
    ) -> Result<(), ChannelError> {
        self.post_read(offset, len, remote_addr, rkey, 0)?;
        self.wait_one_sided()
    }

    /// One-sided: copies `len` bytes of this side's bulk region at `offset` to `remote_addr`
    /// of the peer's region `rkey` (read data pushed into the client's buffer), and waits.
    pub fn write_remote(
        &mut self,
        offset: u64,
        len: u32,
        remote_addr: u64,
        rkey: u32,
    ) -> Result<(), ChannelError> {
        self.post_write(offset, len, remote_addr, rkey, 0)?;
        self.wait_one_sided()
    }

    fn wait_one_sided(&mut self) -> Result<(), ChannelError> {
        while self.one_sided_done.is_empty() {
            self.poll()?;
        }
        self.one_sided_done.pop_front();
        Ok(())
    }

    /// Posts a READ of the peer's bytes into the bulk region at `offset`; [`Channel::done`]
    /// returns `tag` once it completed. `Ok(false)`: [`ONE_SIDED_MAX`] are in flight, retry
    /// after a poll.
    pub fn post_read(
        &mut self,
        offset: u64,
        len: u32,
        remote_addr: u64,
        rkey: u32,
        tag: u32,
    ) -> Result<bool, ChannelError> {
        self.one_sided(SendOp::Read { remote_addr, rkey }, offset, len, tag)
    }

    /// Posts a WRITE of the bulk region's bytes at `offset` to the peer's region; as
    /// [`Channel::post_read`]. A SEND posted after it reaches the peer after its bytes (RC
    /// order), so a message may announce data written just before it.
    pub fn post_write(
        &mut self,
        offset: u64,
        len: u32,
        remote_addr: u64,
        rkey: u32,
        tag: u32,
    ) -> Result<bool, ChannelError> {
        self.one_sided(SendOp::Write { remote_addr, rkey }, offset, len, tag)
    }

    fn one_sided(
        &mut self,
        op: SendOp,
        offset: u64,
        len: u32,
        tag: u32,
    ) -> Result<bool, ChannelError> {
        self.check()?;
        if self.one_sided_busy >= ONE_SIDED_MAX {
            return Ok(false);
        }
        let wr = SendWr {
            wr_id: ONE_SIDED | u64::from(tag),
            op,
            sge: self.bulk.sge(offset, len),
        };
        self.dev.post_send(self.qp, wr)?;
        self.one_sided_busy += 1;
        Ok(true)
    }

    /// The tag of the next completed one-sided operation, oldest first.
    pub fn done(&mut self) -> Option<u32> {
        self.one_sided_done.pop_front()
    }

    /// Whether the channel failed (and why): every call after that fails.
    pub fn failure(&self) -> Option<WcStatus> {
        self.failed
    }

    /// Writes `data` into this side's bulk region at `offset` (what a peer then reads).
    pub fn put_bulk(&self, offset: u64, data: &[u8]) -> Result<(), ChannelError> {
        Ok(self.dev.write_local(self.bulk.lkey, offset, data)?)
    }

    /// Reads this side's bulk region at `offset` into `out`.
    pub fn get_bulk(&self, offset: u64, out: &mut [u8]) -> Result<(), ChannelError> {
        Ok(self.dev.read_local(self.bulk.lkey, offset, out)?)
    }
}

impl Drop for Channel {
    /// Destroys the queue pair and deregisters the regions, so that a transport that
    /// reconnects does not leak device objects (errors are moot: the device may be gone).
    fn drop(&mut self) {
        let _ = self.dev.destroy_qp(self.qp);
        for mr in [self.send, self.recv, self.bulk] {
            let _ = self.dev.dereg_mr(mr.lkey);
        }
    }
}
