//! The read path of a target (3FS §3.3): exact chain-version check, serving targets only, and
//! committed data only. Under [`ReadMode::RejectDirty`] (legacy engine) a chunk with a pending
//! version answers `NotCommitted`; under [`ReadMode::Committed`] (new engine, 3FS default) the
//! committed version is returned even while an update is in flight.
//!
//! Not here: relaxed reads of pending data (ALLOW_READ_UNCOMMITTED) beyond the planted bug.

use crate::bugs::PlantedBug;
use crate::chunk::{ChunkError, ChunkOp, ChunkRead};
use crate::ids::{ChunkVersion, NodeId, TargetId};
use crate::machine::Outbox;
use crate::msg::{Msg, ReadReply, ReadReq, Status};
use crate::payload::Payload;
use crate::routing::PublicState;
use crate::storage::{IoPurpose, ReadMode, StorageNode};

fn reply(
    out: &mut Outbox<StorageNode>,
    to: NodeId,
    req: &ReadReq,
    status: Status,
    read: Option<ChunkRead>,
) {
    let (data, version, checksum) = match read {
        Some(r) => (r.data, r.version, r.checksum),
        None => (Payload::default(), ChunkVersion(0), 0),
    };
    let msg = ReadReply {
        read_id: req.read_id,
        chunk: req.chunk,
        status,
        data,
        version,
        checksum,
    };
    out.send(to, Msg::ReadReply(msg));
}

impl StorageNode {
    pub(super) fn on_read(&mut self, from: NodeId, req: ReadReq, out: &mut Outbox<Self>) {
        let view = match self.admit_chain(req.chain) {
            Ok(view) => view,
            Err(status) => return reply(out, from, &req, status, None),
        };
        let target = view.target;
        // The planted bug skips only the check, so the refusal counter shows what it let by.
        if !self.leased(out) && !self.bug(PlantedBug::LeaseIgnored) {
            return reply(out, from, &req, Status::NoLease, None);
        }
        let t = &self.targets[&target];
        // Reads need a SERVING, UPTODATE target of a node past its restart phase.
        if view.state != PublicState::Serving || !self.local_ready(target, view.state) {
            return reply(out, from, &req, Status::TargetNotServing, None);
        }
        let read_pending = self.bug(PlantedBug::ReadPending);
        // A pipelined update ahead of this store (`pipeline.rs`) is as dirty as a pending
        // version: a successor may have committed it already.
        let dirty = t
            .chunks
            .get(&req.chunk)
            .is_some_and(|m| m.pending.is_some())
            || t.locks
                .running(req.chunk)
                .is_some_and(|r| r.ahead_of_local());
        if dirty && t.read_mode == ReadMode::RejectDirty && !read_pending {
            return reply(out, from, &req, Status::NotCommitted, None);
        }
        let op = ChunkOp::Read {
            chunk: req.chunk,
            offset: req.offset,
            len: req.len,
            uncommitted: read_pending,
            unverified: self.bug(PlantedBug::ReadCrcSkipped),
        };
        self.submit(out, IoPurpose::Read { target, from, req }, op);
    }

    pub(super) fn read_done(
        &mut self,
        _target: TargetId,
        from: NodeId,
        req: ReadReq,
        result: Result<Option<ChunkRead>, ChunkError>,
        out: &mut Outbox<Self>,
    ) {
        match result {
            Ok(read) => reply(out, from, &req, Status::Ok, read),
            Err(_) => reply(out, from, &req, Status::DiskError, None),
        }
    }
}
