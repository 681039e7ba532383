//! The native client library: the core client machine on the tokio driver.
//!
//! [`Client::connect`] needs only mgmtd's address and a credential (or the cluster secret): it asks mgmtd for the
//! server addresses (`NodeAddrs`, published with routing info), then boots the client machine
//! from empty routing and waits until the machine has fetched routing. Every connect is a new
//! incarnation with a fresh random node id and [`ClientId`], so storage's exactly-once records
//! never meet a reused (client, channel, seqnum): a reused id would restart its sequence numbers
//! and have its writes answered from those records without being applied.
//!
//! The API is async and batched: any number of calls may be in flight at once ([`Client::batch`]
//! submits many and collects them in order), the form of 3FS's USRBIO ring; the machine bounds
//! what it runs concurrently and answers the rest `Rejected`. Files go through the meta service
//! (`create`, `open`, `write`, `read`, `close` with the length hint, `stat`, `list`, `remove`).
//! Bad input (a relative path, a read past the layout, a call on a closed client) is an error,
//! never a panic. Not here: FUSE, benchmarks, connecting (client/connect.rs).

use std::net::SocketAddr;
use std::time::Duration;

use t3fs_core::client::{ClientCall, ClientRet};
use t3fs_core::ids::{ChainId, ChunkId, ClientId, InodeId, NodeId};
use t3fs_core::layout::FileLayout;
use t3fs_core::meta::length::LengthHint;
use t3fs_core::meta::request::{MetaAnswer, MetaOp};
use t3fs_core::meta::{DirEntry, Inode, InodeKind, MetaError};
use t3fs_core::node::{AnyCall, AnyRet};
use t3fs_core::routing::RoutingInfo;
use t3fs_scenario::Timeouts;

use crate::node::NodeHandle;
use crate::transport::Transport;

pub mod cluster_dir;
mod connect;
pub mod dirs_watch;
mod read_files;
pub mod read_ranges;
mod stat_many;

/// How to connect.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// mgmtd's address (the first mgmtd, node 0 of the plan).
    pub mgmtd: SocketAddr,
    /// The other mgmtd nodes' addresses (nodes 1, 2, … of the plan): `connect` asks them too and
    /// follows a standby's hint to the primary.
    pub standby: Vec<SocketAddr>,
    /// What the client proves: a client or mount credential string (`t3fs cluster
    /// credential`), or the cluster secret itself (an admin's; `transport::credential`).
    pub token: String,
    /// The cluster's timeout profile (the client's retry and refresh timers follow it).
    pub timeouts: Timeouts,
    /// How long `connect` waits for addresses and routing.
    pub connect_timeout: Duration,
    /// Routing refresh interval instead of the profile's (a routing watcher asks more often, so
    /// that its timeline of chain changes is sharper than the profile's refresh).
    pub refresh: Option<Duration>,
    /// The user namespace requests act for (permission checks, the sticky bit).
    pub user: t3fs_core::meta::perm::User,
    /// What a call does while the cluster cannot serve it.
    pub outage: Outage,
    /// `Some`: chunk I/O and meta calls travel over RDMA on this device (the cluster's
    /// servers must speak it, or they refuse and TCP is used).
    pub rdma: Option<crate::transport::RdmaWire>,
}

/// What a call does while the cluster cannot serve it (every replica of a chain down, no meta
/// server answering).
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
pub enum Outage {
    /// Retry per the profile's bounds (chunk I/O `retries_max` times, meta calls
    /// `meta_attempts_max` sends), then fail the call: a FUSE mount answers EIO.
    #[default]
    Fail,
    /// Retry until the cluster answers: the call waits out the outage, as an NFS hard mount
    /// does. Nothing is answered that the cluster did not do.
    Block,
}

impl ClientOptions {
    /// Options for a cluster with the `fast` profile.
    pub fn new(mgmtd: SocketAddr, token: impl Into<String>) -> Self {
        Self {
            mgmtd,
            standby: Vec::new(),
            token: token.into(),
            timeouts: Timeouts::Fast,
            connect_timeout: Duration::from_secs(30),
            refresh: None,
            user: t3fs_core::meta::perm::ROOT_USER,
            outage: Outage::Fail,
            rdma: None,
        }
    }
}

/// The runtime a benchmark or probe client runs on: two workers, as every `t3fs bench` client
/// has, so figures taken by different commands share their scheduling.
pub fn bench_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))
}

/// What can go wrong.
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum ClientError {
    /// Connecting failed (transport, no answer from mgmtd, no routing).
    Connect(String),
    /// The client's node stopped.
    Stopped,
    /// The caller's input is invalid.
    Invalid(String),
    /// The cluster answered with a failure.
    Failed(String),
    /// A replica had no room for a write (`Status::NoSpace`): nothing of it was committed, and
    /// retrying cannot help until space is freed. The FUSE mount answers ENOSPC.
    NoSpace,
    /// A namespace error.
    Meta(MetaError),
    /// A write or truncate would make the file larger than its layout allows
    /// ([`t3fs_core::layout::file_size_max`]); the FUSE mount answers EFBIG.
    TooLarge {
        /// The size asked for (a write's end, a truncate's length).
        size: u64,
        /// The layout's largest file.
        max: u64,
    },
}

impl ClientError {
    /// The error for a call answered `ret` where another answer was expected: [`Self::NoSpace`]
    /// for a chunk refused for want of space, [`Self::Failed`] naming the answer otherwise.
    pub fn answered(ret: ClientRet) -> Self {
        match ret {
            ClientRet::Failed {
                status: t3fs_core::msg::Status::NoSpace,
                ..
            } => Self::NoSpace,
            other => Self::Failed(format!("{other:?}")),
        }
    }

    /// [`ClientError::TooLarge`] unless a file of `layout` may reach `end` bytes (`None`: past
    /// `u64::MAX`).
    pub fn check_size(layout: &FileLayout, end: Option<u64>) -> Result<(), Self> {
        let max = layout.size_max();
        match end {
            Some(size) if size <= max => Ok(()),
            size => Err(Self::TooLarge {
                size: size.unwrap_or(u64::MAX),
                max,
            }),
        }
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connect(m) => write!(f, "connect: {m}"),
            Self::Stopped => f.write_str("client stopped"),
            Self::Invalid(m) => write!(f, "invalid: {m}"),
            Self::Failed(m) => write!(f, "failed: {m}"),
            Self::NoSpace => f.write_str("no space left on a storage target"),
            Self::Meta(e) => write!(f, "meta: {e:?}"),
            Self::TooLarge { size, max } => {
                write!(
                    f,
                    "file too large: {size} bytes, the layout's largest is {max}"
                )
            }
        }
    }
}

impl std::error::Error for ClientError {}

/// The answer to a submitted call, not yet awaited.
pub type Reply = tokio::sync::oneshot::Receiver<AnyRet>;

/// Waits for a submitted call's answer.
pub async fn answer(rx: Reply) -> Result<ClientRet, ClientError> {
    match rx.await {
        Ok(AnyRet::Client(r)) => Ok(r),
        Ok(AnyRet::Admin(_)) => Err(ClientError::Failed("unexpected admin answer".into())),
        Err(_) => Err(ClientError::Stopped),
    }
}

/// A file opened for I/O.
#[derive(Clone, Debug)]
pub struct File {
    /// Its inode.
    pub inode: InodeId,
    /// Its resolved layout.
    pub layout: FileLayout,
    /// The write session (0: read-only).
    pub session: u64,
    /// Truncate version at open.
    pub truncate_ver: u64,
    /// Length at open.
    pub length: u64,
}

impl File {
    /// The file meta answered as `inode` (opened with write session `session`, 0 for none),
    /// its layout resolved against the chain table `table` gives for it.
    pub(crate) fn of(
        inode: Inode,
        session: u64,
        table: impl FnOnce(&t3fs_core::meta::placement::Layout) -> Vec<ChainId>,
    ) -> Result<Self, ClientError> {
        let InodeKind::File {
            length,
            truncate_ver,
            layout,
        } = inode.kind
        else {
            return Err(ClientError::Invalid("not a regular file".into()));
        };
        let layout = layout.ok_or_else(|| ClientError::Failed("file has no layout".into()))?;
        let fl = layout
            .file_layout(&table(&layout))
            .ok_or_else(|| ClientError::Failed("layout does not resolve against routing".into()))?;
        Ok(Self {
            inode: inode.id,
            layout: fl,
            session,
            truncate_ver,
            length,
        })
    }

    /// Whether `len` bytes may be written at `offset` (see [`File::check_end`]).
    pub(crate) fn check_write(&self, offset: u64, len: usize) -> Result<(), ClientError> {
        self.check_end(offset.checked_add(len as u64))
    }

    /// Whether a write or truncate may make the file reach `end` bytes (`None`: past
    /// `u64::MAX`): the file is open for writing, and `end` is within the layout's largest
    /// file ([`ClientError::TooLarge`] otherwise).
    pub(crate) fn check_end(&self, end: Option<u64>) -> Result<(), ClientError> {
        if self.session == 0 {
            return Err(ClientError::Invalid("file not open for writing".into()));
        }
        ClientError::check_size(&self.layout, end)
    }
}

tokio::task_local! {
    /// The user the current task's namespace requests act for (see [`acting_as`]).
    static ACTING: t3fs_core::meta::perm::User;
}

/// Runs `f` with every namespace request the client makes in it acting for `user` (permission
/// checks, owner of what it creates) instead of the client's own user: a FUSE mount serves
/// many users through one client, one task per kernel request.
pub async fn acting_as<F: std::future::Future>(
    user: t3fs_core::meta::perm::User,
    f: F,
) -> F::Output {
    ACTING.scope(user, f).await
}

/// A connected client.
pub struct Client {
    handle: NodeHandle,
    transport: Transport,
    /// This incarnation's identity.
    pub id: ClientId,
    node: NodeId,
    next_session: std::sync::atomic::AtomicU64,
    dirs_watch: dirs_watch::DirsWatch,
}

impl Client {
    /// The routing info the client machine holds.
    pub fn routing(&self) -> Option<RoutingInfo> {
        self.handle
            .snapshot
            .lock()
            .ok()
            .and_then(|s| s.routing.clone())
    }

    /// This client's node id.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// Runs one client call.
    pub async fn call(&self, call: ClientCall) -> Result<ClientRet, ClientError> {
        answer(self.submit(call).await?).await
    }

    /// Hands `call` to the client machine without waiting for its answer (see [`answer`]), so a
    /// caller can keep many calls in flight and time each one.
    pub async fn submit(&self, call: ClientCall) -> Result<Reply, ClientError> {
        self.handle
            .submit(AnyCall::Client(call))
            .await
            .map_err(|_| ClientError::Stopped)
    }

    /// Runs many calls at once: every call is handed to the client machine before the first
    /// answer is awaited (the machine runs them concurrently up to its bounds and answers the
    /// rest `Rejected`). Answers come back in call order.
    pub async fn batch(&self, calls: Vec<ClientCall>) -> Vec<Result<ClientRet, ClientError>> {
        let mut pending = Vec::with_capacity(calls.len());
        for c in calls {
            pending.push(self.submit(c).await);
        }
        let mut out = Vec::with_capacity(pending.len());
        for p in pending {
            out.push(match p {
                Ok(rx) => answer(rx).await,
                Err(e) => Err(e),
            });
        }
        out
    }

    /// Writes many (offset, data) pieces of `f` at once (see [`Client::batch`]); the first
    /// failure is returned.
    pub async fn write_many(
        &self,
        f: &File,
        pieces: Vec<(u64, Vec<u8>)>,
    ) -> Result<(), ClientError> {
        // Open for writing even when there is nothing to write, and every piece fits.
        f.check_write(0, 0)?;
        for (offset, data) in &pieces {
            f.check_write(*offset, data.len())?;
        }
        let calls = pieces
            .into_iter()
            .map(|(offset, data)| ClientCall::Write {
                inode: f.inode,
                layout: f.layout.clone(),
                offset,
                data,
            })
            .collect();
        for r in self.batch(calls).await {
            match r? {
                ClientRet::Updated { .. } => {}
                other => return Err(ClientError::answered(other)),
            }
        }
        Ok(())
    }

    /// Reads many (offset, len) pieces of `f` at once; the bytes in piece order.
    pub async fn read_many(
        &self,
        f: &File,
        pieces: Vec<(u64, u64)>,
    ) -> Result<Vec<Vec<u8>>, ClientError> {
        self.read_each(f, pieces).await.into_iter().collect()
    }

    /// Reads many (offset, len) pieces of `f` at once, each answered on its own, in order.
    pub async fn read_each(
        &self,
        f: &File,
        pieces: Vec<(u64, u64)>,
    ) -> Vec<Result<Vec<u8>, ClientError>> {
        let calls = pieces
            .into_iter()
            .map(|(offset, len)| ClientCall::Read {
                inode: f.inode,
                layout: f.layout.clone(),
                offset,
                len,
            })
            .collect();
        self.batch(calls)
            .await
            .into_iter()
            .map(|r| match r? {
                ClientRet::Read { data, .. } => Ok(data.into_vec()),
                other => Err(ClientError::answered(other)),
            })
            .collect()
    }

    /// The call that sends `op` to meta as the acting user (see [`acting_as`]).
    pub(crate) fn meta_call(op: MetaOp) -> ClientCall {
        match ACTING.try_with(|u| *u) {
            Ok(user) => ClientCall::MetaAs { user, op },
            Err(_) => ClientCall::Meta(op),
        }
    }

    pub(crate) async fn meta(&self, op: MetaOp) -> Result<MetaAnswer, ClientError> {
        match self.call(Self::meta_call(op)).await? {
            ClientRet::Meta(r, dirs) => {
                self.dirs_watch.tell(&dirs);
                r.map_err(ClientError::Meta)
            }
            other => Err(ClientError::answered(other)),
        }
    }

    pub(crate) fn check_path(path: &str) -> Result<(), ClientError> {
        if !path.starts_with('/') || path.contains('\0') {
            return Err(ClientError::Invalid(format!(
                "`{path}`: paths are absolute, without NUL"
            )));
        }
        Ok(())
    }

    /// Creates a file (exclusive) and opens it for writing.
    pub async fn create(&self, path: &str, perm: u32) -> Result<File, ClientError> {
        self.create_open(path, perm, true).await.map(|(f, _)| f)
    }

    /// open(2) with `O_CREAT` for write (`O_EXCL` when `exclusive`) in one meta transaction:
    /// the file made or found, with its write session (closed by [`Client::close`]). What it
    /// made is its caller's to write whatever `perm` says, as POSIX gives the creator its
    /// descriptor; what it found, only if the caller may write it.
    pub async fn create_open(
        &self,
        path: &str,
        perm: u32,
        exclusive: bool,
    ) -> Result<(File, Inode), ClientError> {
        Self::check_path(path)?;
        let session = self
            .next_session
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let op = MetaOp::Create {
            path: path.into(),
            perm,
            exclusive,
            session: Some(session),
        };
        let inode = match self.meta(op).await? {
            MetaAnswer::Inode(i) => i,
            a => return Err(ClientError::Failed(format!("create answered {a:?}"))),
        };
        Ok((self.file_of(inode.clone(), session)?, inode))
    }

    /// Opens a file; `write` opens a write session (closed by [`Client::close`]).
    pub async fn open(&self, path: &str, write: bool) -> Result<File, ClientError> {
        self.open_with_inode(path, write).await.map(|(f, _)| f)
    }

    /// [`Client::open`], also returning the file's inode as meta answered the open.
    pub async fn open_with_inode(
        &self,
        path: &str,
        write: bool,
    ) -> Result<(File, Inode), ClientError> {
        Self::check_path(path)?;
        let session = if write {
            self.next_session
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        } else {
            0
        };
        let inode = match self
            .meta(MetaOp::Open {
                path: path.into(),
                write,
                session,
            })
            .await?
        {
            MetaAnswer::Inode(i) => i,
            a => return Err(ClientError::Failed(format!("open answered {a:?}"))),
        };
        Ok((self.file_of(inode.clone(), session)?, inode))
    }

    /// The chain table `layout` names, from the routing the client holds (empty if unknown).
    pub(crate) fn chain_table(&self, layout: &t3fs_core::meta::placement::Layout) -> Vec<ChainId> {
        let routing = self.routing().unwrap_or_default();
        let key = (layout.range.table, layout.range.table_version);
        routing.chain_tables.get(&key).cloned().unwrap_or_default()
    }

    pub(crate) fn file_of(&self, inode: Inode, session: u64) -> Result<File, ClientError> {
        File::of(inode, session, |l| self.chain_table(l))
    }

    /// Writes `data` at `offset`; returns once every chunk committed on its whole chain.
    /// [`ClientError::TooLarge`] if it would end past the layout's largest file.
    pub async fn write(&self, f: &File, offset: u64, data: Vec<u8>) -> Result<(), ClientError> {
        f.check_write(offset, data.len())?;
        match self
            .call(ClientCall::Write {
                inode: f.inode,
                layout: f.layout.clone(),
                offset,
                data,
            })
            .await?
        {
            ClientRet::Updated { .. } => Ok(()),
            other => Err(ClientError::answered(other)),
        }
    }

    /// Reads `len` bytes at `offset` (holes read as zeros).
    pub async fn read(&self, f: &File, offset: u64, len: u64) -> Result<Vec<u8>, ClientError> {
        match self
            .call(ClientCall::Read {
                inode: f.inode,
                layout: f.layout.clone(),
                offset,
                len,
            })
            .await?
        {
            ClientRet::Read { data, .. } => Ok(data.into_vec()),
            other => Err(ClientError::answered(other)),
        }
    }

    /// Closes a write session with the length hint `length` (the end of the writes).
    pub async fn close_file(&self, f: &File, length: u64) -> Result<(), ClientError> {
        let hint = (f.session != 0).then_some(LengthHint {
            length,
            truncate_ver: f.truncate_ver,
        });
        self.meta(MetaOp::Close {
            inode: f.inode,
            session: f.session,
            length: hint,
        })
        .await
        .map(|_| ())
    }

    /// Closes write sessions `(inode, session)` that wrote nothing, so no length changes: one
    /// request (and one commit) per `CLOSE_UNWRITTEN_MAX` of them.
    pub async fn close_unwritten(&self, sessions: &[(InodeId, u64)]) -> Result<(), ClientError> {
        for part in sessions.chunks(t3fs_core::wire::CLOSE_UNWRITTEN_MAX) {
            let sessions = part.to_vec();
            self.meta(MetaOp::CloseUnwritten { sessions }).await?;
        }
        Ok(())
    }

    /// Makes a directory (its parent must exist).
    pub async fn mkdir(&self, path: &str) -> Result<(), ClientError> {
        self.mkdir_mode(path, 0o755).await.map(|_| ())
    }

    /// Creates an empty file without opening it (exclusive).
    pub async fn create_empty(&self, path: &str) -> Result<(), ClientError> {
        self.create_file(path, 0o644, true).await.map(|_| ())
    }

    /// Stats a path.
    pub async fn stat(&self, path: &str) -> Result<Inode, ClientError> {
        self.stat_follow(path, true).await
    }

    /// Lists a directory (first `limit` entries).
    pub async fn list(
        &self,
        path: &str,
        limit: u32,
    ) -> Result<Vec<(Vec<u8>, DirEntry)>, ClientError> {
        self.list_after(path, Vec::new(), limit).await
    }

    /// Removes a path.
    pub async fn remove(&self, path: &str, recursive: bool) -> Result<(), ClientError> {
        Self::check_path(path)?;
        self.meta(MetaOp::Remove {
            path: path.into(),
            recursive,
        })
        .await
        .map(|_| ())
    }

    /// Writes one chunk directly (no meta service): `data` at `offset` of chunk `chunk` on
    /// `chain`, in a file of `chunk_size` chunks.
    pub async fn write_chunk(
        &self,
        chain: ChainId,
        chunk: ChunkId,
        chunk_size: u32,
        offset: u32,
        data: Vec<u8>,
    ) -> Result<ClientRet, ClientError> {
        if offset as u64 + data.len() as u64 > chunk_size as u64 {
            return Err(ClientError::Invalid("write past the chunk".into()));
        }
        let layout = FileLayout {
            chunk_size,
            chains: vec![chain],
        };
        let off = u64::from(chunk.index) * u64::from(chunk_size) + u64::from(offset);
        self.call(ClientCall::Write {
            inode: chunk.inode,
            layout,
            offset: off,
            data,
        })
        .await
    }

    /// Reads one chunk directly.
    pub async fn read_chunk(
        &self,
        chain: ChainId,
        chunk: ChunkId,
        chunk_size: u32,
        offset: u32,
        len: u32,
    ) -> Result<Vec<u8>, ClientError> {
        let layout = FileLayout {
            chunk_size,
            chains: vec![chain],
        };
        let off = u64::from(chunk.index) * u64::from(chunk_size) + u64::from(offset);
        match self
            .call(ClientCall::Read {
                inode: chunk.inode,
                layout,
                offset: off,
                len: len.into(),
            })
            .await?
        {
            ClientRet::Read { data, .. } => Ok(data.into_vec()),
            other => Err(ClientError::answered(other)),
        }
    }

    /// Stops the client's node and transport.
    pub async fn close(&self) {
        self.handle.shutdown().await;
        self.transport.shutdown().await;
    }
}
