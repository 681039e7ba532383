//! The file data path's log of a run: every write, truncate step and read a namespace writer
//! issued to its files, each call and answer stamped by one logical clock of the log's own, so
//! the file-read checker can tell which writes and cuts may have reached which read.
//!
//! Writes are self-describing (`payload(request id, len)`), so the log keeps (offset, request
//! id, length) per write, not the bytes. A truncate step to `len` of chunk `k` is logged as the
//! range it may zero, `[k · chunk size + len, chunk end)`; a remove as the whole chunk.
//! Invariant: stamps strictly increase in the order calls and answers are recorded; an answer
//! for no call in flight changes nothing. Not here: the rule the reads are judged by
//! (`check::file_reads`), issuing the calls (the world's `ns_client.rs`, or a real runner's log
//! replayed).

use std::collections::BTreeMap;

use t3fs_core::chunk::UpdateKind;
use t3fs_core::client::{ClientCall, ClientRet};
use t3fs_core::ids::InodeId;

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
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: InodeId = InodeId(9);

    #[test]
    fn calls_map_to_writes_cuts_and_reads() {
        use t3fs_core::ids::{ChainId, ChunkId};
        let mut io = FileIo::default();
        let chunk = ChunkId { inode: F, index: 2 };
        let update = |kind| ClientCall::UpdateChunk {
            chunk,
            chain: ChainId(1),
            chunk_size: 100,
            kind,
        };
        io.called((0, 0, 1), &update(UpdateKind::Truncate { len: 30 }));
        io.called((0, 0, 2), &update(UpdateKind::Extend { len: 30 }));
        io.called((0, 0, 3), &update(UpdateKind::Remove));
        let ok = ClientRet::Updated { results: vec![] };
        io.returned((0, 0, 1), &ok);
        io.returned(
            (0, 0, 3),
            &ClientRet::Rejected(t3fs_core::msg::Status::Busy),
        );
        let cuts = &io.cuts[&F];
        assert_eq!(cuts.len(), 2, "an extend cuts nothing");
        assert_eq!((cuts[0].from, cuts[0].to), (230, 300));
        assert!(cuts[0].acked.is_some());
        assert_eq!((cuts[1].from, cuts[1].to, cuts[1].acked), (200, 300, None));
        // Answers for calls never recorded, or answered twice, change nothing.
        io.returned((0, 0, 1), &ok);
        io.returned((5, 1, 1), &ok);
        assert_eq!(io.cuts[&F].len(), 2);
    }
}
