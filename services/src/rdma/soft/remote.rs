//! The software fabric across processes: one process holds a [`SoftFabric`] and serves it on a
//! Unix socket ([`serve_fabric`], `t3fs fabric`); every other process reaches its own device on
//! it through a [`RemoteDevice`], which forwards each verbs call as one request and answer
//! (`wire.rs`). This is the wire of a loopback cluster's `soft-rdma` mode: the fabric plays the
//! NICs and the network, so one-sided operations move bytes between registered regions without
//! either node's software taking part, and the rules of `soft` hold across processes.
//!
//! A device lives as long as its connection: when a process dies (or closes it), the fabric
//! kills the device, and every queue pair connected to it fails `RetryExcErr`, as a peer's
//! queue pairs do when a host dies. The fabric's RNR timer ticks every millisecond.
//!
//! Not here: speed (every verbs call is a socket round trip, so the regions' bytes cross the
//! socket on each `write_local` and `read_local`: a test mode, not a performance model), more
//! than one host (the socket is local), or authentication (the socket's file mode guards it).

use std::io;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::super::verbs::{
    Access, ConnectAttrs, CqId, MrInfo, PdId, QpCaps, QpEndpoint, QpNum, QpState, RecvWr, SendWr,
    Verbs, VerbsError, WorkCompletion,
};
use super::wire::{self, R, W};
use super::{SoftDevice, SoftFabric};

const HELLO: u8 = 0;
/// The first message of a device's event connection: completions are signalled on it.
const EVENTS: u8 = 15;
const NAME: u8 = 1;
const ALLOC_PD: u8 = 2;
const REG_MR: u8 = 3;
const DEREG_MR: u8 = 4;
const WRITE_LOCAL: u8 = 5;
const READ_LOCAL: u8 = 6;
const CREATE_CQ: u8 = 7;
const CREATE_QP: u8 = 8;
const ENDPOINT: u8 = 9;
const MODIFY_QP: u8 = 10;
const POST_RECV: u8 = 11;
const POST_SEND: u8 = 12;
const POLL_CQ: u8 = 13;
const DESTROY_QP: u8 = 14;

/// Serves a new fabric on the Unix socket at `path` (a stale socket file is replaced) until
/// the process ends. Each connection gets a device, named by its hello.
pub fn serve_fabric(path: &Path) -> io::Result<()> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    let fabric = SoftFabric::new();
    let ticker = fabric.clone();
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(1));
        ticker.tick();
    });
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let fabric = fabric.clone();
        std::thread::spawn(move || {
            let _ = serve_device(&fabric, conn);
        });
    }
    Ok(())
}

/// Serves one device until its connection ends, then kills it; or, for an event connection,
/// registers it with its device.
fn serve_device(fabric: &Arc<SoftFabric>, mut conn: UnixStream) -> io::Result<()> {
    let Some(hello) = wire::recv(&mut conn)? else {
        return Ok(());
    };
    let mut r = R(&hello);
    match r.u8()? {
        HELLO => {}
        EVENTS => return events(fabric, r.u64()?, conn),
        _ => return Err(io::Error::new(io::ErrorKind::InvalidData, "no hello")),
    }
    let dev = fabric.device(&r.string()?);
    let mut ok = W::default();
    ok.u64(dev.index());
    wire::send(&mut conn, &ok.0)?;
    let end = loop {
        let req = match wire::recv(&mut conn) {
            Ok(Some(req)) => req,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        };
        let mut out = W::default();
        match call(&dev, &mut R(&req), &mut out) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                out.0.clear();
                out.u8(1).error(&e);
            }
            Err(e) => break Err(e),
        }
        if let Err(e) = wire::send(&mut conn, &out.0) {
            break Err(e);
        }
    };
    fabric.kill(&dev);
    end
}

/// Signals every completion of device `gid` with one byte on `conn` (coalesced: a byte not
/// yet read stands for the ones after it).
fn events(fabric: &Arc<SoftFabric>, gid: u64, conn: UnixStream) -> io::Result<()> {
    let dev = SoftDevice {
        fabric: fabric.clone(),
        gid,
    };
    conn.set_nonblocking(true)?;
    let conn = Mutex::new(conn);
    let wake = move || {
        use std::io::Write;
        // A full socket already holds an unread signal: dropping this one loses nothing.
        let _ = conn.lock().unwrap_or_else(|e| e.into_inner()).write(&[1]);
    };
    if !dev.on_completion(Arc::new(wake)) {
        return Err(io::Error::new(io::ErrorKind::NotFound, "no such device"));
    }
    Ok(())
}

/// Runs one request on `dev`, writing `0` and the results to `out`. The outer error is a
/// malformed request (the connection ends); the inner one is the call's.
fn call(dev: &SoftDevice, r: &mut R<'_>, out: &mut W) -> io::Result<Result<(), VerbsError>> {
    out.u8(0);
    let res = match r.u8()? {
        NAME => {
            out.bytes(dev.name().as_bytes());
            Ok(())
        }
        ALLOC_PD => dev.alloc_pd().map(|pd| {
            out.u32(pd.0);
        }),
        REG_MR => {
            let (pd, len, access) = (PdId(r.u32()?), r.u64()?, Access(r.u32()?));
            dev.reg_mr(pd, len, access).map(|m| {
                out.mr(m);
            })
        }
        DEREG_MR => dev.dereg_mr(r.u32()?),
        WRITE_LOCAL => {
            let (lkey, off, data) = (r.u32()?, r.u64()?, r.bytes()?);
            dev.write_local(lkey, off, &data)
        }
        READ_LOCAL => {
            let (lkey, off, len) = (r.u32()?, r.u64()?, r.u32()?);
            let mut buf = vec![0; len as usize];
            dev.read_local(lkey, off, &mut buf).map(|()| {
                out.bytes(&buf);
            })
        }
        CREATE_CQ => dev.create_cq(r.u32()?).map(|cq| {
            out.u32(cq.0);
        }),
        CREATE_QP => {
            let (pd, scq, rcq) = (PdId(r.u32()?), CqId(r.u32()?), CqId(r.u32()?));
            let caps = QpCaps {
                max_send_wr: r.u32()?,
                max_recv_wr: r.u32()?,
            };
            dev.create_qp(pd, scq, rcq, caps).map(|qp| {
                out.u32(qp.0);
            })
        }
        ENDPOINT => dev.endpoint(QpNum(r.u32()?)).map(|e| {
            out.endpoint(e);
        }),
        MODIFY_QP => {
            let (qp, to, attrs) = (QpNum(r.u32()?), r.state()?, r.attrs()?);
            dev.modify_qp(qp, to, attrs)
        }
        POST_RECV => {
            let (qp, wr_id, sge) = (QpNum(r.u32()?), r.u64()?, r.sge()?);
            dev.post_recv(qp, RecvWr { wr_id, sge })
        }
        POST_SEND => {
            let (qp, wr) = (QpNum(r.u32()?), r.send_wr()?);
            dev.post_send(qp, wr)
        }
        POLL_CQ => {
            let (cq, max) = (CqId(r.u32()?), r.u32()?);
            dev.poll_cq(cq, max as usize).map(|wcs| {
                out.u32(wcs.len() as u32);
                for wc in &wcs {
                    out.wc(wc);
                }
            })
        }
        DESTROY_QP => dev.destroy_qp(QpNum(r.u32()?)),
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "unknown fabric call",
            ))
        }
    };
    Ok(res)
}

/// A device on a fabric served by another process.
pub struct RemoteDevice {
    name: String,
    path: std::path::PathBuf,
    index: u64,
    conn: Mutex<UnixStream>,
}

impl RemoteDevice {
    /// Connects to the fabric at `path` and gets a device named `name` on it.
    pub fn connect(path: &Path, name: &str) -> Result<Self, VerbsError> {
        let missing = |e: io::Error| {
            VerbsError::NoDevice(format!(
                "no software fabric at {} ({e}; `t3fs cluster up --transport soft-rdma` starts one)",
                path.display()
            ))
        };
        let mut conn = UnixStream::connect(path).map_err(missing)?;
        let mut hello = W::default();
        hello.u8(HELLO).bytes(name.as_bytes());
        wire::send(&mut conn, &hello.0).map_err(missing)?;
        let ok = wire::recv(&mut conn)
            .map_err(missing)?
            .ok_or_else(|| missing(io::ErrorKind::UnexpectedEof.into()))?;
        let index = R(&ok).u64().map_err(missing)?;
        Ok(Self {
            name: name.to_string(),
            path: path.to_path_buf(),
            index,
            conn: Mutex::new(conn),
        })
    }

    /// Sends one request and returns its answer's results.
    fn rpc(&self, req: &W) -> Result<Vec<u8>, VerbsError> {
        let lost = |e: io::Error| VerbsError::Device(format!("software fabric lost: {e}"));
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        wire::send(&mut *conn, &req.0).map_err(lost)?;
        let ans = wire::recv(&mut *conn)
            .map_err(lost)?
            .ok_or_else(|| lost(io::ErrorKind::UnexpectedEof.into()))?;
        drop(conn);
        let mut r = R(&ans);
        match r.u8().map_err(lost)? {
            0 => Ok(r.0.to_vec()),
            _ => Err(r.error().map_err(lost)?),
        }
    }

    /// A call whose answer is decoded by `f`.
    fn ask<T>(
        &self,
        req: &W,
        f: impl FnOnce(&mut R<'_>) -> io::Result<T>,
    ) -> Result<T, VerbsError> {
        let ans = self.rpc(req)?;
        f(&mut R(&ans)).map_err(|e| VerbsError::Device(format!("software fabric: {e}")))
    }
}

fn req(op: u8) -> W {
    let mut w = W::default();
    w.u8(op);
    w
}

impl Verbs for RemoteDevice {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn alloc_pd(&self) -> Result<PdId, VerbsError> {
        self.ask(&req(ALLOC_PD), |r| Ok(PdId(r.u32()?)))
    }
    fn reg_mr(&self, pd: PdId, len: u64, access: Access) -> Result<MrInfo, VerbsError> {
        let mut w = req(REG_MR);
        w.u32(pd.0).u64(len).u32(access.0);
        self.ask(&w, |r| r.mr())
    }
    fn dereg_mr(&self, lkey: u32) -> Result<(), VerbsError> {
        self.rpc(req(DEREG_MR).u32(lkey)).map(drop)
    }
    fn write_local(&self, lkey: u32, offset: u64, data: &[u8]) -> Result<(), VerbsError> {
        self.rpc(req(WRITE_LOCAL).u32(lkey).u64(offset).bytes(data))
            .map(drop)
    }
    fn read_local(&self, lkey: u32, offset: u64, out: &mut [u8]) -> Result<(), VerbsError> {
        let mut w = req(READ_LOCAL);
        w.u32(lkey).u64(offset).u32(out.len() as u32);
        let got = self.ask(&w, |r| r.bytes())?;
        if got.len() != out.len() {
            return Err(VerbsError::Device("software fabric: short read".into()));
        }
        out.copy_from_slice(&got);
        Ok(())
    }
    fn create_cq(&self, depth: u32) -> Result<CqId, VerbsError> {
        self.ask(req(CREATE_CQ).u32(depth), |r| Ok(CqId(r.u32()?)))
    }
    fn create_qp(
        &self,
        pd: PdId,
        send_cq: CqId,
        recv_cq: CqId,
        caps: QpCaps,
    ) -> Result<QpNum, VerbsError> {
        let mut w = req(CREATE_QP);
        w.u32(pd.0).u32(send_cq.0).u32(recv_cq.0);
        w.u32(caps.max_send_wr).u32(caps.max_recv_wr);
        self.ask(&w, |r| Ok(QpNum(r.u32()?)))
    }
    fn endpoint(&self, qp: QpNum) -> Result<QpEndpoint, VerbsError> {
        self.ask(req(ENDPOINT).u32(qp.0), |r| r.endpoint())
    }
    fn modify_qp(
        &self,
        qp: QpNum,
        to: QpState,
        attrs: Option<ConnectAttrs>,
    ) -> Result<(), VerbsError> {
        let mut w = req(MODIFY_QP);
        w.u32(qp.0).u8(wire::state_code(to)).attrs(attrs);
        self.rpc(&w).map(drop)
    }
    fn post_recv(&self, qp: QpNum, wr: RecvWr) -> Result<(), VerbsError> {
        self.rpc(req(POST_RECV).u32(qp.0).u64(wr.wr_id).sge(wr.sge))
            .map(drop)
    }
    fn post_send(&self, qp: QpNum, wr: SendWr) -> Result<(), VerbsError> {
        self.rpc(req(POST_SEND).u32(qp.0).send_wr(wr)).map(drop)
    }
    fn poll_cq(&self, cq: CqId, max: usize) -> Result<Vec<WorkCompletion>, VerbsError> {
        let mut w = req(POLL_CQ);
        w.u32(cq.0).u32(max.min(u32::MAX as usize) as u32);
        self.ask(&w, |r| (0..r.u32()?).map(|_| r.wc()).collect())
    }
    fn destroy_qp(&self, qp: QpNum) -> Result<(), VerbsError> {
        self.rpc(req(DESTROY_QP).u32(qp.0)).map(drop)
    }

    /// A second connection carries the device's completion events; a thread of this process
    /// reads them and runs `wake`, until the fabric closes it.
    fn on_completion(&self, wake: Arc<dyn Fn() + Send + Sync>) -> bool {
        let Ok(mut conn) = UnixStream::connect(&self.path) else {
            return false;
        };
        let mut hello = W::default();
        hello.u8(EVENTS).u64(self.index);
        if wire::send(&mut conn, &hello.0).is_err() {
            return false;
        }
        std::thread::spawn(move || {
            use std::io::Read;
            let mut buf = [0u8; 256];
            while matches!(conn.read(&mut buf), Ok(n) if n > 0) {
                wake();
            }
        });
        true
    }
}
