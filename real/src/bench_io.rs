//! `t3fs bench io`: fio-style load on a running cluster through the native client.
//!
//! Knobs keep fio's names and meanings: `rw` (read, write, randread, randwrite, randrw with
//! `rwmixread`), `bs`, `iodepth` (I/Os in flight per job), `numjobs` (jobs, each its own client),
//! `size` (bytes per job file, or of the shared file), `runtime` with `time_based` (loop over the
//! file until the time is up), `ramp_time` (run but do not record), `rate_iops` (open loop: I/Os
//! start on a fixed schedule per job, and latency counts from the scheduled start, which corrects
//! for coordinated omission), and a file per job or one shared file. The native client keeps no
//! cache, so every I/O reaches storage (`direct=1` in fio's terms).
//!
//! Reads need data: as fio lays out files, a read workload first writes its files (not
//! recorded). Latency goes into HdrHistograms (microseconds, 3 significant digits), one per
//! operation and per one-second interval; [`Report`] holds them and renders fio's JSON
//! vocabulary (bw in KiB/s, iops, clat percentiles in ns up to p99.99). Not here: probing the
//! host's bounds and the roofline (a later step of the same issue).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::sync::mpsc;

use t3fs_core::client::{ClientCall, ClientRet};

use crate::client::{Client, ClientOptions, File};

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
}

/// Parses fio sizes: `4k`, `1m`, `2g`, plain bytes (binary units, as fio's defaults).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim().to_ascii_lowercase();
    let (num, mul) = match s.chars().last() {
        Some('k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('m') => (&s[..s.len() - 1], 1 << 20),
        Some('g') => (&s[..s.len() - 1], 1 << 30),
        _ => (&s[..], 1),
    };
    num.parse::<u64>()
        .map(|n| n * mul)
        .map_err(|_| format!("`{s}`: not a size (e.g. 4k, 1m, 2g)"))
}

/// Latencies and bytes of one operation kind.
pub struct OpStats {
    /// Whole-run latency histogram (µs).
    pub hist: Histogram<u64>,
    /// One histogram per second of the recorded run.
    pub intervals: Vec<Histogram<u64>>,
    /// Bytes moved.
    pub bytes: u64,
    /// I/Os that failed.
    pub errors: u64,
}

impl OpStats {
    fn new() -> Self {
        Self {
            hist: hist(),
            intervals: Vec::new(),
            bytes: 0,
            errors: 0,
        }
    }
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

/// The outcome of a run.
pub struct Report {
    /// The job.
    pub job: Job,
    /// Recorded time.
    pub elapsed: Duration,
    /// By operation: `read`, `write`.
    pub ops: BTreeMap<&'static str, OpStats>,
}

impl Report {
    /// fio-style JSON summary.
    pub fn json(&self) -> String {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        let mut parts = Vec::new();
        for (op, s) in &self.ops {
            let n = s.hist.len();
            let pct: Vec<String> = [1.0, 5.0, 10.0, 50.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.99]
                .iter()
                .map(|q| format!("\"{q:.6}\": {}", s.hist.value_at_quantile(q / 100.0) * 1000))
                .collect();
            parts.push(format!(
                "\"{op}\": {{\"io_bytes\": {}, \"bw\": {}, \"iops\": {:.3}, \"total_ios\": {n}, \"errors\": {}, \"clat_ns\": {{\"min\": {}, \"max\": {}, \"mean\": {:.1}, \"percentile\": {{{}}}}}}}",
                s.bytes,
                (s.bytes as f64 / 1024.0 / secs) as u64,
                n as f64 / secs,
                s.errors,
                s.hist.min() * 1000,
                s.hist.max() * 1000,
                s.hist.mean() * 1000.0,
                pct.join(", ")
            ));
        }
        let j = &self.job;
        format!(
            "{{\"fio version\": \"t3fs-bench-io\", \"global options\": {{\"rw\": \"{:?}\", \"bs\": {}, \"iodepth\": {}, \"numjobs\": {}, \"size\": {}, \"rwmixread\": {}, \"time_based\": {}, \"ramp_time\": {}, \"rate_iops\": {}, \"direct\": 1, \"filename\": \"{}\"}}, \"elapsed_s\": {:.3}, \"jobs\": [{{\"jobname\": \"all\", {}}}]}}\n",
            j.rw,
            j.bs,
            j.iodepth,
            j.numjobs,
            j.size,
            j.rwmixread,
            j.time_based,
            j.ramp_time.as_secs_f64(),
            j.rate_iops.unwrap_or(0),
            if j.shared { "shared" } else { "per-job" },
            secs,
            parts.join(", ")
        )
    }

    /// A one-line human summary per operation.
    pub fn text(&self) -> String {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        self.ops
            .iter()
            .map(|(op, s)| {
                format!(
                    "{op}: {:.1} MiB/s, {:.0} IOPS, clat p50 {} µs p99 {} µs p99.99 {} µs ({} I/Os, {} errors)\n",
                    s.bytes as f64 / (1 << 20) as f64 / secs,
                    s.hist.len() as f64 / secs,
                    s.hist.value_at_quantile(0.5),
                    s.hist.value_at_quantile(0.99),
                    s.hist.value_at_quantile(0.9999),
                    s.hist.len(),
                    s.errors
                )
            })
            .collect()
    }

    /// Writes `summary.json` and one HdrHistogram interval log per operation into `dir`.
    pub fn write(&self, dir: &std::path::Path) -> std::io::Result<()> {
        use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
        use hdrhistogram::serialization::V2DeflateSerializer;
        use std::io::Write;
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("summary.json"), self.json())?;
        for (op, s) in &self.ops {
            let mut f =
                std::io::BufWriter::new(std::fs::File::create(dir.join(format!("{op}.hlog")))?);
            let mut ser = V2DeflateSerializer::new();
            let mut w = IntervalLogWriterBuilder::new()
                .add_comment(&format!(
                    "t3fs bench io: {op} latency in microseconds, 1 s intervals"
                ))
                .begin_log_with(&mut f, &mut ser)
                .map_err(std::io::Error::other)?;
            for (i, h) in s.intervals.iter().enumerate() {
                let tag = Tag::new(op).ok_or_else(|| std::io::Error::other("bad tag"))?;
                w.write_histogram(
                    h,
                    Duration::from_secs(i as u64),
                    Duration::from_secs(1),
                    Some(tag),
                )
                .map_err(std::io::Error::other)?;
            }
            drop(w);
            f.flush()?;
        }
        Ok(())
    }
}

struct Done {
    op: &'static str,
    bytes: u64,
    ok: bool,
    /// Latency from the (scheduled) start.
    lat: Duration,
    /// When it completed, since the run's start.
    at: Duration,
}

fn pattern(k: u64, bs: u64) -> Vec<u8> {
    (0..bs)
        .map(|i| (i.wrapping_mul(31) ^ k.wrapping_mul(131)) as u8)
        .collect()
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn check(j: &Job) -> Result<(), String> {
    if j.bs == 0 || j.size < j.bs {
        return Err(format!(
            "bs {} and size {}: need 0 < bs <= size",
            j.bs, j.size
        ));
    }
    if j.iodepth == 0 || j.numjobs == 0 {
        return Err("iodepth and numjobs must be at least 1".into());
    }
    if j.time_based && j.runtime.is_none() {
        return Err("time_based needs runtime".into());
    }
    if j.rwmixread > 100 {
        return Err("rwmixread is a percentage (0..=100)".into());
    }
    Ok(())
}

/// Runs `job` against the cluster; `progress` is called with the fraction done (0..=1).
pub async fn run(
    opts: ClientOptions,
    job: Job,
    progress: impl Fn(f64) + Send + Sync + 'static,
) -> Result<Report, String> {
    check(&job)?;
    let mut r = [0u8; 8];
    let _ = getrandom::fill(&mut r);
    let tag = format!("{}-{:x}", std::process::id(), u64::from_le_bytes(r));
    let files: Vec<String> = if job.shared {
        vec![format!("/bench-{tag}")]
    } else {
        (0..job.numjobs)
            .map(|k| format!("/bench-{tag}-{k}"))
            .collect()
    };
    // Lay out (create and fill) every file first, as fio does, so reads find data.
    let setup = Client::connect(opts.clone())
        .await
        .map_err(|e| e.to_string())?;
    let blocks = job.size / job.bs;
    for path in &files {
        let f = setup.create(path, 0o644).await.map_err(|e| e.to_string())?;
        let mut k = 0;
        while k < blocks {
            let n = (blocks - k).min(16);
            let pieces = (k..k + n)
                .map(|i| (i * job.bs, pattern(i, job.bs)))
                .collect();
            setup
                .write_many(&f, pieces)
                .await
                .map_err(|e| e.to_string())?;
            k += n;
        }
        setup
            .close_file(&f, blocks * job.bs)
            .await
            .map_err(|e| e.to_string())?;
    }
    setup.close().await;
    let (tx, mut rx) = mpsc::unbounded_channel::<Done>();
    let start = Instant::now();
    let progress = std::sync::Arc::new(progress);
    let mut jobs = tokio::task::JoinSet::new();
    for k in 0..job.numjobs {
        let path = files[if job.shared { 0 } else { k }].clone();
        let (opts, job, tx) = (opts.clone(), job.clone(), tx.clone());
        let p = progress.clone();
        jobs.spawn(async move { job_loop(opts, job, k, path, start, tx, p).await });
    }
    drop(tx);
    let ramp = job.ramp_time;
    let mut ops: BTreeMap<&'static str, OpStats> = BTreeMap::new();
    let mut last = ramp;
    while let Some(d) = rx.recv().await {
        if d.at < ramp {
            continue;
        }
        last = last.max(d.at);
        let s = ops.entry(d.op).or_insert_with(OpStats::new);
        if !d.ok {
            s.errors += 1;
            continue;
        }
        let us = (d.lat.as_micros() as u64).clamp(1, 3_600_000_000);
        let _ = s.hist.record(us);
        let i = (d.at - ramp).as_secs() as usize;
        while s.intervals.len() <= i {
            s.intervals.push(hist());
        }
        let _ = s.intervals[i].record(us);
        s.bytes += d.bytes;
    }
    while let Some(r) = jobs.join_next().await {
        r.map_err(|e| e.to_string())??;
    }
    progress(1.0);
    Ok(Report {
        job,
        elapsed: last.saturating_sub(ramp),
        ops,
    })
}

async fn job_loop(
    opts: ClientOptions,
    job: Job,
    k: usize,
    path: String,
    start: Instant,
    tx: mpsc::UnboundedSender<Done>,
    progress: std::sync::Arc<impl Fn(f64) + Send + Sync>,
) -> Result<(), String> {
    let c = Client::connect(opts).await.map_err(|e| e.to_string())?;
    let write = !matches!(job.rw, Rw::Read | Rw::RandRead);
    let f: File = c.open(&path, write).await.map_err(|e| e.to_string())?;
    let blocks = job.size / job.bs;
    let total = if job.time_based { u64::MAX } else { blocks };
    let deadline = job.runtime.map(|r| start + job.ramp_time + r);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (k as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9));
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<()>();
    let mut in_flight = 0usize;
    let mut i = 0u64;
    let every = job
        .rate_iops
        .map(|r| Duration::from_secs_f64(1.0 / r.max(1) as f64));
    while i < total && deadline.is_none_or(|d| Instant::now() < d) {
        while in_flight >= job.iodepth {
            done_rx.recv().await;
            in_flight -= 1;
        }
        // Open loop: the I/O is due at its slot, and its latency counts from there.
        let due = match every {
            Some(e) => {
                let due = start + e * (i as u32);
                tokio::time::sleep_until(due.into()).await;
                due
            }
            None => Instant::now(),
        };
        let block = match job.rw {
            Rw::Read | Rw::Write => i % blocks,
            _ => rng.next() % blocks,
        };
        let read = match job.rw {
            Rw::Read | Rw::RandRead => true,
            Rw::Write | Rw::RandWrite => false,
            Rw::RandRw => rng.next() % 100 < u64::from(job.rwmixread),
        };
        let call = if read {
            ClientCall::Read {
                inode: f.inode,
                layout: f.layout.clone(),
                offset: block * job.bs,
                len: job.bs,
            }
        } else {
            ClientCall::Write {
                inode: f.inode,
                layout: f.layout.clone(),
                offset: block * job.bs,
                data: pattern(block, job.bs),
            }
        };
        let rx = c.submit(call).await.map_err(|e| e.to_string())?;
        in_flight += 1;
        let (tx, done_tx, bs) = (tx.clone(), done_tx.clone(), job.bs);
        tokio::spawn(async move {
            let r = crate::client::answer(rx).await;
            let ok = matches!(
                r,
                Ok(ClientRet::Read { .. }) | Ok(ClientRet::Updated { .. })
            );
            let now = Instant::now();
            let _ = tx.send(Done {
                op: if read { "read" } else { "write" },
                bytes: bs,
                ok,
                lat: now - due,
                at: now - start,
            });
            let _ = done_tx.send(());
        });
        i += 1;
        if k == 0 {
            let frac = match (deadline, job.time_based) {
                (Some(d), true) => {
                    1.0 - d.saturating_duration_since(Instant::now()).as_secs_f64()
                        / (job.ramp_time + job.runtime.unwrap_or_default())
                            .as_secs_f64()
                            .max(1e-9)
                }
                _ => i as f64 / total as f64,
            };
            progress(frac.clamp(0.0, 1.0));
        }
    }
    while in_flight > 0 {
        done_rx.recv().await;
        in_flight -= 1;
    }
    if write {
        let _ = c.close_file(&f, blocks * job.bs).await;
    }
    c.close().await;
    Ok(())
}
