//! A registered buffer pool: extents of one range of a registered region, handed out first-fit
//! and merged with their neighbours when freed. The RDMA transport keeps two per connection
//! (frames staged for the peer, and frames landing from it) and, on the side that pushes, a
//! mirror of the peer's landing range that only it allocates from.
//!
//! Invariants: extents handed out never overlap and lie inside the range; freeing an extent
//! that was not handed out is refused (the peer named it: a protocol error, not a panic).
//! Not here: the memory itself (the verbs provider's region).

use std::collections::BTreeMap;

/// Extents of `[base, base + len)`.
#[derive(Debug)]
pub(crate) struct Pool {
    /// Free extents: offset → length.
    free: BTreeMap<u64, u64>,
    /// Extents handed out: offset → length.
    used: BTreeMap<u64, u64>,
}

impl Pool {
    /// A pool over `[base, base + len)`, all free.
    pub(crate) fn new(base: u64, len: u64) -> Self {
        let mut free = BTreeMap::new();
        if len > 0 {
            free.insert(base, len);
        }
        Self {
            free,
            used: BTreeMap::new(),
        }
    }

    /// An extent of `len` bytes (8-aligned lengths, so extents stay aligned), or `None` while
    /// the pool lacks room.
    pub(crate) fn alloc(&mut self, len: u64) -> Option<u64> {
        let len = len.max(1).next_multiple_of(8);
        let (&off, &have) = self.free.iter().find(|(_, &l)| l >= len)?;
        self.free.remove(&off);
        if have > len {
            self.free.insert(off + len, have - len);
        }
        self.used.insert(off, len);
        Some(off)
    }

    /// Frees the extent at `off`; false if none was handed out there.
    pub(crate) fn free(&mut self, off: u64) -> bool {
        let Some(len) = self.used.remove(&off) else {
            return false;
        };
        let (mut start, mut end) = (off, off + len);
        if let Some((&p, &pl)) = self.free.range(..off).next_back() {
            if p + pl == off {
                self.free.remove(&p);
                start = p;
            }
        }
        if let Some(nl) = self.free.remove(&end) {
            end += nl;
        }
        self.free.insert(start, end - start);
        true
    }

    /// Bytes handed out.
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> u64 {
        self.used.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::Pool;

    #[test]
    fn extents_never_overlap_and_freed_room_merges_back() {
        let mut p = Pool::new(1000, 96);
        let a = p.alloc(30).unwrap();
        let b = p.alloc(30).unwrap();
        let c = p.alloc(30).unwrap();
        assert_eq!((a, b, c), (1000, 1032, 1064));
        assert_eq!(p.alloc(1), None, "full");
        assert!(p.free(b));
        assert!(!p.free(b), "an extent is freed once");
        assert!(!p.free(1001), "an offset never handed out");
        assert!(p.free(a));
        assert!(p.free(c));
        assert_eq!(p.in_use(), 0);
        assert_eq!(p.alloc(96), Some(1000), "all room merged into one extent");
    }
}
