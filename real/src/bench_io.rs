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
//! Reads need data: as fio lays out files, every run first writes its files (not recorded).
//! Latency goes into HdrHistograms per operation and per one-second interval ([`Report`],
//! bench_report.rs). With `verify`, every block carries its block number and a generation and
//! the run ends by reading every block back (bench_verify.rs). Not here: probing the host's
//! bounds (probe.rs), the roofline (roofline.rs) or the run directory (bench_run.rs).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use t3fs_core::client::{ClientCall, ClientRet};

use crate::bench_verify::{self, Ledger};
use crate::cpu;
use t3fs_client::client::{Client, ClientOptions, File};

pub use crate::bench_job::{Job, Rw};
pub use crate::bench_report::{OpStats, Report};

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

struct Done {
    op: &'static str,
    bytes: u64,
    ok: bool,
    /// Latency from the (scheduled) start.
    lat: Duration,
    /// When it completed, since the run's start.
    at: Duration,
}

/// What one job needs to issue and check its I/O.
struct Ctx {
    job: Job,
    /// Index of the job's file in the run's file list.
    file: usize,
    path: String,
    start: Instant,
    tx: mpsc::UnboundedSender<Done>,
    base: Arc<Vec<u8>>,
    ledger: Option<Arc<Mutex<Ledger>>>,
}

/// xorshift64: the benchmarks' draws (offsets, popularity); seeded, never zero.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A draw in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
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
    if j.verify && j.bs < bench_verify::MIN_BS {
        return Err(format!(
            "verify needs bs of at least {} bytes",
            bench_verify::MIN_BS
        ));
    }
    Ok(())
}

/// Runs `job` against the cluster; `progress` is called with the fraction done (0..=1).
///
/// `procs` names the cluster's processes (name → pid) whose CPU time the report accounts, with
/// this process's as `client`, from the end of the layout to the end of the load.
pub async fn run(
    opts: ClientOptions,
    job: Job,
    procs: BTreeMap<String, i32>,
    progress: impl Fn(f64) + Send + Sync + 'static,
) -> Result<Report, String> {
    check(&job)?;
    // fio's naming: the same files every run (`bench-io.K`, or `bench-io.shared`), laid out
    // again over what is there. Fresh names per run would leave a file set behind each run,
    // and removing them would hand the meta service's GC a purge that lands, after its delay,
    // in the middle of a later run.
    let files: Vec<String> = if job.shared {
        vec!["/bench-io.shared".to_string()]
    } else {
        (0..job.numjobs).map(|k| format!("/bench-io.{k}")).collect()
    };
    let base = Arc::new(bench_verify::base(job.bs));
    let ledger = job.verify.then(|| Arc::new(Mutex::new(Ledger::default())));
    layout(&opts, &job, &files, &base).await?;
    load(&opts, &job, &files, &base, ledger, procs, progress).await
}

/// The load phase of [`run`]: every job, then the verification read-back.
async fn load(
    opts: &ClientOptions,
    job: &Job,
    files: &[String],
    base: &Arc<Vec<u8>>,
    ledger: Option<Arc<Mutex<Ledger>>>,
    procs: BTreeMap<String, i32>,
    progress: impl Fn(f64) + Send + Sync + 'static,
) -> Result<Report, String> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Done>();
    let cpu0 = cpu::Sample::take(&procs);
    let start = Instant::now();
    let progress = Arc::new(progress);
    let mut jobs = tokio::task::JoinSet::new();
    for k in 0..job.numjobs {
        let file = if job.shared { 0 } else { k };
        let ctx = Ctx {
            job: job.clone(),
            file,
            path: files[file].clone(),
            start,
            tx: tx.clone(),
            base: base.clone(),
            ledger: ledger.clone(),
        };
        let (opts, p) = (opts.clone(), progress.clone());
        jobs.spawn(async move { job_loop(opts, ctx, k, p).await });
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
        let s = ops.entry(d.op).or_default();
        s.record(d.ok, d.bytes, d.lat, d.at - ramp);
    }
    while let Some(r) = jobs.join_next().await {
        r.map_err(|e| e.to_string())??;
    }
    let usage = cpu::Usage::between(&cpu0, &cpu::Sample::take(&procs));
    let verify = match &ledger {
        Some(l) => Some(read_back(opts, job, files, base, l).await?),
        None => None,
    };
    progress(1.0);
    Ok(Report {
        job: job.clone(),
        elapsed: last.saturating_sub(ramp),
        ops,
        zero: start + ramp,
        verify,
        usage,
    })
}

/// Creates (or reuses) and fills every file with generation 0 (the ledger knows it without a record), as
/// fio lays out files before a run.
async fn layout(
    opts: &ClientOptions,
    job: &Job,
    files: &[String],
    base: &[u8],
) -> Result<(), String> {
    let setup = Client::connect(opts.clone())
        .await
        .map_err(|e| e.to_string())?;
    let blocks = job.size / job.bs;
    for path in files {
        let f = match setup.create(path, 0o644).await {
            Ok(f) => f,
            // Left by an earlier run: laid out again, block by block.
            Err(_) => setup.open(path, true).await.map_err(|e| e.to_string())?,
        };
        // Large writes whatever the block size: a 4 KiB job's layout goes out in 1 MiB pieces,
        // 16 at a time, each piece the run's stamped blocks back to back.
        let per_piece = ((1u64 << 20) / job.bs).max(1);
        let mut k = 0;
        while k < blocks {
            let mut pieces = Vec::new();
            while k < blocks && pieces.len() < 16 {
                let n = (blocks - k).min(per_piece);
                let mut data = Vec::with_capacity((n * job.bs) as usize);
                for b in k..k + n {
                    data.extend_from_slice(&bench_verify::stamp(base, b, 0));
                }
                pieces.push((k * job.bs, data));
                k += n;
            }
            setup
                .write_many(&f, pieces)
                .await
                .map_err(|e| e.to_string())?;
        }
        setup
            .close_file(&f, blocks * job.bs)
            .await
            .map_err(|e| e.to_string())?;
    }
    setup.close().await;
    Ok(())
}

/// Reads every block of every file back and holds it to the ledger.
async fn read_back(
    opts: &ClientOptions,
    job: &Job,
    files: &[String],
    base: &[u8],
    ledger: &Mutex<Ledger>,
) -> Result<bench_verify::Outcome, String> {
    let c = Client::connect(opts.clone())
        .await
        .map_err(|e| e.to_string())?;
    let blocks = job.size / job.bs;
    for (file, path) in files.iter().enumerate() {
        let f = c.open(path, false).await.map_err(|e| e.to_string())?;
        for b in 0..blocks {
            let data = c
                .read(&f, b * job.bs, job.bs)
                .await
                .map_err(|e| format!("verify: reading back {path} block {b}: {e}"))?;
            if let Ok(mut l) = ledger.lock() {
                l.final_value(file, b, &data, base);
            }
        }
    }
    c.close().await;
    let out = ledger.lock().map_err(|e| e.to_string())?.outcome();
    Ok(out)
}

/// The next I/O of job `k`: (block, is a read).
fn next_io(job: &Job, i: u64, blocks: u64, rng: &mut Rng) -> (u64, bool) {
    let block = match job.rw {
        Rw::Read | Rw::Write => i % blocks,
        _ => rng.next() % blocks,
    };
    let read = match job.rw {
        Rw::Read | Rw::RandRead => true,
        Rw::Write | Rw::RandWrite => false,
        Rw::RandRw => rng.next() % 100 < u64::from(job.rwmixread),
    };
    (block, read)
}

fn fraction(job: &Job, start: Instant, deadline: Option<Instant>, i: u64, total: u64) -> f64 {
    let f = match (deadline, job.time_based) {
        (Some(d), true) => {
            let left = d.saturating_duration_since(Instant::now()).as_secs_f64();
            1.0 - left / d.duration_since(start).as_secs_f64().max(1e-9)
        }
        _ => i as f64 / total as f64,
    };
    f.clamp(0.0, 1.0)
}

/// Job `k`'s I/O loop: its I/Os issued up to `iodepth` at a time (on the `rate_iops` schedule
/// when set) until its blocks or its runtime are done, then every one awaited.
async fn job_loop(
    opts: ClientOptions,
    ctx: Ctx,
    k: usize,
    progress: Arc<impl Fn(f64) + Send + Sync>,
) -> Result<(), String> {
    let job = &ctx.job;
    let c = Client::connect(opts).await.map_err(|e| e.to_string())?;
    let write = !matches!(job.rw, Rw::Read | Rw::RandRead);
    let f: File = c.open(&ctx.path, write).await.map_err(|e| e.to_string())?;
    let blocks = job.size / job.bs;
    let total = if job.time_based { u64::MAX } else { blocks };
    let deadline = job.runtime.map(|r| ctx.start + job.ramp_time + r);
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
        let (block, read) = next_io(job, i, blocks, &mut rng);
        // Generations are unique per (job, I/O); 0 is the layout's.
        let gen = ((k as u64 + 1) << 40) | (i + 1);
        let call = io_call(&ctx, &f, block, read, gen);
        // The call (its buffer stamped) is made before the clock starts, as fio fills its buffers
        // before it times an I/O: a fresh 1 MiB buffer can cost milliseconds in page faults,
        // which are the benchmark's, not the storage system's.
        // Open loop: the I/O is due at its slot, and its latency counts from there.
        let due = match every {
            Some(e) => {
                let due = ctx.start + e * (i as u32);
                tokio::time::sleep_until(due.into()).await;
                due
            }
            None => Instant::now(),
        };
        let rx = c.submit(call).await.map_err(|e| e.to_string())?;
        in_flight += 1;
        spawn_completion(&ctx, rx, (block, read, gen), due, done_tx.clone());
        i += 1;
        if k == 0 {
            progress(fraction(job, ctx.start, deadline, i, total));
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

/// The call of one I/O of `block` in `f`: a read, or a write of the block stamped with `gen`.
fn io_call(ctx: &Ctx, f: &File, block: u64, read: bool, gen: u64) -> ClientCall {
    let job = &ctx.job;
    if read {
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
            data: bench_verify::stamp(&ctx.base, block, gen),
        }
    }
}

/// Spawns the wait for one submitted I/O (`block`, whether a read, its generation), due at
/// `due`: it holds the answer to the ledger, reports the completion, and signals `done_tx`.
fn spawn_completion(
    ctx: &Ctx,
    rx: t3fs_client::client::Reply,
    (block, read, gen): (u64, bool, u64),
    due: Instant,
    done_tx: mpsc::UnboundedSender<()>,
) {
    let job = &ctx.job;
    let tx = ctx.tx.clone();
    let (bs, start, file) = (job.bs, ctx.start, ctx.file);
    let (base, ledger) = (ctx.base.clone(), ctx.ledger.clone());
    tokio::spawn(async move {
        let r = t3fs_client::client::answer(rx).await;
        let now = Instant::now();
        let ok = matches!(
            r,
            Ok(ClientRet::Read { .. }) | Ok(ClientRet::Updated { .. })
        );
        if let Some(l) = &ledger {
            if let Ok(mut l) = l.lock() {
                match &r {
                    Ok(ClientRet::Read { data, .. }) => l.read(file, block, data, &base),
                    _ if !read => l.wrote(file, block, gen, due, ok.then_some(now)),
                    _ => {}
                }
            }
        }
        let _ = tx.send(Done {
            op: if read { "read" } else { "write" },
            bytes: bs,
            ok,
            lat: now - due,
            at: now - start,
        });
        let _ = done_tx.send(());
    });
}
