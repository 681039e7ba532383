//! Opening the engine's files: the snapshot into a fresh in-memory engine, the log's header
//! (written again where a crash cut the log's creation short), and the log's frames replayed
//! after the snapshot. Invariants: module docs. Not here: the torn tail's cut and the engine's
//! state (mod.rs).

use std::io;
use std::path::Path;
use std::sync::Arc;

use t3fs_core::kv::mem::MemKv;
use t3fs_core::kv::{CommitReq, KvEngine, KvError, Mutation};

use super::frame::{self, LOG_HEADER};
use super::{damaged, named, SNAPSHOT, WINDOW};
use crate::durable::fs::{DurableFile, DurableFs};

/// Applies recovered writes as one commit of `mem`.
fn replay(mem: &mut MemKv, mutations: Vec<Mutation>) -> Result<(), KvError> {
    let req = CommitReq {
        read_version: mem.read_version()?,
        read_conflicts: Vec::new(),
        mutations,
    };
    mem.commit(req).map(|_| ())
}

/// Reads the snapshot in `dir` (none: version 0, no keys) into a fresh in-memory engine;
/// returns the snapshot's version and the engine.
pub(super) fn load_snapshot(fs: &dyn DurableFs, dir: &Path) -> io::Result<(u64, MemKv)> {
    let snap_path = dir.join(SNAPSHOT);
    let (snap_version, sets) = match fs.read(&snap_path) {
        Ok(bytes) => frame::parse_snapshot(&bytes).map_err(|why| damaged(&snap_path, why))?,
        // No snapshot yet: only the log holds commits. Any other error is not "no snapshot":
        // the log was emptied when the snapshot was written, so reading on would lose it.
        Err(e) if e.kind() == io::ErrorKind::NotFound => (0, Vec::new()),
        Err(e) => return Err(named(&snap_path, e)),
    };
    let mut mem = MemKv::new(WINDOW);
    if !sets.is_empty() {
        if snap_version == 0 {
            return Err(damaged(&snap_path, "live keys at version 0"));
        }
        replay(&mut mem, sets).map_err(|e| damaged(&snap_path, e))?;
    }
    Ok((snap_version, mem))
}

/// Opens the log at `log_path` for appending and reads it; a log whose header a crash cut
/// short gets its header again. Returns the log and its contents.
pub(super) fn open_log(
    fs: &dyn DurableFs,
    log_path: &Path,
) -> io::Result<(Arc<dyn DurableFile>, Vec<u8>)> {
    let at_log = |e| named(log_path, e);
    let wal: Arc<dyn DurableFile> = fs.open_append(log_path).map_err(at_log)?.into();
    let mut data = fs.read(log_path).map_err(at_log)?;
    if data.len() < LOG_HEADER.len() {
        if !LOG_HEADER.starts_with(&data) {
            return Err(damaged(log_path, "not a t3fs log (bad header)"));
        }
        // A log whose creation a crash cut short: it never held a frame.
        wal.set_len(0).map_err(at_log)?;
        wal.append(LOG_HEADER).map_err(at_log)?;
        wal.sync_data().map_err(at_log)?;
        data = LOG_HEADER.to_vec();
    } else if !data.starts_with(LOG_HEADER) {
        return Err(damaged(log_path, "not a t3fs log (bad header)"));
    }
    Ok((wal, data))
}

/// Replays into `mem` the log's frames after the snapshot at `snap_version` (engine versions
/// are `mem`'s plus `base`); returns the next version and the length of the whole frames.
pub(super) fn replay_log(
    mem: &mut MemKv,
    log_path: &Path,
    data: &[u8],
    snap_version: u64,
    base: u64,
) -> io::Result<(u64, usize)> {
    let (commits, good) = frame::scan(data, LOG_HEADER.len()).map_err(|at| {
        damaged(
            log_path,
            format!(
                "damaged frame at byte {at} with whole frames after it (possibly \
                 acknowledged commits); refusing to open"
            ),
        )
    })?;
    let mut next = snap_version + 1;
    for c in commits {
        if next == snap_version + 1 && c.version <= snap_version {
            // Already in the snapshot: a crash came between its rename and the log's
            // truncation.
            continue;
        }
        if c.version != next {
            let hint = if next == snap_version + 1 {
                " (the commits between are missing: a lost snapshot?)"
            } else {
                ""
            };
            let why = format!(
                "frame at byte {} has version {}, expected {next}{hint}",
                c.offset, c.version
            );
            return Err(damaged(log_path, why));
        }
        replay(mem, c.mutations).map_err(|e| damaged(log_path, e))?;
        if mem.version().0 + base != next {
            let why = format!("frame at byte {} writes nothing", c.offset);
            return Err(damaged(log_path, why));
        }
        next += 1;
    }
    Ok((next, good))
}
