//! `t3fs bench kvcache`: 3FS's KVCache workload (t3fs-real's `workload::kvcache`) on each
//! target: read throughput per client, mean and peak per interval as 3FS's chart draws it, and
//! GC removes per second beside the removes per second of the same store with nothing else
//! running (the teardown), both measured in the same run.

use std::process::ExitCode;
use std::time::Duration;

use t3fs_real::roofline::Row;
use t3fs_real::workload::kvcache::{self, KvcacheJob, KvcacheOutcome};
use t3fs_real::workload::recorder::{Recorder, Tally};
use t3fs_real::workload::run_dir::{mibs_row, verdict, WorkloadRun};

use crate::bench_ai::{self, Common, Target};

/// `t3fs bench kvcache` knobs.
#[derive(clap::Args, Debug)]
pub struct KvcacheArgs {
    #[command(flatten)]
    common: Common,
    /// Inference clients (each its own native client).
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Bytes per KV block (64k to 4m in 3FS's description).
    #[arg(long, default_value = "1m")]
    block: String,
    /// Blocks written before the read phase.
    #[arg(long, default_value_t = 256)]
    blocks: u64,
    /// Operations in flight per client.
    #[arg(long, default_value_t = 8)]
    depth: usize,
    /// Seconds of the read phase.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Popularity skew (power-law exponent over the newest blocks; 0 is uniform).
    #[arg(long, default_value_t = 1.0)]
    skew: f64,
    /// Percentage of operations that write a new block.
    #[arg(long, default_value_t = 5)]
    write_percent: u32,
    /// Seconds after which a block is expired.
    #[arg(long, default_value_t = 4.0)]
    ttl: f64,
    /// Seconds between GC bursts.
    #[arg(long, default_value_t = 2.0)]
    gc_interval: f64,
    /// Removes in flight in a GC burst.
    #[arg(long, default_value_t = 16)]
    gc_depth: usize,
    /// Interval of the per-client throughput figures, seconds.
    #[arg(long, default_value_t = 0.5)]
    interval: f64,
}

fn job(a: &KvcacheArgs, t: &Target) -> Result<KvcacheJob, String> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    Ok(KvcacheJob {
        clients: a.clients,
        block: t3fs_real::bench_io::parse_size(&a.block)?,
        blocks: a.blocks,
        depth: a.depth,
        seconds: a.seconds,
        skew: a.skew,
        write_percent: a.write_percent,
        ttl: a.ttl,
        gc_interval: a.gc_interval,
        gc_depth: a.gc_depth,
        dir: format!(
            "/t3fs-bench-kvcache/{}-{}-{stamp}",
            t.name,
            std::process::id()
        ),
    })
}

/// The headline figures of one run.
#[derive(Debug, Default)]
pub struct Figures {
    /// Mean read MiB/s per client over the read phase.
    pub client_mean: f64,
    /// The highest read MiB/s of any client in any interval.
    pub client_peak: f64,
    /// Read MiB/s of all clients together.
    pub total: f64,
    /// Removes per second while a GC burst ran.
    pub gc_rate: f64,
    /// Removes per second in the teardown (nothing else running).
    pub remove_bound: f64,
}

fn figures(t: &Tally, o: &KvcacheOutcome, clients: usize) -> Figures {
    let (span, secs) = t.phase_span("read").unwrap_or((0..0, 1.0));
    let per = |v: &Vec<u64>| -> (u64, u64) {
        let s = &v[span.start.min(v.len())..span.end.min(v.len())];
        (s.iter().sum(), s.iter().copied().max().unwrap_or(0))
    };
    let mut sum = 0;
    let mut peak = 0;
    for v in t.client_bytes.values() {
        let (s, p) = per(v);
        sum += s;
        peak = peak.max(p);
    }
    let removed: u64 = o.bursts.iter().map(|b| b.1).sum();
    let took: f64 = o.bursts.iter().map(|b| b.2).sum();
    Figures {
        client_mean: bench_ai::mibs(sum, secs) / clients.max(1) as f64,
        client_peak: bench_ai::mibs(peak, t.interval),
        total: bench_ai::mibs(sum, secs),
        gc_rate: removed as f64 / took.max(1e-9),
        remove_bound: o.teardown.0 as f64 / o.teardown.1.max(1e-9),
    }
}

fn rows(f: &Figures, probe: Option<&t3fs_real::probe::Probe>, t: &Target) -> Vec<Row> {
    vec![
        mibs_row(
            "read (all clients)",
            f.total,
            bench_ai::read_bounds(probe, t),
        ),
        Row {
            op: "GC remove",
            unit: "removes/s",
            measured: f.gc_rate,
            bounds: vec![(
                "removes/s with nothing else running (teardown)".into(),
                f.remove_bound,
            )],
            context: None,
        },
    ]
}

/// Whether every block read was what its writer wrote (and something was read), and the
/// evidence.
fn verdict_of(o: &KvcacheOutcome) -> (bool, String) {
    let detail = format!(
        "{} reads equal to what was written, {} misses (removed by GC first), {} wrong{}",
        o.reads_ok,
        o.misses,
        o.corrupt_reads,
        o.corrupt
            .as_ref()
            .map_or_else(String::new, |c| format!("; first: {c}"))
    );
    (o.corrupt.is_none() && o.reads_ok > 0, detail)
}

fn one(
    a: &KvcacheArgs,
    t: &Target,
    probe: Option<&t3fs_real::probe::Probe>,
) -> Result<
    (
        KvcacheOutcome,
        Figures,
        Vec<Row>,
        std::path::PathBuf,
        String,
    ),
    String,
> {
    let j = job(a, t)?;
    let opts = t3fs_real::cluster::client_options(&a.common.cluster)?;
    let rt = t3fs_client::client::bench_runtime()?;
    let rec = Recorder::new(Duration::from_secs_f64(a.interval));
    let (pb, done) = bench_ai::progress(&rec, &format!("kvcache on {}", t.name));
    let procs = bench_ai::procs(&a.common);
    let cpu0 = t3fs_real::cpu::Sample::take(&procs);
    let r = rt.block_on(async {
        let stores = bench_ai::stores(t, &opts, j.clients).await?;
        kvcache::run(&j, &stores, &rec).await
    });
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    pb.finish_and_clear();
    let usage = t3fs_real::cpu::Usage::between(&cpu0, &t3fs_real::cpu::Sample::take(&procs));
    let o = r?;
    let tally = rec.tally();
    let f = figures(&tally, &o, j.clients);
    let rows = rows(&f, probe, t);
    let (ok, detail) = verdict_of(&o);
    let run = WorkloadRun {
        name: format!("bench kvcache on {}", t.name),
        about: format!(
            "{} clients read {} KV blocks (skew {}) {} deep, {}% writes, GC every {} s of blocks older than {} s",
            j.clients, a.block, j.skew, j.depth, j.write_percent, j.gc_interval, j.ttl
        ),
        command: bench_ai::command(),
        config: format!("{j:#?}\n"),
        shape: bench_ai::shape(&a.common, t),
        tally: &tally,
        probe,
        usage: Some(&usage),
        rows: rows.clone(),
        verdicts: vec![verdict("KV blocks read equal to what was written", ok, detail)],
    };
    let out = a
        .common
        .out
        .clone()
        .unwrap_or_else(|| "runs/bench-kvcache".into());
    let dir = bench_ai::write_run(&out, t, &run)?;
    let limits = bench_ai::limits(&rows, &usage);
    Ok((o, f, rows, dir, limits))
}

/// Runs `t3fs bench kvcache`.
pub fn run(a: KvcacheArgs) -> ExitCode {
    let fail = |e: String| {
        eprintln!("error: t3fs bench kvcache: {e}");
        ExitCode::from(2)
    };
    let (targets, probe) = match bench_ai::setup(&a.common, a.clients * a.depth) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    let mut all_ok = true;
    println!(
        "{:<8} {:>16} {:>16} {:>12} {:>12} {:>14}  verdict",
        "target", "client mean MiB/s", "client peak MiB/s", "all MiB/s", "GC rm/s", "rm/s unloaded"
    );
    for t in &targets {
        let (o, f, rows, dir, limits) = match one(&a, t, probe.as_ref()) {
            Ok(x) => x,
            Err(e) => return fail(format!("on {}: {e}", t.name)),
        };
        let ok = verdict_of(&o).0;
        all_ok &= ok;
        println!(
            "{:<8} {:>16.1} {:>16.1} {:>12.1} {:>12.0} {:>14.0}  {}",
            t.name,
            f.client_mean,
            f.client_peak,
            f.total,
            f.gc_rate,
            f.remove_bound,
            if ok { "PASS" } else { "FAIL" }
        );
        println!(
            "         reads {} ok, {} misses, {} GC bursts; read {}; GC {}; run directory {}",
            o.reads_ok,
            o.misses,
            o.bursts.len(),
            bench_ai::against(&rows[0]),
            bench_ai::against(&rows[1]),
            dir.display()
        );
        if !limits.is_empty() {
            println!("         limits: {limits}");
        }
    }
    if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
