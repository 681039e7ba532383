//! What a `t3fs bench io` job is (fio's knobs: pattern, block size, depth, jobs, sizes, time):
//! the description both the runner (bench_io.rs) and its report (bench_report.rs) name.
//! A leaf: it knows nothing of running a job or of reports.

use std::time::Duration;

/// The I/O pattern (fio `rw`).
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Rw {
    /// Sequential reads.
    Read,
    /// Sequential writes.
    Write,
    /// Uniform random reads.
    RandRead,
    /// Uniform random writes.
    RandWrite,
    /// Uniform random mix (`rwmixread` % reads).
    RandRw,
}

impl std::str::FromStr for Rw {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "read" => Self::Read,
            "write" => Self::Write,
            "randread" => Self::RandRead,
            "randwrite" => Self::RandWrite,
            "randrw" => Self::RandRw,
            _ => {
                return Err(format!(
                    "rw `{s}`: expected read, write, randread, randwrite or randrw"
                ))
            }
        })
    }
}

/// A job description.
#[derive(Clone, Debug)]
pub struct Job {
    /// Pattern.
    pub rw: Rw,
    /// Percentage of reads in `randrw`.
    pub rwmixread: u32,
    /// Block size, bytes.
    pub bs: u64,
    /// I/Os in flight per job.
    pub iodepth: usize,
    /// Jobs.
    pub numjobs: usize,
    /// Bytes per file.
    pub size: u64,
    /// Stop after this long (with `time_based`, loop until then).
    pub runtime: Option<Duration>,
    /// Loop over the file until `runtime`.
    pub time_based: bool,
    /// Unrecorded warm-up.
    pub ramp_time: Duration,
    /// Open loop: I/Os per second per job.
    pub rate_iops: Option<u64>,
    /// One file shared by every job (else a file per job).
    pub shared: bool,
    /// Check every read and read every block back at the end (fio `verify`).
    pub verify: bool,
}
