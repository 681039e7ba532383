//! Freeing a GC'd file's chunks on storage (3FS §4.5 `removeChunks`): the meta server embeds a
//! storage client machine and removes every chunk of the file through its chain (a replicated
//! remove, so every replica drops it at commit) before GC deletes the inode row.
//!
//! Which chunks: indexes `0..ceil(length / chunk_size)` (at least chunk 0), each on the chain
//! its layout names. Lengths come from writers' hints (§4.4), so a write whose length was
//! never reported beyond chunk 0 can leave later chunks behind; 3FS instead removes by chunk
//! range on every used stripe chain, a storage operation t3fs does not have yet.
//! Invariant: a file is reported purged only after every one of its removes committed; any
//! failed remove drops the whole file from this round (GC tries it again next round, and
//! removes are idempotent). Not here: the GC decisions (`gc.rs`) and the inode deletion.

use std::collections::BTreeMap;

use crate::chunk::UpdateKind;
use crate::client::{Client, ClientCall, ClientConfig, ClientRet, ClientTimer};
use crate::ids::{ChainId, ChunkId, InodeId, RequestId};
use crate::machine::{ActionOf, EventOf, Machine, Outbox};
use crate::msg::Msg;
use crate::routing::RoutingInfo;
use crate::time::Instant;

use super::{Inode, InodeKind};

/// Most chunks one file's purge removes.
pub const PURGE_CHUNKS_MAX: u64 = 1024;

/// A file being purged.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
struct FilePurge {
    entry: Vec<u8>,
    left: usize,
    failed: bool,
}

/// The storage side of GC.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct Purger {
    client: Client,
    table: Vec<ChainId>,
    next_call: u64,
    calls: BTreeMap<RequestId, InodeId>,
    files: BTreeMap<InodeId, FilePurge>,
}

/// A purge that finished: the file, its GC entry name, and whether every remove committed.
pub type Purged = (InodeId, Vec<u8>, bool);

/// Runs the embedded client's actions: sends go out as the meta server's, timers are wrapped,
/// returns come back as completed calls.
fn relay(
    inner: &mut Outbox<Client>,
    out: &mut Outbox<super::server::MetaServer>,
) -> Vec<(RequestId, ClientRet)> {
    use super::server::MetaTimer;
    let mut returns = Vec::new();
    for a in inner.drain() {
        match a {
            ActionOf::Send { to, msg } => out.send(to, msg),
            ActionOf::SetTimer { timer, after } => out.set_timer(MetaTimer::Storage(timer), after),
            ActionOf::CancelTimer(t) => out.push(ActionOf::CancelTimer(MetaTimer::Storage(t))),
            ActionOf::Return { req, ret } => returns.push((req, ret)),
            // The storage client performs no I/O and never halts.
            ActionOf::Io { .. } | ActionOf::Halt(_) => {}
        }
    }
    returns
}

impl Purger {
    /// A purger removing chunks through chain table `table` with a client of `cfg`.
    pub fn new(cfg: ClientConfig, routing: RoutingInfo, table: Vec<ChainId>) -> Self {
        Self {
            client: Client::new(cfg, routing),
            table,
            next_call: 0,
            calls: BTreeMap::new(),
            files: BTreeMap::new(),
        }
    }

    /// Whether `inode` is being purged.
    pub fn busy(&self, inode: InodeId) -> bool {
        self.files.contains_key(&inode)
    }

    /// Starts the embedded client.
    pub fn start(&mut self, now: Instant, out: &mut Outbox<super::server::MetaServer>) {
        let mut inner = Outbox::new();
        self.client.start(now, &mut inner);
        relay(&mut inner, out);
    }

    /// Starts removing the chunks of `file` (named `entry` under the GC root); a file without
    /// a layout has no chunks and is done at once.
    pub fn purge(
        &mut self,
        entry: Vec<u8>,
        file: &Inode,
        now: Instant,
        out: &mut Outbox<super::server::MetaServer>,
    ) -> Vec<Purged> {
        let InodeKind::File {
            length,
            layout: Some(layout),
            ..
        } = &file.kind
        else {
            return vec![(file.id, entry, true)];
        };
        let Some(fl) = layout.file_layout(&self.table) else {
            return vec![(file.id, entry, false)];
        };
        let chunk = u64::from(layout.chunk_size.max(1));
        let n = length.div_ceil(chunk).clamp(1, PURGE_CHUNKS_MAX);
        let calls: Vec<ClientCall> = (0..n)
            .map(|k| ClientCall::UpdateChunk {
                chunk: ChunkId {
                    inode: file.id,
                    index: k as u32,
                },
                chain: fl.chains[(k % fl.chains.len() as u64) as usize],
                chunk_size: layout.chunk_size,
                kind: UpdateKind::Remove,
            })
            .collect();
        self.files.insert(
            file.id,
            FilePurge {
                entry,
                left: calls.len(),
                failed: false,
            },
        );
        let mut done = Vec::new();
        for call in calls {
            self.next_call += 1;
            let req = RequestId(self.next_call);
            self.calls.insert(req, file.id);
            done.extend(self.feed(now, EventOf::Call { req, call }, out));
        }
        done
    }

    /// A message for the embedded client (replies of storage, routing of mgmtd).
    pub fn on_msg(
        &mut self,
        from: crate::ids::NodeId,
        msg: Msg,
        now: Instant,
        out: &mut Outbox<super::server::MetaServer>,
    ) -> Vec<Purged> {
        self.feed(now, EventOf::Recv { from, msg }, out)
    }

    /// A timer of the embedded client.
    pub fn on_timer(
        &mut self,
        t: ClientTimer,
        now: Instant,
        out: &mut Outbox<super::server::MetaServer>,
    ) -> Vec<Purged> {
        self.feed(now, EventOf::Timer(t), out)
    }

    fn feed(
        &mut self,
        now: Instant,
        ev: EventOf<Msg, ClientTimer, ClientCall>,
        out: &mut Outbox<super::server::MetaServer>,
    ) -> Vec<Purged> {
        let mut inner = Outbox::new();
        self.client.handle(now, ev, &mut inner);
        self.client.check_invariants();
        let mut done = Vec::new();
        for (req, ret) in relay(&mut inner, out) {
            let Some(inode) = self.calls.remove(&req) else {
                continue;
            };
            let Some(f) = self.files.get_mut(&inode) else {
                continue;
            };
            f.left -= 1;
            f.failed |= !matches!(ret, ClientRet::Updated { .. });
            if f.left == 0 {
                let f = self.files.remove(&inode).expect("present");
                done.push((inode, f.entry, !f.failed));
            }
        }
        done
    }

    /// Checks the embedded client and the bookkeeping.
    pub fn check_invariants(&self) {
        self.client.check_invariants();
        for inode in self.calls.values() {
            assert!(self.files.contains_key(inode), "a remove without its file");
        }
    }
}
