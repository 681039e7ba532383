//! The roofline of a `bench io` run: each measured figure next to the host's probed bounds,
//! which one binds, and the fraction reached. For an R-replica write every payload crosses the
//! loopback R times (client to head, then down the chain) and lands on a disk R times, so both
//! bounds divide by R; a read crosses once and comes from one disk. Random reads of 4 KiB are
//! held to the probe's random-read IOPS at the same total queue depth. A read that beats the
//! O_DIRECT disk bound was served from the page cache and is bound by the next bound
//! ([`Row::binding`]). Not here: measuring
//! (probe.rs) or running the load (bench_io.rs).

use crate::bench_io::{Report, Rw};
use crate::probe::Probe;

/// One row.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// `read` or `write`.
    pub op: &'static str,
    /// The unit of `measured` and `bound` (`MiB/s` or `IOPS`).
    pub unit: &'static str,
    /// What the run reached.
    pub measured: f64,
    /// Every bound considered: (name, value).
    pub bounds: Vec<(String, f64)>,
    /// A figure that explains the row without bounding the host: for a write, the disk's
    /// buffered durable writes ÷ R, the file store's own data path (page cache, then
    /// fdatasync), which on some disks is far below what O_DIRECT shows.
    pub context: Option<(String, f64)>,
}

/// A read beating a bound by more than this factor was not bound by it.
const BEATEN: f64 = 1.02;

impl Row {
    /// The binding bound: the lowest, except that a read skips the disk bounds it beat (the
    /// file store reads through the page cache, which the O_DIRECT probe bypasses, so a cached
    /// read is bound by what comes next). Nothing else is skipped: every byte of a read crosses
    /// loopback, and a write's durable-disk bound cannot be cached around, so a run beating
    /// one of those means the probe under-measured it, and shows as over 100%.
    pub fn binding(&self) -> (&str, f64) {
        let binds = |b: &&(String, f64)| {
            self.op != "read" || !b.0.starts_with("disk") || self.measured <= b.1 * BEATEN
        };
        let by_value = |a: &&(String, f64), b: &&(String, f64)| a.1.total_cmp(&b.1);
        let lowest = self.bounds.iter().filter(binds).min_by(by_value);
        lowest
            .or_else(|| self.bounds.iter().max_by(by_value))
            .map(|(n, v)| (n.as_str(), *v))
            .unwrap_or(("none", f64::INFINITY))
    }

    /// The disk bounds a read beat (not binding it: served from the page cache).
    pub fn beaten(&self) -> Vec<&(String, f64)> {
        let binding = self.binding().0;
        self.bounds
            .iter()
            .filter(|b| b.0 != binding && b.0.starts_with("disk") && self.measured > b.1 * BEATEN)
            .collect()
    }

    /// Percentage of the binding bound reached.
    pub fn percent(&self) -> f64 {
        100.0 * self.measured / self.binding().1.max(1e-9)
    }

    /// [`Row::context`] as a clause (empty without one).
    pub fn context_text(&self) -> String {
        self.context.as_ref().map_or_else(String::new, |(name, v)| {
            format!(
                "; against {name} ({v:.1} {}) it reached {:.0}%",
                self.unit,
                100.0 * self.measured / v.max(1e-9)
            )
        })
    }
}

/// The rows of `report` against `probe` on a cluster with `replicas` replicas per chain.
pub fn rows(report: &Report, probe: &Probe, replicas: u32) -> Vec<Row> {
    let secs = report.elapsed.as_secs_f64().max(1e-9);
    let r = f64::from(replicas.max(1));
    let random = matches!(report.job.rw, Rw::RandRead | Rw::RandWrite | Rw::RandRw);
    let small = report.job.bs <= 64 * 1024;
    report
        .ops
        .iter()
        .map(|(op, s)| {
            let mibs = s.bytes as f64 / (1 << 20) as f64 / secs;
            let iops = s.hist.len() as f64 / secs;
            match (*op, random && small) {
                ("read", true) => Row {
                    op: "read",
                    unit: "IOPS",
                    measured: iops,
                    bounds: vec![(
                        format!("disk 4k random read at qd {}", probe.qd),
                        probe.rand_read_iops,
                    )],
                    context: None,
                },
                ("read", false) => Row {
                    op: "read",
                    unit: "MiB/s",
                    measured: mibs,
                    bounds: vec![
                        (
                            format!("disk sequential read (O_DIRECT) at qd {}", probe.qd),
                            probe.disk_read_mibs,
                        ),
                        (
                            format!("loopback TCP ({} streams)", probe.loopback_streams),
                            probe.loopback_mibs,
                        ),
                    ],
                    context: None,
                },
                (_, _) => Row {
                    op: "write",
                    unit: "MiB/s",
                    measured: mibs,
                    bounds: vec![
                        (
                            format!(
                                "disk write (durable) at {} streams ÷ {replicas}",
                                probe.write_qd
                            ),
                            probe.disk_write_mibs / r,
                        ),
                        (
                            format!(
                                "loopback TCP ({} streams) ÷ {replicas} hops",
                                probe.loopback_streams
                            ),
                            probe.loopback_mibs / r,
                        ),
                    ],
                    context: Some((
                        format!(
                            "the file store's data path, buffered durable writes at {} \
                             streams ÷ {replicas}",
                            probe.write_qd
                        ),
                        probe.disk_write_buffered_mibs / r,
                    )),
                },
            }
        })
        .collect()
}

/// The rows as text, one line each.
pub fn text(rows: &[Row]) -> String {
    rows.iter()
        .map(|r| {
            let (name, bound) = r.binding();
            let beaten: String = r
                .beaten()
                .iter()
                .map(|(n, v)| format!("; beat {n} {v:.1} (page cache)"))
                .collect();
            format!(
                "roofline {}: {:.1} {} of {:.1} {} bound by {} ({:.0}%){beaten}\n",
                r.op,
                r.measured,
                r.unit,
                bound,
                r.unit,
                name,
                r.percent()
            )
        })
        .collect()
}

/// The rows as a JSON array.
pub fn json(rows: &[Row]) -> String {
    let items: Vec<String> = rows
        .iter()
        .map(|r| {
            let (name, bound) = r.binding();
            let bounds: Vec<String> = r.bounds.iter().map(|(n, v)| format!("{{\"name\": \"{n}\", \"value\": {v:.1}}}")).collect();
            format!(
                "{{\"op\": \"{}\", \"unit\": \"{}\", \"measured\": {:.1}, \"binding\": \"{name}\", \"bound\": {bound:.1}, \"percent\": {:.1}, \"bounds\": [{}]}}",
                r.op, r.unit, r.measured, r.percent(), bounds.join(", ")
            )
        })
        .collect();
    format!("[{}]", items.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_io::{Job, OpStats};
    use std::time::Duration;

    fn report(rw: Rw, bs: u64, op: &'static str, ios: u64) -> Report {
        let mut hist = hdrhistogram::Histogram::new(3).unwrap();
        for _ in 0..ios {
            hist.record(100).unwrap();
        }
        let job = Job {
            rw,
            rwmixread: 50,
            bs,
            iodepth: 4,
            numjobs: 1,
            size: bs * ios,
            runtime: None,
            time_based: false,
            ramp_time: Duration::ZERO,
            rate_iops: None,
            shared: false,
            verify: false,
        };
        let stats = OpStats {
            hist,
            intervals: Vec::new(),
            bytes: bs * ios,
            errors: 0,
            failed: Vec::new(),
        };
        Report {
            job,
            elapsed: Duration::from_secs(1),
            ops: [(op, stats)].into_iter().collect(),
            zero: std::time::Instant::now(),
            verify: None,
            usage: Default::default(),
        }
    }

    fn probe() -> Probe {
        Probe {
            at: 0,
            disk_write_mibs: 600.0,
            disk_write_buffered_mibs: 450.0,
            disk_read_mibs: 1000.0,
            rand_read_iops: 50_000.0,
            qd: 4,
            write_qd: 12,
            loopback_mibs: 1500.0,
            loopback_streams: 2,
        }
    }

    #[test]
    fn a_replicated_write_divides_both_bounds_by_the_replicas() {
        let rows = rows(&report(Rw::Write, 1 << 20, "write", 100), &probe(), 3);
        assert_eq!(rows.len(), 1);
        assert_eq!(
            rows[0].binding(),
            ("disk write (durable) at 12 streams ÷ 3", 200.0)
        );
        assert!((rows[0].percent() - 50.0).abs() < 1e-9);
        let c = rows[0].context_text();
        assert!(
            c.contains("buffered durable writes at 12 streams ÷ 3 (150.0 MiB/s)"),
            "{c}"
        );
        assert!(c.ends_with("it reached 67%"), "{c}");
    }

    #[test]
    fn a_read_beating_the_disk_bound_is_bound_by_the_next_one_and_a_write_never() {
        let rows = rows(&report(Rw::Read, 1 << 20, "read", 1200), &probe(), 3);
        assert_eq!(rows[0].binding(), ("loopback TCP (2 streams)", 1500.0));
        assert!((rows[0].percent() - 80.0).abs() < 1e-9);
        assert!(text(&rows).contains("beat disk sequential read (O_DIRECT) at qd 4 1000.0"));
        // Every byte of a read crosses loopback: beating it is the probe's error, not a cache.
        let rows = rows_of(Rw::Read, 1800);
        assert_eq!(rows[0].binding(), ("loopback TCP (2 streams)", 1500.0));
        assert!((rows[0].percent() - 120.0).abs() < 1e-9);
        assert_eq!(rows[0].beaten().len(), 1, "only the disk bound is beaten");
        let rows = rows_of(Rw::Read, 900);
        assert!(rows[0].binding().0.starts_with("disk") && rows[0].beaten().is_empty());
        let rows = rows_of(Rw::Write, 300);
        assert!(
            rows[0].binding().0.starts_with("disk write"),
            "a write never skips"
        );
        assert!((rows[0].percent() - 150.0).abs() < 1e-9);
    }

    fn rows_of(rw: Rw, mibs: u64) -> Vec<Row> {
        let op = if rw == Rw::Read { "read" } else { "write" };
        rows(&report(rw, 1 << 20, op, mibs), &probe(), 3)
    }

    #[test]
    fn small_random_reads_are_held_to_the_probed_iops() {
        let rows = rows(&report(Rw::RandRead, 4096, "read", 25_000), &probe(), 3);
        assert_eq!(rows[0].unit, "IOPS");
        assert!((rows[0].percent() - 50.0).abs() < 1e-9);
        assert!(json(&rows).contains("\"percent\": 50.0"));
    }
}
