//! `t3fs sim sweep SCENARIO --vary KEY=V1,V2,...`: a peak-read scenario run once per value of
//! one parameter, drawn as a scaling chart with the roofline's bounds at each value, so a
//! researcher sees where the curve leaves the roofline. Writes `OUT/NAME-sweep-KEY/` with
//! `sweep.svg`, `sweep.csv`, `report.md` and each point's own run directory.
//!
//! Not here: sweeping two parameters at once, or recovery scenarios (their figure is a time,
//! not a rate on a roofline).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::run::peak_read;
use super::scenario::PerfScenario;

/// One point of a sweep.
pub struct Point {
    /// The parameter's value.
    pub x: f64,
    /// Predicted aggregate read, TiB/s.
    pub model: f64,
    /// The bounds at this value: (what, TiB/s).
    pub bounds: Vec<(&'static str, f64)>,
}

impl Point {
    /// The binding bound at this value: (what, TiB/s).
    pub fn binding(&self) -> (&'static str, f64) {
        super::run::Peak {
            mean: self.model,
            bounds: self.bounds.clone(),
        }
        .binding()
    }
}

/// Runs the sweep; `progress(i, n)` after each point. Returns the points and the directory.
pub fn sweep(
    path: &Path,
    vary: &str,
    out: &Path,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Vec<Point>, PathBuf), String> {
    let base = PerfScenario::load(path)?;
    if base.kind != "peak_read" {
        return Err(format!("{}: sweeps run peak_read scenarios", base.name));
    }
    let (key, values) = vary
        .split_once('=')
        .ok_or_else(|| format!("--vary {vary}: expected KEY=V1,V2,..."))?;
    let values: Vec<&str> = values
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect();
    if values.len() < 2 {
        return Err(format!("--vary {vary}: give at least two values"));
    }
    let dir = out.join(format!("{}-sweep-{key}", base.name));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut points = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let mut sc = base.clone();
        sc.set(key, v)?;
        let x: f64 = v.parse().map_err(|_| format!("{key}={v}: not a number"))?;
        let point_dir = dir.join(format!("{key}-{v}"));
        std::fs::create_dir_all(&point_dir).map_err(|e| e.to_string())?;
        let (_, p) = peak_read(&sc, &point_dir, &mut |_| {})?;
        points.push(Point {
            x,
            model: p.mean,
            bounds: p.bounds,
        });
        progress(i + 1, values.len());
    }
    write_report(&base, key, &points, &dir)?;
    Ok((points, dir))
}

fn write_report(sc: &PerfScenario, key: &str, points: &[Point], dir: &Path) -> Result<(), String> {
    let mut series = vec![(
        "model".to_string(),
        points.iter().map(|p| (p.x, p.model)).collect(),
    )];
    // Every bound seen at any value (the fabric core's only where it is oversubscribed).
    let mut names: Vec<&str> = Vec::new();
    for b in points.iter().flat_map(|p| p.bounds.iter()) {
        if !names.contains(&b.0) {
            names.push(b.0);
        }
    }
    let at = |p: &Point, n: &str| p.bounds.iter().find(|b| b.0 == n).map(|b| b.1);
    for n in &names {
        let pts = points
            .iter()
            .filter_map(|p| Some((p.x, at(p, n)?)))
            .collect();
        series.push((format!("{n} bound"), pts));
    }
    let chart = t3fs_reports::perf_charts::lines(
        &format!("{}: aggregate read as {key} varies", sc.name),
        key,
        "TiB/s",
        &series,
    )?;
    std::fs::write(dir.join("sweep.svg"), chart).map_err(|e| e.to_string())?;
    let cols: Vec<String> = names.iter().map(|n| n.replace(' ', "_")).collect();
    let mut csv = format!("{key},model_tib_s,{}\n", cols.join(","));
    let mut md = format!(
        "# {} as {key} varies\n\n| {key} | model TiB/s | binding bound | share of it |\n|---|---|---|---|\n",
        sc.name
    );
    for p in points {
        let vals: Vec<String> = names
            .iter()
            .map(|n| at(p, n).map_or(String::new(), |v| format!("{v:.4}")))
            .collect();
        let _ = writeln!(csv, "{},{:.4},{}", p.x, p.model, vals.join(","));
        let (bind, b) = p.binding();
        let _ = writeln!(
            md,
            "| {} | {:.2} | {bind} {b:.2} | {:.1}% |",
            p.x,
            p.model,
            100.0 * p.model / b
        );
    }
    md.push_str(
        "\n![sweep](sweep.svg)\n\nEach point's own report is in its directory here, with the \
         optimism its time quantum allows (an estimate): a point may pass a bound by about that \
         much.\n",
    );
    std::fs::write(dir.join("sweep.csv"), csv).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("report.md"), md).map_err(|e| e.to_string())
}
