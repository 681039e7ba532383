//! The `kv` role: serves the embedded persistent engine ([`crate::wal_kv`]) to every node of a
//! one-host cluster over the transport. Each [`KvReq`] runs against a shared handle of the engine:
//! reads on the runtime, commits on tokio's blocking pool (commits from many callers share one
//! WAL fsync: group commit)
//! and is answered with a [`KvReply`] carrying the same id.
//!
//! Faults a real run injects (unavailability, spurious conflicts, unknown commits) come from
//! [`crate::kv_faults`], set through the kv node's control endpoint.
//!
//! Invariants: a reply is sent only after the engine answered (a commit reply means durable);
//! a request that cannot be decoded is dropped and counted, never answered. Not here: retries
//! and timeouts (the caller's driver answers an unanswered step with `Unavailable` or
//! `CommitUnknown`), and the remote side of the contract ([`RemoteKv`], below).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use t3fs_core::ids::NodeId;
use t3fs_core::kv::{
    self, CommitReq, Key, KeyRange, KvDone, KvEngine, KvError, KvOp, KvVersion, Value,
};
use t3fs_core::msg::kv::{KvReply, KvReq};
use t3fs_core::msg::Msg;

use crate::kv_faults::{KvFate, KvFaultLayer};
use crate::transport::{Inbound, Transport, TransportConfig};
use crate::wal_kv::SharedWalKv;

/// Counters of the KV service.
#[derive(Debug, Default)]
pub struct KvServiceCounters {
    /// Requests answered.
    pub answered: AtomicU64,
    /// Frames that were not KV requests (dropped).
    pub dropped: AtomicU64,
}

/// Serves `engine` to every peer of `transport` until `inbound` closes, obeying `faults`.
pub async fn serve(
    engine: SharedWalKv,
    transport: Transport,
    mut inbound: mpsc::Receiver<Inbound>,
    counters: Arc<KvServiceCounters>,
    faults: Arc<KvFaultLayer>,
) {
    let mut jitter = crate::node::host::Jitter::new();
    while let Some(mut inb) = inbound.recv().await {
        let req = match transport.decode(&mut inb) {
            Ok(Msg::KvReq(r)) => r,
            Ok(_) | Err(_) => {
                counters.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        };
        let mut e = engine.clone();
        let t = transport.clone();
        let c = counters.clone();
        let fate = faults.fate(&req.op, [jitter.bits(), jitter.bits(), jitter.bits()]);
        tokio::spawn(async move {
            let KvReq { id, op } = req;
            let result = match fate {
                KvFate::Unavailable => Err(KvError::Unavailable),
                KvFate::Conflict => Err(KvError::Conflict),
                KvFate::UnknownDropped => Err(KvError::CommitUnknown),
                KvFate::Run | KvFate::UnknownApplied => {
                    let r = match op {
                        // A read holds the engine's lock only for its lookups (a commit drops
                        // it while it syncs): run it here rather than hand it to another
                        // thread and back, which costs a metadata call more than the read.
                        KvOp::Read { .. } => kv::execute(&mut e, op),
                        KvOp::Commit(_) => {
                            tokio::task::spawn_blocking(move || kv::execute(&mut e, op))
                                .await
                                .unwrap_or(Err(KvError::Unavailable))
                        }
                    };
                    if fate == KvFate::UnknownApplied {
                        Err(KvError::CommitUnknown)
                    } else {
                        r
                    }
                }
            };
            let reply = Msg::KvReply(KvReply { id, result });
            let _ = t.send(inb.from, reply).await;
            c.answered.fetch_add(1, Ordering::Relaxed);
        });
    }
}

/// A KV engine reached over the transport: the remote side of the KV contract, for tools and
/// tests that own an engine directly (machines go through the node driver instead). Blocking:
/// it runs its own small runtime, so call it from a plain thread, not from async code.
pub struct RemoteKv {
    rt: tokio::runtime::Runtime,
    transport: Transport,
    inbound: mpsc::Receiver<Inbound>,
    kv_node: NodeId,
    next: u64,
    timeout: Duration,
}

impl RemoteKv {
    /// Connects as node `me` to the kv service `kv_node` at `addr` with `token`.
    pub fn connect(
        me: NodeId,
        kv_node: NodeId,
        addr: SocketAddr,
        token: &str,
    ) -> std::io::Result<Self> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        // Inside the runtime: the transport spawns its peer tasks on it (they run whenever a
        // call blocks on the runtime).
        let (transport, inbound) = rt.block_on(async {
            let (t, inbound) = Transport::start(TransportConfig::new(me, None, token)).await?;
            t.set_addr(kv_node, addr);
            Ok::<_, std::io::Error>((t, inbound))
        })?;
        Ok(Self {
            rt,
            transport,
            inbound,
            kv_node,
            next: 0,
            timeout: Duration::from_secs(10),
        })
    }

    fn run(&mut self, op: KvOp) -> Result<KvDone, KvError> {
        let commit = matches!(op, KvOp::Commit(_));
        self.next += 1;
        let id = self.next;
        let msg = Msg::KvReq(KvReq { id, op });
        let (t, node, timeout) = (self.transport.clone(), self.kv_node, self.timeout);
        let inbound = &mut self.inbound;
        let lost = if commit {
            KvError::CommitUnknown
        } else {
            KvError::Unavailable
        };
        self.rt.block_on(async move {
            if t.send(node, msg).await.is_err() {
                return Err(KvError::Unavailable);
            }
            let wait = async {
                while let Some(mut inb) = inbound.recv().await {
                    if let Ok(Msg::KvReply(r)) = t.decode(&mut inb) {
                        if r.id == id {
                            return r.result;
                        }
                    }
                }
                Err(lost)
            };
            tokio::time::timeout(timeout, wait)
                .await
                .unwrap_or(Err(lost))
        })
    }
}

impl Drop for RemoteKv {
    fn drop(&mut self) {
        let t = self.transport.clone();
        self.rt.block_on(async move { t.shutdown().await });
    }
}

impl KvEngine for RemoteKv {
    fn read_version(&mut self) -> Result<KvVersion, KvError> {
        match self.run(KvOp::Read {
            at: None,
            keys: Vec::new(),
            ranges: Vec::new(),
        })? {
            KvDone::Read { version, .. } => Ok(version),
            KvDone::Committed(_) => Err(KvError::Unavailable),
        }
    }

    fn get(&mut self, at: KvVersion, key: &[u8]) -> Result<Option<Value>, KvError> {
        let op = KvOp::Read {
            at: Some(at),
            keys: vec![key.to_vec()],
            ranges: Vec::new(),
        };
        match self.run(op)? {
            KvDone::Read { mut values, .. } if values.len() == 1 => Ok(values.remove(0)),
            _ => Err(KvError::Unavailable),
        }
    }

    fn range(
        &mut self,
        at: KvVersion,
        range: &KeyRange,
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, KvError> {
        let limit = u32::try_from(limit).unwrap_or(u32::MAX);
        let op = KvOp::Read {
            at: Some(at),
            keys: Vec::new(),
            ranges: vec![(range.clone(), limit)],
        };
        match self.run(op)? {
            KvDone::Read { mut ranges, .. } if ranges.len() == 1 => Ok(ranges.remove(0)),
            _ => Err(KvError::Unavailable),
        }
    }

    fn commit(&mut self, req: CommitReq) -> Result<KvVersion, KvError> {
        match self.run(KvOp::Commit(req))? {
            KvDone::Committed(v) => Ok(v),
            KvDone::Read { .. } => Err(KvError::CommitUnknown),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    /// Starts a kv service on its own thread and runtime; returns its address.
    fn start_service(dir: &std::path::Path) -> SocketAddr {
        let engine = crate::wal_kv::WalKv::open(dir).unwrap().into_shared();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listen = Some("127.0.0.1:0".parse().unwrap());
                let (t, inbound) = Transport::start(TransportConfig::new(NodeId(9), listen, "tok"))
                    .await
                    .unwrap();
                tx.send(t.local_addr().unwrap()).unwrap();
                serve(engine, t, inbound, Arc::default(), Arc::default()).await;
            });
        });
        rx.recv().unwrap()
    }

    #[test]
    fn remote_kv_passes_the_kv_suite() {
        static N: AtomicU32 = AtomicU32::new(0);
        let root = std::env::temp_dir().join(format!("t3fs-remote-kv-{}", std::process::id()));
        t3fs_core::testing::kv_suite(|| {
            let k = N.fetch_add(1, Ordering::Relaxed);
            let dir = root.join(k.to_string());
            let _ = std::fs::remove_dir_all(&dir);
            let addr = start_service(&dir);
            RemoteKv::connect(NodeId(100 + k), NodeId(9), addr, "tok").unwrap()
        });
        let _ = std::fs::remove_dir_all(&root);
    }
}
