//! The native client's remaining namespace verbs (lstat, paged listing, non-exclusive create,
//! rename, symlink, hard link, setattr, statfs), each one meta request through the client
//! machine, which retries it with the same request id (exactly once on the meta service), and
//! truncate, 3FS's client-driven truncate run by the steps the simulator's namespace clients
//! use (`t3fs_scenario::ns_files`). The FUSE mount is their main user.
//!
//! Not here: file I/O and the verbs of `client.rs` (create, open, mkdir, stat, list, remove).

use t3fs_core::ids::RequestId;
use t3fs_core::limits::DIR_LIST_PAGE_MAX;
use t3fs_core::meta::request::{FsStat, MetaAnswer, MetaOp};
use t3fs_core::meta::SetAttr;
use t3fs_core::meta::{DirEntry, Inode, InodeKind, MetaError};
use t3fs_core::wire::SpecialKind;
use t3fs_scenario::namespace::FileAction;
use t3fs_scenario::ns_files::{Session, Step};

use crate::client::{Client, ClientError, File};

/// The inode meta answered `verb` with (any other answer is a failure).
pub(crate) fn inode(a: MetaAnswer, verb: &str) -> Result<Inode, ClientError> {
    match a {
        MetaAnswer::Inode(i) => Ok(i),
        a => Err(ClientError::Failed(format!("{verb} answered {a:?}"))),
    }
}

/// Meta did `verb` (any answer but done or an inode is a failure).
pub(crate) fn done(a: MetaAnswer, verb: &str) -> Result<(), ClientError> {
    match a {
        MetaAnswer::Done | MetaAnswer::Inode(_) => Ok(()),
        a => Err(ClientError::Failed(format!("{verb} answered {a:?}"))),
    }
}

impl Client {
    /// stat of up to [`t3fs_core::meta::BATCH_STAT_MAX`] paths in one meta call (final
    /// symlinks followed), each answered on its own.
    pub async fn batch_stat(
        &self,
        paths: Vec<String>,
    ) -> Result<Vec<Result<Inode, MetaError>>, ClientError> {
        for p in &paths {
            Self::check_path(p)?;
        }
        match self.meta(MetaOp::BatchStat { paths }).await? {
            MetaAnswer::Stats(v) => Ok(v),
            a => Err(ClientError::Failed(format!("batch stat answered {a:?}"))),
        }
    }

    /// stat without following a final symlink.
    pub async fn lstat(&self, path: &str) -> Result<Inode, ClientError> {
        self.stat_follow(path, false).await
    }

    /// stat (`follow`) or lstat.
    pub(crate) async fn stat_follow(&self, path: &str, follow: bool) -> Result<Inode, ClientError> {
        Self::check_path(path)?;
        let op = MetaOp::Stat {
            path: path.into(),
            follow,
        };
        inode(self.meta(op).await?, "stat")
    }

    /// At most `limit` names after `after` (exclusive), in name order. Meta answers at most
    /// `DIR_LIST_PAGE_MAX` names a request, so a larger `limit` takes several requests, each
    /// after the last name of the one before; a short page ends the listing.
    pub async fn list_after(
        &self,
        path: &str,
        mut after: Vec<u8>,
        limit: u32,
    ) -> Result<Vec<(Vec<u8>, DirEntry)>, ClientError> {
        Self::check_path(path)?;
        let mut out = Vec::new();
        loop {
            let want = (limit - out.len() as u32).min(DIR_LIST_PAGE_MAX);
            let op = MetaOp::List {
                path: path.into(),
                after,
                limit: want,
            };
            let page = match self.meta(op).await? {
                MetaAnswer::Entries(e) => e,
                a => return Err(ClientError::Failed(format!("list answered {a:?}"))),
            };
            let full = page.len() as u32 >= want;
            out.extend(page);
            match out.last() {
                Some((name, _)) if full && (out.len() as u32) < limit => after = name.clone(),
                _ => return Ok(out),
            }
        }
    }

    /// Creates a file (O_CREAT; with O_EXCL when `exclusive`) without opening it; an existing
    /// file is fine unless `exclusive`.
    pub async fn create_file(
        &self,
        path: &str,
        perm: u32,
        exclusive: bool,
    ) -> Result<Inode, ClientError> {
        Self::check_path(path)?;
        let op = MetaOp::Create {
            path: path.into(),
            perm,
            exclusive,
            session: None,
        };
        inode(self.meta(op).await?, "create")
    }

    /// Makes a directory with mode `perm` (its parent must exist).
    pub async fn mkdir_mode(&self, path: &str, perm: u32) -> Result<Inode, ClientError> {
        Self::check_path(path)?;
        let op = MetaOp::Mkdirs {
            path: path.into(),
            perm,
            recursive: false,
        };
        inode(self.meta(op).await?, "mkdir")
    }

    /// rename(2) with POSIX's replace rules.
    pub async fn rename(&self, from: &str, to: &str) -> Result<(), ClientError> {
        Self::check_path(from)?;
        Self::check_path(to)?;
        let op = MetaOp::Rename {
            from: from.into(),
            to: to.into(),
        };
        done(self.meta(op).await?, "rename")
    }

    /// symlink(2): `path` → `target` (any text).
    pub async fn symlink(&self, path: &str, target: &str) -> Result<Inode, ClientError> {
        Self::check_path(path)?;
        let op = MetaOp::Symlink {
            path: path.into(),
            target: target.into(),
        };
        inode(self.meta(op).await?, "symlink")
    }

    /// mknod(2) of a FIFO, a device (root only) or a UNIX socket's inode at `path`, with mode
    /// bits `perm` (the umask applied) and, for a device, `rdev`.
    pub async fn mknod(
        &self,
        path: &str,
        kind: SpecialKind,
        perm: u32,
        rdev: u64,
    ) -> Result<Inode, ClientError> {
        Self::check_path(path)?;
        let op = MetaOp::Mknod {
            path: path.into(),
            kind,
            perm,
            rdev,
        };
        inode(self.meta(op).await?, "mknod")
    }

    /// link(2): `path` becomes another name of what `existing` names (not a directory).
    pub async fn link(&self, existing: &str, path: &str) -> Result<Inode, ClientError> {
        Self::check_path(existing)?;
        Self::check_path(path)?;
        let op = MetaOp::Hardlink {
            existing: existing.into(),
            path: path.into(),
        };
        inode(self.meta(op).await?, "link")
    }

    /// chmod, chown and utimes of `path` (symlinks followed).
    pub async fn set_attr(&self, path: &str, attr: SetAttr) -> Result<Inode, ClientError> {
        Self::check_path(path)?;
        let op = MetaOp::SetAttr {
            path: path.into(),
            attr,
        };
        inode(self.meta(op).await?, "setattr")
    }

    /// The cluster's raw capacity and use.
    pub async fn statfs(&self) -> Result<FsStat, ClientError> {
        match self.meta(MetaOp::StatFs).await? {
            MetaAnswer::StatFs(s) => Ok(s),
            a => Err(ClientError::Failed(format!("statfs answered {a:?}"))),
        }
    }

    /// Cuts (or zero-extends) the file open for write as `f`, whose open answered `inode`, to
    /// `len` bytes: ask the heads for the last chunk, empty the chunks past the new tail, cut
    /// the tail chunk, then `sync(truncated)`. `f`'s truncate version moves to the sync's, so
    /// its close hint counts writes from there. A length past the layout's largest file is
    /// [`ClientError::TooLarge`], before anything is asked of storage.
    pub async fn truncate(&self, f: &mut File, inode: &Inode, len: u64) -> Result<(), ClientError> {
        f.check_end(Some(len))?;
        let mut s = Session::opened(inode, f.session, vec![FileAction::Truncate(len)])
            .ok_or_else(|| ClientError::Invalid("not a regular file".into()))?;
        let table = match &inode.kind {
            InodeKind::File {
                layout: Some(l), ..
            } => self.chain_table(l),
            _ => Vec::new(),
        };
        let mut synced = None;
        while s.busy(false) {
            match s.step(&table, RequestId(0)) {
                None => return Err(ClientError::Failed("layout does not resolve".into())),
                Some(Step::Data(call)) => {
                    let ret = self.call(call).await?;
                    s.data_returned(&ret);
                }
                Some(Step::Sync(op)) => {
                    let r = self.meta(op).await;
                    let as_result = r.clone().map_err(|e| match e {
                        ClientError::Meta(m) => m,
                        _ => t3fs_core::meta::MetaError::Invalid("sync failed"),
                    });
                    s.synced(&as_result);
                    synced = Some(r?);
                }
            }
        }
        match synced {
            Some(MetaAnswer::Inode(Inode {
                kind: InodeKind::File { truncate_ver, .. },
                ..
            })) => {
                f.truncate_ver = truncate_ver;
                f.length = len;
                Ok(())
            }
            other => Err(ClientError::Failed(format!(
                "truncate's sync answered {other:?}"
            ))),
        }
    }

    /// Tells meta the length of the file open for write as `f`: the end of its acknowledged
    /// writes since its truncate version (fsync's length update, 3FS `sync`).
    pub async fn sync_length(&self, f: &File, written: u64) -> Result<(), ClientError> {
        let op = MetaOp::Sync {
            inode: f.inode,
            length: Some(t3fs_core::meta::length::LengthHint {
                length: written,
                truncate_ver: f.truncate_ver,
            }),
            truncated: false,
        };
        done(self.meta(op).await?, "sync")
    }
}
