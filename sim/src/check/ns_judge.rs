//! The namespace verdicts of a run, from what any run (simulated or on real processes) leaves:
//! its namespace history, its file-data log, the KV's final rows and the file chunks the
//! targets hold. One function, so `t3fs sim run` and `t3fs cluster run` judge a namespace the
//! same way: serializability against the final tree, fsck with file lengths, file reads.
//!
//! Invariant: with `log`, a failed serializability check prints the whole history and the
//! final tree (what a reader needs to see why). Not here: producing the logs or waiting for GC.

use t3fs_core::kv::mem::MemKv;

use super::file_length::{acknowledged_hints, Extents};
use super::verdicts::NsVerdicts;
use super::Verdict;
use crate::history::file_io::FileIo;
use crate::history::ns::NsHistory;

/// The length bounds of file chunks from `chunks` (per file, per chunk index, the longest
/// committed length on any target) and the logs' hints and cuts.
pub fn extents(
    h: &NsHistory,
    io: &FileIo,
    chunks: std::collections::BTreeMap<
        t3fs_core::ids::InodeId,
        std::collections::BTreeMap<u32, u32>,
    >,
) -> Extents {
    Extents {
        chunks,
        hints: acknowledged_hints(h),
        cut: io.cuts.keys().copied().collect(),
    }
}

/// The three namespace verdicts. `drained`: GC and session pruning finished; `dirs`: the
/// starting tree's directory count.
pub fn judge(
    h: &NsHistory,
    io: &FileIo,
    kv: &mut MemKv,
    drained: bool,
    extents: &Extents,
    dirs: u32,
    log: bool,
) -> NsVerdicts {
    let integrity = super::ns_fsck::fsck(kv, drained, extents);
    let initial = t3fs_scenario::ns_files::initial_dirs(dirs);
    let serializable = match super::ns_listing::final_listing(kv) {
        Ok(listing) => {
            let v = super::namespace::check(h, &initial, Some(listing.clone()));
            if v.failed() && log {
                for o in &h.ops {
                    println!("ns {o:?}");
                }
                println!("ns final {listing:?}");
            }
            v
        }
        Err(e) => Verdict::Fail(e),
    };
    let file_reads = match super::file_reads::check(io) {
        Ok(s) => Verdict::Pass(s),
        Err(e) => Verdict::Fail(e),
    };
    NsVerdicts {
        serializable,
        integrity,
        file_reads,
    }
}
