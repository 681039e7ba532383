//! The outcome of a `bench io` run: latencies (HdrHistogram, microseconds, 3 significant
//! digits) per operation for the whole run and per one-second interval, bytes, failures per
//! interval, and what `verify` found; rendered as fio's JSON vocabulary (bw in KiB/s, iops, clat
//! percentiles in ns up to p99.99), a one-line text summary per operation, and HdrHistogram
//! interval logs. Not here: running the load (bench_io.rs) or the run directory (bench_run.rs).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::bench_job::Job;
use crate::bench_verify::Outcome;

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
    /// Failed I/Os per second of the recorded run.
    pub failed: Vec<u64>,
}

impl OpStats {
    /// Nothing recorded yet.
    pub fn new() -> Self {
        Self {
            hist: hist(),
            intervals: Vec::new(),
            bytes: 0,
            errors: 0,
            failed: Vec::new(),
        }
    }

    /// One I/O completed `at` after recording began, `lat` after it was (due to be) issued.
    pub fn record(&mut self, ok: bool, bytes: u64, lat: Duration, at: Duration) {
        let i = at.as_secs() as usize;
        if !ok {
            self.errors += 1;
            grow(&mut self.failed, i, || 0);
            self.failed[i] += 1;
            return;
        }
        let us = (lat.as_micros() as u64).clamp(1, 3_600_000_000);
        let _ = self.hist.record(us);
        grow(&mut self.intervals, i, hist);
        let _ = self.intervals[i].record(us);
        self.bytes += bytes;
    }
}

impl Default for OpStats {
    fn default() -> Self {
        Self::new()
    }
}

fn grow<T>(v: &mut Vec<T>, i: usize, new: impl Fn() -> T) {
    while v.len() <= i {
        v.push(new());
    }
}

/// A latency histogram: 1 µs to 1 hour, 3 significant digits.
pub fn hist() -> Histogram<u64> {
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
    /// When recording began (after the layout and the ramp).
    pub zero: Instant,
    /// What `verify` found (`None`: the run did not verify).
    pub verify: Option<Outcome>,
    /// CPU use of the host, this client and the cluster's processes during the load.
    pub usage: crate::cpu::Usage,
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
            "{{\"fio version\": \"t3fs-bench-io\", \"global options\": {{\"rw\": \"{:?}\", \"bs\": {}, \"iodepth\": {}, \"numjobs\": {}, \"size\": {}, \"rwmixread\": {}, \"time_based\": {}, \"ramp_time\": {}, \"rate_iops\": {}, \"direct\": 1, \"verify\": {}, \"filename\": \"{}\"}}, \"elapsed_s\": {:.3}, \"jobs\": [{{\"jobname\": \"all\", {}}}], \"verify_result\": {}}}\n",
            j.rw,
            j.bs,
            j.iodepth,
            j.numjobs,
            j.size,
            j.rwmixread,
            j.time_based,
            j.ramp_time.as_secs_f64(),
            j.rate_iops.unwrap_or(0),
            if j.verify { "\"meta\"" } else { "0" },
            if j.shared { "shared" } else { "per-job" },
            secs,
            parts.join(", "),
            self.verify_json()
        )
    }

    fn verify_json(&self) -> String {
        match &self.verify {
            None => "null".into(),
            Some(v) => {
                let problems: Vec<String> = v
                    .problems
                    .iter()
                    .map(|p| format!("\"{}\"", p.replace('"', "'")))
                    .collect();
                format!(
                    "{{\"reads_checked\": {}, \"blocks_checked\": {}, \"problem_count\": {}, \"problems\": [{}]}}",
                    v.reads_checked,
                    v.blocks_checked,
                    v.problem_count,
                    problems.join(", ")
                )
            }
        }
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
