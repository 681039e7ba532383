//! The jobs `t3fs calibrate` runs both ways: each job's shape in the simulator (streams, block
//! size, reads or writes) and the real command that stands beside it, `t3fs bench io` for the
//! I/O jobs and the workload benchmarks themselves for the workload jobs (`--workloads`).
//!
//! Invariant: a job's simulated shape is the real command's as far as the chunk workload can
//! say it: the same streams, each one I/O at a time, of the same block size, reading chunks
//! laid out first or writing chunks of its own. Not here: running either side (calibrate.rs,
//! workloads.rs) or judging them.

use super::Args;

/// How a job's real side runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Real {
    /// `t3fs bench io --rw <rw> --numjobs <jobs>`: its summary's side.
    Io,
    /// `t3fs bench checkpoint` on the native client, `jobs` ranks with 1 MiB pieces: the named
    /// phase (`save` or `load`), its roofline row and its operation's latencies.
    Checkpoint(&'static str),
    /// `t3fs bench kvcache` on the native client, `jobs` reads in flight over four clients,
    /// reads only (no new blocks, so no GC): its reads.
    Kvcache,
}

/// One job, run both ways: `jobs` concurrent streams, each one I/O at a time (on the real
/// side `bench io --numjobs`, each its own client and file, or a workload's ranks or reads in
/// flight; in the simulator as many clients).
#[derive(Debug)]
pub(super) struct Job {
    pub name: &'static str,
    pub rw: &'static str,
    pub bs: u32,
    pub jobs: u32,
    /// The side judged: "read" or "write" (a mixed job is judged on each side as two jobs).
    pub side: &'static str,
    pub real: Real,
}

const fn job(name: &'static str, rw: &'static str, bs: u32, jobs: u32) -> Job {
    let side = if matches!(rw.as_bytes(), [b'w', ..]) {
        "write"
    } else {
        "read"
    };
    Job {
        name,
        rw,
        bs,
        jobs,
        side,
        real: Real::Io,
    }
}

/// A mixed job (half reads, half writes), judged on `side`.
const fn mixed(name: &'static str, bs: u32, jobs: u32, side: &'static str) -> Job {
    Job {
        name,
        rw: "randrw",
        bs,
        jobs,
        side,
        real: Real::Io,
    }
}

/// A workload job: 1 MiB operations (one chunk each), `jobs` streams, run for real by `real`.
const fn workload(name: &'static str, rw: &'static str, jobs: u32, real: Real) -> Job {
    let mut j = job(name, rw, 1 << 20, jobs);
    j.real = real;
    j
}

/// The jobs every calibration runs: one stream at a time.
pub(super) const JOBS: [Job; 3] = [
    job("seq-write-1m", "write", 1 << 20, 1),
    job("seq-read-1m", "read", 1 << 20, 1),
    job("randread-4k", "randread", 4096, 1),
];

/// The concurrency variants (`--concurrency`): the same three jobs with 8 streams in flight,
/// as the benchmarks run (depth 8 through 8 clients), and a mixed one: 1 MiB random reads and
/// writes, half each, judged on its reads and on its writes (a run each).
pub(super) const CONCURRENT_JOBS: [Job; 5] = [
    job("seq-write-1m-x8", "write", 1 << 20, 8),
    job("seq-read-1m-x8", "read", 1 << 20, 8),
    job("randread-4k-x8", "randread", 4096, 8),
    mixed("randrw-1m-x8-r", 1 << 20, 8, "read"),
    mixed("randrw-1m-x8-w", 1 << 20, 8, "write"),
];

/// Ranks of the checkpoint jobs.
pub(super) const CHECKPOINT_RANKS: u32 = 4;

/// KVCache's clients; each keeps `jobs / KVCACHE_CLIENTS` reads in flight.
pub(super) const KVCACHE_CLIENTS: u32 = 4;

/// The AI workloads (`--workloads`, issue 40 item 6): a checkpoint saved and loaded by four
/// ranks, and KVCache's reads with 32 in flight (four clients at depth 8, its defaults).
pub(super) const WORKLOAD_JOBS: [Job; 3] = [
    workload(
        "checkpoint-save",
        "write",
        CHECKPOINT_RANKS,
        Real::Checkpoint("save"),
    ),
    workload(
        "checkpoint-load",
        "read",
        CHECKPOINT_RANKS,
        Real::Checkpoint("load"),
    ),
    workload("kvcache-read", "read", KVCACHE_CLIENTS * 8, Real::Kvcache),
];

/// The chunks a job's simulated streams use: 64 each for a write job (the real jobs write
/// files of their own); for a read or mixed job, 64 shared chunks, fewer (at least 8) beyond 8
/// streams, because every simulated client writes each chunk in the prefill, which would
/// otherwise outlast the simulated seconds (the KVCache twin's 32 streams: 16 chunks, 512
/// prefill writes as for the 8-stream jobs). A workload job's real side uses as many blocks.
pub(super) fn chunks(j: &Job) -> u32 {
    if j.rw == "write" {
        64 * j.jobs
    } else {
        (512 / j.jobs).clamp(8, 64)
    }
}

/// The jobs a run calibrates.
pub(super) fn jobs(a: &Args) -> Vec<&'static Job> {
    let extra: &'static [Job] = if a.concurrency { &CONCURRENT_JOBS } else { &[] };
    let workloads: &'static [Job] = if a.workloads { &WORKLOAD_JOBS } else { &[] };
    JOBS.iter().chain(extra).chain(workloads).collect()
}
