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
use t3fs_core::meta::length::LengthHint;
use t3fs_core::meta::placement::Layout;
use t3fs_core::meta::request::{MetaAnswer, MetaOp, MetaResult};
use t3fs_core::meta::InodeKind;

/// Mode of the initial directories of a run: world-writable and sticky, like /tmp, so every
/// user can create in them and only owners remove.
pub const INITIAL_DIR_PERM: u32 = 0o1777;

/// The paths every namespace run starts with: `/d0` … `/d{dirs-1}` (the reference model of
/// the checker starts from the same tree).
pub fn initial_dirs(dirs: u32) -> Vec<String> {
    (0..dirs).map(|k| format!("/d{k}")).collect()
}

/// The user client `k` acts for: every third is root, the others two ordinary users of one
/// group, so permission checks and the sticky bit meet both kinds.
pub fn client_user(k: u32) -> t3fs_core::meta::perm::User {
    match k % 3 {
        0 => t3fs_core::meta::perm::ROOT_USER,
        k => t3fs_core::meta::perm::User {
            uid: 999 + k,
            gid: 100,
        },
    }
}

/// A client's next meta request when none of its open files has a step to take: a close of
/// its oldest session (always once the workload `stopped`, sometimes before), else the
/// generator's next request (a write open names session `req`). `None`: nothing is left.
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
        Some(op) => Some(op),
        // Budget spent: a writer still closes what it opened.
        None if !open.is_empty() => Some(open.remove(0).close()),
        None => None,
    }
}

/// Bytes of one write of a plan.
pub const FILE_WRITE_BYTES: u32 = 64;

/// Where a truncate is.
#[derive(Clone, Debug)]
pub enum TruncStage {
    /// Asking the heads for the last chunks.
    Query,
    /// Emptying these chunk indexes, then cutting the tail.
    Empty(Vec<u32>),
    /// Cutting the tail chunk.
    Tail,
    /// Telling meta.
    Sync,
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
}

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
            return None;
        };
        let cs = u64::from(l.chunk_size);
        let update = |index: u32, kind| {
            let chunk = ChunkId {
                inode: self.inode,
                index,
            };
            ClientCall::UpdateChunk {
                chunk,
                chain: fl.chain_of(index),
                chunk_size: l.chunk_size,
                kind,
            }
        };
        let query = ClientCall::QueryLastChunk {
            inode: self.inode,
            chains: l.used_chains(&fl),
            end: u32::MAX,
            empty: false,
        };
        let stage = self.trunc.as_mut().map(|(len, s)| (*len, s));
        let step = match stage {
            None => match self.plan.pop_front()? {
                FileAction::Write(offset) => {
                    self.writing = offset + u64::from(FILE_WRITE_BYTES);
                    Step::Data(ClientCall::Write {
                        inode: self.inode,
                        layout: fl,
                        offset,
                        data: payload(req.0, FILE_WRITE_BYTES),
                    })
                }
                FileAction::Truncate(len) => {
                    self.trunc = Some((len, TruncStage::Query));
                    Step::Data(query)
                }
                FileAction::Read(offset) => {
                    self.reading = Some(offset);
                    Step::Data(ClientCall::Read {
                        inode: self.inode,
                        layout: fl,
                        offset,
                        len: FILE_READ_BYTES,
                    })
                }
            },
            Some((_, TruncStage::Query)) => Step::Data(query),
            Some((_, TruncStage::Empty(left))) => {
                let k = left.pop().expect("empty lists move on");
                Step::Data(update(k, UpdateKind::Truncate { len: 0 }))
            }
            Some((len, TruncStage::Tail)) => {
                let k = (len - 1) / cs;
                let tail = (len - k * cs) as u32;
                Step::Data(update(k as u32, UpdateKind::Truncate { len: tail }))
            }
            Some((_, TruncStage::Sync)) => Step::Sync(MetaOp::Sync {
                inode: self.inode,
                length: None,
                truncated: true,
            }),
        };
        Some(step)
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
        // The chunks past the new tail, emptied from the last one down.
        let first = len.div_ceil(cs);
        let next = match (std::mem::replace(stage, TruncStage::Sync), ret) {
            (TruncStage::Query, ClientRet::LastChunks(lasts)) => {
                let last = lasts.iter().filter_map(|(_, l)| *l).map(|l| l.index).max();
                let emptied: Vec<u32> = match last {
                    Some(last) if u64::from(last) >= first => (first as u32..=last).collect(),
                    _ => Vec::new(),
                };
                TruncStage::Empty(emptied)
            }
            // Chunks unknown: cut the tail only; the sync reports what storage holds.
            (TruncStage::Query, _) => TruncStage::Empty(Vec::new()),
            (TruncStage::Empty(left), _) => TruncStage::Empty(left),
            (TruncStage::Tail | TruncStage::Sync, _) => TruncStage::Sync,
        };
        *stage = match next {
            TruncStage::Empty(left) if left.is_empty() && len > 0 => TruncStage::Tail,
            TruncStage::Empty(left) if left.is_empty() => TruncStage::Sync,
            other => other,
        };
        None
    }

    /// The truncate's sync answered: later writes count from the truncate version it set.
    pub fn synced(&mut self, result: &MetaResult) {
        self.trunc = None;
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
