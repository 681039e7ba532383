//! Reads a scenario from TOML: serde for the shape, then validation of every value, and errors
//! that name the file, the line and the field (`catalog/x.toml:14: step 2, field `node`: ...`).
//!
//! Invariant: a file that loads is a valid [`Scenario`] (see schema.rs); nothing panics on any
//! input. Not here: the schema's meaning.

use core::ops::Range;
use core::time::Duration;

use serde::de::IntoDeserializer;
use serde::Deserialize;
use toml::Spanned;

use crate::duration::{parse_duration, parse_range};
use crate::hardware::Hardware;
use crate::load_error::Cx;
pub use crate::load_error::ScenarioError;
pub use crate::load_step::parse_node;
use crate::namespace::NsWorkload;
use crate::schema::{Cluster, Expect, Faults, Scenario, Step, Timeouts, Workload};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: Spanned<String>,
    about: Spanned<String>,
    #[serde(default)]
    seeds: Vec<u64>,
    duration: Option<Spanned<String>>,
    converge_within: Option<Spanned<String>>,
    bug: Option<Spanned<String>>,
    #[serde(default)]
    cluster: Option<Spanned<toml::Table>>,
    #[serde(default)]
    workload: Option<Spanned<toml::Table>>,
    #[serde(default)]
    namespace: Option<Spanned<toml::Table>>,
    #[serde(default)]
    hardware: Option<Spanned<toml::Table>>,
    #[serde(default)]
    faults: Option<Spanned<toml::Table>>,
    #[serde(default)]
    step: Vec<Spanned<toml::Table>>,
    #[serde(default)]
    expect: Option<Spanned<toml::Table>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    #[serde(default = "one")]
    mgmtd: u32,
    #[serde(default = "three")]
    storage_nodes: u32,
    #[serde(default = "one")]
    targets_per_node: u32,
    #[serde(default = "three")]
    replicas: u32,
    chains: Option<u32>,
    #[serde(default = "two")]
    clients: u32,
    #[serde(default)]
    meta: u32,
    #[serde(default = "fast")]
    timeouts: String,
    #[serde(default)]
    reject_dirty_reads: bool,
    #[serde(default)]
    storage_lease: bool,
    #[serde(default)]
    serial_forwarding: bool,
    #[serde(default)]
    client_boot_empty: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkload {
    #[serde(default = "four")]
    chunks: u32,
    #[serde(default = "sixteen")]
    write_size: u32,
    #[serde(default = "half")]
    read_fraction: f64,
    #[serde(default = "think")]
    think: String,
    ops_per_client: Option<u64>,
    #[serde(default)]
    prefill: bool,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFaults {
    net_latency: Option<String>,
    net_spike: Option<f64>,
    net_spike_latency: Option<String>,
    loss: Option<f64>,
    duplicate: Option<f64>,
    disk_latency: Option<String>,
    disk_spike: Option<f64>,
    disk_eio: Option<f64>,
    disk_corrupt: Option<f64>,
    torn_write: Option<f64>,
    lost_write: Option<f64>,
    kv_latency: Option<String>,
    kv_conflict: Option<f64>,
    kv_commit_unknown: Option<f64>,
    heartbeat_loss: Option<f64>,
    restart_after: Option<String>,
    clock_offset: Option<String>,
    clock_drift_ppm: Option<u32>,
    buggify: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    #[serde(default = "yes")]
    linearizable: bool,
    #[serde(default)]
    loss_allowed: bool,
    #[serde(default = "yes")]
    converges: bool,
    #[serde(default)]
    undecided_ok: bool,
}

fn one() -> u32 {
    1
}
fn two() -> u32 {
    2
}
fn three() -> u32 {
    3
}
fn four() -> u32 {
    4
}
fn sixteen() -> u32 {
    16
}
fn half() -> f64 {
    0.5
}
fn think() -> String {
    "1ms..10ms".into()
}
fn fast() -> String {
    "fast".into()
}
fn yes() -> bool {
    true
}

/// Loads a scenario file.
pub fn load_file(path: &std::path::Path) -> Result<Scenario, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        file: path.display().to_string(),
        line: 0,
        field: String::new(),
        message: format!("cannot read: {e}"),
    })?;
    parse(&path.display().to_string(), &text)
}

/// Parses scenario text; `file` names it in errors.
pub fn parse(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
    let cx = Cx { file, text };
    let raw: Raw = toml::from_str(text).map_err(|e| cx.toml_error(&e, ""))?;
    let cluster = match &raw.cluster {
        Some(t) => cx.cluster(t)?,
        None => cx.cluster_from(RawCluster::deserialize(empty()).expect("defaults"), 0)?,
    };
    let workload = match &raw.workload {
        Some(t) => cx.workload(t)?,
        None => cx.workload_from(RawWorkload::deserialize(empty()).expect("defaults"), 0)?,
    };
    let namespace = match &raw.namespace {
        Some(t) => Some(cx.namespace(t, &cluster)?),
        None => None,
    };
    let hardware = match &raw.hardware {
        Some(t) => Some(cx.hardware(t)?),
        None => None,
    };
    let faults = match &raw.faults {
        Some(t) => cx.faults(t)?,
        None => Faults::default(),
    };
    let expect = match &raw.expect {
        Some(t) => cx.expect(t)?,
        None => Expect::default(),
    };
    let steps = cx.steps(&raw.step, &cluster)?;
    let dur = |v: &Option<Spanned<String>>, field: &str, default: u64| match v {
        Some(s) => parse_duration(s.get_ref()).map_err(|m| cx.err(s.span().start, field, m)),
        None => Ok(Duration::from_secs(default)),
    };
    let duration = dur(&raw.duration, "duration", 30)?;
    if let Some(last) = steps.last() {
        if last.at > duration {
            return Err(cx.err_line(
                last.line,
                "at",
                "step runs after `duration` ends".to_string(),
            ));
        }
    }
    Ok(Scenario {
        name: raw.name.into_inner(),
        about: raw.about.into_inner(),
        seeds: if raw.seeds.is_empty() {
            vec![1]
        } else {
            raw.seeds
        },
        duration,
        converge_within: dur(&raw.converge_within, "converge_within", 60)?,
        cluster,
        workload,
        namespace,
        faults,
        hardware,
        steps,
        expect,
        bug: raw.bug.map(Spanned::into_inner),
    })
}

fn empty() -> serde::de::value::MapDeserializer<
    'static,
    std::iter::Empty<(String, String)>,
    serde::de::value::Error,
> {
    serde::de::value::MapDeserializer::new(std::iter::empty())
}

impl Cx<'_> {
    /// A serde/toml error: its span gives the line; the key on that line (or the backticked name
    /// in the message) gives the field.
    fn toml_error(&self, e: &toml::de::Error, prefix: &str) -> ScenarioError {
        let line = e.span().map(|s| self.line_of(s.start)).unwrap_or(0);
        let key = e
            .span()
            .and_then(|s| {
                let start = self.text[..s.start].rfind('\n').map_or(0, |i| i + 1);
                let l = &self.text[start..];
                let l = &l[..l.find('\n').unwrap_or(l.len())];
                l.split_once('=').map(|(k, _)| k.trim().to_string())
            })
            .unwrap_or_default();
        let field = match (prefix.is_empty(), key.is_empty()) {
            (true, _) => key,
            (false, true) => prefix.to_string(),
            (false, false) => format!("{prefix}.{key}"),
        };
        self.err_line(line, &field, e.message().trim().to_string())
    }

    /// Deserializes a sub-table; errors point into it.
    fn table<T: for<'de> Deserialize<'de>>(
        &self,
        t: &Spanned<toml::Table>,
        name: &str,
    ) -> Result<T, ScenarioError> {
        T::deserialize(toml::Value::Table(t.get_ref().clone()).into_deserializer()).map_err(|e| {
            // Errors from a detached table carry no span: find the offending key by name.
            let msg = e.message().trim().to_string();
            let key = msg.split('`').nth(1).unwrap_or("").to_string();
            let line = self.key_line(t.span().start, &key);
            let field = if key.is_empty() {
                name.to_string()
            } else {
                format!("{name}.{key}")
            };
            self.err_line(line, &field, msg)
        })
    }

    /// The line of `key = ...` at or after `from` (the table's own line when not found).
    pub(crate) fn key_line(&self, from: usize, key: &str) -> usize {
        let base = self.line_of(from);
        if key.is_empty() {
            return base;
        }
        self.text
            .lines()
            .enumerate()
            .skip(base - 1)
            .find(|(_, l)| l.split_once('=').is_some_and(|(k, _)| k.trim() == key))
            .map_or(base, |(i, _)| i + 1)
    }

    /// The `[namespace]` section; it needs meta servers in the cluster.
    fn namespace(
        &self,
        t: &Spanned<toml::Table>,
        cluster: &Cluster,
    ) -> Result<NsWorkload, ScenarioError> {
        let raw: crate::namespace::RawNamespace = self.table(t, "namespace")?;
        let from = t.span().start;
        let ns = raw.validate().map_err(|(key, m)| {
            self.err_line(self.key_line(from, key), &format!("namespace.{key}"), m)
        })?;
        if cluster.meta == 0 {
            return Err(self.err(
                from,
                "namespace",
                "a namespace workload needs `cluster.meta` of at least 1",
            ));
        }
        Ok(ns)
    }

    /// The `[hardware]` section.
    fn hardware(&self, t: &Spanned<toml::Table>) -> Result<Hardware, ScenarioError> {
        let raw: crate::hardware::RawHardware = self.table(t, "hardware")?;
        let from = t.span().start;
        raw.validate().map_err(|(key, m)| {
            self.err_line(self.key_line(from, key), &format!("hardware.{key}"), m)
        })
    }

    /// The `[expect]` section.
    fn expect(&self, t: &Spanned<toml::Table>) -> Result<Expect, ScenarioError> {
        let e: RawExpect = self.table(t, "expect")?;
        Ok(Expect {
            linearizable: e.linearizable,
            loss_allowed: e.loss_allowed,
            converges: e.converges,
            undecided_ok: e.undecided_ok,
        })
    }

    /// The `[[step]]` tables, numbered from 1 in file order, sorted by time.
    fn steps(
        &self,
        raw: &[Spanned<toml::Table>],
        cluster: &Cluster,
    ) -> Result<Vec<Step>, ScenarioError> {
        let mut steps = Vec::new();
        for (i, s) in raw.iter().enumerate() {
            steps.push(self.step(i + 1, s, cluster)?);
        }
        steps.sort_by_key(|s| s.at);
        Ok(steps)
    }

    fn cluster(&self, t: &Spanned<toml::Table>) -> Result<Cluster, ScenarioError> {
        let raw: RawCluster = self.table(t, "cluster")?;
        self.cluster_from(raw, self.line_of(t.span().start))
    }

    fn cluster_from(&self, c: RawCluster, line: usize) -> Result<Cluster, ScenarioError> {
        let bad = |field: &str, m: String| self.err_line(line, &format!("cluster.{field}"), m);
        if c.mgmtd == 0 || c.mgmtd > 7 {
            return Err(bad("mgmtd", format!("{} mgmtd: use 1 to 7", c.mgmtd)));
        }
        if c.replicas == 0 || c.replicas as usize > t3fs_core::limits::CHAIN_TARGETS_MAX {
            return Err(bad(
                "replicas",
                format!("{} replicas per chain", c.replicas),
            ));
        }
        if c.storage_nodes < c.replicas {
            return Err(bad(
                "storage_nodes",
                format!(
                    "{} storage nodes cannot host chains of {}",
                    c.storage_nodes, c.replicas
                ),
            ));
        }
        if c.targets_per_node == 0 || c.targets_per_node > 64 {
            return Err(bad("targets_per_node", "use 1 to 64".into()));
        }
        let targets = c.storage_nodes * c.targets_per_node;
        let chains = c.chains.unwrap_or(targets / c.replicas);
        if chains == 0 || chains * c.replicas > targets {
            return Err(bad(
                "chains",
                format!(
                    "{chains} chains of {} need more than {targets} targets",
                    c.replicas
                ),
            ));
        }
        if c.clients == 0 || c.clients > 1024 {
            return Err(bad("clients", "use 1 to 1024".into()));
        }
        if c.meta > 16 {
            return Err(bad("meta", "use 0 to 16".into()));
        }
        let timeouts = match c.timeouts.as_str() {
            "fast" => Timeouts::Fast,
            "3fs" => Timeouts::ThreeFs,
            other => {
                return Err(bad(
                    "timeouts",
                    format!("`{other}`: use \"fast\" or \"3fs\""),
                ))
            }
        };
        Ok(Cluster {
            mgmtd: c.mgmtd,
            storage_nodes: c.storage_nodes,
            targets_per_node: c.targets_per_node,
            replicas: c.replicas,
            chains,
            clients: c.clients,
            meta: c.meta,
            timeouts,
            reject_dirty_reads: c.reject_dirty_reads,
            storage_lease: c.storage_lease,
            serial_forwarding: c.serial_forwarding,
            client_boot_empty: c.client_boot_empty,
        })
    }

    fn workload(&self, t: &Spanned<toml::Table>) -> Result<Workload, ScenarioError> {
        let raw: RawWorkload = self.table(t, "workload")?;
        self.workload_from(raw, t.span().start)
    }

    fn workload_from(&self, w: RawWorkload, from: usize) -> Result<Workload, ScenarioError> {
        let at = |key: &str, m: String| {
            self.err_line(self.key_line(from, key), &format!("workload.{key}"), m)
        };
        if w.chunks == 0 || w.chunks > 1 << 20 {
            return Err(at("chunks", "use 1 to 1048576".into()));
        }
        if w.write_size < 8 || w.write_size > 1 << 20 {
            return Err(at("write_size", "use 8 bytes to 1 MiB".into()));
        }
        if !(0.0..=1.0).contains(&w.read_fraction) {
            return Err(at("read_fraction", "must be within 0..1".into()));
        }
        let think = parse_range(&w.think).map_err(|m| at("think", m))?;
        Ok(Workload {
            chunks: w.chunks,
            write_size: w.write_size,
            read_fraction: w.read_fraction,
            think,
            ops_per_client: w.ops_per_client,
            prefill: w.prefill,
        })
    }

    fn faults(&self, t: &Spanned<toml::Table>) -> Result<Faults, ScenarioError> {
        let r: RawFaults = self.table(t, "faults")?;
        let from = t.span().start;
        let mut f = Faults::default();
        let rate = |key: &str, v: Option<f64>, into: &mut f64| -> Result<(), ScenarioError> {
            if let Some(v) = v {
                if !(0.0..=1.0).contains(&v) {
                    let line = self.key_line(from, key);
                    return Err(self.err_line(
                        line,
                        &format!("faults.{key}"),
                        "a rate within 0..1",
                    ));
                }
                *into = v;
            }
            Ok(())
        };
        rate("net_spike", r.net_spike, &mut f.net_spike)?;
        rate("loss", r.loss, &mut f.loss)?;
        rate("duplicate", r.duplicate, &mut f.duplicate)?;
        rate("disk_spike", r.disk_spike, &mut f.disk_spike)?;
        rate("disk_eio", r.disk_eio, &mut f.disk_eio)?;
        rate("disk_corrupt", r.disk_corrupt, &mut f.disk_corrupt)?;
        rate("torn_write", r.torn_write, &mut f.torn_write)?;
        rate("lost_write", r.lost_write, &mut f.lost_write)?;
        rate("kv_conflict", r.kv_conflict, &mut f.kv_conflict)?;
        rate(
            "kv_commit_unknown",
            r.kv_commit_unknown,
            &mut f.kv_commit_unknown,
        )?;
        rate("heartbeat_loss", r.heartbeat_loss, &mut f.heartbeat_loss)?;
        let range = |key: &str, v: &Option<String>, into: &mut Range<Duration>| {
            if let Some(v) = v {
                *into = parse_range(v).map_err(|m| {
                    self.err_line(self.key_line(from, key), &format!("faults.{key}"), m)
                })?;
            }
            Ok::<(), ScenarioError>(())
        };
        range("net_latency", &r.net_latency, &mut f.net_latency)?;
        range(
            "net_spike_latency",
            &r.net_spike_latency,
            &mut f.net_spike_latency,
        )?;
        range("disk_latency", &r.disk_latency, &mut f.disk_latency)?;
        range("kv_latency", &r.kv_latency, &mut f.kv_latency)?;
        range("restart_after", &r.restart_after, &mut f.restart_after)?;
        if let Some(v) = &r.clock_offset {
            f.clock_offset = parse_duration(v).map_err(|m| {
                self.err_line(
                    self.key_line(from, "clock_offset"),
                    "faults.clock_offset",
                    m,
                )
            })?;
        }
        f.clock_drift_ppm = r.clock_drift_ppm.unwrap_or(0);
        f.buggify = r.buggify.unwrap_or(false);
        Ok(f)
    }
}
