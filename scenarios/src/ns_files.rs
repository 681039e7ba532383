//! The data side of a namespace writer's open files: the writes and client-driven truncates of
//! its plan (3FS §4.3 truncate, §4.4 length hints), one storage call at a time.
//!
//! A truncate to `len` (3FS `MetaClient::truncateImpl`): ask every used chain's head for the
//! file's last chunk holding data, empty each chunk past the new tail, cut the tail chunk to
//! the exact length (zero-extending a hole), then `sync(truncated)`, for which meta asks
//! storage for the length and bumps the truncate version. A step that fails does not stop the
//! truncate: the sync makes meta's length match whatever storage ended up holding.
//!
//! Deviation from 3FS: chunks past the tail are cut to length 0, not removed. t3fs's chunk
//! stores keep no tombstones, so a removed chunk's version starts again at 1 and a delayed
//! duplicate forward of the remove could apply to the chunk's next incarnation on one replica
//! (swarm seeds 11 and 194: replicas diverged, a forward retried forever). An empty chunk keeps
//! its version history; lengths and queries ignore empty chunks; GC removes them with the file.
//!
//! The chunks past the new tail are walked as a range, never listed: every index from the new
//! tail to the last chunk holding data, from the last one down, while that range is at most
//! [`TRUNCATE_EMPTY_EVERY_MAX`] chunks; a longer one (a sparse file with a far chunk: chunk
//! indexes reach 2^32 - 2) is walked by asking the heads again for the last chunks holding data
//! below the ones just emptied, so only chunks that exist are touched. A truncate to more than
//! the layout's largest file ([`t3fs_core::layout::file_size_max`]) is not run (the native
//! client answers it "file too large" before it gets here).
//!
//! The length hint a writer closes with is the end of its acknowledged writes since the
//! truncate version it last saw; a write or sync whose outcome is unknown makes it close
//! without a hint, so meta asks storage.
//!
//! Shared by the simulator's namespace clients (t3fs-sim `world/ns_client.rs`) and the real
//! runner's (t3fs-real `scenario_run/namespace.rs`), so both drive files the same way; with the
//! starting tree (`initial_dirs`) and the users clients act for. Not here: sending requests.

use std::collections::VecDeque;

use crate::namespace::{FileAction, FILE_READ_BYTES};
use crate::workload::payload;
use t3fs_core::chunk::UpdateKind;
use t3fs_core::client::{ClientCall, ClientRet};
use t3fs_core::ids::{ChainId, ChunkId, InodeId, RequestId};
use t3fs_core::layout::FileLayout;
use t3fs_core::meta::length::LengthHint;
use t3fs_core::meta::placement::Layout;
use t3fs_core::meta::request::{MetaAnswer, MetaOp, MetaResult};
use t3fs_core::meta::InodeKind;
use t3fs_core::msg::{LastChunk, Status};

/// Mode of the initial directories of a run: world-writable and sticky, like /tmp, so every
/// user can create in them and only owners remove.
pub const INITIAL_DIR_PERM: u32 = 0o1777;

/// The paths every namespace run starts with: `/d0` … `/d{dirs-1}` (the reference model of
/// the checker starts from the same tree).
pub fn initial_dirs(dirs: u32) -> Vec<String> {
    (0..dirs).map(|k| format!("/d{k}")).collect()
}

/// The user client `k` acts for: every third is root, the others two ordinary users of one
/// group, the second also in supplementary group 200, so permission checks, chown's group
/// rule and the sticky bit meet every kind of caller.
pub fn client_user(k: u64) -> t3fs_core::meta::perm::User {
    use t3fs_core::meta::perm::User;
    match (k % 3) as u32 {
        0 => t3fs_core::meta::perm::ROOT_USER,
        1 => User::new(1000, 100),
        k => User {
            groups: t3fs_core::wire::Groups::of(&[200]),
            ..User::new(999 + k, 100)
        },
    }
}

/// A client's next meta request when none of its open files has a step to take: a close of
/// its oldest session (always once the workload `stopped`, sometimes before), else the
/// generator's next request (a write open, or a create that opens, names session `req`).
/// `None`: nothing is left.
pub fn next_request(
    gen: &mut crate::namespace::NsGenerator,
    open: &mut Vec<Session>,
    stopped: bool,
    req: u64,
) -> Option<MetaOp> {
    if stopped || gen.wants_close(open.len()) {
        return Some(open.remove(0).close());
    }
    match gen.next_op() {
        Some(MetaOp::Open { path, write, .. }) => Some(MetaOp::Open {
            path,
            write,
            session: req,
        }),
        Some(MetaOp::Create {
            path,
            perm,
            exclusive,
            session: Some(_),
        }) => Some(MetaOp::Create {
            path,
            perm,
            exclusive,
            session: Some(req),
        }),
        Some(op) => Some(op),
        // Budget spent: a writer still closes what it opened.
        None if !open.is_empty() => Some(open.remove(0).close()),
        None => None,
    }
}

/// Whether `op`'s answer starts a write session: an open for write, or a create that opens.
pub fn opens_session(op: &MetaOp) -> bool {
    matches!(
        op,
        MetaOp::Open { write: true, .. }
            | MetaOp::Create {
                session: Some(_),
                ..
            }
    )
}

/// Bytes of one write of a plan.
pub const FILE_WRITE_BYTES: u32 = 64;

/// Longest range of chunks past a truncate's new tail that is emptied index by index (holes
/// included); a longer one is walked chunk by chunk as the heads name them.
pub const TRUNCATE_EMPTY_EVERY_MAX: u64 = 1024;

/// Where a truncate is. The chunks past the new tail are those from `len.div_ceil(chunk_size)`
/// on (`first` below).
#[derive(Clone, Debug)]
pub enum TruncStage {
    /// Asking the heads for the last chunks.
    Query,
    /// Emptying every chunk index in `first..end`, from the last one down, then cutting the
    /// tail (at most [`TRUNCATE_EMPTY_EVERY_MAX`] of them).
    Empty {
        /// One past the next index to empty.
        end: u64,
    },
    /// Emptying the chunks the heads named (ascending, each `>= first`, at most one per chain),
    /// from the last one down, then asking the heads again below `below`.
    EmptyFound {
        /// The chunks left to empty.
        found: Vec<u32>,
        /// The exclusive bound of the next query: the last of the chunks found.
        below: u32,
    },
    /// Asking the heads for the last chunks holding data below `below`.
    Find {
        /// The exclusive bound of the query.
        below: u32,
    },
    /// Cutting the tail chunk.
    Tail,
    /// Telling meta.
    Sync,
}

impl TruncStage {
    /// What to do with the chunks the heads named (`lasts`), for a truncate whose first chunk
    /// past the tail is `first`: empty every index up to the last, empty just those named, or,
    /// with none at or past `first`, cut the tail (`len > 0`) or sync.
    fn after_query(first: u64, lasts: &[(ChainId, Option<LastChunk>)], len: u64) -> Self {
        let mut found: Vec<u32> = lasts
            .iter()
            .filter_map(|(_, l)| l.map(|l| l.index))
            .filter(|&k| u64::from(k) >= first)
            .collect();
        found.sort_unstable();
        found.dedup();
        match found.last() {
            None => Self::after_emptying(len),
            Some(&last) if u64::from(last) - first < TRUNCATE_EMPTY_EVERY_MAX => Self::Empty {
                end: u64::from(last) + 1,
            },
            Some(&last) => Self::EmptyFound { found, below: last },
        }
    }

    /// The stage once no chunk past the tail is left: cut the tail, or for a truncate to 0,
    /// sync.
    fn after_emptying(len: u64) -> Self {
        if len > 0 {
            Self::Tail
        } else {
            Self::Sync
        }
    }

    /// The next step of a truncate to `len` in this stage; a chunk cut is noted in `cutting`.
    fn step(&mut self, len: u64, calls: &FileCalls, cutting: &mut Option<(u32, u32)>) -> Step {
        match self {
            Self::Query => Step::Data(calls.query(u32::MAX)),
            Self::Find { below } => Step::Data(calls.query(*below)),
            Self::Empty { end } => {
                // `end - 1` is at most the last chunk a head named, a u32.
                *end -= 1;
                let k = u32::try_from(*end).expect("chunk indexes named by heads are u32");
                *cutting = Some((k, 0));
                Step::Data(calls.update(k, UpdateKind::Truncate { len: 0 }))
            }
            Self::EmptyFound { found, .. } => {
                let k = found.pop().expect("emptied lists move on");
                *cutting = Some((k, 0));
                Step::Data(calls.update(k, UpdateKind::Truncate { len: 0 }))
            }
            Self::Tail => match t3fs_core::layout::tail_chunk(calls.layout.chunk_size, len) {
                Some((k, tail)) => {
                    *cutting = Some((k, tail));
                    Step::Data(calls.update(k, UpdateKind::Truncate { len: tail }))
                }
                // Not reached: a truncate past the maximum never starts. Meta learns what
                // storage holds.
                None => {
                    *self = Self::Sync;
                    calls.sync()
                }
            },
            Self::Sync => calls.sync(),
        }
    }
}

/// The calls of one session's file, by its resolved layout.
struct FileCalls {
    inode: InodeId,
    layout: Layout,
    file: FileLayout,
}

impl FileCalls {
    /// An update of chunk `index` on its chain.
    fn update(&self, index: u32, kind: UpdateKind) -> ClientCall {
        let chunk = ChunkId {
            inode: self.inode,
            index,
        };
        ClientCall::UpdateChunk {
            chunk,
            chain: self.file.chain_of(index),
            chunk_size: self.layout.chunk_size,
            kind,
        }
    }

    /// A query of the used chains' heads for the last chunks holding data below `end`.
    fn query(&self, end: u32) -> ClientCall {
        ClientCall::QueryLastChunk {
            inode: self.inode,
            chains: self.layout.used_chains(&self.file),
            end,
            empty: false,
        }
    }

    /// The truncate's sync: meta asks storage for the length.
    fn sync(&self) -> Step {
        Step::Sync(MetaOp::Sync {
            inode: self.inode,
            length: None,
            truncated: true,
        })
    }
}

/// A write session the client holds.
#[derive(Clone, Debug)]
pub struct Session {
    /// The file.
    pub inode: InodeId,
    /// The session id (its open's request id).
    pub session: u64,
    /// The file's layout, from the open's answer.
    pub layout: Option<Layout>,
    /// The truncate version the writer last saw (open's answer, then its own syncs').
    pub truncate_ver: u64,
    /// What is left of the plan.
    pub plan: VecDeque<FileAction>,
    /// A truncate in progress: the length and the stage.
    pub trunc: Option<(u64, TruncStage)>,
    /// The end of the acknowledged writes since `truncate_ver`.
    pub written: u64,
    /// The end of the write in flight.
    pub writing: u64,
    /// Some write or sync had an unknown outcome.
    pub uncertain: bool,
    /// The offset of the read in flight.
    pub reading: Option<u64>,
    /// The chunk cut in flight (index, length), to repeat it if its outcome is unknown.
    pub cutting: Option<(u32, u32)>,
    /// A cut whose outcome was unknown, sent again before the truncate goes on: (index, length,
    /// tries so far).
    pub recut: Option<(u32, u32, u32)>,
}

/// Repeats of a chunk cut whose outcome stays unknown before the truncate goes on without it
/// (a definite refusal, `NoSpace` or `InvalidRequest`, is not repeated).
/// An unknown cut may still be running at the head (a chain a replica short, a successor
/// without routing) and commit after the truncate's sync asked storage for the length: meta
/// would keep a length past the data. Sent again, the cut queues behind the running one on the
/// chunk's lock at the same head, so its answer says the first one ended too; at a new head,
/// the old head is out of SERVING and fails the first (found by swarm seed 7001054).
pub const RECUT_TRIES_MAX: u32 = 8;

/// The next thing a session asks of storage or meta.
pub enum Step {
    /// A storage call.
    Data(ClientCall),
    /// The truncate's sync.
    Sync(MetaOp),
}

impl Session {
    /// A session of the file `inode` opened as `session` by a write open's answer.
    pub fn opened(
        inode: &t3fs_core::meta::Inode,
        session: u64,
        plan: Vec<FileAction>,
    ) -> Option<Self> {
        let InodeKind::File {
            layout,
            truncate_ver,
            ..
        } = &inode.kind
        else {
            return None;
        };
        Some(Self {
            inode: inode.id,
            session,
            layout: *layout,
            truncate_ver: *truncate_ver,
            plan: plan.into(),
            trunc: None,
            written: 0,
            writing: 0,
            uncertain: false,
            reading: None,
            cutting: None,
            recut: None,
        })
    }

    /// Whether the session has steps left (only a started truncate once `stopped`).
    pub fn busy(&self, stopped: bool) -> bool {
        self.trunc.is_some() || (!stopped && !self.plan.is_empty())
    }

    /// The close of this session, with its hint.
    pub fn close(&self) -> MetaOp {
        MetaOp::Close {
            inode: self.inode,
            session: self.session,
            length: (!self.uncertain).then_some(LengthHint {
                length: self.written,
                truncate_ver: self.truncate_ver,
            }),
        }
    }

    /// The session's next step (`req` names a write's payload); `None` when its layout cannot
    /// be resolved (the plan is dropped).
    pub fn step(&mut self, table: &[ChainId], req: RequestId) -> Option<Step> {
        let layout = self
            .layout
            .and_then(|l| l.file_layout(table).map(|f| (l, f)));
        let Some((l, fl)) = layout else {
            self.plan.clear();
            self.trunc = None;
            self.recut = None;
            return None;
        };
        let calls = FileCalls {
            inode: self.inode,
            layout: l,
            file: fl,
        };
        let size_max = t3fs_core::layout::file_size_max(l.chunk_size);
        if let (Some((k, len, _)), Some(_)) = (self.recut, &self.trunc) {
            self.cutting = Some((k, len));
            return Some(Step::Data(calls.update(k, UpdateKind::Truncate { len })));
        }
        let step = match self.trunc.as_mut() {
            None => self.plan_step(calls, size_max, req)?,
            Some((len, stage)) => stage.step(*len, &calls, &mut self.cutting),
        };
        Some(step)
    }

    /// The step of the plan's next action (a truncate past `size_max` is skipped); `None` when
    /// the plan is done.
    fn plan_step(&mut self, calls: FileCalls, size_max: u64, req: RequestId) -> Option<Step> {
        loop {
            break Some(match self.plan.pop_front()? {
                FileAction::Write(offset) => {
                    // Past the layout's maximum the client refuses the write (the session
                    // then closes without a hint).
                    self.writing = offset.saturating_add(u64::from(FILE_WRITE_BYTES));
                    Step::Data(ClientCall::Write {
                        inode: self.inode,
                        layout: calls.file,
                        offset,
                        data: payload(req.0, FILE_WRITE_BYTES),
                    })
                }
                // Too large for the layout (EFBIG): nothing to cut or extend.
                FileAction::Truncate(len) if len > size_max => continue,
                FileAction::Truncate(len) => {
                    self.trunc = Some((len, TruncStage::Query));
                    Step::Data(calls.query(u32::MAX))
                }
                FileAction::Read(offset) => {
                    self.reading = Some(offset);
                    Step::Data(ClientCall::Read {
                        inode: self.inode,
                        layout: calls.file,
                        offset,
                        len: FILE_READ_BYTES,
                    })
                }
            });
        }
    }

    /// A storage call of this session returned; a read's offset and bytes come back for the
    /// file-read check.
    pub fn data_returned(&mut self, ret: &ClientRet) -> Option<(u64, Vec<u8>)> {
        if let Some(offset) = self.reading.take() {
            return match ret {
                ClientRet::Read { data, .. } => Some((offset, data.to_vec())),
                _ => None,
            };
        }
        let cs = u64::from(self.layout.map_or(1, |l| l.chunk_size.max(1)));
        let Some((len, stage)) = &mut self.trunc else {
            // A write: its end joins the hint only once acknowledged.
            match ret {
                ClientRet::Updated { .. } => self.written = self.written.max(self.writing),
                _ => self.uncertain = true,
            }
            return None;
        };
        let len = *len;
        if let Some((k, cut)) = self.cutting.take() {
            let again = self.recut.take().map_or(0, |(_, _, tries)| tries);
            let unknown = matches!(ret, ClientRet::Failed { status, .. }
                if !matches!(status, Status::NoSpace | Status::InvalidRequest));
            if unknown && again < RECUT_TRIES_MAX {
                self.recut = Some((k, cut, again + 1));
            }
            if again > 0 {
                return None; // A repeated cut: the stage moved on when the first one returned.
            }
        }
        // The chunks past the new tail (from `first` on), emptied from the last one down.
        let first = len.div_ceil(cs);
        *stage = match (std::mem::replace(stage, TruncStage::Sync), ret) {
            (TruncStage::Query | TruncStage::Find { .. }, ClientRet::LastChunks(lasts)) => {
                TruncStage::after_query(first, lasts, len)
            }
            // Chunks unknown: cut the tail only; the sync reports what storage holds.
            (TruncStage::Query | TruncStage::Find { .. }, _) => TruncStage::after_emptying(len),
            (TruncStage::Empty { end }, _) if end > first => TruncStage::Empty { end },
            (TruncStage::Empty { .. }, _) => TruncStage::after_emptying(len),
            (TruncStage::EmptyFound { found, below }, _) if found.is_empty() => {
                TruncStage::Find { below }
            }
            (s @ TruncStage::EmptyFound { .. }, _) => s,
            (TruncStage::Tail | TruncStage::Sync, _) => TruncStage::Sync,
        };
        None
    }

    /// The truncate's sync answered: later writes count from the truncate version it set.
    pub fn synced(&mut self, result: &MetaResult) {
        self.trunc = None;
        self.recut = None;
        match result {
            Ok(MetaAnswer::Inode(i)) => match &i.kind {
                InodeKind::File { truncate_ver, .. } => {
                    self.truncate_ver = *truncate_ver;
                    self.written = 0;
                }
                _ => self.uncertain = true,
            },
            _ => self.uncertain = true,
        }
    }
}

#[cfg(test)]
mod tests;
