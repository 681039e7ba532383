//! The client's own readahead for one open file handle, on top of the kernel's: once a read
//! starts where the previous one ended, the next `window` bytes are read from the chains in
//! whole-chunk units, all at once, and later reads are answered from those units. This is what
//! keeps several chains busy for a reader that waits for each read (psync, `O_DIRECT`, or a
//! kernel readahead smaller than the chains' pipeline).
//!
//! Invariants: a unit is used only for a read it covers entirely, as it was asked (a short unit
//! at the end of the file never answers a read past its end); units behind the reader are
//! dropped, and at most `window` bytes are ahead of it; every write and truncate of the file
//! through this mount forgets the file's units (`forget`), so a reader never sees data older
//! than its own mount's writes. Data other clients write after a unit was read shows up at the
//! next unit, as with the kernel's page cache. Not here: writes (write_behind.rs).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use fuser::Errno;
use tokio::sync::watch;

use super::backend::{lock, Backend};
use super::errno::errno;
use crate::client::File;

type Landing = watch::Receiver<Option<Result<Bytes, Errno>>>;

/// One unit being read or read: its length as asked, and its bytes when they land.
struct Unit {
    len: u64,
    data: Landing,
}

#[derive(Default)]
struct State {
    /// Where a sequential reader's next read starts.
    next: u64,
    units: BTreeMap<u64, Unit>,
}

/// One handle's readahead.
pub(super) struct ReadAhead {
    file: File,
    window: u64,
    unit: u64,
    st: Mutex<State>,
}

impl ReadAhead {
    /// Readahead of `window` bytes for `file` (0: none).
    pub fn new(file: File, window: u64) -> Self {
        let unit = u64::from(file.layout.chunk_size.max(1));
        Self {
            file,
            window,
            unit,
            st: Mutex::default(),
        }
    }

    /// Forgets every unit (the file changed through this mount).
    pub fn forget(&self) {
        lock(&self.st).units.clear();
    }

    /// `len` bytes at `offset` of a file that ends at `end` (`offset + len <= end`).
    pub async fn read<B: Backend>(
        &self,
        s: &Arc<B>,
        offset: u64,
        len: u64,
        end: u64,
    ) -> Result<Vec<u8>, Errno> {
        let covering = self.plan(s, offset, len, end);
        if let Some(units) = covering {
            if let Some(d) = assemble(units, offset, len).await {
                return Ok(d);
            }
        }
        s.read(&self.file, offset, len).await.map_err(|e| errno(&e))
    }

    /// Notes the read, starts the units ahead of a sequential reader, and returns the units that
    /// cover the read (start, landing), if they all exist.
    fn plan<B: Backend>(
        &self,
        s: &Arc<B>,
        offset: u64,
        len: u64,
        end: u64,
    ) -> Option<Vec<(u64, Landing)>> {
        let mut st = lock(&self.st);
        let sequential = offset == st.next;
        st.next = offset + len;
        let unit = self.unit;
        st.units.retain(|&start, u| start + u.len > offset);
        if sequential && self.window > 0 {
            let first = (offset + len) / unit * unit;
            let last = (offset + len + self.window).min(end);
            let mut at = first;
            while at < last {
                if let std::collections::btree_map::Entry::Vacant(v) = st.units.entry(at) {
                    v.insert(self.start(s, at, unit.min(end - at)));
                }
                at += unit;
            }
        }
        let mut out = Vec::new();
        let mut at = offset / unit * unit;
        while at < offset + len {
            let u = st.units.get(&at)?;
            if at + u.len < (offset + len).min(at + unit) {
                return None;
            }
            out.push((at, u.data.clone()));
            at += unit;
        }
        Some(out)
    }

    /// Starts reading one unit.
    fn start<B: Backend>(&self, s: &Arc<B>, at: u64, len: u64) -> Unit {
        let (tx, rx) = watch::channel(None);
        let (s2, file) = (s.clone(), self.file.clone());
        s.runtime().spawn(async move {
            let r = s2.read(&file, at, len).await;
            let _ = tx.send(Some(r.map(Bytes::from).map_err(|e| errno(&e))));
        });
        Unit { len, data: rx }
    }
}

/// The read's bytes from the units covering it, or `None` if one of them failed (the caller
/// then reads directly, and reports the cluster's answer to that).
async fn assemble(units: Vec<(u64, Landing)>, offset: u64, len: u64) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(len as usize);
    for (start, mut rx) in units {
        let landed = rx.wait_for(Option::is_some).await.ok()?;
        let Some(Ok(data)) = landed.as_ref() else {
            return None;
        };
        let from = offset.max(start) - start;
        let to = (offset + len).min(start + data.len() as u64) - start;
        if from >= to {
            return None;
        }
        out.extend_from_slice(&data[from as usize..to as usize]);
    }
    (out.len() as u64 == len).then_some(out)
}

#[cfg(test)]
#[path = "read_ahead_tests.rs"]
mod tests;
