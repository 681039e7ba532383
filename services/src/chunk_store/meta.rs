//! The metadata log (`meta`): its record format, its replay at boot and its compaction.
//!
//! Format: the 8-byte header [`META_HEADER`], then frames `[magic u32][len u32][crc32c u32]
//! [payload: len bytes]` (magic `T3CM`, framing shared with WalKv: `durable/frame.rs`), all
//! integers little-endian. A payload is one [`Record`]: the whole new
//! metadata of one chunk (committed and pending versions, lengths, checksums, data extents,
//! exactly-once records) or its removal. Records carry absolute state, not deltas, so replaying
//! the log is just "last record per chunk wins".
//!
//! Invariants:
//! - the file's name exists only with a whole header: a new log is written as `meta.tmp`,
//!   fdatasync'd, renamed to `meta` and the directory fsync'd (compaction does the same);
//! - records are appended and fdatasync'd before any operation they carry is reported, so a
//!   crash can only leave a torn tail of unreported records, which boot zeroes (and syncs);
//! - a damaged frame with a whole frame after it is not a torn tail: boot refuses to open,
//!   naming the offset, rather than silently dropping acknowledged operations;
//! - records are only ever written into room already written as zeros (the file grows ahead of
//!   its records, [`AHEAD`] at a time), and every record is claimed ([`MetaLog::claim`]) before
//!   the operation carrying it writes anything: so a full file system refuses the operation up
//!   front (`NoSpace`) instead of failing the append of records whose operations already
//!   changed the catalog, which would poison the store. An operation bringing new content must
//!   leave [`RESERVE`] bytes of room after its claim; commits and removes may use that reserve,
//!   so that space can still be freed on a full file system. (On a file system that allocates
//!   on overwrite, btrfs or zfs, the zeros guarantee nothing and an append can still fail.)
//! - compaction writes the new log, with its room ahead, beside the old one: when that does not
//!   fit it is skipped (the old log stays whole and valid) and tried again after the log has
//!   grown by half.
//!
//! Boot keeps the zeros after the last record as room (junk there, a torn record, is zeroed and
//! synced before anything is appended after it).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use t3fs_core::chunk::{Applied, ChunkMeta, PendingMeta, UpdateTag};
use t3fs_core::ids::{ChainVersion, ChannelId, ChunkId, ChunkVersion, ClientId, SeqNum};

use super::sums::Sums;
use super::{damaged, Extent, Rec, BLOCK};
use crate::durable::frame::{Framing, HEAD};
use crate::durable::fs::{no_space, DurableFile, DurableFs};

/// First bytes of the metadata log (format 2: records carry per-block checksums).
pub const META_HEADER: &[u8; 8] = b"t3fschk2";
/// The header of format 1 (whole-chunk checksums only), refused with a clear error.
const META_HEADER_1: &[u8; 8] = b"t3fschk1";
const FRAMES: Framing = Framing::new(b"T3CM");
const NONE: u64 = u64::MAX;
/// The log's name in the store directory.
pub const META: &str = "meta";
const META_TMP: &str = "meta.tmp";
/// The step by which the log's file grows ahead of its records.
const AHEAD: u64 = 1 << 20;
/// Room in the log (zeros written ahead) that an operation bringing new content must leave
/// after its record: what commits and removes may still use once the file system is full.
/// About 450 commits of 1 MiB chunks with pending versions (a record of ~2.3 KiB), 7 of 64 MiB
/// chunks; past it a commit answers `NoSpace` (nothing written, retried), never `Failed`.
pub const RESERVE: u64 = 1 << 20;
/// Bytes of a whole frame whose record has no sums and no applied records, with a pending
/// version and tag: frame head, kind, chunk id, committed fields and extent, sums count,
/// pending flag, fields, extent and sums count, tag flag and tag, applied count.
const PUT_FIXED: u64 = (HEAD + 1 + 12 + 16 + 16 + 4 + 1 + 12 + 16 + 4 + 1 + 20 + 4) as u64;
/// Bytes of one applied record in a frame.
const APPLIED_LEN: u64 = 20 + 16;

/// One metadata change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// The chunk's whole metadata is now this.
    Put(Rec),
    /// The chunk is gone.
    Delete(ChunkId),
}

struct W(Vec<u8>);
impl W {
    fn u8(&mut self, x: u8) {
        self.0.push(x);
    }
    fn u32(&mut self, x: u32) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
    fn u64(&mut self, x: u64) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
    fn ext(&mut self, e: Option<Extent>) {
        self.u64(e.map_or(NONE, |e| e.offset));
        self.u64(e.map_or(0, |e| e.len));
    }
    fn sums(&mut self, sums: &[u32]) {
        self.u32(sums.len() as u32);
        for &s in sums {
            self.u32(s);
        }
    }
    fn tag(&mut self, t: &UpdateTag) {
        self.u64(t.client.0);
        self.u32(t.channel.0);
        self.u64(t.seqnum.0);
    }
}

struct R<'a>(&'a [u8]);
impl R<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (a, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*a)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|a| a[0])
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
    fn ext(&mut self) -> Option<Option<Extent>> {
        let (offset, len) = (self.u64()?, self.u64()?);
        Some((offset != NONE).then_some(Extent { offset, len }))
    }
    /// Block sums of a `len`-byte content: exactly one per block, or the record is damaged.
    fn sums(&mut self, len: u32) -> Option<Sums> {
        let n = self.u32()?;
        if u64::from(n) != u64::from(len).div_ceil(BLOCK) {
            return None;
        }
        (0..n).map(|_| self.u32()).collect()
    }
    fn tag(&mut self) -> Option<UpdateTag> {
        Some(UpdateTag {
            client: ClientId(self.u64()?),
            channel: ChannelId(self.u32()?),
            seqnum: SeqNum(self.u64()?),
        })
    }
}

/// The most bytes a frame carrying a `Put` with `sums` block sums in all (committed and
/// pending) and `applied` applied records takes (a `Delete` takes fewer).
pub fn put_bound(sums: u64, applied: usize) -> u64 {
    PUT_FIXED + 4 * sums + APPLIED_LEN * applied as u64
}

fn rec_sums(r: &Record) -> usize {
    match r {
        Record::Put(rec) => rec.sums.len() + rec.pending_sums.len(),
        Record::Delete(_) => 0,
    }
}

/// One whole frame carrying `r`, appended to `out`.
pub fn encode(r: &Record, out: &mut Vec<u8>) {
    let mut w = W(Vec::with_capacity(128 + 4 * rec_sums(r)));
    let chunk = match r {
        Record::Put(rec) => rec.meta.chunk,
        Record::Delete(c) => *c,
    };
    w.u8(matches!(r, Record::Put(_)) as u8);
    w.u64(chunk.inode.0);
    w.u32(chunk.index);
    if let Record::Put(rec) = r {
        let m = &rec.meta;
        w.u32(m.committed.0);
        w.u32(m.chain_version.0);
        w.u32(m.len);
        w.u32(m.checksum);
        w.ext(rec.data);
        w.sums(&rec.sums);
        match &m.pending {
            None => w.u8(0),
            Some(p) => {
                w.u8(1 + p.removes as u8);
                w.u32(p.version.0);
                w.u32(p.len);
                w.u32(p.checksum);
                w.ext(rec.pending_data);
                w.sums(&rec.pending_sums);
                match &p.tag {
                    None => w.u8(0),
                    Some(t) => {
                        w.u8(1);
                        w.tag(t);
                    }
                }
            }
        }
        w.u32(m.applied.len() as u32);
        for a in &m.applied {
            w.tag(&a.tag);
            w.u32(a.version.0);
            w.u32(a.chain_version.0);
            w.u32(a.len);
            w.u32(a.checksum);
        }
    }
    FRAMES.put(&w.0, out);
}

fn decode_payload(p: &[u8]) -> Option<Record> {
    let mut r = R(p);
    let put = r.u8()?;
    let chunk = ChunkId::new(r.u64()?, r.u32()?);
    if put == 0 {
        return r.0.is_empty().then_some(Record::Delete(chunk));
    }
    let mut meta = ChunkMeta {
        chunk,
        committed: ChunkVersion(r.u32()?),
        chain_version: ChainVersion(r.u32()?),
        len: r.u32()?,
        checksum: r.u32()?,
        ..ChunkMeta::default()
    };
    let data = r.ext()?;
    let sums = r.sums(meta.len)?;
    let (mut pending_data, mut pending_sums) = (None, Sums::default());
    let flag = r.u8()?;
    if flag > 0 {
        let (version, len, checksum) = (r.u32()?, r.u32()?, r.u32()?);
        pending_data = r.ext()?;
        pending_sums = r.sums(len)?;
        let tag = if r.u8()? == 1 { Some(r.tag()?) } else { None };
        meta.pending = Some(PendingMeta {
            version: ChunkVersion(version),
            len,
            checksum,
            removes: flag == 2,
            tag,
        });
    }
    for _ in 0..r.u32()? {
        meta.applied.push(Applied {
            tag: r.tag()?,
            version: ChunkVersion(r.u32()?),
            chain_version: ChainVersion(r.u32()?),
            len: r.u32()?,
            checksum: r.u32()?,
        });
    }
    r.0.is_empty().then_some(Record::Put(Rec {
        meta,
        data,
        pending_data,
        sums,
        pending_sums,
    }))
}

/// The frame at `pos` of `buf`, if whole and intact: its record and the offset after it.
#[cfg(test)]
fn frame_at(buf: &[u8], pos: usize) -> Option<(Record, usize)> {
    FRAMES.decode_at(buf, pos, decode_payload)
}

/// The open metadata log.
pub struct MetaLog {
    fs: Arc<dyn DurableFs>,
    dir: PathBuf,
    file: Box<dyn DurableFile>,
    end: u64,
    /// The file's size: zeros from `end` on, written ahead of the records (see `flush`).
    size: u64,
    staged: Vec<u8>,
    /// Bytes claimed for records not yet staged (operations under way).
    claimed: u64,
    records: u64,
    compact_min: u64,
    /// Records below which no compaction is tried again, after one that did not fit.
    compact_after: u64,
}

/// Room in the log promised to one operation's record: given back by staging the record
/// ([`MetaLog::stage`]) or by [`MetaLog::release`] when the operation stages none.
#[must_use]
#[derive(Debug)]
pub struct Claim(u64);

impl MetaLog {
    /// Opens (creating when absent) the log in `dir` and replays it. `compact_min`: records in
    /// the log below which it is never compacted.
    pub fn open(
        fs: Arc<dyn DurableFs>,
        dir: &Path,
        compact_min: u64,
    ) -> io::Result<(Self, BTreeMap<ChunkId, Rec>)> {
        let path = dir.join(META);
        if !fs.exists(&path)? {
            Self::write_whole(&*fs, dir, &[])?;
        }
        let file = fs.open(&path)?;
        let len = file.size()?;
        let mut buf = vec![0; len as usize];
        file.read_at(&mut buf, 0)?;
        if buf.starts_with(META_HEADER_1) {
            return Err(damaged(
                &path,
                "a chunk metadata log of format 1 (whole-chunk checksums), from a t3fs before \
                 per-block checksums: this t3fs cannot serve it; move the target's directory \
                 aside and let the target resync from its chain",
            ));
        }
        if !buf.starts_with(META_HEADER) {
            return Err(damaged(&path, "not a t3fs chunk metadata log"));
        }
        let (mut chunks, mut records) = (BTreeMap::new(), 0);
        let mut frames = FRAMES.frames(&buf, META_HEADER.len(), decode_payload);
        for (_, rec) in frames.by_ref() {
            match rec {
                Record::Put(r) => chunks.insert(r.meta.chunk, r),
                Record::Delete(c) => chunks.remove(&c),
            };
            records += 1;
        }
        let pos = frames.end();
        // Any whole record after damage makes it damage: records carry no order to compare
        // (WalKv, whose frames carry versions, asks for a newer one).
        if FRAMES.whole_after(&buf, pos, |p| decode_payload(p).is_some()) {
            return Err(damaged(
                &path,
                format!("damaged record at byte {pos} with whole records after it"),
            ));
        }
        // Zeros written ahead, possibly after a torn tail of unreported records. The zeros
        // stay: they are room for records that needs no new space (a restart on a full file
        // system keeps its reserve), where WalKv cuts its torn tail. The torn part is zeroed,
        // durably, before anything is appended after it: zeroed in place, not cut, for the same
        // reason.
        if let Some(last) = buf[pos..].iter().rposition(|&b| b != 0) {
            file.write_at(&vec![0; last + 1], pos as u64)?;
            file.sync_data()?;
        }
        let log = Self {
            fs,
            dir: dir.to_path_buf(),
            file,
            end: pos as u64,
            size: len.max(pos as u64),
            staged: Vec::new(),
            claimed: 0,
            records,
            compact_min,
            compact_after: 0,
        };
        Ok((log, chunks))
    }

    /// Writes a complete log holding `recs` as `meta.tmp`, then renames it over `meta`, durably.
    fn write_whole<'a>(
        fs: &dyn DurableFs,
        dir: &Path,
        recs: impl IntoIterator<Item = &'a Rec>,
    ) -> io::Result<()> {
        let tmp = dir.join(META_TMP);
        Self::write_tmp(fs, &tmp, &Self::whole(recs, 0))?;
        fs.rename(&tmp, &dir.join(META))?;
        fs.sync_dir(dir)
    }

    /// A whole log holding `recs` followed by at least `ahead` zeros (none when 0), and the
    /// offset where its records end.
    fn whole<'a>(recs: impl IntoIterator<Item = &'a Rec>, ahead: u64) -> (Vec<u8>, u64) {
        let mut buf = META_HEADER.to_vec();
        for r in recs {
            encode(&Record::Put(r.clone()), &mut buf);
        }
        let end = buf.len() as u64;
        if ahead > 0 {
            buf.resize((end + ahead).next_multiple_of(AHEAD) as usize, 0);
        }
        (buf, end)
    }

    /// Writes `bytes` as the new file `tmp`, durably (its name is not durable yet).
    fn write_tmp(fs: &dyn DurableFs, tmp: &Path, bytes: &(Vec<u8>, u64)) -> io::Result<()> {
        let f = fs.create(tmp)?;
        f.write_at(&bytes.0, 0)?;
        f.sync_data()
    }

    /// Claims room for a record of at most `bytes`, leaving `keep` bytes of room after it (0:
    /// the operation may use the reserve), growing the file ahead in zeros when needed: by
    /// [`AHEAD`], or when `tight` (space is short) just by what is needed, in blocks.
    /// `Ok(None)`: the file system has no room for that; nothing but zeros was written (and
    /// zeros are room, not records).
    pub fn claim(&mut self, bytes: u64, keep: u64, tight: bool) -> io::Result<Option<Claim>> {
        let need = self.end + self.staged.len() as u64 + self.claimed + bytes + keep;
        if need > self.size {
            let step = if tight { BLOCK } else { AHEAD };
            if let Err(e) = self.grow(need.next_multiple_of(step)) {
                // The zeros written before the error may be room enough.
                if self.size < need {
                    return if no_space(&e) { Ok(None) } else { Err(e) };
                }
            }
        }
        self.claimed += bytes;
        Ok(Some(Claim(bytes)))
    }

    /// Gives back a claim whose operation staged no record.
    pub fn release(&mut self, claim: Claim) {
        self.claimed -= claim.0;
    }

    /// Writes zeros from the file's size to `size`. On failure the zeros written before it
    /// still count as room.
    fn grow(&mut self, size: u64) -> io::Result<()> {
        // Zeros are written, not fallocated: an unwritten extent would make the first write into
        // it a metadata change again (and written blocks are the file's for good).
        let zeros = vec![0u8; (size - self.size) as usize];
        if let Err(e) = self.file.write_at(&zeros, self.size) {
            // A short write before the error leaves zeros up to the file's new size.
            let now = self.file.size().unwrap_or(self.size);
            self.size = now.clamp(self.size, size);
            return Err(e);
        }
        self.size = size;
        Ok(())
    }

    /// Queues `r` for the next [`MetaLog::flush`], in the room `claim` holds for it.
    pub fn stage(&mut self, r: &Record, claim: Claim) {
        let before = self.staged.len();
        encode(r, &mut self.staged);
        debug_assert!(
            (self.staged.len() - before) as u64 <= claim.0,
            "a record larger than its claim"
        );
        self.claimed -= claim.0;
        self.records += 1;
    }

    /// Whether records wait for a flush.
    pub fn has_staged(&self) -> bool {
        !self.staged.is_empty()
    }

    /// Appends the staged records and makes them durable (one write, one fdatasync).
    ///
    /// The records land in room claimed for them, zeros already written ahead ([`AHEAD`] at a
    /// time, by [`MetaLog::claim`]): the write allocates nothing, so it cannot meet a full file
    /// system, and an append that does not change the file's size makes its fdatasync flush only
    /// the blocks written, where one that does commits the file system's journal. Boot treats
    /// the zeros as room (no frame starts with zeros).
    pub fn flush(&mut self) -> io::Result<()> {
        if self.staged.is_empty() {
            return Ok(());
        }
        let need = self.end + self.staged.len() as u64;
        debug_assert!(need <= self.size, "records past the room claimed for them");
        if need > self.size {
            // Only if a record outgrew its claim (a bound bug): a size change, not a lost record.
            self.grow(need.next_multiple_of(AHEAD))?;
        }
        self.file.write_at(&self.staged, self.end)?;
        self.file.sync_data()?;
        self.end += self.staged.len() as u64;
        self.staged.clear();
        Ok(())
    }

    /// Rewrites the log as one record per live chunk when it holds many more records than
    /// chunks (after a flush; `live` holds every chunk's current metadata).
    ///
    /// The new log is written with its room ahead ([`RESERVE`] plus what is claimed) beside the
    /// old one, as `meta.tmp`. When the file system has no room for it, compaction is skipped
    /// (the old log is whole and stays in use; the partial copy is cut to free its blocks) and
    /// tried again once the log has grown by half: an error only from the rename on.
    pub fn maybe_compact(&mut self, live: &BTreeMap<ChunkId, Rec>) -> io::Result<()> {
        let at = self.compact_min.max(4 * live.len() as u64);
        if self.records <= at.max(self.compact_after) {
            return Ok(());
        }
        debug_assert!(self.staged.is_empty());
        let tmp = self.dir.join(META_TMP);
        let whole = Self::whole(live.values(), RESERVE + self.claimed);
        match Self::write_tmp(&*self.fs, &tmp, &whole) {
            Ok(()) => {}
            Err(e) if no_space(&e) => {
                tracing::warn!(
                    "chunk store {}: no room to compact the metadata log ({} bytes): {e}; \
                     it stays as it is",
                    self.dir.display(),
                    whole.0.len()
                );
                // Nothing refers to the copy: creating it again cuts it.
                let _ = self.fs.create(&tmp);
                self.compact_after = self.records + self.records / 2;
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        self.fs.rename(&tmp, &self.dir.join(META))?;
        self.fs.sync_dir(&self.dir)?;
        self.file = self.fs.open(&self.dir.join(META))?;
        self.end = whole.1;
        self.size = whole.0.len() as u64;
        self.records = live.len() as u64;
        self.compact_after = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let tag = UpdateTag {
            client: ClientId(7),
            channel: ChannelId(3),
            seqnum: SeqNum(99),
        };
        let rec = Rec {
            meta: ChunkMeta {
                chunk: ChunkId::new(5, 6),
                committed: ChunkVersion(3),
                chain_version: ChainVersion(2),
                len: 10,
                checksum: 0xdead_beef,
                pending: Some(PendingMeta {
                    version: ChunkVersion(4),
                    len: 0,
                    checksum: 0,
                    removes: true,
                    tag: Some(tag),
                }),
                applied: vec![Applied {
                    tag,
                    version: ChunkVersion(3),
                    chain_version: ChainVersion(2),
                    len: 10,
                    checksum: 1,
                }],
            },
            data: Some(Extent {
                offset: 8192,
                len: 4096,
            }),
            pending_data: None,
            sums: vec![0x1234_5678].into(),
            pending_sums: Sums::default(),
        };
        for r in [Record::Put(rec), Record::Delete(ChunkId::new(1, 2))] {
            let mut buf = Vec::new();
            encode(&r, &mut buf);
            let (got, end) = frame_at(&buf, 0).expect("decodes");
            assert_eq!((got, end), (r, buf.len()));
            buf[HEAD + 2] ^= 1;
            assert!(frame_at(&buf, 0).is_none(), "a flipped bit fails the crc");
        }
    }

    #[test]
    fn a_put_never_outgrows_its_bound() {
        let tag = UpdateTag::default();
        let full = |sums: usize, psums: usize, applied: usize| Rec {
            meta: ChunkMeta {
                pending: Some(PendingMeta {
                    tag: Some(tag),
                    ..PendingMeta::default()
                }),
                applied: vec![Applied::default(); applied],
                ..ChunkMeta::default()
            },
            sums: vec![7; sums].into(),
            pending_sums: vec![7; psums].into(),
            ..Rec::empty(ChunkId::new(1, 1))
        };
        for (s, p, a) in [(0, 0, 0), (3, 0, 1), (256, 256, 16), (16384, 16384, 16)] {
            let mut buf = Vec::new();
            encode(&Record::Put(full(s, p, a)), &mut buf);
            let bound = put_bound((s + p) as u64, a);
            assert_eq!(
                buf.len() as u64,
                bound,
                "exact for a record with a tagged pending"
            );
        }
        let mut buf = Vec::new();
        encode(&Record::Delete(ChunkId::new(1, 1)), &mut buf);
        assert!((buf.len() as u64) < put_bound(0, 0));
    }

    fn claim_stage(log: &mut MetaLog, r: &Record) {
        let c = log.claim(put_bound(0, 0), 0, false).unwrap().expect("room");
        log.stage(r, c);
    }

    #[test]
    fn the_log_grows_ahead_in_zeros_that_boot_keeps_as_room() {
        let dir = std::env::temp_dir().join(format!("t3fs-meta-ahead-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let fs: Arc<dyn DurableFs> = Arc::new(crate::durable::fs::StdFs);
        fs.create_dir_all(&dir).unwrap();
        let (mut log, chunks) = MetaLog::open(fs.clone(), &dir, 1 << 16).unwrap();
        assert!(chunks.is_empty());
        for i in 0..3 {
            claim_stage(&mut log, &Record::Put(Rec::empty(ChunkId::new(1, i))));
            log.flush().unwrap();
        }
        let size = std::fs::metadata(dir.join(META)).unwrap().len();
        assert_eq!(size, AHEAD, "one step ahead, not one size change per flush");
        assert!(log.end < size);
        // Content must leave the reserve: the file grows by another step, in zeros.
        let c = log
            .claim(put_bound(0, 0), RESERVE, false)
            .unwrap()
            .expect("room");
        assert_eq!(log.size, 2 * AHEAD);
        log.release(c);
        let end = log.end;
        drop(log);
        // A torn record after the last whole one: zeroed in place, the zeros kept as room.
        // (Torn where bytes that are not zeros are missing: zeros for zeros would be whole.)
        let mut torn = Vec::new();
        encode(&Record::Put(Rec::empty(ChunkId::new(9, 9))), &mut torn);
        let f = fs.open(&dir.join(META)).unwrap();
        f.write_at(&torn[..torn.len() / 2], end).unwrap();
        drop(f);
        let (log, chunks) = MetaLog::open(fs.clone(), &dir, 1 << 16).unwrap();
        assert_eq!(chunks.len(), 3, "every record before the zeros is replayed");
        assert_eq!((log.end, log.size), (end, 2 * AHEAD), "zeros kept");
        let bytes = std::fs::read(dir.join(META)).unwrap();
        assert!(
            bytes[end as usize..].iter().all(|&b| b == 0),
            "torn tail zeroed"
        );
        drop(log);
        let (log, chunks) = MetaLog::open(fs, &dir, 1 << 16).unwrap();
        assert_eq!((chunks.len(), log.end), (3, end));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
