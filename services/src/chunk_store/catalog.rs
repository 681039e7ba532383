//! The in-memory catalog both stores share: every chunk's metadata and data extents, the extent
//! allocator of the data file, and the decisions of each operation (version checks, what to
//! read, what metadata record to write). It performs no I/O: the file store and the io_uring
//! store do the reads and writes it asks for, in their own ways.
//!
//! Invariant: an extent becomes reusable only once the metadata that stopped referencing it is
//! durable ([`Catalog::durable`]); before that a crash would bring back metadata pointing at an
//! extent already overwritten by another chunk. The same holds for giving an extent's blocks
//! back to the file system (`space.rs` punches only extents [`Catalog::durable`] released or
//! [`Catalog::free_extents`] lists).

use std::collections::BTreeMap;
use std::ops::Range;

use t3fs_core::chunk::{
    Applied, ChunkDone, ChunkError, ChunkMeta, ChunkRead, PendingMeta, UpdateKind, UpdateTag,
};
use t3fs_core::crc32c;
use t3fs_core::ids::{ChainVersion, ChunkId, ChunkVersion};
use t3fs_core::payload::Payload;

use super::meta::{self, Record};
use super::sums::{self, Sums};
use super::{Extent, Rec, BLOCK};
use crate::vec_pool::VecPool;

/// Where to find the bytes of one version of a chunk.
#[derive(Clone, Debug)]
pub struct Src {
    /// The extent (`None`: the content is empty).
    pub data: Option<Extent>,
    /// Content length.
    pub len: u32,
    /// CRC32C of each block of the content, kept with it.
    pub sums: Sums,
    /// The version the content belongs to.
    pub version: ChunkVersion,
}

/// New content, written: its length, checksums and extent.
#[derive(Clone, Debug)]
pub struct Written {
    /// Length.
    pub len: u32,
    /// CRC32C of the whole content.
    pub checksum: u32,
    /// CRC32C of each block.
    pub sums: Sums,
    /// Extent (`None` when empty).
    pub data: Option<Extent>,
}

impl Written {
    /// `content`, checksummed, about to be written into `data`: each block's CRC32C computed
    /// once per buffer (the replica that verified the write's checksum has usually done it
    /// already: a payload keeps its sums), the whole content's folded from them.
    pub fn new(content: &Payload, data: Option<Extent>) -> Self {
        let s = content.sums();
        Self {
            len: content.len() as u32,
            checksum: s.whole,
            sums: s.blocks.clone(),
            data,
        }
    }
}

/// Free space of the data file: free extents below `end`, and everything from `end` on.
#[derive(Debug, Default)]
struct Alloc {
    free: BTreeMap<u64, u64>,
    end: u64,
}

impl Alloc {
    fn rebuild<'a>(used: impl Iterator<Item = &'a Extent>) -> Self {
        let mut used: Vec<&Extent> = used.collect();
        used.sort_by_key(|e| e.offset);
        let mut a = Self::default();
        for e in used {
            if e.offset > a.end {
                a.free.insert(a.end, e.offset - a.end);
            }
            a.end = a.end.max(e.offset + e.len);
        }
        a
    }

    fn alloc(&mut self, len: u64) -> Extent {
        let fit = self
            .free
            .iter()
            .find(|(_, &l)| l >= len)
            .map(|(&o, &l)| (o, l));
        if let Some((offset, l)) = fit {
            self.free.remove(&offset);
            if l > len {
                self.free.insert(offset + len, l - len);
            }
            return Extent { offset, len };
        }
        let e = Extent {
            offset: self.end,
            len,
        };
        self.end += len;
        e
    }

    fn release(&mut self, e: Extent) {
        let (mut offset, mut len) = (e.offset, e.len);
        if let Some((&po, &pl)) = self.free.range(..offset).next_back() {
            if po + pl == offset {
                self.free.remove(&po);
                offset = po;
                len += pl;
            }
        }
        if let Some(nl) = self.free.remove(&(offset + len)) {
            len += nl;
        }
        if offset + len == self.end {
            self.end = offset;
        } else {
            self.free.insert(offset, len);
        }
    }
}

/// Every chunk's metadata and the allocator.
#[derive(Debug, Default)]
pub struct Catalog {
    chunks: BTreeMap<ChunkId, Rec>,
    alloc: Alloc,
    freed: Vec<Extent>,
}

impl Catalog {
    /// The catalog of a reopened store.
    pub fn new(chunks: BTreeMap<ChunkId, Rec>) -> Self {
        let used = chunks
            .values()
            .flat_map(|r| r.data.iter().chain(r.pending_data.iter()));
        let alloc = Alloc::rebuild(used);
        Self {
            chunks,
            alloc,
            freed: Vec::new(),
        }
    }

    /// Every chunk's record.
    pub fn chunks(&self) -> &BTreeMap<ChunkId, Rec> {
        &self.chunks
    }

    /// Metadata of every chunk (`ChunkOp::List`).
    pub fn list(&self) -> Vec<ChunkMeta> {
        self.chunks.values().map(|r| r.meta.clone()).collect()
    }

    /// What a read of `chunk` reads; `None`: a hole.
    pub fn read_src(&self, chunk: ChunkId, uncommitted: bool) -> Option<Src> {
        let r = self.chunks.get(&chunk)?;
        match (&r.meta.pending, uncommitted) {
            (Some(p), true) if p.removes => None,
            (Some(p), true) => Some(Src {
                data: r.pending_data,
                len: p.len,
                sums: r.pending_sums.clone(),
                version: p.version,
            }),
            _ if r.meta.committed == ChunkVersion(0) => None,
            _ => Some(Self::committed(r)),
        }
    }

    fn committed(r: &Rec) -> Src {
        Src {
            data: r.data,
            len: r.meta.len,
            sums: r.sums.clone(),
            version: r.meta.committed,
        }
    }

    /// Checks `content` (the whole content of `src`) against its block checksums.
    pub fn verify(src: &Src, content: &[u8]) -> Result<(), ChunkError> {
        if content.len() != src.len as usize || !sums::verify(&src.sums, 0, content) {
            return Err(ChunkError::Corrupt);
        }
        Ok(())
    }

    /// The bytes of `src`'s content a read of `len` bytes at `offset` loads: the blocks it
    /// covers (empty when it covers none).
    pub fn read_span(src: &Src, offset: u32, len: u32) -> Range<u64> {
        let start = u64::from(offset);
        sums::span(start, start + u64::from(len), u64::from(src.len))
    }

    /// Answers a read of `len` bytes at `offset` from `bytes`, the content of `src` over `span`
    /// ([`Catalog::read_span`]), checked against its block checksums unless `unverified`; the
    /// answer's payload returns `bytes` to `pool` when dropped, if given (and pooled).
    pub fn finish_read(
        src: &Src,
        span: Range<u64>,
        mut bytes: Vec<u8>,
        offset: u32,
        len: u32,
        unverified: bool,
        pool: Option<&VecPool>,
    ) -> Result<ChunkDone, ChunkError> {
        let verified = !unverified;
        if bytes.len() as u64 != span.end - span.start
            || (verified && !sums::verify(&src.sums, span.start, &bytes))
        {
            return Err(ChunkError::Corrupt);
        }
        let start = u64::from(offset).clamp(span.start, span.end);
        let end = (start + u64::from(len)).min(span.end);
        // Verified whole blocks: their CRC folds from the sums, no second pass over the bytes.
        let folded = (verified && (start, end) == (span.start, span.end))
            .then(|| sums::of_span(&src.sums, &span));
        bytes.truncate((end - span.start) as usize);
        bytes.drain(..(start - span.start) as usize);
        let checksum = folded.unwrap_or_else(|| crc32c::checksum(&bytes));
        Ok(ChunkDone::Read(Some(ChunkRead {
            data: match pool {
                Some(pool) => pool.payload(bytes),
                None => Payload::from(bytes),
            },
            version: src.version,
            checksum,
        })))
    }

    /// Checks an update of `chunk` to `version`; `Ok(Some(src))` when it builds on committed
    /// content that must be read (and verified) first.
    pub fn update_base(
        &self,
        chunk: ChunkId,
        version: ChunkVersion,
        kind: &UpdateKind,
    ) -> Result<Option<Src>, ChunkError> {
        let r = self.chunks.get(&chunk);
        let committed = r.map_or(ChunkVersion(0), |r| r.meta.committed);
        if version <= committed {
            return Err(ChunkError::VersionConflict);
        }
        Ok(
            r.filter(|r| r.meta.committed > ChunkVersion(0) && kind.builds_on_base(r.meta.len))
                .map(Self::committed),
        )
    }

    /// Room in the data file for `len` bytes (`None` when `len` is 0).
    pub fn alloc(&mut self, len: usize) -> Option<Extent> {
        (len > 0).then(|| self.alloc.alloc((len as u64).div_ceil(BLOCK) * BLOCK))
    }

    /// Returns an extent nothing durable ever referenced (a failed write).
    pub fn release_unused(&mut self, e: Option<Extent>) {
        if let Some(e) = e {
            self.alloc.release(e);
        }
    }

    /// The metadata records naming every freed extent are durable: the extents may be reused.
    /// Returns them (their blocks may be given back to the file system now).
    pub fn durable(&mut self) -> Vec<Extent> {
        let freed = std::mem::take(&mut self.freed);
        for &e in &freed {
            self.alloc.release(e);
        }
        freed
    }

    /// Every free extent of the data file below its allocated end, and that end (everything
    /// from it on is free too).
    pub fn free_extents(&self) -> (Vec<Extent>, u64) {
        let free = self.alloc.free.iter();
        let free = free.map(|(&offset, &len)| Extent { offset, len }).collect();
        (free, self.alloc.end)
    }

    /// An upper bound on the bytes of the metadata record an operation on `chunk` stages when
    /// it brings new content of `len` bytes (0 for none): what it claims in the log before it
    /// writes anything.
    pub fn record_bound(&self, chunk: ChunkId, len: usize) -> u64 {
        let blocks = |l: u64| l.div_ceil(BLOCK);
        let new = blocks(len as u64);
        let (old, applied) = self.chunks.get(&chunk).map_or((0, 0), |r| {
            let pending = r.meta.pending.as_ref().map_or(0, |p| p.len);
            (
                blocks(u64::from(r.meta.len.max(pending))),
                r.meta.applied.len(),
            )
        });
        // The new record's committed content is the old committed one, the pending one or the
        // new one, its pending content at most the new one, and a commit adds an applied record.
        meta::put_bound(old.max(new) + new, applied + 1)
    }

    /// Records pending `version` of `chunk` (`content` `None`: a pending remove), replacing an
    /// older pending version.
    pub fn set_pending(
        &mut self,
        chunk: ChunkId,
        version: ChunkVersion,
        content: Option<Written>,
        tag: Option<UpdateTag>,
    ) -> (ChunkMeta, Record) {
        let r = self
            .chunks
            .entry(chunk)
            .or_insert_with(|| Rec::empty(chunk));
        self.freed.extend(r.pending_data.take());
        let removes = content.is_none();
        let w = content.unwrap_or_else(|| Written::new(&Payload::default(), None));
        r.pending_data = w.data;
        r.pending_sums = w.sums;
        r.meta.pending = Some(PendingMeta {
            version,
            len: w.len,
            checksum: w.checksum,
            removes,
            tag,
        });
        (r.meta.clone(), Record::Put(r.clone()))
    }

    /// Publishes pending `version`; `None` record: a replayed commit, nothing to write.
    pub fn commit(
        &mut self,
        chunk: ChunkId,
        version: ChunkVersion,
        chain_version: ChainVersion,
    ) -> Result<(ChunkMeta, Option<Record>), ChunkError> {
        let r = self
            .chunks
            .get_mut(&chunk)
            .ok_or(ChunkError::VersionConflict)?;
        if version <= r.meta.committed {
            return Ok((r.meta.clone(), None));
        }
        let p = match &r.meta.pending {
            Some(p) if p.version == version => p.clone(),
            _ => return Err(ChunkError::VersionConflict),
        };
        if p.removes {
            return Ok(self.remove(chunk, chain_version));
        }
        self.freed.extend(r.data.take());
        r.data = r.pending_data.take();
        r.sums = std::mem::take(&mut r.pending_sums);
        let m = &mut r.meta;
        m.pending = None;
        (m.committed, m.chain_version, m.len, m.checksum) =
            (version, chain_version, p.len, p.checksum);
        if let Some(tag) = p.tag {
            let a = Applied {
                tag,
                version,
                chain_version,
                len: p.len,
                checksum: p.checksum,
            };
            Applied::record(&mut m.applied, a);
        }
        Ok((r.meta.clone(), Some(Record::Put(r.clone()))))
    }

    fn remove(
        &mut self,
        chunk: ChunkId,
        chain_version: ChainVersion,
    ) -> (ChunkMeta, Option<Record>) {
        if let Some(r) = self.chunks.remove(&chunk) {
            self.freed.extend(r.data.into_iter().chain(r.pending_data));
        }
        let meta = ChunkMeta {
            chunk,
            chain_version,
            ..ChunkMeta::default()
        };
        (meta, Some(Record::Delete(chunk)))
    }

    /// Sets the committed version and content outright (`None`: removes the chunk), dropping
    /// any pending version.
    pub fn install(
        &mut self,
        chunk: ChunkId,
        version: ChunkVersion,
        chain_version: ChainVersion,
        content: Option<Written>,
    ) -> (ChunkMeta, Record) {
        let Some(w) = content else {
            let (meta, rec) = self.remove(chunk, chain_version);
            return (meta, rec.expect("a removal record"));
        };
        let r = self
            .chunks
            .entry(chunk)
            .or_insert_with(|| Rec::empty(chunk));
        self.freed
            .extend(r.data.take().into_iter().chain(r.pending_data.take()));
        r.data = w.data;
        r.sums = w.sums;
        r.pending_sums = Sums::default();
        let m = &mut r.meta;
        m.pending = None;
        (m.committed, m.chain_version, m.len, m.checksum) =
            (version, chain_version, w.len, w.checksum);
        (r.meta.clone(), Record::Put(r.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocator_reuses_and_coalesces() {
        let mut a = Alloc::default();
        let x = a.alloc(4096);
        let y = a.alloc(8192);
        let z = a.alloc(4096);
        assert_eq!(
            (x.offset, y.offset, z.offset, a.end),
            (0, 4096, 12288, 16384)
        );
        a.release(x);
        a.release(y);
        assert_eq!(a.free.get(&0), Some(&12288), "neighbours coalesce");
        assert_eq!(a.alloc(4096).offset, 0, "first fit");
        a.release(z);
        assert_eq!(
            a.end, 4096,
            "a freed tail shrinks the end, with free space before it"
        );
        let b = Alloc::rebuild(
            [Extent {
                offset: 8192,
                len: 4096,
            }]
            .iter(),
        );
        assert_eq!((b.free.get(&0), b.end), (Some(&8192), 12288));
    }
}
