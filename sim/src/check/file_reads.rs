//! Reads of files against what was written to them (the file-level "no silent corruption" and
//! "no acknowledged write lost"): every byte a namespace writer reads back at file offset `o`
//! must be the byte some write to that file put at `o` (acknowledged or not, invoked before the
//! read answered), or zero; and zero only where that is possible: a hole, bytes a truncate may
//! have cut, or a write whose own payload has a zero there.
//!
//! Writes are self-describing (`payload(request id, len)`), so the log keeps (offset, request
//! id, length) per write. A byte from another file, another offset or another chunk index
//! (a wrong chain or chunk in the layout, a misplaced write, a corrupt replica) fails the run.
//!
//! Timing: every call and answer gets a stamp of one logical clock (the log's own, strictly
//! increasing in the order the world records them). A zero fails only if a write covering that
//! byte was acknowledged before the read began and no truncate step covering the byte could
//! have taken effect between that write and the read: one invoked before the read answered
//! and not acknowledged before the write was invoked (a truncate step whose outcome is unknown
//! may take effect at any later time). A truncate step to `len` of chunk `k` can only zero
//! bytes from `k · chunk size + len` to the chunk's end (the chunks past the new tail are cut
//! to 0, the tail chunk to the exact length; zero-extending a chunk zeroes nothing written).
//!
//! Not here: ordering among non-zero values (which of several overlapping writes a read should
//! see: file reads are not linearizable in 3FS either), lengths (`file_length.rs`). Not
//! excused yet, where a zero is no proof of a defect and this check would fail: a read served
//! by a replica cut off from mgmtd (3FS Appendix B #1/#4; the runner attributes those for the
//! chunk workload only), data loss a scenario expects, and a file GC purged under a writer
//! whose session meta pruned while the writer still ran.

use std::collections::BTreeMap;

use t3fs_core::chunk::UpdateKind;
use t3fs_core::client::{ClientCall, ClientRet};
use t3fs_core::ids::InodeId;
use t3fs_scenario::workload::payload;

/// Identifies one call: (node index, incarnation, request id). Request ids repeat across
/// clients and across a client's incarnations; the triple does not.
pub type CallKey = (usize, u64, u64);

/// One write issued to a file.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct WriteRec {
    /// File offset.
    pub offset: u64,
    /// Request id: the payload is `payload(req, len)`.
    pub req: u64,
    /// Bytes.
    pub len: u32,
    /// Stamp of the invocation.
    pub invoked: u64,
    /// Stamp of the acknowledgement (`None`: failed or never answered, outcome unknown).
    pub acked: Option<u64>,
}

/// One truncate step issued to a file: it may zero the bytes `[from, to)`.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct CutRec {
    /// First byte it may zero.
    pub from: u64,
    /// End (exclusive) of what it may zero.
    pub to: u64,
    /// Stamp of the invocation.
    pub invoked: u64,
    /// Stamp of the acknowledgement (`None`: may take effect at any later time).
    pub acked: Option<u64>,
}

/// One read answered.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct ReadRec {
    /// The file.
    pub inode: InodeId,
    /// File offset.
    pub offset: u64,
    /// The bytes.
    pub data: Vec<u8>,
    /// Stamp of the invocation.
    pub invoked: u64,
    /// Stamp of the answer.
    pub answered: u64,
}

/// A data call of a namespace writer, as the log sees it.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Call {
    /// A write of `payload(req, len)` at `offset`.
    Write {
        /// The file.
        inode: InodeId,
        /// File offset.
        offset: u64,
        /// Request id (names the payload).
        req: u64,
        /// Bytes.
        len: u32,
    },
    /// A chunk update that may zero `[from, to)`.
    Cut {
        /// The file.
        inode: InodeId,
        /// First byte.
        from: u64,
        /// End (exclusive).
        to: u64,
    },
    /// A read at `offset`.
    Read {
        /// The file.
        inode: InodeId,
        /// File offset.
        offset: u64,
    },
}

/// How a call ended, as the log sees it.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Answer<'a> {
    /// A write or chunk update finished on every chunk.
    Done,
    /// Anything else: failed, rejected (an update's outcome stays unknown).
    Failed,
    /// A read's bytes.
    Read(&'a [u8]),
}

#[derive(Clone, Debug)]
enum Pending {
    Write(InodeId, usize),
    Cut(InodeId, usize),
    Read(InodeId, u64, u64),
}

/// The file data path's log.
#[derive(Clone, Debug, Default)]
pub struct FileIo {
    /// Per file, every write issued.
    pub writes: BTreeMap<InodeId, Vec<WriteRec>>,
    /// Per file, every truncate step issued.
    pub cuts: BTreeMap<InodeId, Vec<CutRec>>,
    /// Every read answered.
    pub reads: Vec<ReadRec>,
    pending: BTreeMap<CallKey, Pending>,
    clock: u64,
}

impl FileIo {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Records the invocation of a storage call (calls the log has no use for are ignored).
    pub fn called(&mut self, key: CallKey, call: &ClientCall) {
        let call = match call {
            ClientCall::Write {
                inode,
                offset,
                data,
                ..
            } => Call::Write {
                inode: *inode,
                offset: *offset,
                req: key.2,
                len: data.len() as u32,
            },
            ClientCall::UpdateChunk {
                chunk,
                chunk_size,
                kind,
                ..
            } => {
                let cs = u64::from(*chunk_size);
                let start = u64::from(chunk.index) * cs;
                // An invalid chunk size resolves nothing sensible: assume it may cut anything.
                let end = if cs == 0 { u64::MAX } else { start + cs };
                let from = match kind {
                    UpdateKind::Truncate { len } => start + u64::from(*len),
                    UpdateKind::Remove => start,
                    // Extends, writes and replaces zero nothing written.
                    _ => return,
                };
                Call::Cut {
                    inode: chunk.inode,
                    from,
                    to: end,
                }
            }
            ClientCall::Read { inode, offset, .. } => Call::Read {
                inode: *inode,
                offset: *offset,
            },
            _ => return,
        };
        self.invoke(key, call);
    }

    /// Records the answer of a call `called` recorded.
    pub fn returned(&mut self, key: CallKey, ret: &ClientRet) {
        let answer = match ret {
            ClientRet::Updated { .. } => Answer::Done,
            ClientRet::Read { data, .. } => Answer::Read(data),
            _ => Answer::Failed,
        };
        self.answer(key, answer);
    }

    /// Records an invocation.
    pub fn invoke(&mut self, key: CallKey, call: Call) {
        let invoked = self.tick();
        let pending = match call {
            Call::Write {
                inode,
                offset,
                req,
                len,
            } => {
                let w = self.writes.entry(inode).or_default();
                w.push(WriteRec {
                    offset,
                    req,
                    len,
                    invoked,
                    acked: None,
                });
                Pending::Write(inode, w.len() - 1)
            }
            Call::Cut { inode, from, to } => {
                let c = self.cuts.entry(inode).or_default();
                c.push(CutRec {
                    from,
                    to,
                    invoked,
                    acked: None,
                });
                Pending::Cut(inode, c.len() - 1)
            }
            Call::Read { inode, offset } => Pending::Read(inode, offset, invoked),
        };
        self.pending.insert(key, pending);
    }

    /// Records an answer; one for no call in flight is ignored.
    pub fn answer(&mut self, key: CallKey, answer: Answer<'_>) {
        let Some(p) = self.pending.remove(&key) else {
            return;
        };
        let at = self.tick();
        match (p, answer) {
            (Pending::Write(f, k), Answer::Done) => {
                self.writes.get_mut(&f).expect("recorded")[k].acked = Some(at)
            }
            (Pending::Cut(f, k), Answer::Done) => {
                self.cuts.get_mut(&f).expect("recorded")[k].acked = Some(at)
            }
            (Pending::Read(inode, offset, invoked), Answer::Read(data)) => {
                self.reads.push(ReadRec {
                    inode,
                    offset,
                    data: data.to_vec(),
                    invoked,
                    answered: at,
                })
            }
            // A failed update stays unacknowledged; a failed read tells nothing.
            _ => {}
        }
    }

    /// Checks every read; `Err` names the first byte no write explains.
    pub fn check(&self) -> Result<String, String> {
        let (mut bytes, mut data, mut zeros_after_ack) = (0u64, 0u64, 0u64);
        for r in &self.reads {
            let inode = r.inode;
            let offset = r.offset;
            let writes = self.writes.get(&inode).map_or(&[][..], Vec::as_slice);
            let cuts = self.cuts.get(&inode).map_or(&[][..], Vec::as_slice);
            // The writes that may have reached this read (invoked before it answered) and
            // overlap it, with their payloads, built once per read.
            let end = offset + r.data.len() as u64;
            let overlapping: Vec<(&WriteRec, Vec<u8>)> = writes
                .iter()
                .filter(|w| w.invoked < r.answered)
                .filter(|w| w.offset < end && w.offset + u64::from(w.len) > offset)
                .map(|w| (w, payload(w.req, w.len)))
                .collect();
            for (k, b) in r.data.iter().enumerate() {
                let at = offset + k as u64;
                bytes += 1;
                let covering = overlapping
                    .iter()
                    .filter(|(w, _)| at >= w.offset && at < w.offset + u64::from(w.len));
                let byte_of = |(w, p): &&(&WriteRec, Vec<u8>)| p[(at - w.offset) as usize];
                if *b != 0 {
                    data += 1;
                    if !covering.clone().any(|x| byte_of(&x) == *b) {
                        return Err(format!(
                            "file {inode:?}: a read at {offset} returned {b:#04x} at byte {at}, which no write to the file put there"
                        ));
                    }
                    continue;
                }
                // A zero: fine if some write may have put a zero there itself.
                if covering.clone().any(|x| byte_of(&x) == 0) {
                    continue;
                }
                // The latest-invoked write acknowledged before the read began: the one a
                // truncate is least likely to explain (whatever excuses it excuses earlier ones).
                let Some((w, _)) = covering
                    .filter(|(w, _)| w.acked.is_some_and(|a| a < r.invoked))
                    .max_by_key(|(w, _)| w.invoked)
                else {
                    continue; // A hole, or only writes that may not have landed yet.
                };
                zeros_after_ack += 1;
                let cut = cuts.iter().any(|c| {
                    c.from <= at
                        && at < c.to
                        && c.invoked < r.answered
                        && c.acked.is_none_or(|a| a > w.invoked)
                });
                if !cut {
                    return Err(format!(
                        "file {inode:?}: a read at {offset} returned zero at byte {at}, but write {:#x} of [{}, {}) was acknowledged before the read began and no truncate could have cut it since: an acknowledged write is lost",
                        w.req,
                        w.offset,
                        w.offset + u64::from(w.len)
                    ));
                }
            }
        }
        Ok(format!(
            "{} file reads ({bytes} bytes, {data} of them data, {zeros_after_ack} zeros after an acknowledged write explained by a truncate) explained by {} writes and {} truncate steps",
            self.reads.len(),
            self.writes.values().map(Vec::len).sum::<usize>(),
            self.cuts.values().map(Vec::len).sum::<usize>()
        ))
    }
}

#[cfg(test)]
mod tests;
