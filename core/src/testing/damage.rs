//! Damage to the in-memory store's bytes, for the simulator's disk faults: bits rotting at
//! rest, a misdirected write landing on another chunk, a torn write persisting only a prefix,
//! and a lost write (the device acknowledged, then lost the bytes at power loss).
//!
//! Invariant: rot, misdirection and tears change stored bytes and never the checksums kept
//! with them, so the store's own verification (`MemChunkStore::apply`, read and read-modify-
//! write) reports `Corrupt`; a lost write puts back a whole earlier, self-consistent state that
//! no checksum can flag (only the replication protocol can repair it). Not here: when damage
//! happens (the simulator's disk model and fault atlas decide).

use crate::chunk::ChunkOp;
use crate::crc32c;
use crate::ids::ChunkId;
use crate::payload::Payload;

use super::{MemChunk, MemChunkStore};

/// Applies `f` to a copy of `stored` and stores the copy: stored bytes are immutable (a read's
/// checksum is computed once per content), so damage replaces them.
fn edit<R>(stored: &mut Payload, f: impl FnOnce(&mut [u8]) -> R) -> R {
    let mut bytes = stored.to_vec();
    let r = f(&mut bytes);
    *stored = bytes.into();
    r
}

impl MemChunkStore {
    /// Flips bit `bit` (modulo the content's size) of `chunk`'s committed bytes. False if it
    /// has none.
    pub fn flip_bit(&mut self, chunk: ChunkId, bit: u64) -> bool {
        let Some(c) = self.chunks.get_mut(&chunk) else {
            return false;
        };
        if c.data.is_empty() || c.committed.0 == 0 {
            return false;
        }
        let bit = bit % (c.data.len() as u64 * 8);
        edit(&mut c.data, |b| b[(bit / 8) as usize] ^= 1 << (bit % 8));
        true
    }

    /// Writes `bytes` over `chunk`'s committed bytes at `offset` (clipped to its length), as a
    /// write aimed elsewhere would land. False if nothing changed.
    pub fn scribble(&mut self, chunk: ChunkId, offset: u32, bytes: &[u8]) -> bool {
        let Some(c) = self.chunks.get_mut(&chunk) else {
            return false;
        };
        if c.committed.0 == 0 {
            return false;
        }
        let start = (offset as usize).min(c.data.len());
        let end = (start + bytes.len()).min(c.data.len());
        let new = &bytes[..end - start];
        if c.data[start..end] == *new {
            return false;
        }
        edit(&mut c.data, |b| b[start..end].copy_from_slice(new));
        true
    }

    /// Some bytes of `op` never reached the medium: in `range` (chunk offsets), the new content
    /// of `op`'s chunk (pending for an update, committed for an install) holds what `before`
    /// held (zeros past it) under the new checksum. A torn write reverts everything after its
    /// persisted prefix; a misdirected one reverts exactly what it wrote. Call after applying
    /// `op`. False if nothing changed.
    pub fn revert(
        &mut self,
        op: &ChunkOp,
        before: Option<&MemChunk>,
        range: core::ops::Range<usize>,
    ) -> bool {
        let old: &[u8] = before.map_or(&[], |b| &b.data[..]);
        let (chunk, pending) = match op {
            ChunkOp::Update { chunk, .. } => (chunk, true),
            ChunkOp::Install {
                chunk,
                data: Some(_),
                ..
            } => (chunk, false),
            _ => return false,
        };
        let Some(c) = self.chunks.get_mut(chunk) else {
            return false;
        };
        let target = if pending {
            match &mut c.pending {
                Some((_, Some(content))) => content,
                _ => return false,
            }
        } else {
            &mut c.data
        };
        edit(target, |bytes| {
            let mut torn = false;
            let end = range.end.min(bytes.len());
            for (i, b) in bytes.iter_mut().enumerate().take(end).skip(range.start) {
                let was = old.get(i).copied().unwrap_or(0);
                torn |= *b != was;
                *b = was;
            }
            torn
        })
    }

    /// A lost write: `chunk` goes back to `before` (`None`: it did not exist), a whole earlier
    /// state with matching checksums.
    pub fn restore(&mut self, chunk: ChunkId, before: Option<MemChunk>) {
        match before {
            Some(c) => {
                self.chunks.insert(chunk, c);
            }
            None => {
                self.chunks.remove(&chunk);
            }
        }
    }

    /// Whether `chunk`'s stored bytes (committed and pending) match their checksums.
    pub fn intact(&self, chunk: ChunkId) -> bool {
        self.chunks.get(&chunk).is_none_or(|c| {
            let pending_ok = match &c.pending {
                Some((_, Some(content))) => crc32c::checksum(content) == c.pending_crc,
                _ => true,
            };
            pending_ok && (c.committed.0 == 0 || crc32c::checksum(&c.data) == c.data_crc)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::{ChunkDone, ChunkError, UpdateKind};
    use crate::ids::{ChainVersion, ChunkVersion};

    fn store_with(data: &[u8]) -> (MemChunkStore, ChunkId) {
        let mut s = MemChunkStore::new();
        let chunk = ChunkId::new(1, 0);
        let op = ChunkOp::Install {
            chunk,
            version: ChunkVersion(1),
            chain_version: ChainVersion(1),
            data: Some(data.to_vec().into()),
        };
        s.apply(&op).unwrap();
        (s, chunk)
    }

    fn read(
        s: &mut MemChunkStore,
        chunk: ChunkId,
        unverified: bool,
    ) -> Result<ChunkDone, ChunkError> {
        s.apply(&ChunkOp::Read {
            chunk,
            offset: 0,
            len: 2,
            uncommitted: false,
            unverified,
        })
    }

    #[test]
    fn rotten_bytes_fail_verification_and_are_served_only_unverified() {
        let (mut s, c) = store_with(b"abcdefgh");
        assert!(read(&mut s, c, false).is_ok());
        assert!(s.flip_bit(c, 60)); // In the last byte: outside the 2-byte range read.
        assert!(!s.intact(c));
        assert_eq!(read(&mut s, c, false), Err(ChunkError::Corrupt));
        assert!(read(&mut s, c, true).is_ok(), "the planted bug serves it");
        // A read-modify-write would launder the rot into a fresh checksum: refused.
        let w = ChunkOp::Update {
            chunk: c,
            version: ChunkVersion(2),
            kind: UpdateKind::Write {
                offset: 0,
                data: b"z".to_vec().into(),
            },
            tag: None,
        };
        assert_eq!(s.apply(&w), Err(ChunkError::Corrupt));
        // A full replace does not build on the old bytes and heals the chunk once committed.
        let r = ChunkOp::Update {
            chunk: c,
            version: ChunkVersion(2),
            kind: UpdateKind::Replace {
                data: b"new".to_vec().into(),
            },
            tag: None,
        };
        assert!(s.apply(&r).is_ok());
        let commit = ChunkOp::Commit {
            chunk: c,
            version: ChunkVersion(2),
            chain_version: ChainVersion(1),
        };
        assert!(s.apply(&commit).is_ok());
        assert!(s.intact(c) && read(&mut s, c, false).is_ok());
    }

    #[test]
    fn torn_and_misdirected_writes_are_caught_and_lost_writes_are_not() {
        let (mut s, c) = store_with(b"aaaaaaaa");
        let before = s.chunks().get(&c).cloned();
        let op = ChunkOp::Install {
            chunk: c,
            version: ChunkVersion(2),
            chain_version: ChainVersion(1),
            data: Some(b"bbbbbbbb".to_vec().into()),
        };
        s.apply(&op).unwrap();
        assert!(s.revert(&op, before.as_ref(), 3..usize::MAX));
        assert_eq!(&s.chunks()[&c].data[..], b"bbbaaaaa");
        assert!(!s.intact(c));
        // Misdirected bytes on another chunk.
        let (mut s, c) = store_with(b"aaaaaaaa");
        assert!(s.scribble(c, 6, b"xyz"));
        assert_eq!(&s.chunks()[&c].data[..], b"aaaaaaxy");
        assert_eq!(read(&mut s, c, false), Err(ChunkError::Corrupt));
        // A lost write: a whole earlier state, which verifies.
        let (mut s, c) = store_with(b"aaaaaaaa");
        let before = s.chunks().get(&c).cloned();
        s.apply(&op).unwrap();
        s.restore(c, before);
        assert!(s.intact(c));
        assert_eq!(s.chunks()[&c].committed, ChunkVersion(1));
    }
}
