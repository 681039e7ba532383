//! The `[[step]]` tables of a scenario file: the verb, its fields, and node references checked
//! against the cluster shape, with errors naming the step's line and field.
//!
//! Invariant: a step that parses names only nodes the cluster has. Not here: the rest of the
//! file (load.rs) or executing steps (t3fs-sim).

use toml::Spanned;

use crate::duration::{parse_duration, parse_range};
use crate::load_error::{Cx, ScenarioError};
use crate::schema::{Action, ChainPos, Cluster, NodeRef, Step};

impl Cx<'_> {
    pub(crate) fn step(
        &self,
        index: usize,
        s: &Spanned<toml::Table>,
        cluster: &Cluster,
    ) -> Result<Step, ScenarioError> {
        let line = self.line_of(s.span().start);
        let t = s.get_ref();
        let field_line = |key: &str| self.key_line(s.span().start, key);
        let err = |key: &str, m: String| {
            self.err_line(field_line(key), &format!("step[{index}].{key}"), m)
        };
        let str_of = |key: &str| -> Result<String, ScenarioError> {
            match t.get(key) {
                Some(toml::Value::String(v)) => Ok(v.clone()),
                Some(other) => Err(err(
                    key,
                    format!("expected a string, found {}", other.type_str()),
                )),
                None => Err(err(key, "missing".into())),
            }
        };
        let int_of = |key: &str| -> Result<i64, ScenarioError> {
            match t.get(key) {
                Some(toml::Value::Integer(v)) => Ok(*v),
                Some(other) => Err(err(
                    key,
                    format!("expected an integer, found {}", other.type_str()),
                )),
                None => Err(err(key, "missing".into())),
            }
        };
        let rate_of = |key: &str| -> Result<f64, ScenarioError> {
            let v = match t.get(key) {
                Some(toml::Value::Float(v)) => *v,
                Some(toml::Value::Integer(v)) => *v as f64,
                Some(other) => {
                    return Err(err(
                        key,
                        format!("expected a rate, found {}", other.type_str()),
                    ))
                }
                None => return Err(err(key, "missing".into())),
            };
            if !(0.0..=1.0).contains(&v) {
                return Err(err(key, "a rate within 0..1".into()));
            }
            Ok(v)
        };
        let node_of = |key: &str| -> Result<NodeRef, ScenarioError> {
            parse_node(&str_of(key)?, cluster).map_err(|m| err(key, m))
        };
        let nodes_of = |key: &str| -> Result<Vec<NodeRef>, ScenarioError> {
            match t.get(key) {
                Some(toml::Value::Array(items)) => items
                    .iter()
                    .map(|v| match v {
                        toml::Value::String(s) => parse_node(s, cluster).map_err(|m| err(key, m)),
                        other => Err(err(
                            key,
                            format!("expected node names, found {}", other.type_str()),
                        )),
                    })
                    .collect(),
                Some(toml::Value::String(s)) => {
                    Ok(vec![parse_node(s, cluster).map_err(|m| err(key, m))?])
                }
                Some(other) => Err(err(
                    key,
                    format!("expected a list of nodes, found {}", other.type_str()),
                )),
                None => Err(err(key, "missing".into())),
            }
        };
        let at = parse_duration(&str_of("at")?).map_err(|m| err("at", m))?;
        let verb = str_of("do")?;
        let allowed: &[&str] = match verb.as_str() {
            "crash" | "crash_after_forward" | "pause_on_commit" | "restart" | "restart_empty" | "pause" | "resume"
            | "isolate" | "corrupt_chunk" | "fail_disk" | "heal_disk" | "fill_disk" => &["node"],
            "partition" => &["a", "b", "oneway"],
            "link" => &["a", "b", "latency", "spike", "loss"],
            "repair" | "hold" | "release" => &["a", "b"],
            "heal" | "kv_unavailable" | "kv_available" => &[],
            "set_loss" | "set_duplicate" => &["rate"],
            "set_latency" => &["latency"],
            "flap" => &["node", "down", "up", "count"],
            "skew_clock" => &["node", "offset_ms", "drift_ppm"],
            "step_clock" => &["node", "by_ms"],
            "slow_disk" => &["node", "latency"],
            "drop_heartbeats" => &["node", "for"],
            "kv_faults" => &["conflict", "commit_unknown"],
            other => {
                return Err(err(
                    "do",
                    format!(
                        "unknown verb `{other}` (crash, crash_after_forward, pause_on_commit, restart, \
                         restart_empty, pause, resume, partition, link, isolate, repair, hold, \
                         release, heal, set_loss, set_duplicate, set_latency, flap, skew_clock, \
                         step_clock, corrupt_chunk, fail_disk, heal_disk, slow_disk, fill_disk, \
                         drop_heartbeats, kv_unavailable, kv_available, kv_faults)"
                    ),
                ))
            }
        };
        if let Some(k) = t
            .keys()
            .find(|k| *k != "at" && *k != "do" && !allowed.contains(&k.as_str()))
        {
            return Err(err(
                k,
                format!(
                    "`{verb}` takes {}",
                    if allowed.is_empty() {
                        "no fields".to_string()
                    } else {
                        allowed.join(", ")
                    }
                ),
            ));
        }
        let action = match verb.as_str() {
            "crash" => Action::Crash(node_of("node")?),
            "pause_on_commit" => Action::PauseOnCommit(node_of("node")?),
            "crash_after_forward" => Action::CrashAfterForward(
                storage_only(node_of("node")?).map_err(|m| err("node", m))?,
            ),
            "restart" => Action::Restart(node_of("node")?),
            "restart_empty" => {
                Action::RestartEmpty(storage_only(node_of("node")?).map_err(|m| err("node", m))?)
            }
            "pause" => Action::Pause(node_of("node")?),
            "resume" => Action::Resume(node_of("node")?),
            "isolate" => Action::Isolate(node_of("node")?),
            "corrupt_chunk" => {
                Action::CorruptChunk(storage_only(node_of("node")?).map_err(|m| err("node", m))?)
            }
            "fail_disk" => {
                Action::FailDisk(storage_only(node_of("node")?).map_err(|m| err("node", m))?)
            }
            "heal_disk" => {
                Action::HealDisk(storage_only(node_of("node")?).map_err(|m| err("node", m))?)
            }
            "fill_disk" => {
                Action::FillDisk(storage_only(node_of("node")?).map_err(|m| err("node", m))?)
            }
            "partition" => Action::Partition {
                a: nodes_of("a")?,
                b: nodes_of("b")?,
                oneway: match t.get("oneway") {
                    None => false,
                    Some(toml::Value::Boolean(b)) => *b,
                    Some(_) => return Err(err("oneway", "expected true or false".into())),
                },
            },
            "link" => Action::Link {
                a: nodes_of("a")?,
                b: nodes_of("b")?,
                latency: parse_range(&str_of("latency")?).map_err(|m| err("latency", m))?,
                spike: if t.contains_key("spike") {
                    rate_of("spike")?
                } else {
                    0.0
                },
                loss: if t.contains_key("loss") {
                    rate_of("loss")?
                } else {
                    0.0
                },
            },
            "repair" => Action::Repair {
                a: nodes_of("a")?,
                b: nodes_of("b")?,
            },
            "hold" => Action::Hold {
                a: nodes_of("a")?,
                b: nodes_of("b")?,
            },
            "release" => Action::Release {
                a: nodes_of("a")?,
                b: nodes_of("b")?,
            },
            "heal" => Action::Heal,
            "kv_unavailable" => Action::KvUnavailable,
            "kv_available" => Action::KvAvailable,
            "set_loss" => Action::SetLoss(rate_of("rate")?),
            "set_duplicate" => Action::SetDuplicate(rate_of("rate")?),
            "set_latency" => {
                Action::SetLatency(parse_range(&str_of("latency")?).map_err(|m| err("latency", m))?)
            }
            "flap" => {
                let count = int_of("count")?;
                if !(1..=1000).contains(&count) {
                    return Err(err("count", "use 1 to 1000 cycles".into()));
                }
                Action::Flap {
                    node: node_of("node")?,
                    down: parse_duration(&str_of("down")?).map_err(|m| err("down", m))?,
                    up: parse_duration(&str_of("up")?).map_err(|m| err("up", m))?,
                    count: count as u32,
                }
            }
            "skew_clock" => Action::SkewClock {
                node: node_of("node")?,
                offset_ms: int_of("offset_ms")?,
                drift_ppm: if t.contains_key("drift_ppm") {
                    int_of("drift_ppm")?
                } else {
                    0
                },
            },
            "step_clock" => Action::StepClock {
                node: node_of("node")?,
                by_ms: int_of("by_ms")?,
            },
            "slow_disk" => Action::SlowDisk {
                node: storage_only(node_of("node")?).map_err(|m| err("node", m))?,
                latency: parse_range(&str_of("latency")?).map_err(|m| err("latency", m))?,
            },
            "drop_heartbeats" => Action::DropHeartbeats {
                node: storage_only(node_of("node")?).map_err(|m| err("node", m))?,
                duration: parse_duration(&str_of("for")?).map_err(|m| err("for", m))?,
            },
            "kv_faults" => Action::KvFaults {
                conflict: rate_of("conflict")?,
                commit_unknown: rate_of("commit_unknown")?,
            },
            _ => unreachable!("verbs are matched above"),
        };
        Ok(Step { at, line, action })
    }
}

fn storage_only(n: NodeRef) -> Result<NodeRef, String> {
    match n {
        NodeRef::Storage(_) | NodeRef::ChainPos(..) => Ok(n),
        _ => Err("this verb needs a storage node (storage-N, head:N, middle:N, tail:N)".into()),
    }
}

/// Parses a node reference against the cluster shape.
pub fn parse_node(s: &str, c: &Cluster) -> Result<NodeRef, String> {
    if s == "primary" {
        return Ok(NodeRef::Primary);
    }
    if let Some((pos, chain)) = s.split_once(':') {
        let pos = match pos {
            "head" => ChainPos::Head,
            "middle" => ChainPos::Middle,
            "tail" => ChainPos::Tail,
            _ => return Err(format!("`{s}`: use head:N, middle:N or tail:N")),
        };
        let n: u32 = chain
            .parse()
            .map_err(|_| format!("`{s}`: chain number expected"))?;
        if n == 0 || n > c.chains {
            return Err(format!("`{s}`: chains are numbered 1..={}", c.chains));
        }
        if pos == ChainPos::Middle && c.replicas < 3 {
            return Err(format!("`{s}`: chains of {} have no middle", c.replicas));
        }
        return Ok(NodeRef::ChainPos(pos, n));
    }
    let (role, idx) = s.rsplit_once('-').ok_or_else(|| {
        format!(
            "unknown node `{s}` (mgmtd-N, storage-N, client-N, meta-N, primary, head:N, middle:N, tail:N)"
        )
    })?;
    let i: u32 = idx
        .parse()
        .map_err(|_| format!("`{s}`: index expected after `-`"))?;
    let (node, count) = match role {
        "mgmtd" => (NodeRef::Mgmtd(i), c.mgmtd),
        "storage" => (NodeRef::Storage(i), c.storage_nodes),
        "client" => (NodeRef::Client(i), c.clients),
        "meta" => (NodeRef::Meta(i), c.meta),
        _ => {
            return Err(format!(
            "unknown node `{s}` (mgmtd-N, storage-N, client-N, meta-N, primary, head:N, middle:N, tail:N)"
        ))
        }
    };
    if i >= count {
        return Err(format!(
            "`{s}`: the cluster has {count} {role} nodes (0..{count})"
        ));
    }
    Ok(node)
}
