//! The `[[step]]` tables of a scenario file: the verb, its fields, and node references checked
//! against the cluster shape, with errors naming the step's line and field.
//!
//! Invariant: a step that parses names only nodes the cluster has. Not here: the rest of the
//! file (load.rs) or executing steps (t3fs-sim).

use core::ops::Range;
use core::time::Duration;

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
        let f = StepTable {
            cx: self,
            index,
            start: s.span().start,
            t: s.get_ref(),
            cluster,
        };
        let at = f.duration_of("at")?;
        let verb = f.str_of("do")?;
        let Some(allowed) = verb_fields(&verb) else {
            return Err(f.err(
                "do",
                format!(
                    "unknown verb `{verb}` (crash, crash_after_forward, pause_on_commit, restart, \
                     restart_empty, pause, resume, partition, link, isolate, repair, hold, \
                     release, heal, set_loss, set_duplicate, set_latency, flap, skew_clock, \
                     step_clock, corrupt_chunk, fail_disk, heal_disk, slow_disk, fill_disk, \
                     drop_heartbeats, kv_unavailable, kv_available, kv_faults)"
                ),
            ));
        };
        f.only_fields(&verb, allowed)?;
        let action = f.action(&verb)?;
        Ok(Step { at, line, action })
    }
}

/// The fields a verb takes besides `at` and `do`; `None` for an unknown verb.
fn verb_fields(verb: &str) -> Option<&'static [&'static str]> {
    Some(match verb {
        "crash"
        | "crash_after_forward"
        | "pause_on_commit"
        | "restart"
        | "restart_empty"
        | "pause"
        | "resume"
        | "isolate"
        | "corrupt_chunk"
        | "fail_disk"
        | "heal_disk"
        | "fill_disk" => &["node"],
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
        _ => return None,
    })
}

/// One `[[step]]` table being read: its fields, typed and checked, with errors that name the
/// step's field and the line of its key.
struct StepTable<'a> {
    cx: &'a Cx<'a>,
    /// 1-based position of the step in the file.
    index: usize,
    /// Offset of the table in the text.
    start: usize,
    t: &'a toml::Table,
    cluster: &'a Cluster,
}

impl StepTable<'_> {
    /// An error about field `key` of this step, at the line of that key.
    fn err(&self, key: &str, m: String) -> ScenarioError {
        let line = self.cx.key_line(self.start, key);
        self.cx
            .err_line(line, &format!("step[{}].{key}", self.index), m)
    }

    /// Refuses a field that `verb` does not take.
    fn only_fields(&self, verb: &str, allowed: &[&str]) -> Result<(), ScenarioError> {
        if let Some(k) = self
            .t
            .keys()
            .find(|k| *k != "at" && *k != "do" && !allowed.contains(&k.as_str()))
        {
            return Err(self.err(
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
        Ok(())
    }

    /// A required string field.
    fn str_of(&self, key: &str) -> Result<String, ScenarioError> {
        match self.t.get(key) {
            Some(toml::Value::String(v)) => Ok(v.clone()),
            Some(other) => Err(self.err(
                key,
                format!("expected a string, found {}", other.type_str()),
            )),
            None => Err(self.err(key, "missing".into())),
        }
    }

    /// A required integer field.
    fn int_of(&self, key: &str) -> Result<i64, ScenarioError> {
        match self.t.get(key) {
            Some(toml::Value::Integer(v)) => Ok(*v),
            Some(other) => Err(self.err(
                key,
                format!("expected an integer, found {}", other.type_str()),
            )),
            None => Err(self.err(key, "missing".into())),
        }
    }

    /// A required rate field (a number within 0..1).
    fn rate_of(&self, key: &str) -> Result<f64, ScenarioError> {
        let v = match self.t.get(key) {
            Some(toml::Value::Float(v)) => *v,
            Some(toml::Value::Integer(v)) => *v as f64,
            Some(other) => {
                return Err(self.err(key, format!("expected a rate, found {}", other.type_str())))
            }
            None => return Err(self.err(key, "missing".into())),
        };
        if !(0.0..=1.0).contains(&v) {
            return Err(self.err(key, "a rate within 0..1".into()));
        }
        Ok(v)
    }

    /// A rate field that defaults to 0 when left out.
    fn rate_or_zero(&self, key: &str) -> Result<f64, ScenarioError> {
        Ok(if self.t.contains_key(key) {
            self.rate_of(key)?
        } else {
            0.0
        })
    }

    /// A required duration field (`250ms`).
    fn duration_of(&self, key: &str) -> Result<Duration, ScenarioError> {
        parse_duration(&self.str_of(key)?).map_err(|m| self.err(key, m))
    }

    /// A required duration range field (`1ms..10ms`).
    fn range_of(&self, key: &str) -> Result<Range<Duration>, ScenarioError> {
        parse_range(&self.str_of(key)?).map_err(|m| self.err(key, m))
    }

    /// A required node field.
    fn node_of(&self, key: &str) -> Result<NodeRef, ScenarioError> {
        parse_node(&self.str_of(key)?, self.cluster).map_err(|m| self.err(key, m))
    }

    /// A required node field that must name a storage node.
    fn storage_node_of(&self, key: &str) -> Result<NodeRef, ScenarioError> {
        storage_only(self.node_of(key)?).map_err(|m| self.err(key, m))
    }

    /// A required field of one node or a list of nodes.
    fn nodes_of(&self, key: &str) -> Result<Vec<NodeRef>, ScenarioError> {
        match self.t.get(key) {
            Some(toml::Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    toml::Value::String(s) => {
                        parse_node(s, self.cluster).map_err(|m| self.err(key, m))
                    }
                    other => Err(self.err(
                        key,
                        format!("expected node names, found {}", other.type_str()),
                    )),
                })
                .collect(),
            Some(toml::Value::String(s)) => Ok(vec![
                parse_node(s, self.cluster).map_err(|m| self.err(key, m))?
            ]),
            Some(other) => Err(self.err(
                key,
                format!("expected a list of nodes, found {}", other.type_str()),
            )),
            None => Err(self.err(key, "missing".into())),
        }
    }

    /// The action of a known `verb`, its fields read in the order they are checked.
    fn action(&self, verb: &str) -> Result<Action, ScenarioError> {
        Ok(match verb {
            "crash" => Action::Crash(self.node_of("node")?),
            "pause_on_commit" => Action::PauseOnCommit(self.node_of("node")?),
            "crash_after_forward" => Action::CrashAfterForward(self.storage_node_of("node")?),
            "restart" => Action::Restart(self.node_of("node")?),
            "restart_empty" => Action::RestartEmpty(self.storage_node_of("node")?),
            "pause" => Action::Pause(self.node_of("node")?),
            "resume" => Action::Resume(self.node_of("node")?),
            "isolate" => Action::Isolate(self.node_of("node")?),
            "corrupt_chunk" => Action::CorruptChunk(self.storage_node_of("node")?),
            "fail_disk" => Action::FailDisk(self.storage_node_of("node")?),
            "heal_disk" => Action::HealDisk(self.storage_node_of("node")?),
            "fill_disk" => Action::FillDisk(self.storage_node_of("node")?),
            "partition" => self.partition()?,
            "link" => self.link()?,
            "repair" => Action::Repair {
                a: self.nodes_of("a")?,
                b: self.nodes_of("b")?,
            },
            "hold" => Action::Hold {
                a: self.nodes_of("a")?,
                b: self.nodes_of("b")?,
            },
            "release" => Action::Release {
                a: self.nodes_of("a")?,
                b: self.nodes_of("b")?,
            },
            "heal" => Action::Heal,
            "kv_unavailable" => Action::KvUnavailable,
            "kv_available" => Action::KvAvailable,
            "set_loss" => Action::SetLoss(self.rate_of("rate")?),
            "set_duplicate" => Action::SetDuplicate(self.rate_of("rate")?),
            "set_latency" => Action::SetLatency(self.range_of("latency")?),
            "flap" => self.flap()?,
            "skew_clock" => self.skew_clock()?,
            "step_clock" => Action::StepClock {
                node: self.node_of("node")?,
                by_ms: self.int_of("by_ms")?,
            },
            "slow_disk" => Action::SlowDisk {
                node: self.storage_node_of("node")?,
                latency: self.range_of("latency")?,
            },
            "drop_heartbeats" => Action::DropHeartbeats {
                node: self.storage_node_of("node")?,
                duration: self.duration_of("for")?,
            },
            "kv_faults" => Action::KvFaults {
                conflict: self.rate_of("conflict")?,
                commit_unknown: self.rate_of("commit_unknown")?,
            },
            _ => unreachable!("verbs are matched above"),
        })
    }

    /// `partition`: the two sides, and whether only `a` to `b` is cut.
    fn partition(&self) -> Result<Action, ScenarioError> {
        Ok(Action::Partition {
            a: self.nodes_of("a")?,
            b: self.nodes_of("b")?,
            oneway: match self.t.get("oneway") {
                None => false,
                Some(toml::Value::Boolean(b)) => *b,
                Some(_) => return Err(self.err("oneway", "expected true or false".into())),
            },
        })
    }

    /// `link`: the latency, spike and loss between two sides.
    fn link(&self) -> Result<Action, ScenarioError> {
        Ok(Action::Link {
            a: self.nodes_of("a")?,
            b: self.nodes_of("b")?,
            latency: self.range_of("latency")?,
            spike: self.rate_or_zero("spike")?,
            loss: self.rate_or_zero("loss")?,
        })
    }

    /// `flap`: a node down and up again `count` times.
    fn flap(&self) -> Result<Action, ScenarioError> {
        let count = self.int_of("count")?;
        if !(1..=1000).contains(&count) {
            return Err(self.err("count", "use 1 to 1000 cycles".into()));
        }
        Ok(Action::Flap {
            node: self.node_of("node")?,
            down: self.duration_of("down")?,
            up: self.duration_of("up")?,
            count: count as u32,
        })
    }

    /// `skew_clock`: a node's clock offset and drift (0 when left out).
    fn skew_clock(&self) -> Result<Action, ScenarioError> {
        Ok(Action::SkewClock {
            node: self.node_of("node")?,
            offset_ms: self.int_of("offset_ms")?,
            drift_ppm: if self.t.contains_key("drift_ppm") {
                self.int_of("drift_ppm")?
            } else {
                0
            },
        })
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
