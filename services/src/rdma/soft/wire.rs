//! The byte format of the software fabric's socket protocol (`remote.rs`): each verbs call is
//! one length-prefixed request and one length-prefixed answer, fields little-endian, in the
//! order the call names them. Decoding never panics: a short or unknown message is an error.
//!
//! Not here: the calls themselves (`remote.rs`), the fabric (`mod.rs`).

use std::io::{self, Read, Write};

use super::super::verbs::{
    ConnectAttrs, MrInfo, QpEndpoint, QpNum, QpState, SendOp, SendWr, Sge, VerbsError, WcOpcode,
    WcStatus, WorkCompletion,
};

/// Largest message either way: a region's bytes plus a little.
pub(super) const MSG_MAX: usize = 256 << 20;

/// A message being built.
#[derive(Default)]
pub(super) struct W(pub(super) Vec<u8>);

impl W {
    pub(super) fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub(super) fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(super) fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(super) fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(super) fn u128(&mut self, v: u128) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(super) fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
        self
    }
    pub(super) fn opt_u32(&mut self, v: Option<u32>) -> &mut Self {
        match v {
            Some(x) => self.u8(1).u32(x),
            None => self.u8(0),
        }
    }
    pub(super) fn endpoint(&mut self, e: QpEndpoint) -> &mut Self {
        self.u128(e.gid).u16(e.lid).u32(e.qpn.0).u32(e.psn)
    }
    pub(super) fn mr(&mut self, m: MrInfo) -> &mut Self {
        self.u64(m.addr).u64(m.len).u32(m.lkey).u32(m.rkey)
    }
    pub(super) fn sge(&mut self, s: Sge) -> &mut Self {
        self.u64(s.addr).u32(s.len).u32(s.lkey)
    }
    pub(super) fn send_wr(&mut self, wr: SendWr) -> &mut Self {
        self.u64(wr.wr_id);
        match wr.op {
            SendOp::Send { imm } => self.u8(0).opt_u32(imm),
            SendOp::Write { remote_addr, rkey } => self.u8(1).u64(remote_addr).u32(rkey),
            SendOp::Read { remote_addr, rkey } => self.u8(2).u64(remote_addr).u32(rkey),
        };
        self.sge(wr.sge)
    }
    pub(super) fn attrs(&mut self, a: Option<ConnectAttrs>) -> &mut Self {
        match a {
            Some(a) => self.u8(1).endpoint(a.remote).u8(a.rnr_retry),
            None => self.u8(0),
        }
    }
    pub(super) fn wc(&mut self, wc: &WorkCompletion) -> &mut Self {
        self.u64(wc.wr_id);
        match wc.status {
            WcStatus::Other(n) => self.u8(255).u32(n),
            s => self.u8(status_code(s)),
        };
        let op = match wc.opcode {
            WcOpcode::Send => 0,
            WcOpcode::RdmaWrite => 1,
            WcOpcode::RdmaRead => 2,
            WcOpcode::Recv => 3,
        };
        self.u8(op).u32(wc.byte_len).opt_u32(wc.imm).u32(wc.qp.0)
    }
    pub(super) fn error(&mut self, e: &VerbsError) -> &mut Self {
        match e {
            VerbsError::NoDevice(m) => self.u8(0).bytes(m.as_bytes()),
            VerbsError::NoSuchObject(o) => self.u8(1).bytes(o.as_bytes()),
            VerbsError::InvalidState { qp, state } => self.u8(2).u32(qp.0).u8(state_code(*state)),
            VerbsError::QueueFull => self.u8(3),
            VerbsError::CqOverrun(cq) => self.u8(4).u32(cq.0),
            VerbsError::Invalid(m) => self.u8(5).bytes(m.as_bytes()),
            VerbsError::Device(m) => self.u8(6).bytes(m.as_bytes()),
        }
    }
}

const STATUSES: [WcStatus; 8] = [
    WcStatus::Success,
    WcStatus::LocLenErr,
    WcStatus::LocProtErr,
    WcStatus::RemAccessErr,
    WcStatus::RemInvReqErr,
    WcStatus::RnrRetryExcErr,
    WcStatus::RetryExcErr,
    WcStatus::WrFlushErr,
];

fn status_code(s: WcStatus) -> u8 {
    STATUSES.iter().position(|x| *x == s).unwrap_or(254) as u8
}

const STATES: [QpState; 5] = [
    QpState::Reset,
    QpState::Init,
    QpState::Rtr,
    QpState::Rts,
    QpState::Error,
];

pub(super) fn state_code(s: QpState) -> u8 {
    STATES.iter().position(|x| *x == s).unwrap_or(0) as u8
}

/// A message being read; every getter fails on a short message.
pub(super) struct R<'a>(pub(super) &'a [u8]);

fn bad(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("fabric message: bad {what}"),
    )
}

impl R<'_> {
    fn take<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        if self.0.len() < N {
            return Err(bad("length"));
        }
        let (a, b) = self.0.split_at(N);
        self.0 = b;
        Ok(a.try_into().expect("split at N"))
    }
    pub(super) fn u8(&mut self) -> io::Result<u8> {
        Ok(self.take::<1>()?[0])
    }
    pub(super) fn u16(&mut self) -> io::Result<u16> {
        Ok(u16::from_le_bytes(self.take()?))
    }
    pub(super) fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    pub(super) fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    pub(super) fn u128(&mut self) -> io::Result<u128> {
        Ok(u128::from_le_bytes(self.take()?))
    }
    pub(super) fn bytes(&mut self) -> io::Result<Vec<u8>> {
        let n = self.u32()? as usize;
        if self.0.len() < n {
            return Err(bad("length"));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a.to_vec())
    }
    pub(super) fn string(&mut self) -> io::Result<String> {
        String::from_utf8(self.bytes()?).map_err(|_| bad("text"))
    }
    pub(super) fn opt_u32(&mut self) -> io::Result<Option<u32>> {
        Ok(match self.u8()? {
            0 => None,
            _ => Some(self.u32()?),
        })
    }
    pub(super) fn endpoint(&mut self) -> io::Result<QpEndpoint> {
        Ok(QpEndpoint {
            gid: self.u128()?,
            lid: self.u16()?,
            qpn: QpNum(self.u32()?),
            psn: self.u32()?,
        })
    }
    pub(super) fn mr(&mut self) -> io::Result<MrInfo> {
        Ok(MrInfo {
            addr: self.u64()?,
            len: self.u64()?,
            lkey: self.u32()?,
            rkey: self.u32()?,
        })
    }
    pub(super) fn sge(&mut self) -> io::Result<Sge> {
        Ok(Sge {
            addr: self.u64()?,
            len: self.u32()?,
            lkey: self.u32()?,
        })
    }
    pub(super) fn send_wr(&mut self) -> io::Result<SendWr> {
        let wr_id = self.u64()?;
        let op = match self.u8()? {
            0 => SendOp::Send {
                imm: self.opt_u32()?,
            },
            1 => SendOp::Write {
                remote_addr: self.u64()?,
                rkey: self.u32()?,
            },
            2 => SendOp::Read {
                remote_addr: self.u64()?,
                rkey: self.u32()?,
            },
            _ => return Err(bad("opcode")),
        };
        Ok(SendWr {
            wr_id,
            op,
            sge: self.sge()?,
        })
    }
    pub(super) fn attrs(&mut self) -> io::Result<Option<ConnectAttrs>> {
        Ok(match self.u8()? {
            0 => None,
            _ => Some(ConnectAttrs {
                remote: self.endpoint()?,
                rnr_retry: self.u8()?,
            }),
        })
    }
    pub(super) fn state(&mut self) -> io::Result<QpState> {
        STATES
            .get(self.u8()? as usize)
            .copied()
            .ok_or_else(|| bad("state"))
    }
    pub(super) fn wc(&mut self) -> io::Result<WorkCompletion> {
        let wr_id = self.u64()?;
        let status = match self.u8()? {
            255 => WcStatus::Other(self.u32()?),
            c => *STATUSES.get(c as usize).ok_or_else(|| bad("status"))?,
        };
        let opcode = match self.u8()? {
            0 => WcOpcode::Send,
            1 => WcOpcode::RdmaWrite,
            2 => WcOpcode::RdmaRead,
            3 => WcOpcode::Recv,
            _ => return Err(bad("opcode")),
        };
        Ok(WorkCompletion {
            wr_id,
            status,
            opcode,
            byte_len: self.u32()?,
            imm: self.opt_u32()?,
            qp: QpNum(self.u32()?),
        })
    }
    pub(super) fn error(&mut self) -> io::Result<VerbsError> {
        Ok(match self.u8()? {
            0 => VerbsError::NoDevice(self.string()?),
            1 => VerbsError::NoSuchObject(object_name(&self.string()?)),
            2 => VerbsError::InvalidState {
                qp: QpNum(self.u32()?),
                state: self.state()?,
            },
            3 => VerbsError::QueueFull,
            4 => VerbsError::CqOverrun(super::super::verbs::CqId(self.u32()?)),
            5 => VerbsError::Invalid(self.string()?),
            6 => VerbsError::Device(self.string()?),
            _ => return Err(bad("error")),
        })
    }
}

/// The static name of an object kind the provider reports missing.
fn object_name(s: &str) -> &'static str {
    [
        "protection domain",
        "memory region",
        "completion queue",
        "queue pair",
    ]
    .into_iter()
    .find(|n| *n == s)
    .unwrap_or("object")
}

/// Writes one length-prefixed message.
pub(super) fn send(s: &mut impl Write, body: &[u8]) -> io::Result<()> {
    s.write_all(&(body.len() as u32).to_le_bytes())?;
    s.write_all(body)?;
    s.flush()
}

/// Reads one length-prefixed message (`None` at a clean end of stream).
pub(super) fn recv(s: &mut impl Read) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match s.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let n = u32::from_le_bytes(len) as usize;
    if n > MSG_MAX {
        return Err(bad("length"));
    }
    let mut body = vec![0; n];
    s.read_exact(&mut body)?;
    Ok(Some(body))
}
