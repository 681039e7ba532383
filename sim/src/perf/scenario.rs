//! Performance scenario files (`scenarios/perf/*.toml`): the cluster, its hardware profile
//! with overrides, the workload and the model's settings. Every key is documented on its field;
//! an unknown key, a missing one or a bad value is reported with the file, line and key.
//!
//! Not here: running them (`run.rs`).

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A performance scenario.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerfScenario {
    /// Its name.
    pub name: String,
    /// One line saying what it shows.
    pub about: String,
    /// `peak_read`, `recovery` or `pipeline`.
    pub kind: String,
    /// Seed of the random chain and replica choices.
    #[serde(default = "one")]
    pub seed: u64,
    /// Simulated seconds (recovery: at most; it ends when the copies do).
    pub duration_s: f64,
    /// Sampling interval of the throughput series, milliseconds.
    #[serde(default = "ten")]
    pub sample_ms: f64,
    /// Events closer than this are handled together, microseconds (0: exact; see engine.rs).
    #[serde(default = "fifty")]
    pub quantum_us: f64,
    /// Hardware.
    pub hardware: HwSection,
    /// Cluster shape.
    pub cluster: ClusterSection,
    /// Client reads (peak_read and recovery; a pipeline's phases say what moves).
    #[serde(default)]
    pub workload: WorkloadSection,
    /// `recovery`: what fails and how much it held.
    pub recovery: Option<RecoverySection>,
    /// `training`: what each simulated accelerator reads and computes.
    pub training: Option<TrainingSection>,
    /// A published figure to compare the prediction with, TiB/s (peak_read).
    pub published_tib_s: Option<f64>,
    /// A published per-client read figure to compare the prediction with, GiB/s (peak_read;
    /// 3FS's KVCache clients).
    pub published_client_gib_s: Option<f64>,
    /// `pipeline`: its phases, run one after another.
    #[serde(default, rename = "phase")]
    pub phases: Vec<PhaseSection>,
    /// `pipeline`: a published rate to compare with, TiB/min of the first phase's data over the
    /// whole run (GraySort's figure).
    pub published_tib_min: Option<f64>,
}

/// `[[phase]]` of a pipeline: equal tasks on task slots of the clients' cores.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSection {
    /// Its name.
    pub name: String,
    /// Data through the phase, TiB (each task moves `tib / tasks`).
    pub tib: f64,
    /// Whether its tasks read their data from storage.
    #[serde(default)]
    pub read: bool,
    /// Whether its tasks write their data to storage, replicated down a chain.
    #[serde(default)]
    pub write: bool,
    /// Tasks in the phase.
    pub tasks: u32,
    /// Cores each task holds: a client runs `client_cores / task_cores` tasks at once.
    #[serde(default = "one_u32")]
    pub task_cores: u32,
    /// Data one core processes per second, MiB/s (the CPU cost per byte); absent: no CPU bound,
    /// and `slots_per_client` says how many tasks a client runs at once.
    pub core_mib_s: Option<f64>,
    /// Amdahl's serial share of a task (0 ..= 1): a task of k cores runs at
    /// `core_mib_s / (s + (1 - s) / k)`, not k times one core.
    #[serde(default)]
    pub serial_fraction: f64,
    /// Tasks a client runs at once when the phase has no CPU rate (a checkpoint's writers).
    pub slots_per_client: Option<u32>,
    /// Bytes per flow, MiB (a task moves its data in units of this).
    #[serde(default = "sixty_four")]
    pub unit_mib: f64,
    /// Seconds a task holds its slot before its first byte moves: the framework's own cost
    /// of starting a task (smallpond's dispatch, process and engine start-up), measured with
    /// no data. 0 by default.
    #[serde(default)]
    pub task_startup_s: f64,
}

fn one_u32() -> u32 {
    1
}
fn sixty_four() -> f64 {
    64.0
}

fn one() -> u64 {
    1
}
fn ten() -> f64 {
    10.0
}
fn fifty() -> f64 {
    50.0
}

/// `[hardware]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HwSection {
    /// A named profile (`3fs-2025`).
    pub profile: String,
    /// Share of each storage NIC taken by other traffic (0 ..< 1).
    #[serde(default)]
    pub background: f64,
    /// Fabric oversubscription instead of the profile's (1: non-blocking).
    pub oversubscription: Option<f64>,
    /// SSDs per storage node instead of the profile's.
    pub ssds: Option<u32>,
    /// Line rate of every NIC (storage and client), Gbps, instead of the profile's.
    pub nic_gbps: Option<f64>,
    /// Line rate of the clients' NIC, Gbps, instead of the profile's (after `nic_gbps`).
    pub client_nic_gbps: Option<f64>,
    /// Cores per client node (pipeline phases with a per-core rate).
    pub client_cores: Option<u32>,
}

/// `[cluster]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    /// Storage nodes.
    pub storage_nodes: u32,
    /// Client nodes.
    pub clients: u32,
    /// Targets per SSD (3FS: 6 in its deploy example).
    pub targets_per_disk: u32,
    /// Replicas per chain.
    pub replicas: u32,
    /// `balanced` or `round-robin`.
    pub table: String,
}

/// `[workload]` (peak_read and recovery).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSection {
    /// Bytes per read, KiB.
    #[serde(default)]
    pub read_kib: u32,
    /// Reads each client keeps in flight.
    #[serde(default)]
    pub concurrency: u32,
}

/// `[training]`: MLPerf Storage's training workload (DLIO) on `accelerators_per_client`
/// accelerators per client node; the run finds how many client nodes keep every accelerator at
/// or above `au_floor`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingSection {
    /// Bytes per sample (one file, read whole).
    pub sample_bytes: f64,
    /// Samples per batch.
    pub batch: u32,
    /// Seconds of computation per batch.
    pub compute_s: f64,
    /// Batches the loader reads ahead.
    pub prefetch: u32,
    /// Accelerators per client node.
    pub accelerators_per_client: u32,
    /// The accelerator utilisation a run must hold (MLPerf Storage: 0.9 for unet3d).
    pub au_floor: f64,
    /// Accelerator counts per client node to run in turn, stopping after the first below the
    /// floor (DLIO's own rule, as a real sweep runs it); empty (the default): the bisection
    /// over client nodes of `accelerators_per_client` each.
    #[serde(default)]
    pub sweep: Vec<u32>,
}

/// `[recovery]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecoverySection {
    /// The node that fails (and comes back empty).
    pub failed_node: u32,
    /// Bytes each of its targets held, GiB.
    pub target_gib: f64,
}

/// Where performance scenarios live.
pub fn perf_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("scenarios")
        .join("perf")
}

/// The file of scenario `name_or_path`, if it is a performance scenario.
pub fn find(name_or_path: &str) -> Option<PathBuf> {
    let p = Path::new(name_or_path);
    if p.extension().is_some_and(|e| e == "toml") && p.exists() {
        let text = std::fs::read_to_string(p).ok()?;
        return text
            .lines()
            .any(|l| l.trim_start().starts_with("kind ="))
            .then(|| p.to_path_buf());
    }
    let f = perf_dir().join(format!("{name_or_path}.toml"));
    f.exists().then_some(f)
}

/// Performance scenarios by name.
pub fn catalog() -> Vec<(String, PathBuf)> {
    let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(perf_dir())
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .filter_map(|p| Some((p.file_stem()?.to_string_lossy().to_string(), p)))
        .collect();
    v.sort();
    v
}

impl PerfScenario {
    /// Reads and checks `path`; errors name the file, line and key.
    pub fn load(path: &Path) -> Result<Self, String> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| format!("{file}: {e}"))?;
        let sc: Self = toml::from_str(&text).map_err(|e| {
            let line = e.span().map_or(0, |s| {
                text[..s.start.min(text.len())].matches('\n').count() + 1
            });
            format!("{file}:{line}: {}", e.message().trim())
        })?;
        sc.check().map_err(|(key, m)| {
            let short = key.rsplit('.').next().unwrap_or(key);
            let line = text
                .lines()
                .position(|l| l.split_once('=').is_some_and(|(k, _)| k.trim() == short))
                .map_or(0, |i| i + 1);
            format!("{file}:{line}: {key}: {m}")
        })?;
        Ok(sc)
    }

    /// Sets `key` (a sweep's parameter) to `value`; the result is checked as a file would be.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let bad = |e: &dyn std::fmt::Display| format!("{key}={value}: {e}");
        let int = |v: &str| v.parse::<u32>().map_err(|e| bad(&e));
        let real = |v: &str| v.parse::<f64>().map_err(|e| bad(&e));
        match key {
            "storage_nodes" => self.cluster.storage_nodes = int(value)?,
            "clients" => self.cluster.clients = int(value)?,
            "replicas" => self.cluster.replicas = int(value)?,
            "targets_per_disk" => self.cluster.targets_per_disk = int(value)?,
            "concurrency" => self.workload.concurrency = int(value)?,
            "read_kib" => self.workload.read_kib = int(value)?,
            "ssds" => self.hardware.ssds = Some(int(value)?),
            "nic_gbps" => self.hardware.nic_gbps = Some(real(value)?),
            "background" => self.hardware.background = real(value)?,
            "oversubscription" => self.hardware.oversubscription = Some(real(value)?),
            _ => {
                return Err(format!(
                    "cannot vary `{key}`: one of storage_nodes, clients, replicas, \
                     targets_per_disk, concurrency, read_kib, ssds, nic_gbps, background, \
                     oversubscription"
                ))
            }
        }
        self.check()
            .map_err(|(k, m)| format!("{key}={value}: {k}: {m}"))
    }

    /// `[hardware]`: a known profile and overrides in range.
    fn check_hardware(&self) -> Result<(), (&'static str, String)> {
        if super::hardware::Hardware::profile(&self.hardware.profile).is_none() {
            return Err((
                "hardware.profile",
                format!("`{}`: known: 3fs-2025", self.hardware.profile),
            ));
        }
        let h = &self.hardware;
        if h.ssds == Some(0) {
            return Err(("hardware.ssds", "at least 1".into()));
        }
        if h.nic_gbps.is_some_and(|g| !(g.is_finite() && g > 0.0)) {
            return Err(("hardware.nic_gbps", "must be positive".into()));
        }
        if h.client_nic_gbps
            .is_some_and(|g| !(g.is_finite() && g > 0.0))
        {
            return Err(("hardware.client_nic_gbps", "must be positive".into()));
        }
        if h.oversubscription
            .is_some_and(|o| !(o.is_finite() && o >= 1.0))
        {
            return Err((
                "hardware.oversubscription",
                "must be 1 (non-blocking) or more".into(),
            ));
        }
        Ok(())
    }

    fn check(&self) -> Result<(), (&'static str, String)> {
        if !matches!(
            self.kind.as_str(),
            "peak_read" | "recovery" | "pipeline" | "training"
        ) {
            return Err((
                "kind",
                format!(
                    "`{}`: expected peak_read, recovery, pipeline or training",
                    self.kind
                ),
            ));
        }
        self.check_hardware()?;
        let c = &self.cluster;
        if c.replicas == 0 || c.storage_nodes < c.replicas {
            return Err(("cluster.replicas", "1 ..= storage_nodes".into()));
        }
        if !(0.0..1.0).contains(&self.hardware.background) {
            return Err(("hardware.background", "must be in 0 ..< 1".into()));
        }
        if !matches!(self.cluster.table.as_str(), "balanced" | "round-robin") {
            return Err(("cluster.table", "expected balanced or round-robin".into()));
        }
        let finite = [
            self.duration_s,
            self.sample_ms,
            self.quantum_us,
            self.hardware.background,
        ]
        .iter()
        .all(|v| v.is_finite());
        if !(finite && self.duration_s > 0.0 && self.sample_ms > 0.0 && self.quantum_us >= 0.0) {
            return Err((
                "duration_s",
                "duration, sample and quantum must be positive".into(),
            ));
        }
        if self.cluster.clients == 0 {
            return Err(("cluster.clients", "must be positive".into()));
        }
        if self.kind == "pipeline" {
            return self.check_pipeline();
        }
        if self.kind == "training" {
            return self.check_training();
        }
        if self.workload.read_kib == 0 || self.workload.concurrency == 0 {
            return Err((
                "workload.read_kib",
                "[workload] needs read_kib and concurrency, both positive".into(),
            ));
        }
        if !self.phases.is_empty() {
            return Err(("phase", "only a pipeline has phases".into()));
        }
        match (&self.recovery, self.kind.as_str()) {
            (None, "recovery") => Err(("recovery", "a recovery scenario needs [recovery]".into())),
            (Some(r), _) if r.failed_node >= self.cluster.storage_nodes => {
                Err(("recovery.failed_node", "not a storage node".into()))
            }
            (Some(r), _) if !(r.target_gib.is_finite() && r.target_gib > 0.0) => {
                Err(("recovery.target_gib", "must be positive".into()))
            }
            (Some(_), _) if self.cluster.replicas < 2 => Err((
                "cluster.replicas",
                "a recovery needs a surviving replica: at least 2".into(),
            )),
            _ => Ok(()),
        }
    }
}

impl PerfScenario {
    /// A pipeline's own rules: phases that move data, a CPU rate or a slot count for each, the
    /// clients' cores where a rate needs them, and no `[workload]`.
    fn check_pipeline(&self) -> Result<(), (&'static str, String)> {
        if self.workload.read_kib != 0 || self.workload.concurrency != 0 {
            return Err((
                "workload",
                "a pipeline's phases say what moves: leave [workload] out".into(),
            ));
        }
        if self.phases.is_empty() {
            return Err(("phase", "a pipeline needs at least one [[phase]]".into()));
        }
        for p in &self.phases {
            if !(p.tib.is_finite() && p.tib > 0.0) || p.tasks == 0 || p.task_cores == 0 {
                return Err((
                    "tib",
                    format!(
                        "phase `{}`: tib, tasks and task_cores must be positive",
                        p.name
                    ),
                ));
            }
            if !(p.read || p.write || p.core_mib_s.is_some()) {
                return Err((
                    "read",
                    format!("phase `{}` neither reads, writes nor computes", p.name),
                ));
            }
            if !(0.0..=1.0).contains(&p.serial_fraction) {
                return Err((
                    "serial_fraction",
                    format!("phase `{}`: must be in 0 ..= 1", p.name),
                ));
            }
            if !(p.unit_mib.is_finite() && p.unit_mib > 0.0) {
                return Err(("unit_mib", format!("phase `{}`: must be positive", p.name)));
            }
            if !(p.task_startup_s.is_finite() && p.task_startup_s >= 0.0) {
                return Err((
                    "task_startup_s",
                    format!("phase `{}`: must be 0 or more", p.name),
                ));
            }
            match (p.core_mib_s, p.slots_per_client) {
                (Some(r), None) if r.is_finite() && r > 0.0 => {
                    let cores = self.hardware.client_cores.unwrap_or(0);
                    if cores < p.task_cores {
                        return Err((
                            "hardware.client_cores",
                            format!(
                                "phase `{}` needs at least task_cores ({}) cores per client",
                                p.name, p.task_cores
                            ),
                        ));
                    }
                }
                (None, Some(s)) if s > 0 => {}
                _ => {
                    return Err(("core_mib_s", format!("phase `{}`: give either a positive core_mib_s (CPU-bound tasks on the clients' cores) or a positive slots_per_client", p.name)));
                }
            }
        }
        Ok(())
    }
}

impl PerfScenario {
    /// A training run's rules: a `[training]` section of positive sizes and times, an AU floor
    /// in (0, 1], and no `[workload]`.
    fn check_training(&self) -> Result<(), (&'static str, String)> {
        if self.workload.read_kib != 0 || self.workload.concurrency != 0 {
            return Err((
                "workload",
                "[training] says what is read: leave [workload] out".into(),
            ));
        }
        let Some(t) = &self.training else {
            return Err(("training", "a training scenario needs [training]".into()));
        };
        let positive = t.sample_bytes.is_finite()
            && t.sample_bytes > 0.0
            && t.compute_s.is_finite()
            && t.compute_s > 0.0;
        if !positive || t.batch == 0 || t.prefetch == 0 || t.accelerators_per_client == 0 {
            return Err(("training.batch", "sample_bytes, batch, compute_s, prefetch and accelerators_per_client must be positive".into()));
        }
        if !(t.au_floor > 0.0 && t.au_floor <= 1.0) {
            return Err(("training.au_floor", "must be in (0, 1]".into()));
        }
        if t.sweep.first() == Some(&0) || t.sweep.windows(2).any(|w| w[0] >= w[1]) {
            return Err((
                "training.sweep",
                "accelerator counts must be positive and increasing".into(),
            ));
        }
        Ok(())
    }
}
