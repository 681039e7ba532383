//! In-memory reference [`ChunkStore`]: committed and pending content per chunk, completions
//! delivered in submission order on the next poll.
//!
//! It also offers a synchronous [`MemChunkStore::apply`] used by the model checker, which
//! executes an op at the moment its self-message is delivered. It injects no faults itself;
//! the simulator's disk model adds latency, errors and crash loss around it and damages its
//! bytes through the hooks in `damage.rs`, which reads then catch by the checksums kept with
//! the data (as a real store must).

use std::collections::{BTreeMap, VecDeque};

use crate::chunk::{
    Applied, ChunkDone, ChunkError, ChunkMeta, ChunkOp, ChunkRead, ChunkStore, PendingMeta,
    UpdateKind, UpdateTag,
};
use crate::ids::{ChainVersion, ChunkId, ChunkVersion, IoId};
use crate::payload::Payload;

/// One chunk's versions.
#[derive(Clone, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct MemChunk {
    /// Committed version (0: none).
    pub committed: ChunkVersion,
    /// Chain version recorded at the last commit.
    pub chain_version: ChainVersion,
    /// Committed bytes. Shared with the update that wrote them (never copied into the store),
    /// and immutable: damage replaces them, so the checksum a read verifies against is
    /// computed once per content ([`Payload::checksum`]), as a pure function of the bytes.
    pub data: Payload,
    /// Pending version: its number and content (`None` content: a pending remove).
    pub pending: Option<(ChunkVersion, Option<Payload>)>,
    /// CRC32C of `data`, kept with it (every completion reports it; recomputing it per
    /// operation was most of the simulator's time).
    pub data_crc: u32,
    /// CRC32C of the pending content (0 when none).
    pub pending_crc: u32,
    /// The client request of the pending version.
    pub pending_tag: Option<UpdateTag>,
    /// Exactly-once records of committed client updates (`ChunkMeta::applied`).
    pub applied: Vec<Applied>,
}

impl MemChunk {
    fn meta(&self, chunk: ChunkId) -> ChunkMeta {
        ChunkMeta {
            chunk,
            committed: self.committed,
            chain_version: self.chain_version,
            len: self.data.len() as u32,
            checksum: self.data_crc,
            pending: self.pending.as_ref().map(|(v, content)| PendingMeta {
                version: *v,
                len: content.as_ref().map_or(0, |c| c.len() as u32),
                checksum: self.pending_crc,
                removes: content.is_none(),
                tag: self.pending_tag,
            }),
            applied: self.applied.clone(),
        }
    }
}

/// The in-memory reference chunk store of one target.
#[derive(Clone, Debug, Default, Eq, Hash, PartialEq)]
pub struct MemChunkStore {
    pub(super) chunks: BTreeMap<ChunkId, MemChunk>,
    queue: VecDeque<(IoId, ChunkOp)>,
}

impl MemChunkStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The chunks held (committed or pending).
    pub fn chunks(&self) -> &BTreeMap<ChunkId, MemChunk> {
        &self.chunks
    }

    /// Metadata of every chunk, as `ChunkOp::List` reports it.
    pub fn metas(&self) -> Vec<ChunkMeta> {
        self.chunks.iter().map(|(id, c)| c.meta(*id)).collect()
    }

    /// Executes `op` now and returns its completion.
    pub fn apply(&mut self, op: &ChunkOp) -> Result<ChunkDone, ChunkError> {
        match op {
            ChunkOp::List => Ok(ChunkDone::Listed(self.metas())),
            ChunkOp::Install {
                chunk,
                version,
                chain_version,
                data,
            } => Ok(self.install(*chunk, *version, *chain_version, data.as_ref())),
            ChunkOp::Read {
                chunk,
                offset,
                len,
                uncommitted,
                unverified,
            } => self.read(*chunk, (*offset, *len), *uncommitted, *unverified),
            ChunkOp::Update {
                chunk,
                version,
                kind,
                tag,
            } => self.update(*chunk, *version, kind, *tag),
            ChunkOp::Commit {
                chunk,
                version,
                chain_version,
            } => self.commit(*chunk, *version, *chain_version),
        }
    }

    /// Installs a full chunk as committed at `version` (no `data`: removes it).
    fn install(
        &mut self,
        chunk: ChunkId,
        version: ChunkVersion,
        chain_version: ChainVersion,
        data: Option<&Payload>,
    ) -> ChunkDone {
        match data {
            Some(data) => {
                let c = self.chunks.entry(chunk).or_default();
                c.committed = version;
                c.chain_version = chain_version;
                c.data = data.clone();
                c.data_crc = data.checksum();
                c.pending = None;
                c.pending_crc = 0;
                c.pending_tag = None;
                ChunkDone::Committed(c.meta(chunk))
            }
            None => {
                self.chunks.remove(&chunk);
                ChunkDone::Committed(ChunkMeta {
                    chunk,
                    chain_version,
                    ..ChunkMeta::default()
                })
            }
        }
    }

    /// Reads `range` (offset, length) of the committed content, or of the pending one when
    /// `uncommitted`, checked against its checksum unless `unverified`.
    fn read(
        &self,
        chunk: ChunkId,
        (offset, len): (u32, u32),
        uncommitted: bool,
        unverified: bool,
    ) -> Result<ChunkDone, ChunkError> {
        let Some(c) = self.chunks.get(&chunk) else {
            return Ok(ChunkDone::Read(None));
        };
        let (version, bytes, crc) = match (&c.pending, uncommitted) {
            (Some((v, Some(content))), true) => (*v, content, c.pending_crc),
            (Some((_, None)), true) => return Ok(ChunkDone::Read(None)),
            _ if c.committed == ChunkVersion(0) => return Ok(ChunkDone::Read(None)),
            _ => (c.committed, &c.data, c.data_crc),
        };
        // The whole chunk against its stored checksum, not just the range: the checksum
        // covers the chunk, and a range of rotten bytes must not slip through.
        if !unverified && bytes.checksum() != crc {
            return Err(ChunkError::Corrupt);
        }
        let start = (offset as usize).min(bytes.len());
        let end = start.saturating_add(len as usize).min(bytes.len());
        // A whole-chunk read shares the content and its checksum; a range is copied
        // and gets its own.
        let (data, checksum) = if start == 0 && end == bytes.len() {
            (bytes.clone(), bytes.checksum())
        } else {
            let part = Payload::from(&bytes[start..end]);
            let sum = part.checksum();
            (part, sum)
        };
        Ok(ChunkDone::Read(Some(ChunkRead {
            data,
            version,
            checksum,
        })))
    }

    /// Writes pending version `version` of `chunk`: `kind` applied to the committed content.
    fn update(
        &mut self,
        chunk: ChunkId,
        version: ChunkVersion,
        kind: &UpdateKind,
        tag: Option<UpdateTag>,
    ) -> Result<ChunkDone, ChunkError> {
        let c = self.chunks.entry(chunk).or_default();
        if version <= c.committed {
            return Err(ChunkError::VersionConflict);
        }
        let base = (c.committed > ChunkVersion(0)).then_some(&c.data);
        // Building on rotten bytes would give them a fresh, matching checksum.
        let rotten = |b: &Payload| b.checksum() != c.data_crc;
        if base.is_some_and(|b| kind.builds_on_base(b.len() as u32) && rotten(b)) {
            return Err(ChunkError::Corrupt);
        }
        let content = match kind {
            UpdateKind::Remove => None,
            k => Some(k.apply(base.map(|b| &b[..])).expect("only Remove removes")),
        };
        // The payload's own checksum: computed once per buffer, so a write whose bytes the
        // replica already verified is not read again here.
        c.pending_crc = content.as_ref().map_or(0, Payload::checksum);
        c.pending = Some((version, content));
        c.pending_tag = tag;
        Ok(ChunkDone::Updated(c.meta(chunk)))
    }

    /// Commits pending version `version` of `chunk` (a committed remove deletes it).
    fn commit(
        &mut self,
        chunk: ChunkId,
        version: ChunkVersion,
        chain_version: ChainVersion,
    ) -> Result<ChunkDone, ChunkError> {
        let Some(c) = self.chunks.get_mut(&chunk) else {
            return Err(ChunkError::VersionConflict);
        };
        if version <= c.committed {
            return Ok(ChunkDone::Committed(c.meta(chunk))); // A replayed commit.
        }
        match c.pending.take() {
            Some((v, Some(data))) if v == version => {
                c.committed = v;
                c.chain_version = chain_version;
                c.data = data;
                c.data_crc = c.pending_crc;
                c.pending_crc = 0;
                if let Some(tag) = c.pending_tag.take() {
                    let a = Applied {
                        tag,
                        version: v,
                        chain_version,
                        len: c.data.len() as u32,
                        checksum: c.data_crc,
                    };
                    Applied::record(&mut c.applied, a);
                }
                Ok(ChunkDone::Committed(c.meta(chunk)))
            }
            Some((v, None)) if v == version => {
                self.chunks.remove(&chunk);
                let meta = ChunkMeta {
                    chunk,
                    chain_version,
                    ..ChunkMeta::default()
                };
                Ok(ChunkDone::Committed(meta))
            }
            other => {
                c.pending = other;
                Err(ChunkError::VersionConflict)
            }
        }
    }
}

impl ChunkStore for MemChunkStore {
    fn submit(&mut self, id: IoId, op: ChunkOp) {
        self.queue.push_back((id, op));
    }

    fn poll_completions(&mut self, done: &mut Vec<(IoId, Result<ChunkDone, ChunkError>)>) {
        while let Some((id, op)) = self.queue.pop_front() {
            let result = self.apply(&op);
            done.push((id, result));
        }
    }
}
