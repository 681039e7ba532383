//! The storage-side lease in the mgmtd model (`CraqConfig::storage_lease`): clocks, lapses and
//! the failure detector they bound.
//!
//! Purpose: the race of planted bug `lease-during-demotion` (swarm seed 4000194). mgmtd's
//! deadline for a live node fires (the node was cut off), the chain update that takes the node's
//! SERVING target out is being committed, the node's next heartbeat is accepted in between and
//! renews its lease, the commit lands, and the node serves a client on the old routing a value
//! older than a write acknowledged through the new chain. It needs a commit in flight
//! (`CraqConfig::async_kv`), a lease, a detector that may suspect a live node, and a reader that
//! starts after the write is acknowledged (`CraqConfig::readers` begin at any moment).
//!
//! Time. Each storage node has a clock (`StorageState::clock`, in nanoseconds, from 0) that its
//! machine runs at; nothing else moves it. The lease lasts one unit ([`LEASE`]), so a grant for
//! a heartbeat sent at clock `s` holds exactly while the clock reads `s` (and, by the machine's
//! own rule, once the node has applied the routing version the grant carried). A *lapse* (timer
//! [`CraqTimer::LeaseLapse`], at most `lease_lapses` in all) is one lease length passing at a
//! node: its clock moves one unit, so every lease it holds or has in flight ends; it tells the
//! mgmtd actor ([`CraqMsg::Lapsed`]), then sends the heartbeat (and routing poll) its periodic
//! timer would. mgmtd runs at time zero throughout: its own lease and the heartbeat timestamp
//! window are not in question here. The run begins in steady state: every node starts with
//! mgmtd's routing and holds the lease its first heartbeat earned ([`boot`]).
//!
//! The detector ([`LeaseBook`]). In the real system a deadline fires `F` (the fail interval)
//! after mgmtd accepted the node's last heartbeat, sent at `s`, and every lease from heartbeats
//! sent up to `s` has ended by then (`L ≤ F` with drift, `t3fs_core::storage::lease`). Here the
//! deadline of a live node is armed exactly while its latest lapse is newer than the newest
//! heartbeat mgmtd accepted from it. The lapse notice travels the node's FIFO link to mgmtd
//! ahead of the heartbeat sent at the new clock, so in between mgmtd may suspect the node while
//! that heartbeat is in flight: the race. Soundness both ways:
//! - no false counterexample: a deadline fires only once the node's clock has passed every lease
//!   granted before it (a grant still in flight lands already expired), which is what `F`
//!   guarantees; a lapse may come any time after a grant, but a lease ending early is always
//!   safe (the node refuses, the client retries or gives up);
//! - the bug stays visible: the deadline may fire at any moment once allowed, the commit it
//!   leads to stays in flight for any number of steps, and the heartbeat sent after the lapse
//!   may arrive in between; with the bug planted its grant carries the routing version from
//!   before the exclusion, which the node has applied.
//!
//! Where lapses strike: at any replica, the head included. A head suspected while a client's
//! write is in flight on its disk once met a storage-side hole that has nothing to do with the
//! lease: the write landed after the head was taken out and re-admitted (SYNCING, or SERVING
//! again after an empty resync), and the storage machine's `forward` committed it as the tail
//! and acknowledged it though no SERVING replica held it (15,090 states with one client, even
//! with synchronous commits). A target now marks updates running when it leaves UPTODATE, and
//! `forward` fails them (`t3fs_core::storage::write`).
//!
//! Invariants: a node's clock never decreases (it survives restarts); `LeaseBook` only ever
//! records newer values. Not modelled: clock drift and steps (the lease length's margin covers
//! drift), periodic heartbeats other than the one each lapse sends (a live node otherwise
//! reports only when its state changes, as everywhere in the model), heartbeat loss, several
//! mgmtds; clocks of different nodes are never compared, so only the lapsing node's moves.

use std::collections::BTreeMap;
use std::time::Duration;

use stateright::actor::{model_timeout, Command, Id, Out};
use t3fs_core::ids::NodeId;
use t3fs_core::machine::EventOf;
use t3fs_core::msg::Msg;
use t3fs_core::routing::RoutingInfo;
use t3fs_core::storage::{StorageNode, StorageTimer};

use super::actor::{CraqNode, StorageState};
use super::{CraqConfig, CraqMsg, CraqTimer};
use crate::model::adapter;

/// The lease length: one clock unit.
pub(super) const LEASE: Duration = Duration::from_nanos(1);

/// What the mgmtd actor knows about the storage nodes' clocks (model bookkeeping, empty without
/// the lease).
#[derive(Clone, Debug, Default, Eq, Hash, PartialEq)]
pub struct LeaseBook {
    /// The clock of each node's latest lapse notice.
    lapsed: BTreeMap<NodeId, u64>,
    /// The timestamp of the newest heartbeat mgmtd accepted from each node.
    heard: BTreeMap<NodeId, u64>,
}

impl LeaseBook {
    /// Whether mgmtd's deadline for live `node` may fire: its latest lapse is newer than every
    /// heartbeat accepted from it, so the leases they renewed are over.
    pub fn may_suspect(&self, node: NodeId) -> bool {
        self.lapsed.get(&node) > self.heard.get(&node).or(Some(&0))
    }

    /// A lapse notice arrived.
    pub fn lapsed(&mut self, node: NodeId, clock: u64) {
        let at = self.lapsed.entry(node).or_default();
        *at = (*at).max(clock);
    }

    /// mgmtd accepted a heartbeat sent at `timestamp` (it re-armed the node's deadline).
    pub fn heard(&mut self, node: NodeId, timestamp: u64) {
        let at = self.heard.entry(node).or_default();
        *at = (*at).max(timestamp);
    }
}

/// The routing every node starts with under the lease: mgmtd's after its start (one version
/// past the deployed one), so no node begins by polling for it.
pub(super) fn steady_routing(cfg: &CraqConfig) -> RoutingInfo {
    let (m, _) = super::mgmtd_actor::settle(cfg, Id::from(0), &mut Out::new());
    m.machine.routing().cloned().expect("loaded at start")
}

/// The heartbeat storage node `node` sends as it starts with `routing`.
pub(super) fn first_heartbeat(cfg: &CraqConfig, node: NodeId, routing: &RoutingInfo) -> Msg {
    let mut machine = StorageNode::new_in_service(
        super::actor::storage_cfg(cfg, node),
        BTreeMap::new(),
        routing.clone(),
    );
    let mut out: Out<CraqNode> = Out::new();
    adapter::step(
        adapter::actor_id(node),
        &mut machine,
        None,
        &mut out,
        CraqTimer::Storage,
    );
    out.into_iter()
        .find_map(|c| match c {
            Command::Send(_, CraqMsg::Wire(m @ Msg::Heartbeat(_))) => Some(m),
            _ => None,
        })
        .expect("a storage node heartbeats as it starts")
}

/// Starts a storage machine under the lease in steady state: its first heartbeat was already
/// accepted (mgmtd's start, `mgmtd_actor::settle`, took it), so instead of sending it the node
/// takes mgmtd's reply, its first lease, at once.
pub(super) fn boot(cfg: &CraqConfig, id: Id, machine: &mut StorageNode, o: &mut Out<CraqNode>) {
    let (_, mut replies) = super::mgmtd_actor::settle(cfg, Id::from(0), &mut Out::new());
    let mut out: Out<CraqNode> = Out::new();
    adapter::step(id, machine, None, &mut out, CraqTimer::Storage);
    let mut kept: Out<CraqNode> = out
        .into_iter()
        .filter(|c| !matches!(c, Command::Send(_, CraqMsg::Wire(Msg::Heartbeat(_)))))
        .collect();
    o.append(&mut kept);
    let reply = replies
        .remove(&adapter::node_id(id))
        .expect("mgmtd answered the first heartbeat");
    let event = EventOf::Recv {
        from: NodeId(0),
        msg: reply,
    };
    adapter::step(id, machine, Some(event), o, CraqTimer::Storage);
}

/// Whether a node may lapse (again): the lease is on and lapses are left.
fn lapses_left(cfg: &CraqConfig, s: &StorageState) -> bool {
    cfg.storage_lease && usize::from(s.lapses) < cfg.lease_lapses
}

/// Arms a storage node's next lapse (at start, after a lapse, at a restart).
pub(super) fn arm(cfg: &CraqConfig, s: &StorageState, o: &mut Out<CraqNode>) {
    if lapses_left(cfg, s) {
        o.set_timer(CraqTimer::LeaseLapse, model_timeout());
    }
}

/// Whether a lapse timer of this node acts now.
pub(super) fn may_lapse(cfg: &CraqConfig, s: &StorageState) -> bool {
    !s.halted && lapses_left(cfg, s)
}

/// One lease length passes at a live node: its clock moves past every lease it was granted,
/// mgmtd's actor is told (ahead of the next heartbeat, on the same FIFO link), and the node
/// sends the heartbeat its periodic timer would.
pub(super) fn lapse(cfg: &CraqConfig, id: Id, s: &mut StorageState, o: &mut Out<CraqNode>) {
    s.clock += 1;
    s.lapses += 1;
    let target = adapter::target_of(adapter::node_id(id));
    o.send(
        Id::from(0),
        CraqMsg::Lapsed {
            target,
            clock: s.clock,
        },
    );
    super::actor::storage_step(id, s, EventOf::Timer(StorageTimer::Heartbeat), o);
    arm(cfg, s, o);
}

#[cfg(test)]
mod tests {
    use t3fs_core::bugs::{MgmtdBug, PlantedBug};

    use crate::model::craq::{self, CraqConfig};
    use crate::model::run::{self, FailureKind, Verdict};

    /// The smallest shape with the race (`t3fs check mgmtd --bug lease-during-demotion`): two
    /// replicas; one client writing once, from the start; one reader reading once, at any
    /// moment, at the tail; no crash, one lapse (at the tail), commits in flight, no retries.
    fn shape(bug: Option<MgmtdBug>) -> CraqConfig {
        CraqConfig {
            replicas: 2,
            clients: 2,
            readers: 1,
            writes: 1,
            reads: 0,
            failures: 0,
            recoveries: 0,
            client_retries: 0,
            mgmtd: true,
            mgmtd_bug: bug,
            async_kv: true,
            storage_lease: true,
            lease_lapses: 1,
            ..CraqConfig::default()
        }
    }

    fn check(cfg: CraqConfig) -> Verdict {
        run::check(
            craq::build(cfg),
            1,
            |_| {},
            craq::describe_action,
            craq::describe_state,
        )
    }

    fn violated(v: &Verdict) -> Vec<&'static str> {
        v.failures
            .iter()
            .filter(|f| f.kind == FailureKind::Violated)
            .map(|f| f.name)
            .collect()
    }

    #[test]
    fn a_lease_granted_while_the_demotion_is_committed_serves_a_stale_read() {
        let v = check(shape(Some(MgmtdBug::LeaseDuringDemotion)));
        assert_eq!(violated(&v), ["linearizable"], "{}", run::render(&v));
        let steps = v.failures[0].steps.join("\n");
        assert!(steps.contains("KV commit in flight lands"), "{steps}");
        assert!(steps.contains("LEASE LAPSE"), "{steps}");
    }

    #[test]
    fn a_demoted_node_that_ignores_its_lease_serves_a_stale_read() {
        // The lease is what keeps the suspected node from serving: without the storage-side
        // check the fixed mgmtd does not help.
        let mut cfg = shape(None);
        cfg.bug = Some(PlantedBug::LeaseIgnored);
        let v = check(cfg);
        assert_eq!(violated(&v), ["linearizable"], "{}", run::render(&v));
    }

    /// 40.2M states (16.8M before pipelined forwarding): about 80 s.
    #[test]
    fn no_lease_is_granted_while_a_demotion_is_committed() {
        let v = check(shape(None));
        assert!(v.passed(), "{}", run::render(&v));
        assert!(v
            .passed
            .contains(&"a live replica is suspected and taken out of SERVING"));
        assert_eq!(v.unique_states, 40_159_997, "pinned state count changed");
    }

    /// A suspected head whose local write lands after mgmtd took it out (and maybe back in)
    /// must not commit it: the storage machine found wanting here before the fix (`forward` in
    /// `t3fs_core::storage::write`), 15,090 states into this shape.
    #[test]
    fn a_lapsed_head_never_acknowledges_a_write_no_serving_replica_holds() {
        let cfg = CraqConfig {
            clients: 1,
            readers: 0,
            async_kv: false,
            ..shape(None)
        };
        let v = check(cfg);
        assert!(v.passed(), "{}", run::render(&v));
        assert!(v
            .passed
            .contains(&"serving replicas hold every acknowledged write"));
        assert!(v
            .passed
            .contains(&"a live replica is suspected and taken out of SERVING"));
    }

    #[test]
    fn synchronous_commits_hide_the_race() {
        // Why the model needs commits in flight: with every commit done in the step that
        // decided it, no heartbeat can arrive in between.
        let mut cfg = shape(Some(MgmtdBug::LeaseDuringDemotion));
        cfg.async_kv = false;
        let v = check(cfg);
        assert!(v.passed(), "{}", run::render(&v));
    }
}
