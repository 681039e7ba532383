//! Heartbeats, failure detection, the chain update loop, routing requests, client sessions and
//! admin-call admission of the primary mgmtd (3FS §2.3, §2.4, §2.6.1, §2.8).
//!
//! Failure detection is one deadline timer per node, re-armed by every accepted heartbeat: its
//! firing is "no heartbeat for `heartbeat_fail_interval`" (3FS polls for the same condition
//! every 10 s; a timer costs per event, not per node per tick). Invariant: a target's local
//! state at mgmtd changes only through an accepted heartbeat, a deadline, or an admin offline;
//! every change marks its chain dirty for the next chain update run. Not here: persistence.

use core::time::Duration;
use std::collections::BTreeSet;

use super::chain_update::generate_new_chain_avoiding;
use super::{AdminCall, AdminError, AdminRet, Mgmtd, MgmtdTimer, WriterOp};
use crate::bugs::MgmtdBug;
use crate::ids::{ChainId, ChainVersion, ClientId, NodeId, RequestId, RoutingVersion, TargetId};
use crate::machine::{ActionOf, Outbox};
use crate::msg::{Heartbeat, HeartbeatReply, MgmtdStatus, Msg};
use crate::routing::{ChainInfo, LocalState, PublicState};
use crate::time::Instant;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Mgmtd {
    fn reply_hb(out: &mut Outbox<Self>, to: NodeId, status: MgmtdStatus) {
        out.send(to, Msg::HeartbeatReply(HeartbeatReply { status }));
    }

    /// A heartbeat from `from`: refused (with its reason), or accepted, recording the node's
    /// target states and re-arming its deadline, and answered with a lease where storage leases
    /// are on.
    pub(super) fn on_heartbeat(
        &mut self,
        now: Instant,
        from: NodeId,
        hb: Heartbeat,
        out: &mut Outbox<Self>,
    ) {
        if !self.is_primary(now) {
            let primary = self.primary_hint();
            return Self::reply_hb(out, from, MgmtdStatus::NotPrimary { primary });
        }
        let window = nanos(self.cfg.max_clock_skew);
        let me = self.cfg.node;
        let fail_after = self.cfg.heartbeat_fail_interval;
        let ignore_stale = self.cfg.ignore_stale_targets;
        let p = self.primary.as_mut().expect("is_primary");
        let mut targets: Vec<TargetId> = hb.targets.iter().map(|t| t.target).collect();
        targets.sort();
        targets.dedup();
        let status = p.heartbeat_refusal(now, from, me, window, &hb, targets.len());
        if status == Some(MgmtdStatus::BadTimestamp) {
            p.note_alive_despite_clock(now, &hb);
            out.set_timer(
                MgmtdTimer::HeartbeatDeadline(hb.node),
                fail_after..fail_after,
            );
        }
        if let Some(status) = status {
            self.counters.heartbeats_refused += 1;
            return Self::reply_hb(out, from, status);
        }
        let moved = p.accept_reports(now, &hb, &targets, ignore_stale);
        if !moved.is_empty() && !self.writer.has(|op| matches!(op, WriterOp::TargetNodes(_))) {
            self.writer.enqueue(WriterOp::TargetNodes(moved));
        }
        out.set_timer(
            MgmtdTimer::HeartbeatDeadline(hb.node),
            fail_after..fail_after,
        );
        // 3FS answers accepted heartbeats with nothing (it piggybacks config updates, which
        // t3fs does not distribute). With the storage-side lease, the answer is the lease: it
        // echoes the sender's timestamp, from which the node's lease runs, and it is sent only
        // after the deadline above was re-armed (the order the lease argument needs).
        if self.cfg.storage_lease {
            self.grant_lease(from, &hb, out);
        }
    }

    /// Answers an accepted heartbeat from `from` with a storage lease, unless an exclusion of
    /// its targets is pending.
    fn grant_lease(&mut self, from: NodeId, hb: &Heartbeat, out: &mut Outbox<Self>) {
        let p = self.primary.as_ref().expect("is_primary");
        let routing = p.routing.version;
        if self.demotion_pending(hb.node) {
            // The exclusion may be published any moment now, long before `fail_after`
            // has passed: a lease granted now would outlive it (seed 4000194). No answer
            // grants nothing; the node's next heartbeat, after the commit, gets a lease
            // bound to the routing version that excludes it (`storage/lease.rs`).
            self.counters.leases_withheld += 1;
            return;
        }
        let status = MgmtdStatus::Accepted {
            hb_version: hb.hb_version,
            timestamp: hb.timestamp,
            routing,
        };
        Self::reply_hb(out, from, status);
    }

    /// Whether a chain update being committed (queued or running in the writer) takes one of
    /// `node`'s SERVING targets out of SERVING. The lease argument (`storage/lease.rs`) needs
    /// every exclusion of a node to be published no earlier than one fail interval after the
    /// node's last lease grant; an exclusion decided before a grant and committed after it
    /// breaks that, so no grant is made while one is pending.
    fn demotion_pending(&self, node: NodeId) -> bool {
        let Some(p) = self.primary.as_ref() else {
            return false;
        };
        if self.cfg.bug == Some(MgmtdBug::LeaseDuringDemotion) {
            return false;
        }
        let demotes = |next: &ChainInfo| {
            p.routing.chain(next.chain).is_some_and(|cur| {
                cur.targets.iter().any(|t| {
                    t.state == PublicState::Serving
                        && p.routing.node_of(t.target) == Some(node)
                        && next.state_of(t.target) != Some(PublicState::Serving)
                })
            })
        };
        self.writer.has(|op| match op {
            WriterOp::Chains(next) => next.iter().any(demotes),
            _ => false,
        })
    }

    /// No heartbeat from `node` for the fail interval: it is failed and its targets OFFLINE.
    ///
    /// Only a primary with a trusted lease judges silence. A deadline that fires while the lease
    /// is untrusted (mgmtd stalled, or its KV was slow to extend) is re-armed instead: the
    /// silence may be mgmtd's own. With 3FS's settings (fail interval 60 s ≥ lease 60 s −
    /// suspicious 20 s) any stall long enough to fire a deadline falsely also distrusts the
    /// lease, and a stall past the lease's end starts a new tenure (`lease::decide`).
    pub(super) fn on_heartbeat_deadline(
        &mut self,
        now: Instant,
        node: NodeId,
        out: &mut Outbox<Self>,
    ) {
        if self.primary.is_some() && !self.is_primary(now) {
            let wait = self.cfg.heartbeat_fail_interval;
            return out.set_timer(MgmtdTimer::HeartbeatDeadline(node), wait..wait);
        }
        let Some(p) = self.primary.as_mut() else {
            return;
        };
        let Some(rec) = p.nodes.get_mut(&node) else {
            return;
        };
        rec.connected = false;
        let mut targets: BTreeSet<TargetId> = rec.reported.clone();
        targets.extend(
            p.routing
                .targets
                .iter()
                .filter(|(_, n)| **n == node)
                .map(|(t, _)| *t),
        );
        for t in targets {
            if p.local.insert(t, LocalState::Offline) != Some(LocalState::Offline) {
                if let Some(c) = p.routing.chain_of_target(t) {
                    p.dirty.insert(c.chain);
                }
            }
        }
    }

    /// One run of the chain update loop (§2.6.1): every dirty, unfrozen chain is recomputed;
    /// changed ones are persisted in one transaction with bumped chain versions.
    pub(super) fn update_chains(&mut self, now: Instant) {
        if !self.is_primary(now)
            || self
                .writer
                .has(|op| matches!(op, WriterOp::Chains(_) | WriterOp::Load))
        {
            return;
        }
        let bug = self.cfg.bug;
        let p = self.primary.as_mut().expect("is_primary");
        let mut changed = Vec::new();
        let dirty: Vec<ChainId> = p.dirty.iter().copied().collect();
        for id in dirty {
            let Some(chain) = p.routing.chain(id) else {
                p.dirty.remove(&id);
                continue;
            };
            if let Some(until) = p.frozen.get(&id) {
                let all_reported = chain.targets.iter().all(|t| p.reported.contains(&t.target));
                if now < *until && !all_reported {
                    continue; // New-born: wait for its targets to report (or the freeze to end).
                }
                p.frozen.remove(&id);
            }
            p.dirty.remove(&id);
            let local = |t: TargetId| p.local.get(&t).copied().unwrap_or(LocalState::Offline);
            let fresh = |t: TargetId| p.fresh.contains(&t);
            let (targets, transitions) =
                generate_new_chain_avoiding(&chain.targets, local, fresh, bug);
            if targets != chain.targets {
                for t in &transitions {
                    *self.counters.rows.entry(t.row).or_default() += 1;
                }
                changed.push(ChainInfo {
                    chain: id,
                    version: ChainVersion(chain.version.0 + 1),
                    targets,
                });
            }
        }
        if !changed.is_empty() {
            self.writer.enqueue(WriterOp::Chains(changed));
        }
    }

    pub(super) fn on_get_routing(
        &mut self,
        now: Instant,
        from: NodeId,
        known: RoutingVersion,
        out: &mut Outbox<Self>,
    ) {
        if !self.is_primary(now) {
            let primary = self.primary_hint();
            return out.send(from, Msg::NotPrimary { primary });
        }
        let routing = self.routing().expect("primary is loaded");
        if routing.version > known || known == RoutingVersion(0) {
            out.send(from, Msg::Routing(routing.clone()));
            if !self.cfg.addresses.is_empty() {
                let addrs = self.cfg.addresses.clone();
                let meta = self.cfg.meta_nodes.clone();
                out.send(
                    from,
                    Msg::NodeAddrs(crate::msg::kv::NodeAddrs { addrs, meta }),
                );
            }
        }
    }

    pub(super) fn on_extend_session(&mut self, now: Instant, client: ClientId) {
        if !self.is_primary(now) {
            return;
        }
        let p = self.primary.as_mut().expect("is_primary");
        if p.sessions.contains_key(&client) || p.sessions.len() < crate::limits::CLIENT_SESSIONS_MAX
        {
            p.sessions.insert(client, now);
        }
    }

    pub(super) fn on_get_client_sessions(
        &mut self,
        now: Instant,
        from: NodeId,
        out: &mut Outbox<Self>,
    ) {
        if !self.is_primary(now) {
            let primary = self.primary_hint();
            return out.send(from, Msg::NotPrimary { primary });
        }
        let p = self.primary.as_ref().expect("is_primary");
        let complete = now.0.saturating_sub(p.lease.start) >= nanos(self.cfg.session_timeout);
        let clients = p.sessions.keys().copied().collect();
        out.send(
            from,
            Msg::ClientSessions(crate::msg::mgmtd::ClientSessions { clients, complete }),
        );
    }

    pub(super) fn check_sessions(&mut self, now: Instant) {
        let timeout = nanos(self.cfg.session_timeout);
        if let Some(p) = self.primary.as_mut() {
            p.sessions
                .retain(|_, last| now.0.saturating_sub(last.0) <= timeout);
        }
    }

    pub(super) fn on_admin(
        &mut self,
        now: Instant,
        req: RequestId,
        call: AdminCall,
        out: &mut Outbox<Self>,
    ) {
        let ret = |ret| ActionOf::Return { req, ret };
        if !self.is_primary(now) {
            return out.push(ret(AdminRet::Failed(AdminError::NotPrimary(
                self.primary_hint(),
            ))));
        }
        let p = self.primary.as_mut().expect("is_primary");
        match call {
            AdminCall::OfflineTarget(t) | AdminCall::OnlineTarget(t) => {
                let Some(chain) = p.routing.chain_of_target(t).map(|c| c.chain) else {
                    return out.push(ret(AdminRet::Failed(AdminError::Invalid(format!(
                        "{t} is in no chain"
                    )))));
                };
                if matches!(call, AdminCall::OfflineTarget(_)) {
                    p.admin_offline.insert(t);
                    p.local.insert(t, LocalState::Offline);
                } else {
                    // Its next heartbeat reports its real state.
                    p.admin_offline.remove(&t);
                }
                p.dirty.insert(chain);
                out.push(ret(AdminRet::Ok(p.routing.version)));
            }
            call => {
                if !self.writer.enqueue(WriterOp::Admin { req, call }) {
                    out.push(ret(AdminRet::Failed(AdminError::Busy)));
                }
            }
        }
    }
}

impl super::Primary {
    /// Why the primary refuses `hb` from `from` (`unique` distinct targets in it), or `None`
    /// to accept it.
    fn heartbeat_refusal(
        &self,
        now: Instant,
        from: NodeId,
        me: NodeId,
        window: u64,
        hb: &Heartbeat,
        unique: usize,
    ) -> Option<MgmtdStatus> {
        let last = self.nodes.get(&hb.node).map_or(0, |n| n.hb_version);
        if hb.node.0 == 0 || hb.node == me || hb.node != from || unique != hb.targets.len() {
            Some(MgmtdStatus::Invalid)
        } else if self.disabled.contains(&hb.node) {
            Some(MgmtdStatus::Disabled)
        } else if !self.nodes.contains_key(&hb.node)
            && self.nodes.len() >= crate::limits::MGMTD_NODES_MAX
        {
            Some(MgmtdStatus::Invalid)
        } else if hb.hb_version <= last {
            Some(MgmtdStatus::StaleHeartbeat { last })
        } else if hb.timestamp.abs_diff(now.0) > window {
            Some(MgmtdStatus::BadTimestamp)
        } else {
            None
        }
    }

    /// A heartbeat refused for its timestamp. The clocks disagree, maybe because mgmtd's own is
    /// off: the report's states are refused (3FS), but a fresh heartbeat still proves the node
    /// alive, and a target it reports OFFLINE is down whoever's clock is wrong. Without this, a
    /// primary whose clock stepped past the window heard only refusals, declared every node
    /// dead and made an emptied head LASTSRV (found by the swarm, seed 2849).
    fn note_alive_despite_clock(&mut self, now: Instant, hb: &Heartbeat) {
        let rec = self.nodes.entry(hb.node).or_default();
        rec.hb_version = hb.hb_version;
        rec.connected = true;
        *rec.clock_offset_ns = hb.timestamp as i64 - now.0 as i64;
        for info in hb.targets.iter().filter(|i| i.state == LocalState::Offline) {
            if let Some(chain) = self.routing.chain_of_target(info.target) {
                self.reported.insert(info.target);
                if info.fresh {
                    self.fresh.insert(info.target);
                }
                if self.local.insert(info.target, LocalState::Offline) != Some(LocalState::Offline)
                {
                    self.dirty.insert(chain.chain);
                }
            }
        }
    }

    /// Records an accepted heartbeat's node and target states (`targets`: its targets, sorted
    /// and distinct); a changed state marks its chain dirty. Returns the targets routing places
    /// on another node than the sender.
    fn accept_reports(
        &mut self,
        now: Instant,
        hb: &Heartbeat,
        targets: &[TargetId],
        ignore_stale: bool,
    ) -> Vec<(TargetId, NodeId)> {
        let rec = self.nodes.entry(hb.node).or_default();
        rec.hb_version = hb.hb_version;
        rec.connected = true;
        *rec.clock_offset_ns = hb.timestamp as i64 - now.0 as i64;
        rec.reported.extend(targets.iter().copied());
        let mut moved = Vec::new();
        for info in &hb.targets {
            let Some(chain) = self.routing.chain_of_target(info.target) else {
                self.orphans.insert(info.target);
                continue;
            };
            if ignore_stale
                && info.chain_version != ChainVersion(0)
                && info.chain_version < chain.version
            {
                continue; // A report made under an older chain: its state may predate the change.
            }
            let state = if self.admin_offline.contains(&info.target) {
                LocalState::Offline
            } else {
                info.state
            };
            let old = self.local.insert(info.target, state);
            self.reported.insert(info.target);
            if info.fresh {
                self.fresh.insert(info.target);
            } else {
                self.fresh.remove(&info.target);
            }
            if old != Some(state) {
                self.dirty.insert(chain.chain);
            }
            if self.routing.node_of(info.target) != Some(hb.node) {
                moved.push((info.target, hb.node));
            }
        }
        moved
    }
}
