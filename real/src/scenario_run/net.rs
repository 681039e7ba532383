//! A real run's network faults: the state the scenario's network steps build (cut links between
//! named nodes, isolated nodes, loss and duplication rates, a delay range, links with their own
//! latency and loss, held links), turned into each node's [`NetFaults`] and pushed to its
//! transport's fault layer through the fault RPC. On a `--hosts netns` cluster, cuts and
//! isolation go to the kernel instead (nftables rules in the nodes' namespaces,
//! `netns_rules.rs`); the rest stays in the transport.
//!
//! Invariants: the faults belong to the network, not to a process, so a node that restarts or
//! resumes gets them again (`forget` then `apply`; kernel rules live in the namespace and
//! outlast the process); a node that cannot be reached (paused, down) keeps its pending faults
//! and is retried at the next `apply`, never silently skipped; a kernel rule that fails to apply
//! is an error. Not here: the fault layer itself (transport/faults.rs), the namespaces
//! (netns.rs) and the rules' text (netns_rules.rs).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use t3fs_core::ids::NodeId;

use crate::cluster;
use crate::netns;
use crate::netns_rules::Rules;
use t3fs_services::transport::{Link, NetFaults};

/// The network as the steps have left it.
#[derive(Clone, Debug, Default)]
pub struct Net {
    /// Directed cut links (from, to), by process name.
    pub cut: BTreeSet<(String, String)>,
    /// Isolated processes.
    pub isolated: BTreeSet<String>,
    /// Outbound loss rate on every node.
    pub loss: f64,
    /// Outbound duplication rate on every node.
    pub duplicate: f64,
    /// Outbound delay range on every node.
    pub delay: Option<(Duration, Duration)>,
    /// Directed links (from, to) with their own behaviour.
    pub links: BTreeMap<(String, String), Link>,
    /// Directed links (from, to) whose frames are held.
    pub held: BTreeSet<(String, String)>,
    /// The latency of a spike on a `link` (the scenario's `net_spike_latency`).
    pub spike_latency: (Duration, Duration),
    /// Probability that a heartbeat is lost, on every node.
    pub hb_loss: f64,
    /// Until when each node's heartbeats are dropped (`drop_heartbeats`).
    pub hb_until: BTreeMap<String, std::time::Instant>,
    /// Cuts and isolation are kernel rules (a namespace cluster), not transport faults.
    pub kernel: bool,
    applied: BTreeMap<String, NetFaults>,
    /// The kernel rules each node holds.
    applied_rules: BTreeMap<String, Rules>,
}

impl Net {
    /// Cuts a → b (and b → a unless `oneway`).
    pub fn partition(&mut self, a: &[String], b: &[String], oneway: bool) {
        for x in a {
            for y in b {
                self.cut.insert((x.clone(), y.clone()));
                if !oneway {
                    self.cut.insert((y.clone(), x.clone()));
                }
            }
        }
    }

    /// Restores a ↔ b both ways.
    pub fn repair(&mut self, a: &[String], b: &[String]) {
        self.cut
            .retain(|(x, y)| !(a.contains(x) && b.contains(y) || b.contains(x) && a.contains(y)));
    }

    /// Links a ↔ b (both ways) behave as `link` (a far rack, a congested uplink).
    pub fn link(&mut self, a: &[String], b: &[String], link: Link) {
        for x in a {
            for y in b {
                self.links.insert((x.clone(), y.clone()), link);
                self.links.insert((y.clone(), x.clone()), link);
            }
        }
    }

    /// Holds (or, with `on` false, releases) frames a → b.
    pub fn hold(&mut self, a: &[String], b: &[String], on: bool) {
        for x in a {
            for y in b {
                let k = (x.clone(), y.clone());
                if on {
                    self.held.insert(k);
                } else {
                    self.held.remove(&k);
                }
            }
        }
    }

    /// Every fault cleared.
    pub fn heal(&mut self) {
        let applied = std::mem::take(&mut self.applied);
        let applied_rules = std::mem::take(&mut self.applied_rules);
        *self = Self {
            applied,
            applied_rules,
            kernel: self.kernel,
            spike_latency: self.spike_latency,
            ..Self::default()
        };
    }

    /// `name`'s process no longer has what was applied (it restarted).
    pub fn forget(&mut self, name: &str) {
        self.applied.remove(name);
    }

    /// The faults of process `name`, with node ids from `ids`.
    pub fn faults_of(&self, name: &str, ids: &BTreeMap<String, u32>) -> NetFaults {
        let id = |n: &String| ids.get(n).map(|i| NodeId((*i).into()));
        let mut f = self.transport_faults(name, ids);
        if !self.kernel {
            f.cut_out = self
                .cut
                .iter()
                .filter(|(x, _)| x == name)
                .filter_map(|(_, y)| id(y))
                .collect();
            f.cut_in = self
                .cut
                .iter()
                .filter(|(_, y)| y == name)
                .filter_map(|(x, _)| id(x))
                .collect();
            f.isolated = self.isolated.contains(name);
        }
        f
    }

    /// The kernel rules of process `name` (a namespace cluster), with addresses from `net`.
    pub fn rules_of(&self, name: &str, ids: &BTreeMap<String, u32>, net: &netns::Net) -> Rules {
        Rules {
            drop_to: self
                .cut
                .iter()
                .filter(|(x, _)| x == name)
                .filter_map(|(_, y)| Some(net.host_ip(*ids.get(y)?)))
                .collect(),
            isolated: self.isolated.contains(name),
        }
    }

    /// What stays in the transport whichever way cuts go.
    fn transport_faults(&self, name: &str, ids: &BTreeMap<String, u32>) -> NetFaults {
        let id = |n: &String| ids.get(n).map(|i| NodeId((*i).into()));
        NetFaults {
            cut_out: Default::default(),
            cut_in: Default::default(),
            isolated: false,
            loss: self.loss,
            duplicate: self.duplicate,
            delay: self.delay,
            links: self
                .links
                .iter()
                .filter(|((x, _), _)| x == name)
                .filter_map(|((_, y), l)| Some((id(y)?, *l)))
                .collect(),
            hold: self
                .held
                .iter()
                .filter(|(x, _)| x == name)
                .filter_map(|(_, y)| id(y))
                .collect(),
            hb_loss: self.hb_loss,
            // What is left of the drop, whole milliseconds (the RPC's unit), from now.
            hb_drop: self.hb_until.get(name).map_or(Duration::ZERO, |u| {
                let left = u.saturating_duration_since(std::time::Instant::now());
                Duration::from_millis(left.as_millis() as u64)
            }),
        }
    }

    /// Pushes every changed node's faults (those that never had any and have none need no
    /// call); returns the nodes that could not be reached.
    pub fn apply(&mut self, dir: &Path) -> Result<Vec<String>, String> {
        let ids: BTreeMap<String, u32> = cluster::nodes(dir)?
            .iter()
            .map(|n| (n.name.clone(), n.cfg.node.id))
            .collect();
        if let Some(net) = cluster::net_of(dir) {
            self.kernel = true;
            self.apply_kernel(&ids, &net)?;
        }
        let mut applied = std::mem::take(&mut self.applied);
        let this = &*self;
        let missed = super::pushed::push_changed(
            dir,
            |role| role != "kv",
            |n| this.faults_of(&n.name, &ids),
            &mut applied,
            |f| format!("/fault?{}", f.to_query()),
        );
        self.applied = applied;
        missed
    }
}

impl Net {
    /// Replaces the kernel rules of every node whose rules changed.
    fn apply_kernel(
        &mut self,
        ids: &BTreeMap<String, u32>,
        net: &netns::Net,
    ) -> Result<(), String> {
        for (name, id) in ids {
            let rules = self.rules_of(name, ids, net);
            let held = self.applied_rules.get(name).cloned().unwrap_or_default();
            if rules != held {
                net.apply_rules(*id, &rules)?;
                tracing::info!("{name}: nftables rules {rules:?}");
                self.applied_rules.insert(name.clone(), rules);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn partitions_repairs_and_isolation_become_per_node_faults() {
        let ids: BTreeMap<String, u32> = [("mgmtd-0", 0), ("storage-0", 1), ("storage-1", 2)]
            .into_iter()
            .map(|(n, i)| (n.to_string(), i))
            .collect();
        let mut net = Net::default();
        net.partition(&names(&["storage-1"]), &names(&["mgmtd-0"]), true);
        let s1 = net.faults_of("storage-1", &ids);
        assert_eq!(s1.cut_out, [NodeId(0)].into());
        assert!(s1.cut_in.is_empty());
        assert_eq!(net.faults_of("mgmtd-0", &ids).cut_in, [NodeId(2)].into());
        net.partition(&names(&["storage-0"]), &names(&["mgmtd-0"]), false);
        assert_eq!(net.faults_of("mgmtd-0", &ids).cut_out, [NodeId(1)].into());
        net.repair(&names(&["mgmtd-0"]), &names(&["storage-0", "storage-1"]));
        assert!(net.cut.is_empty());
        net.isolated.insert("storage-0".into());
        net.loss = 0.1;
        let s0 = net.faults_of("storage-0", &ids);
        assert!(s0.isolated && s0.loss == 0.1);
        let far = Link {
            latency: (Duration::from_millis(2), Duration::from_millis(8)),
            ..Link::default()
        };
        net.link(&names(&["storage-0"]), &names(&["mgmtd-0"]), far);
        net.hold(&names(&["storage-1"]), &names(&["storage-0"]), true);
        assert_eq!(net.faults_of("mgmtd-0", &ids).links[&NodeId(1)], far);
        assert_eq!(net.faults_of("storage-1", &ids).hold, [NodeId(1)].into());
        net.hold(&names(&["storage-1"]), &names(&["storage-0"]), false);
        assert!(net.faults_of("storage-1", &ids).hold.is_empty());
        net.heal();
        assert!(net.faults_of("storage-0", &ids).is_clear());
    }

    #[test]
    fn on_a_namespace_cluster_cuts_are_kernel_rules_and_the_rest_stays_in_the_transport() {
        let ids: BTreeMap<String, u32> = [("mgmtd-0", 0), ("storage-0", 1), ("storage-1", 2)]
            .into_iter()
            .map(|(n, i)| (n.to_string(), i))
            .collect();
        let ns = netns::Net {
            key: "abcd".into(),
            subnet: 7,
            hosts: 3,
        };
        let mut net = Net {
            kernel: true,
            ..Net::default()
        };
        net.partition(
            &names(&["storage-1"]),
            &names(&["mgmtd-0", "storage-0"]),
            true,
        );
        net.isolated.insert("storage-0".into());
        net.loss = 0.2;
        let f = net.faults_of("storage-1", &ids);
        assert!(f.cut_out.is_empty() && f.cut_in.is_empty(), "{f:?}");
        assert_eq!(f.loss, 0.2, "loss stays in the transport");
        assert!(!net.faults_of("storage-0", &ids).isolated);
        let r = net.rules_of("storage-1", &ids, &ns);
        let want: BTreeSet<String> = ["10.77.7.10".into(), "10.77.7.11".into()].into();
        assert_eq!(r.drop_to, want);
        assert!(!r.isolated);
        assert!(
            net.rules_of("mgmtd-0", &ids, &ns).is_empty(),
            "a one-way cut"
        );
        assert!(net.rules_of("storage-0", &ids, &ns).isolated);
        net.heal();
        assert!(net.kernel, "healing keeps where cuts go");
        assert!(net.rules_of("storage-1", &ids, &ns).is_empty());
    }
}
