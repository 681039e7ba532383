//! One connection's data path once it is up ([`Up`]): frames out of the peer's queue onto the
//! channel, messages off the channel into the inbound queue, in order.
//!
//! Roles follow 3FS, where the server side drives every one-sided operation: the *acceptor* of
//! a connection pulls the frames the dialer staged (RDMA READ) and pushes its own frames into
//! the dialer's landing range (RDMA WRITE, then a SEND announcing them); the *dialer* only
//! stages, and copies landed frames out. A client always dials, so storage moves the bytes.
//! The registered region of each side is split in halves: staging (frames going out) and
//! landing (frames coming in); the acceptor allocates from its own halves and from a mirror of
//! the dialer's landing half, which the dialer gives back extent by extent (`Return`).
//!
//! Invariants: frames reach the inbound queue in the order the peer sent them (a frame waiting
//! for its READ holds back those behind it); every extent is freed exactly once, and a peer
//! that names one it does not hold, or sends a message its role may not, breaks the protocol:
//! the connection fails, as a failed work request fails it. Memory is bounded by the halves and
//! by [`PENDING_MAX`] frames received and not yet delivered.
//!
//! Not here: connection set-up and failure handling (`mod.rs`), zero-copy hand-off of landed
//! bytes to the storage engine (frames are copied out of the pool into their `Inbound`).

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use t3fs_core::ids::NodeId;

use super::msg::ChMsg;
use super::pool::Pool;
use crate::rdma::channel::{Channel, ChannelError};
use crate::rdma::verbs::MrInfo;
use crate::transport::counters::Counters;
use crate::transport::rdma_ctl::Region;
use crate::transport::{Frame, Inbound};

/// Frames received and not yet in the inbound queue, at most.
pub(crate) const PENDING_MAX: usize = 64;

/// Why a connection ended.
#[derive(Debug)]
pub(crate) enum LinkError {
    /// A verbs call or work request failed.
    Channel(ChannelError),
    /// The peer broke the protocol.
    Protocol(&'static str),
}

impl std::fmt::Display for LinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Channel(e) => write!(f, "{e:?}"),
            Self::Protocol(m) => write!(f, "protocol: {m}"),
        }
    }
}

impl From<ChannelError> for LinkError {
    fn from(e: ChannelError) -> Self {
        Self::Channel(e)
    }
}

/// A received frame on its way to the inbound queue.
enum Pending {
    Ready(Inbound),
    /// A frame staged by the dialer: READ into `at` (landing offset) under `tag` once room.
    Pull {
        id: u32,
        addr: u64,
        head: u32,
        bulk: u32,
        at: Option<(u32, u64)>,
        done: bool,
    },
}

/// What became of a frame handed to the channel.
enum Sent {
    Yes,
    /// No room now (pools, channel or one-sided slots): it stays first in the queue.
    Wait,
    /// It can never fit the peer's pool: dropped and counted `oversized`.
    Dropped,
}

/// What the data path needs from the transport.
pub(crate) struct Io<'a> {
    pub(crate) from: NodeId,
    /// What the peer proved in the handshake.
    pub(crate) id: crate::transport::Identity,
    pub(crate) counters: &'a Counters,
    /// Delivers a frame; gives it back when the inbound queue is full.
    pub(crate) deliver: &'a dyn Fn(Inbound) -> Result<(), Inbound>,
    /// The next frame to send, if any; `unsend` puts it back at the front.
    pub(crate) next: &'a dyn Fn() -> Option<Frame>,
    pub(crate) unsend: &'a dyn Fn(Frame),
}

/// An established connection.
pub(crate) struct Up {
    pub(crate) ch: Channel,
    pub(crate) conn: u64,
    acceptor: bool,
    peer: Region,
    mine: MrInfo,
    slot_bytes: usize,
    half: u64,
    staging: Pool,
    landing: Pool,
    peer_landing: Pool,
    /// Dialer: frames staged for the peer to pull, by id.
    staged: BTreeMap<u32, u64>,
    /// Acceptor: WRITEs in flight, by tag, with their staging extent.
    writes: BTreeMap<u32, u64>,
    pending: VecDeque<Pending>,
    next_tag: u32,
    /// Delivery stopped on a full inbound queue: stop taking messages until it drains (the
    /// channel then stops returning credits, which stops the peer).
    blocked: bool,
    /// Acceptor: the dialer said its queue pair is connected; nothing is sent before.
    ready: bool,
}

impl Up {
    /// A connection over `ch` (connected), `acceptor` or dialer, to a peer whose region is
    /// `peer`; `slot_bytes` is the channel's message size.
    pub(crate) fn new(
        mut ch: Channel,
        conn: u64,
        acceptor: bool,
        peer: Region,
        slot_bytes: u32,
    ) -> Result<Self, ChannelError> {
        if !acceptor {
            // Our queue pair is connected: the acceptor may send from now on.
            ch.send(&ChMsg::Ready.encode())?;
        }
        let mine = ch.bulk();
        let half = mine.len / 2;
        let peer_half = peer.len / 2;
        Ok(Self {
            ch,
            conn,
            acceptor,
            peer,
            mine,
            slot_bytes: slot_bytes as usize,
            half,
            staging: Pool::new(0, half),
            landing: Pool::new(half, half),
            peer_landing: Pool::new(peer_half, peer_half),
            staged: BTreeMap::new(),
            writes: BTreeMap::new(),
            pending: VecDeque::new(),
            next_tag: 0,
            blocked: false,
            ready: !acceptor,
        })
    }

    /// Largest frame this connection carries (a pool half, the smaller side's).
    fn frame_max(&self) -> u64 {
        self.half.min(self.peer.len / 2)
    }

    /// Frames sent whose delivery is not known when the connection fails: waiting in the
    /// channel, staged for a pull not yet released, or pushed with the WRITE not yet complete.
    pub(crate) fn in_flight(&self) -> usize {
        self.ch.waiting() + self.staged.len() + self.writes.len()
    }

    /// Whether delivery waits for room in the inbound queue.
    pub(crate) fn blocked(&self) -> bool {
        self.blocked
    }

    fn tag(&mut self) -> u32 {
        self.next_tag = self.next_tag.wrapping_add(1);
        self.next_tag
    }

    /// One round: completions, received messages, READs, deliveries, then sends. Returns
    /// whether anything moved.
    pub(crate) fn pump(&mut self, io: &Io<'_>) -> Result<bool, LinkError> {
        let mut busy = false;
        // Always polled: credits and completions of our own sends keep flowing while delivery
        // waits (the messages wait in the channel, and so do their credits).
        self.ch.poll()?;
        while let Some(tag) = self.ch.done() {
            busy = true;
            self.one_sided_done(tag)?;
        }
        while !self.blocked && self.pending.len() < PENDING_MAX {
            let Some(m) = self.ch.recv() else { break };
            busy = true;
            self.take(&m, io)?;
        }
        busy |= self.post_reads()?;
        busy |= self.deliver(io)?;
        if self.ready {
            busy |= self.send(io)?;
        }
        Ok(busy)
    }

    fn one_sided_done(&mut self, tag: u32) -> Result<(), LinkError> {
        if let Some(off) = self.writes.remove(&tag) {
            self.staging.free(off);
            return Ok(());
        }
        for p in &mut self.pending {
            if let Pending::Pull {
                at: Some((t, _)),
                done,
                ..
            } = p
            {
                if *t == tag {
                    *done = true;
                    return Ok(());
                }
            }
        }
        Err(LinkError::Protocol("a completion for no operation"))
    }

    /// Takes one received message.
    fn take(&mut self, m: &[u8], io: &Io<'_>) -> Result<(), LinkError> {
        let msg = ChMsg::decode(m).ok_or(LinkError::Protocol("a malformed message"))?;
        match msg {
            ChMsg::Inline(head) => self.pending.push_back(Pending::Ready(Inbound {
                from: io.from,
                id: io.id,
                frame: head.into(),
                bulk: Vec::new(),
            })),
            ChMsg::Pull {
                id,
                addr,
                head,
                bulk,
            } => {
                let len = u64::from(head) + u64::from(bulk);
                if !self.acceptor || len > self.half {
                    return Err(LinkError::Protocol("a pull the acceptor cannot take"));
                }
                self.pending.push_back(Pending::Pull {
                    id,
                    addr,
                    head,
                    bulk,
                    at: None,
                    done: false,
                });
            }
            ChMsg::Pushed { off, head, bulk } => {
                let end = off.checked_add(u64::from(head) + u64::from(bulk));
                if self.acceptor || off < self.half || end.is_none_or(|e| e > self.mine.len) {
                    return Err(LinkError::Protocol("a push outside the landing range"));
                }
                let inb = self.copy_out(io, off, head, bulk)?;
                self.ch.send(&ChMsg::Return(off).encode())?;
                self.pending.push_back(Pending::Ready(inb));
            }
            ChMsg::Release(id) => {
                let off = self
                    .staged
                    .remove(&id)
                    .ok_or(LinkError::Protocol("a release of nothing staged"))?;
                self.staging.free(off);
            }
            ChMsg::Return(off) => {
                if !self.acceptor || !self.peer_landing.free(off) {
                    return Err(LinkError::Protocol("a return of nothing pushed"));
                }
            }
            ChMsg::Ready => {
                if !self.acceptor || self.ready {
                    return Err(LinkError::Protocol("a ready out of turn"));
                }
                self.ready = true;
            }
        }
        Ok(())
    }

    /// A frame of `head` then `bulk` bytes at `off` of this side's region, copied out.
    fn copy_out(&self, io: &Io<'_>, off: u64, head: u32, bulk: u32) -> Result<Inbound, LinkError> {
        let mut h = vec![0; head as usize];
        self.ch.get_bulk(off, &mut h)?;
        let mut b = vec![0; bulk as usize];
        if bulk > 0 {
            self.ch.get_bulk(off + u64::from(head), &mut b)?;
        }
        Ok(Inbound {
            from: io.from,
            id: io.id,
            frame: Bytes::from(h),
            bulk: b,
        })
    }

    /// Posts the READ of every staged frame that has landing room, in order.
    fn post_reads(&mut self) -> Result<bool, LinkError> {
        let mut busy = false;
        let rkey = self.peer.rkey;
        for p in &mut self.pending {
            let Pending::Pull {
                addr,
                head,
                bulk,
                at: at @ None,
                ..
            } = p
            else {
                continue;
            };
            let len = *head + *bulk;
            let Some(off) = self.landing.alloc(u64::from(len)) else {
                break;
            };
            self.next_tag = self.next_tag.wrapping_add(1);
            let tag = self.next_tag;
            if !self.ch.post_read(off, len, *addr, rkey, tag)? {
                self.landing.free(off);
                break;
            }
            *at = Some((tag, off));
            busy = true;
        }
        Ok(busy)
    }

    /// Moves received frames, oldest first, into the inbound queue until one is not ready.
    fn deliver(&mut self, io: &Io<'_>) -> Result<bool, LinkError> {
        let mut busy = false;
        self.blocked = false;
        while let Some(front) = self.pending.pop_front() {
            let inb = match front {
                Pending::Ready(inb) => inb,
                Pending::Pull {
                    id,
                    head,
                    bulk,
                    at: Some((_, off)),
                    done: true,
                    ..
                } => {
                    let inb = self.copy_out(io, off, head, bulk)?;
                    self.landing.free(off);
                    self.ch.send(&ChMsg::Release(id).encode())?;
                    let n = u64::from(head) + u64::from(bulk);
                    Counters::add(&io.counters.rdma_read_bytes, n);
                    inb
                }
                p @ Pending::Pull { .. } => {
                    self.pending.push_front(p);
                    break;
                }
            };
            let n = (inb.frame.len() + inb.bulk.len()) as u64;
            // Counted before the receiver can see the frame (as the TCP transport does), so a
            // snapshot taken after receiving it includes it; taken back if the receiver is full.
            let counted = [&io.counters.frames_in, &io.counters.rdma_frames_in];
            for c in counted {
                Counters::bump(c);
            }
            Counters::add(&io.counters.bytes_in, n);
            match (io.deliver)(inb) {
                Ok(()) => busy = true,
                Err(inb) => {
                    for c in counted {
                        Counters::sub(c, 1);
                    }
                    Counters::sub(&io.counters.bytes_in, n);
                    self.pending.push_front(Pending::Ready(inb));
                    self.blocked = true;
                    break;
                }
            }
        }
        Ok(busy)
    }

    /// Sends queued frames while the channel, the pools and the one-sided slots have room.
    fn send(&mut self, io: &Io<'_>) -> Result<bool, LinkError> {
        let mut busy = false;
        while self.ch.waiting() < PENDING_MAX {
            let Some(frame) = (io.next)() else { break };
            let n = frame.len() as u64;
            busy = true;
            // Counted before the peer can see the frame, so a snapshot taken after the peer
            // received it includes it; taken back if it did not go.
            let counted = [&io.counters.frames_out, &io.counters.rdma_frames_out];
            for c in counted {
                Counters::bump(c);
            }
            Counters::add(&io.counters.bytes_out, n);
            let sent = self.send_one(&frame, io);
            if !matches!(sent, Ok(Sent::Yes)) {
                for c in counted {
                    Counters::sub(c, 1);
                }
                Counters::sub(&io.counters.bytes_out, n);
            }
            match sent? {
                Sent::Yes => {}
                Sent::Dropped => continue,
                Sent::Wait => {
                    (io.unsend)(frame);
                    break;
                }
            }
        }
        Ok(busy)
    }

    /// Sends one frame, or says it must wait for room.
    fn send_one(&mut self, f: &Frame, io: &Io<'_>) -> Result<Sent, LinkError> {
        let (head, bulk) = (f.head.len() as u32, f.bulk.len() as u32);
        if f.bulk.is_empty() && f.head.len() + ChMsg::INLINE_HEADER <= self.slot_bytes {
            self.ch.send(&ChMsg::encode_inline(&f.head))?;
            return Ok(Sent::Yes);
        }
        let len = u64::from(head) + u64::from(bulk);
        if len > self.frame_max() {
            // The peer's pool is smaller than ours: this frame can never go. Dropped, counted.
            Counters::bump(&io.counters.oversized);
            return Ok(Sent::Dropped);
        }
        let Some(off) = self.staging.alloc(len) else {
            return Ok(Sent::Wait);
        };
        self.ch.put_bulk(off, &f.head)?;
        self.ch.put_bulk(off + u64::from(head), &f.bulk)?;
        if !self.acceptor {
            let id = self.tag();
            self.staged.insert(id, off);
            let addr = self.mine.addr + off;
            self.ch.send(
                &ChMsg::Pull {
                    id,
                    addr,
                    head,
                    bulk,
                }
                .encode(),
            )?;
            return Ok(Sent::Yes);
        }
        let Some(poff) = self.peer_landing.alloc(len) else {
            self.staging.free(off);
            return Ok(Sent::Wait);
        };
        let tag = self.tag();
        let to = self.peer.addr + poff;
        if !self
            .ch
            .post_write(off, len as u32, to, self.peer.rkey, tag)?
        {
            self.staging.free(off);
            self.peer_landing.free(poff);
            return Ok(Sent::Wait);
        }
        self.writes.insert(tag, off);
        Counters::add(&io.counters.rdma_write_bytes, len);
        let pushed = ChMsg::Pushed {
            off: poff,
            head,
            bulk,
        };
        self.ch.send(&pushed.encode())?;
        Ok(Sent::Yes)
    }
}
