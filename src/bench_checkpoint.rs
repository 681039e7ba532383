//! `t3fs bench checkpoint`: a torch-distributed-style checkpoint saved by N ranks and loaded
//! back by N ranks on each target (t3fs-real's `workload::checkpoint`), against the host's
//! write bound ÷ replicas and its read bound probed in the same run.

use std::process::ExitCode;
use std::time::Duration;

use t3fs_real::workload::checkpoint::{self, CheckpointJob, CheckpointOutcome};
use t3fs_real::workload::recorder::Recorder;
use t3fs_real::workload::run_dir::{mibs_row, verdict, WorkloadRun};

use crate::bench_ai::{self, Common, Target};

/// `t3fs bench checkpoint` knobs.
#[derive(clap::Args, Debug)]
pub struct CheckpointArgs {
    #[command(flatten)]
    common: Common,
    /// Ranks: writers on save, readers on load (one shard each).
    #[arg(long, default_value_t = 4)]
    ranks: usize,
    /// Size of the whole checkpoint (4k, 1m, 2g).
    #[arg(long, default_value = "1g")]
    size: String,
    /// Bytes per write and read call.
    #[arg(long, default_value = "8m")]
    piece: String,
}

fn job(a: &CheckpointArgs, t: &Target) -> Result<CheckpointJob, String> {
    let size = t3fs_real::bench_io::parse_size(&a.size)?;
    let piece = t3fs_real::bench_io::parse_size(&a.piece)?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let dir = format!(
        "/t3fs-bench-checkpoint/{}-{}-{stamp}",
        t.name,
        std::process::id()
    );
    Ok(CheckpointJob {
        ranks: a.ranks,
        size,
        piece,
        dir,
    })
}

fn config(j: &CheckpointJob) -> String {
    format!(
        "ranks = {}\nsize = {}\npiece = {}\npieces_per_shard = {}\ndir = \"{}\"\n",
        j.ranks,
        j.size,
        j.piece,
        j.pieces_per_shard(),
        j.dir
    )
}

/// Whether every piece loaded equal to what was saved, and the evidence.
fn verdict_of(o: &CheckpointOutcome) -> (bool, String) {
    let ok = o.mismatch.is_none() && o.verified.0 == o.verified.1;
    let detail = format!(
        "{} of {} pieces loaded equal to what was saved{}",
        o.verified.0,
        o.verified.1,
        o.mismatch
            .as_ref()
            .map_or_else(String::new, |m| format!("; first mismatch: {m}"))
    );
    (ok, detail)
}

/// One target's run: the outcome and its run directory's path.
fn one(
    a: &CheckpointArgs,
    t: &Target,
    probe: Option<&t3fs_real::probe::Probe>,
) -> Result<
    (
        CheckpointOutcome,
        Vec<t3fs_real::roofline::Row>,
        std::path::PathBuf,
        String,
    ),
    String,
> {
    let j = job(a, t)?;
    let opts = t3fs_real::cluster::client_options(&a.common.cluster)?;
    let rt = t3fs_client::client::bench_runtime()?;
    let rec = Recorder::new(Duration::from_millis(250));
    let (pb, done) = bench_ai::progress(&rec, &format!("checkpoint on {}", t.name));
    let procs = bench_ai::procs(&a.common);
    let cpu0 = t3fs_real::cpu::Sample::take(&procs);
    let r = rt.block_on(async {
        let stores = bench_ai::stores(t, &opts, j.ranks).await?;
        let out = checkpoint::run(&j, &stores, &rec).await;
        // Best effort: a checkpoint left behind only takes space.
        let _ = stores[0].remove(&j.dir, true).await;
        out
    });
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    pb.finish_and_clear();
    let usage = t3fs_real::cpu::Usage::between(&cpu0, &t3fs_real::cpu::Sample::take(&procs));
    let o = r?;
    let rows = vec![
        mibs_row(
            "save",
            bench_ai::mibs(o.bytes, o.save_secs),
            bench_ai::write_bounds(probe, t),
        ),
        mibs_row(
            "load",
            bench_ai::mibs(o.bytes, o.load_secs),
            bench_ai::read_bounds(probe, t),
        ),
    ];
    let (ok, detail) = verdict_of(&o);
    let tally = rec.tally();
    let run = WorkloadRun {
        name: format!("bench checkpoint on {}", t.name),
        about: format!(
            "{} ranks save a {} checkpoint (a shard each, fsynced, manifest last) and load it back",
            j.ranks, a.size
        ),
        command: bench_ai::command(),
        config: config(&j),
        shape: bench_ai::shape(&a.common, t),
        tally: &tally,
        probe,
        usage: Some(&usage),
        rows: rows.clone(),
        verdicts: vec![verdict(
            "checkpoint loaded equal to what was saved",
            ok,
            detail,
        )],
    };
    let out = a
        .common
        .out
        .clone()
        .unwrap_or_else(|| "runs/bench-checkpoint".into());
    let dir = bench_ai::write_run(&out, t, &run)?;
    let limits = bench_ai::limits(&rows, &usage);
    Ok((o, rows, dir, limits))
}

/// Runs `t3fs bench checkpoint`.
pub fn run(a: CheckpointArgs) -> ExitCode {
    let fail = |e: String| {
        eprintln!("error: t3fs bench checkpoint: {e}");
        ExitCode::from(2)
    };
    let (targets, probe) = match bench_ai::setup(&a.common, a.ranks) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    let mut all_ok = true;
    println!(
        "{:<8} {:>12} {:>12}  verdict  bounds",
        "target", "save MiB/s", "load MiB/s"
    );
    for t in &targets {
        let (o, rows, dir, limits) = match one(&a, t, probe.as_ref()) {
            Ok(x) => x,
            Err(e) => return fail(format!("on {}: {e}", t.name)),
        };
        let ok = verdict_of(&o).0;
        all_ok &= ok;
        println!(
            "{:<8} {:>12.1} {:>12.1}  {}     save {}; load {}",
            t.name,
            rows[0].measured,
            rows[1].measured,
            if ok { "PASS" } else { "FAIL" },
            bench_ai::against(&rows[0]),
            bench_ai::against(&rows[1]),
        );
        println!(
            "         {} MiB in {:.2} s / {:.2} s; run directory {}",
            o.bytes >> 20,
            o.save_secs,
            o.load_secs,
            dir.display()
        );
        if !limits.is_empty() {
            println!("         limits: {limits}");
        }
        if let Some(m) = &o.mismatch {
            println!("         first mismatch: {m}");
        }
    }
    if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
