//! An in-memory [`MountClient`] for the mount's unit tests: the namespace is t3fs-core's own
//! meta (`request::execute` on the in-memory KV, one transaction per call, as a meta server
//! runs it), so names, inode ids, kinds, modes and owners, link counts, lengths and truncate
//! versions, and every status (NotFound, NotDir, Exists, NotEmpty, IsDir, Access,
//! NotPermitted, ...) are what a cluster would answer; the requests it runs are the ones the
//! native client sends for each verb. File bytes are kept per inode, as the chunks would hold
//! them: a truncate cuts or zero-extends them, and a length update that needs storage's answer
//! (a truncate's sync, a stale hint) gets their length, as the meta server asks the chains.
//! Test-only.
//!
//! What a test can do besides the trait: hold writes (they wait until released, so a test
//! decides when they land), plant the failure of a verb's next call, make the KV unavailable,
//! set what statfs answers, and read back the bytes, the reads that reached storage and the
//! write sessions still open.
//!
//! Not modelled: chains, replicas and their failures (a planted error stands for them),
//! retries and the outage mode, directory locks of other clients, routing. A listing is one
//! meta page (at most `DIR_LIST_PAGE_MAX` names: the mount asks for fewer).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use t3fs_core::ids::{ChainId, ClientId, InodeId, RequestId};
use t3fs_core::kv::mem::MemKv;
use t3fs_core::meta::length::{LengthHint, QueriedLength};
use t3fs_core::meta::perm::{User, ROOT_USER};
use t3fs_core::meta::placement::{ChainAllocator, Layout};
use t3fs_core::meta::request::{execute, FsStat, MetaAnswer, MetaOp};
use t3fs_core::meta::{transact, DirEntry, Inode, InodeKind, MetaError, PathOp, SetAttr};
use t3fs_core::wire::SpecialKind;
use tokio::sync::watch;

use super::backend::lock;
use super::mem_chunks::Chunks;
use super::mount_client::{Answer, MountClient};
use crate::client::{Client, ClientError, File};
use crate::client_ns::{done, inode};

tokio::task_local! {
    /// The user the current task's namespace calls act for (root outside `acting_as`, as the
    /// native client acts for its own user, root by default).
    static USER: User;
}

/// The client id meta sees (idempotency records and sessions are keyed on it).
const CLIENT: ClientId = ClientId(1);

/// The one chain every file's chunks are on.
const CHAIN: ChainId = ChainId(1);

#[derive(Default)]
struct State {
    kv: MemKv,
    /// The last request id and the clock (seconds), one step a call.
    request: u64,
    /// Each file's chunks.
    data: BTreeMap<InodeId, Chunks>,
    /// Write sessions opened and not closed: (inode, session).
    sessions: BTreeSet<(InodeId, u64)>,
    space: FsStat,
    /// Reads that reached storage: (inode, offset, len).
    reads: Vec<(InodeId, u64, u64)>,
    /// Failures planted for the next call of a verb.
    fail: Vec<(&'static str, ClientError)>,
}

/// The in-memory client.
pub(super) struct MemClient {
    st: Mutex<State>,
    /// The layout new files get.
    layout: Layout,
    /// While true, writes wait.
    held: watch::Sender<bool>,
    next_session: AtomicU64,
}

impl MemClient {
    /// An empty namespace (the root, mode 0755, root's), new files in `chunk_size`-byte chunks.
    pub fn new(chunk_size: u32) -> Self {
        let mut kv = MemKv::new(1 << 20);
        transact(&mut kv, |ns| ns.init(1)).expect("a fresh namespace");
        // A table of one chain, as the meta server allocates a file's range from it.
        let range = ChainAllocator::default().allocate(1, 1, 1, 1, 0);
        let range = range.expect("a stripe of one fits a table of one");
        Self {
            st: Mutex::new(State {
                kv,
                ..State::default()
            }),
            layout: Layout::new(chunk_size, range),
            held: watch::channel(false).0,
            next_session: AtomicU64::new(1),
        }
    }

    /// Holds every write until `hold(false)`.
    pub fn hold(&self, hold: bool) {
        self.held.send_replace(hold);
    }

    /// The next call of `verb` (a [`MountClient`] method's name) fails with `e`.
    pub fn fail_next(&self, verb: &'static str, e: ClientError) {
        lock(&self.st).fail.push((verb, e));
    }

    /// Makes every namespace call fail as a KV that cannot be reached does.
    pub fn kv_unavailable(&self, unavailable: bool) {
        lock(&self.st).kv.set_unavailable(unavailable);
    }

    /// What statfs answers from now on.
    pub fn set_space(&self, space: FsStat) {
        lock(&self.st).space = space;
    }

    /// The bytes of inode `id`'s chunks, to the end of the last one holding data.
    pub fn bytes(&self, id: InodeId) -> Vec<u8> {
        let st = lock(&self.st);
        let chunks = st.data.get(&id);
        chunks.map_or_else(Vec::new, |c| c.read(self.chunk(), 0, c.len(self.chunk())))
    }

    /// Bytes per chunk of every file.
    fn chunk(&self) -> u64 {
        u64::from(self.layout.chunk_size)
    }

    /// The reads of inode `id` that reached storage: (offset, len).
    pub fn reads(&self, id: InodeId) -> Vec<(u64, u64)> {
        let st = lock(&self.st);
        let of = st.reads.iter().filter(|r| r.0 == id);
        of.map(|r| (r.1, r.2)).collect()
    }

    /// Meta requests run so far.
    pub fn requests(&self) -> u64 {
        lock(&self.st).request
    }

    /// Write sessions opened and not closed.
    pub fn open_sessions(&self) -> usize {
        lock(&self.st).sessions.len()
    }

    /// The failure planted for this call of `verb`, if any (taken).
    fn planted(&self, verb: &str) -> Answer<()> {
        let mut st = lock(&self.st);
        match st.fail.iter().position(|(v, _)| *v == verb) {
            Some(k) => Err(st.fail.remove(k).1),
            None => Ok(()),
        }
    }

    /// Runs `op` as a meta server does, for the task's user: one transaction; a length update
    /// that needs storage's answer runs again with the length of the file's bytes.
    fn meta(&self, verb: &str, op: MetaOp) -> Answer<MetaAnswer> {
        self.planted(verb)?;
        let user = USER.try_with(|u| *u).unwrap_or(ROOT_USER);
        let mut st = lock(&self.st);
        st.request += 1;
        let p = PathOp {
            client: CLIENT,
            request: RequestId(st.request),
            now: st.request,
        };
        let mut queried = None;
        loop {
            let State {
                kv, data, space, ..
            } = &mut *st;
            let mut wants = None;
            let r = transact(kv, |ns| {
                ns.set_user(user);
                ns.set_new_layout(Some(self.layout), 1);
                ns.set_space(*space);
                ns.length_ctx().queried = queried;
                let r = execute(ns, &op, p);
                wants = ns.length_ctx().wants.take();
                r
            });
            match (r, wants) {
                (Err(MetaError::LengthUnknown), Some(i)) if queried.is_none() => {
                    queried = Some(stored_length(&i, data, self.chunk()));
                }
                (r, _) => return r.map_err(ClientError::Meta),
            }
        }
    }

    /// A namespace call answered with an inode.
    fn inode_op(&self, verb: &str, paths: &[&str], op: MetaOp) -> Answer<Inode> {
        checked(paths)?;
        inode(self.meta(verb, op)?, verb)
    }

    /// A namespace call answered done.
    fn done_op(&self, verb: &str, paths: &[&str], op: MetaOp) -> Answer<()> {
        checked(paths)?;
        done(self.meta(verb, op)?, verb)
    }
}

/// Paths as the native client checks them before asking meta.
fn checked(paths: &[&str]) -> Answer<()> {
    paths.iter().try_for_each(|p| Client::check_path(p))
}

/// Storage's answer to a length query of file `i`: the end of its last chunk holding data.
fn stored_length(i: &Inode, data: &BTreeMap<InodeId, Chunks>, chunk: u64) -> QueriedLength {
    let seen = match &i.kind {
        InodeKind::File {
            length,
            truncate_ver,
            ..
        } => (*length, *truncate_ver),
        _ => (0, 0),
    };
    let length = data.get(&i.id).map_or(0, |c| c.len(chunk));
    QueriedLength {
        inode: i.id,
        length,
        seen,
    }
}

impl MountClient for MemClient {
    async fn lstat(&self, path: &str) -> Answer<Inode> {
        let op = MetaOp::Stat {
            path: path.into(),
            follow: false,
        };
        self.inode_op("lstat", &[path], op)
    }

    async fn batch_stat(&self, paths: Vec<String>) -> Answer<Vec<Result<Inode, MetaError>>> {
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        checked(&refs)?;
        match self.meta("batch_stat", MetaOp::BatchStat { paths })? {
            MetaAnswer::Stats(v) => Ok(v),
            a => Err(ClientError::Failed(format!("batch stat answered {a:?}"))),
        }
    }

    async fn list_after(
        &self,
        path: &str,
        after: Vec<u8>,
        limit: u32,
    ) -> Answer<Vec<(Vec<u8>, DirEntry)>> {
        checked(&[path])?;
        let op = MetaOp::List {
            path: path.into(),
            after,
            limit,
        };
        match self.meta("list_after", op)? {
            MetaAnswer::Entries(e) => Ok(e),
            a => Err(ClientError::Failed(format!("list answered {a:?}"))),
        }
    }

    async fn open_with_inode(&self, path: &str, write: bool) -> Answer<(File, Inode)> {
        let session = match write {
            true => self.next_session.fetch_add(1, Ordering::Relaxed),
            false => 0,
        };
        let op = MetaOp::Open {
            path: path.into(),
            write,
            session,
        };
        let i = self.inode_op("open_with_inode", &[path], op)?;
        if write {
            lock(&self.st).sessions.insert((i.id, session));
        }
        Ok((File::of(i.clone(), session, |_| vec![CHAIN])?, i))
    }

    async fn create_file(&self, path: &str, perm: u32, exclusive: bool) -> Answer<Inode> {
        let op = MetaOp::Create {
            path: path.into(),
            perm,
            exclusive,
            session: None,
        };
        self.inode_op("create_file", &[path], op)
    }

    async fn create_open(&self, path: &str, perm: u32, exclusive: bool) -> Answer<(File, Inode)> {
        let session = self.next_session.fetch_add(1, Ordering::Relaxed);
        let op = MetaOp::Create {
            path: path.into(),
            perm,
            exclusive,
            session: Some(session),
        };
        let i = self.inode_op("create_open", &[path], op)?;
        lock(&self.st).sessions.insert((i.id, session));
        Ok((File::of(i.clone(), session, |_| vec![CHAIN])?, i))
    }

    async fn mkdir_mode(&self, path: &str, perm: u32) -> Answer<Inode> {
        let op = MetaOp::Mkdirs {
            path: path.into(),
            perm,
            recursive: false,
        };
        self.inode_op("mkdir_mode", &[path], op)
    }

    async fn symlink(&self, path: &str, target: &str) -> Answer<Inode> {
        let op = MetaOp::Symlink {
            path: path.into(),
            target: target.into(),
        };
        self.inode_op("symlink", &[path], op)
    }

    async fn mknod(&self, path: &str, kind: SpecialKind, perm: u32, rdev: u64) -> Answer<Inode> {
        let op = MetaOp::Mknod {
            path: path.into(),
            kind,
            perm,
            rdev,
        };
        self.inode_op("mknod", &[path], op)
    }

    async fn link(&self, existing: &str, path: &str) -> Answer<Inode> {
        let op = MetaOp::Hardlink {
            existing: existing.into(),
            path: path.into(),
        };
        self.inode_op("link", &[existing, path], op)
    }

    async fn rename(&self, from: &str, to: &str) -> Answer<()> {
        let op = MetaOp::Rename {
            from: from.into(),
            to: to.into(),
        };
        self.done_op("rename", &[from, to], op)
    }

    async fn remove(&self, path: &str) -> Answer<()> {
        let op = MetaOp::Remove {
            path: path.into(),
            recursive: false,
        };
        self.done_op("remove", &[path], op)
    }

    async fn set_attr(&self, path: &str, attr: SetAttr) -> Answer<Inode> {
        let op = MetaOp::SetAttr {
            path: path.into(),
            attr,
        };
        self.inode_op("set_attr", &[path], op)
    }

    async fn statfs(&self) -> Answer<FsStat> {
        match self.meta("statfs", MetaOp::StatFs)? {
            MetaAnswer::StatFs(s) => Ok(s),
            a => Err(ClientError::Failed(format!("statfs answered {a:?}"))),
        }
    }

    async fn write(&self, f: &File, offset: u64, data: Vec<u8>) -> Answer<()> {
        f.check_write(offset, data.len())?;
        let mut released = self.held.subscribe();
        let _ = released.wait_for(|held| !held).await;
        self.planted("write")?;
        let chunk = self.chunk();
        let mut st = lock(&self.st);
        st.data
            .entry(f.inode)
            .or_default()
            .write(chunk, offset, &data);
        Ok(())
    }

    async fn read(&self, f: &File, offset: u64, len: u64) -> Answer<Vec<u8>> {
        self.planted("read")?;
        let chunk = self.chunk();
        let mut st = lock(&self.st);
        st.reads.push((f.inode, offset, len));
        let chunks = st.data.get(&f.inode);
        Ok(chunks.map_or_else(|| vec![0; len as usize], |c| c.read(chunk, offset, len)))
    }

    async fn truncate(&self, f: &mut File, i: &Inode, len: u64) -> Answer<()> {
        f.check_end(Some(len))?;
        if !matches!(i.kind, InodeKind::File { .. }) {
            return Err(ClientError::Invalid("not a regular file".into()));
        }
        // The chunks first (cut, or the tail zero-extended), then meta asks them.
        let chunk = self.chunk();
        let mut st = lock(&self.st);
        st.data.entry(f.inode).or_default().truncate(chunk, len);
        drop(st);
        let op = MetaOp::Sync {
            inode: f.inode,
            length: None,
            truncated: true,
        };
        match self.meta("truncate", op)? {
            MetaAnswer::Inode(Inode {
                kind: InodeKind::File { truncate_ver, .. },
                ..
            }) => {
                f.truncate_ver = truncate_ver;
                f.length = len;
                Ok(())
            }
            a => Err(ClientError::Failed(format!(
                "truncate's sync answered {a:?}"
            ))),
        }
    }

    async fn sync_length(&self, f: &File, written: u64) -> Answer<()> {
        let op = MetaOp::Sync {
            inode: f.inode,
            length: Some(LengthHint {
                length: written,
                truncate_ver: f.truncate_ver,
            }),
            truncated: false,
        };
        done(self.meta("sync_length", op)?, "sync")
    }

    async fn close_file(&self, f: &File, length: u64) -> Answer<()> {
        let hint = (f.session != 0).then_some(LengthHint {
            length,
            truncate_ver: f.truncate_ver,
        });
        let op = MetaOp::Close {
            inode: f.inode,
            session: f.session,
            length: hint,
        };
        self.meta("close_file", op)?;
        lock(&self.st).sessions.remove(&(f.inode, f.session));
        Ok(())
    }

    async fn close_unwritten(&self, sessions: &[(InodeId, u64)]) -> Answer<()> {
        let op = MetaOp::CloseUnwritten {
            sessions: sessions.to_vec(),
        };
        self.meta("close_unwritten", op)?;
        let mut st = lock(&self.st);
        for s in sessions {
            st.sessions.remove(s);
        }
        Ok(())
    }

    fn acting_as<F>(user: User, f: F) -> impl Future<Output = F::Output> + Send
    where
        F: Future + Send,
    {
        USER.scope(user, f)
    }
}
