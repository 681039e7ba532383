//! The meta server's storage side (3FS meta → storage RPCs): an embedded storage client
//! machine that asks chain heads for the last chunk of a file (`queryLastChunk`) and removes
//! files' chunks (`removeChunks`) for GC.
//!
//! Purging a GC'd file (§4.5): first the last committed chunk on every chain the file may use
//! (its dynamic stripe), then a replicated remove of every chunk from 0 up to the furthest
//! one found (or up to the length's last chunk, if that is further), each on the chain its
//! layout names, so data past a length nobody reported is removed too. When no chain holds a
//! chunk of the file any more, there is nothing to remove and the file is purged at once: its
//! chunks went with removes that committed after their client call had given up (an earlier
//! round's), or with the other meta server's purge of the same file. (Swarm seed 4002183: two
//! meta servers purged one file over a slow chain, and their removes of each chunk queued
//! behind each other; every round, some remove ran out of client retries, and every next
//! round removed every chunk again, up to the length, long after they were gone, failing the
//! same way, so the file stayed under GC for good.) A length query (§4.4) answers
//! `max(last index · chunk size + last length)` over the same chains.
//! Invariant: a file is reported purged only after every one of its removes committed, or
//! once a query found none of its chunks on any chain; any failed query or remove drops the
//! whole file from this round (GC tries it again next round, and removes are idempotent).
//! Not here: the GC decisions (`gc.rs`), the inode deletion, the length rules (`length.rs`).

use std::collections::BTreeMap;

use crate::chunk::UpdateKind;
use crate::client::{Client, ClientCall, ClientConfig, ClientRet, ClientTimer};
use crate::ids::{ChainId, ChunkId, ClientId, InodeId, RequestId};
use crate::machine::{ActionOf, EventOf, Machine, Outbox};
use crate::msg::Msg;
use crate::routing::RoutingInfo;
use crate::time::Instant;

use super::server_cfg::MetaTimer;
use super::{Inode, InodeKind};

/// The machine the purger's client runs inside (the meta server, which owns the purger): it
/// sends the client's messages as its own and holds the client's timers as
/// `MetaTimer::Storage`. A bound rather than the server's type, so that this file does not
/// name its owner.
pub trait Host: Machine<Msg = Msg, Timer = MetaTimer> {}
impl<M: Machine<Msg = Msg, Timer = MetaTimer>> Host for M {}

/// Most chunks one file's purge removes.
pub const PURGE_CHUNKS_MAX: u64 = 1024;

/// A file being purged.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
struct FilePurge {
    entry: Vec<u8>,
    file: Inode,
    left: usize,
    failed: bool,
}

/// What a call of the embedded client is for.
#[derive(Clone, Copy, Debug, Eq, Hash, PartialEq)]
enum CallFor {
    /// The last chunks of a file being purged.
    PurgeQuery(InodeId),
    /// One remove of a file being purged.
    Remove(InodeId),
    /// A length query for a request of the server (its key), with the file's chunk size.
    Length((ClientId, RequestId), u32),
}

/// The meta server's storage client: length queries and GC's chunk removal.
#[derive(Clone, Debug, Eq, Hash, PartialEq)]
pub struct Purger {
    client: Client,
    table: Vec<ChainId>,
    next_call: u64,
    calls: BTreeMap<RequestId, CallFor>,
    files: BTreeMap<InodeId, FilePurge>,
}

/// Something the storage side finished.
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum StorageDone {
    /// A purge: the file, its GC entry name, and whether every remove committed.
    Purged(InodeId, Vec<u8>, bool),
    /// A length query for request `key`: the length, `None` if storage could not tell.
    Length((ClientId, RequestId), Option<u64>),
}

/// Runs the embedded client's actions: sends go out as the meta server's, timers are wrapped,
/// returns come back as completed calls.
fn relay(inner: &mut Outbox<Client>, out: &mut Outbox<impl Host>) -> Vec<(RequestId, ClientRet)> {
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

    /// The routing the embedded client acts on.
    pub fn routing(&self) -> &RoutingInfo {
        self.client.routing()
    }

    /// Whether `inode` is being purged.
    pub fn busy(&self, inode: InodeId) -> bool {
        self.files.contains_key(&inode)
    }

    /// Starts the embedded client.
    pub fn start(&mut self, now: Instant, out: &mut Outbox<impl Host>) {
        let mut inner = Outbox::new();
        self.client.start(now, &mut inner);
        relay(&mut inner, out);
    }

    /// The chains `layout` may have chunks on, `None` if it does not resolve.
    fn used_chains(&self, layout: &super::placement::Layout) -> Option<Vec<ChainId>> {
        Some(layout.used_chains(&layout.file_layout(&self.table)?))
    }

    fn call(
        &mut self,
        call: ClientCall,
        purpose: CallFor,
        now: Instant,
        out: &mut Outbox<impl Host>,
    ) -> Vec<StorageDone> {
        self.next_call += 1;
        let req = RequestId(self.next_call);
        self.calls.insert(req, purpose);
        self.feed(now, EventOf::Call { req, call }, out)
    }

    /// Starts removing the chunks of `file` (named `entry` under the GC root); a file without
    /// a layout has no chunks and is done at once.
    pub fn purge(
        &mut self,
        entry: Vec<u8>,
        file: &Inode,
        now: Instant,
        out: &mut Outbox<impl Host>,
    ) -> Vec<StorageDone> {
        let InodeKind::File {
            layout: Some(layout),
            ..
        } = &file.kind
        else {
            return vec![StorageDone::Purged(file.id, entry, true)];
        };
        let Some(chains) = self.used_chains(layout) else {
            return vec![StorageDone::Purged(file.id, entry, false)];
        };
        let purge = FilePurge {
            entry,
            file: file.clone(),
            left: 1,
            failed: false,
        };
        self.files.insert(file.id, purge);
        let query = ClientCall::QueryLastChunk {
            inode: file.id,
            chains,
            end: PURGE_CHUNKS_MAX as u32,
            empty: true,
        };
        self.call(query, CallFor::PurgeQuery(file.id), now, out)
    }

    /// Asks storage for the length of `file` on behalf of request `key`.
    pub fn query_length(
        &mut self,
        key: (ClientId, RequestId),
        file: &Inode,
        now: Instant,
        out: &mut Outbox<impl Host>,
    ) -> Vec<StorageDone> {
        let InodeKind::File {
            layout: Some(layout),
            ..
        } = &file.kind
        else {
            return vec![StorageDone::Length(key, Some(0))];
        };
        let Some(chains) = self.used_chains(layout) else {
            return vec![StorageDone::Length(key, None)];
        };
        let query = ClientCall::QueryLastChunk {
            inode: file.id,
            chains,
            end: u32::MAX,
            empty: false,
        };
        let purpose = CallFor::Length(key, layout.chunk_size);
        self.call(query, purpose, now, out)
    }

    /// The removes of a purge whose last chunks are known: every chunk up to the furthest
    /// (and up to the length's last chunk); none when no chain holds a chunk of the file
    /// (`last` is `None`): every chunk it had is gone already.
    fn removes(&mut self, inode: InodeId, last: Option<u64>) -> Vec<ClientCall> {
        let (Some(f), Some(last)) = (self.files.get_mut(&inode), last) else {
            return Vec::new();
        };
        let InodeKind::File {
            length,
            layout: Some(layout),
            ..
        } = &f.file.kind
        else {
            return Vec::new();
        };
        let Some(fl) = layout.file_layout(&self.table) else {
            return Vec::new();
        };
        let chunk = u64::from(layout.chunk_size.max(1));
        let n = (last + 1).max(length.div_ceil(chunk)).min(PURGE_CHUNKS_MAX);
        let calls: Vec<ClientCall> = (0..n)
            .map(|k| ClientCall::UpdateChunk {
                chunk: ChunkId {
                    inode,
                    index: k as u32,
                },
                chain: fl.chain_of(k as u32),
                chunk_size: layout.chunk_size,
                kind: UpdateKind::Remove,
            })
            .collect();
        f.left += calls.len();
        calls
    }

    /// A message for the embedded client (replies of storage, routing of mgmtd).
    pub fn on_msg(
        &mut self,
        from: crate::ids::NodeId,
        msg: Msg,
        now: Instant,
        out: &mut Outbox<impl Host>,
    ) -> Vec<StorageDone> {
        self.feed(now, EventOf::Recv { from, msg }, out)
    }

    /// A timer of the embedded client.
    pub fn on_timer(
        &mut self,
        t: ClientTimer,
        now: Instant,
        out: &mut Outbox<impl Host>,
    ) -> Vec<StorageDone> {
        self.feed(now, EventOf::Timer(t), out)
    }

    fn feed(
        &mut self,
        now: Instant,
        ev: EventOf<Msg, ClientTimer, ClientCall>,
        out: &mut Outbox<impl Host>,
    ) -> Vec<StorageDone> {
        let mut inner = Outbox::new();
        self.client.handle(now, ev, &mut inner);
        self.client.check_invariants();
        let mut done = Vec::new();
        for (req, ret) in relay(&mut inner, out) {
            let Some(purpose) = self.calls.remove(&req) else {
                continue;
            };
            let (inode, ok) = match (purpose, &ret) {
                (CallFor::Length(key, chunk), ClientRet::LastChunks(lasts)) => {
                    let len = lasts
                        .iter()
                        .filter_map(|(_, l)| *l)
                        .map(|l| u64::from(l.index) * u64::from(chunk) + u64::from(l.len))
                        .max()
                        .unwrap_or(0);
                    done.push(StorageDone::Length(key, Some(len)));
                    continue;
                }
                (CallFor::Length(key, _), _) => {
                    done.push(StorageDone::Length(key, None));
                    continue;
                }
                (CallFor::PurgeQuery(inode), ClientRet::LastChunks(lasts)) => {
                    let last = lasts.iter().filter_map(|(_, l)| *l).map(|l| l.index).max();
                    for call in self.removes(inode, last.map(u64::from)) {
                        done.extend(self.call(call, CallFor::Remove(inode), now, out));
                    }
                    (inode, true)
                }
                (CallFor::PurgeQuery(inode), _) => (inode, false),
                (CallFor::Remove(inode), ret) => (inode, matches!(ret, ClientRet::Updated { .. })),
            };
            let Some(f) = self.files.get_mut(&inode) else {
                continue;
            };
            f.left -= 1;
            f.failed |= !ok;
            if f.left == 0 {
                let f = self.files.remove(&inode).expect("present");
                done.push(StorageDone::Purged(inode, f.entry, !f.failed));
            }
        }
        done
    }

    /// Checks the embedded client and the bookkeeping.
    pub fn check_invariants(&self) {
        self.client.check_invariants();
        for purpose in self.calls.values() {
            if let CallFor::PurgeQuery(inode) | CallFor::Remove(inode) = purpose {
                assert!(self.files.contains_key(inode), "a remove without its file");
            }
        }
    }
}
