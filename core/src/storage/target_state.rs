//! The storage side of target states (3FS §2.6.2): local states, heartbeats to the primary
//! mgmtd, routing polls, the restart rule, disk errors and the LASTSRV force-commit.
//!
//! Rules: a target loaded from disk is ONLINE; ONLINE + public SERVING → UPTODATE; UPTODATE +
//! public OFFLINE/LASTSRV/WAITING → OFFLINE, and (its handle dropped and reloaded, as 3FS's
//! CheckWorker does) straight back to ONLINE unless a disk error pins it OFFLINE; sync done →
//! UPTODATE (in `resync.rs`); UPTODATE + public SYNCING at another chain version than the sync
//! round's → ONLINE (t3fs: the swarm found a target synced by one predecessor, then, after the
//! chain moved on and its view skipped a WAITING, promoted without the new predecessor's pending
//! write, which that predecessor then force-committed: the replicas diverged). A restarted process reports every target OFFLINE until routing
//! shows none of them SERVING/SYNCING/WAITING, so every restarted target goes through recovery.
//! A target leaving LASTSRV for SERVING/SYNCING/WAITING force-commits its pending versions with
//! the new chain version (§3.5 #8: an unacknowledged write may become visible).
//!
//! Not here: chain decisions (mgmtd) and the resync itself.

use crate::chunk::{ChunkError, ChunkMeta, ChunkOp};
use crate::ids::{ChainVersion, ChunkId, NodeId, TargetId};
use crate::machine::Outbox;
use crate::msg::{Heartbeat, LocalTargetInfo, MgmtdStatus, Msg};
use crate::routing::{LocalState, PublicState, RoutingInfo};
use crate::storage::{IoPurpose, StorageNode, StorageTimer};
use crate::time::Instant;

impl StorageNode {
    /// Whether the node reports to a mgmtd.
    fn with_mgmtd(&self) -> bool {
        !self.cfg.mgmtd.is_empty()
    }

    /// Whether the node is still in its restart phase (reporting everything OFFLINE).
    pub fn booting(&self) -> bool {
        self.booting
    }

    /// Whether `target` may take part in updates in public state `public`: never while booting
    /// (its routing may be stale: mgmtd has not yet marked it down); a SERVING target must be
    /// UPTODATE, a SYNCING one ONLINE.
    pub(super) fn local_ready(&self, target: TargetId, public: PublicState) -> bool {
        let local = self.targets[&target].local_state;
        !self.booting
            && match public {
                PublicState::Serving => local == LocalState::UpToDate,
                PublicState::Syncing => local == LocalState::Online,
                _ => false,
            }
    }

    pub(super) fn start_reporting(&mut self, out: &mut Outbox<Self>) {
        if !self.with_mgmtd() {
            return;
        }
        self.send_heartbeat(out);
        // A restarted process knows no routing: ask (periodic polls come with the timer).
        if self.routing.version.0 == 0 || self.cfg.heartbeat_interval.is_some() {
            self.poll_routing(out);
        }
        if let Some(every) = self.cfg.heartbeat_interval.clone() {
            out.set_timer(StorageTimer::Heartbeat, every);
        }
    }

    pub(super) fn poll_routing(&self, out: &mut Outbox<Self>) {
        if let Some(m) = self.primary {
            out.send(
                m,
                Msg::GetRouting {
                    known: self.routing.version,
                },
            );
        }
    }

    /// The report for one target: OFFLINE while booting, else its local state.
    fn report(&self, target: TargetId) -> LocalTargetInfo {
        let t = &self.targets[&target];
        let chain_version = self
            .chain_info(target)
            .map_or(ChainVersion(0), |c| c.version);
        LocalTargetInfo {
            target,
            state: if self.booting {
                LocalState::Offline
            } else {
                t.local_state
            },
            chain_version,
            fresh: t.fresh,
        }
    }

    pub(super) fn send_heartbeat(&mut self, out: &mut Outbox<Self>) {
        self.hb_version += 1;
        self.resend_heartbeat(out);
    }

    /// Sends the current reports under the current heartbeat version: after a refusal nothing
    /// was accepted, so the version need not move (and a retry loop adds no new states).
    fn resend_heartbeat(&mut self, out: &mut Outbox<Self>) {
        let Some(m) = self.primary else { return };
        self.counters.heartbeats += 1;
        let targets = self.targets.keys().map(|t| self.report(*t)).collect();
        let hb = Heartbeat {
            node: self.cfg.node,
            hb_version: self.hb_version,
            timestamp: self.now.0 .0,
            targets,
        };
        out.send(m, Msg::Heartbeat(hb));
    }

    pub(super) fn on_heartbeat_timer(&mut self, out: &mut Outbox<Self>) {
        // Accepted heartbeats get no reply, so silence alone cannot tell a healthy primary from
        // a dead, frozen or cut-off one. Every third period without any reply the node probes
        // the next mgmtd: a standby's NotPrimary hint sends it straight back to a live primary
        // (one redirect per three periods), and once a standby has taken over, the probe is
        // what brings the node's heartbeats to it. Without this, a frozen primary swallowed
        // every heartbeat and its successor declared the whole cluster down (found by the
        // swarm).
        self.hb_unanswered += 1;
        if self.hb_unanswered > 2 && self.cfg.mgmtd.len() > 1 {
            let at = self
                .primary
                .and_then(|p| self.cfg.mgmtd.iter().position(|m| *m == p));
            let next = at.map_or(0, |i| (i + 1) % self.cfg.mgmtd.len());
            self.primary = Some(self.cfg.mgmtd[next]);
            self.hb_unanswered = 0;
        }
        self.send_heartbeat(out);
        self.poll_routing(out);
        if let Some(every) = self.cfg.heartbeat_interval.clone() {
            out.set_timer(StorageTimer::Heartbeat, every);
        }
    }

    pub(super) fn on_heartbeat_reply(
        &mut self,
        from: NodeId,
        status: MgmtdStatus,
        out: &mut Outbox<Self>,
    ) {
        // Only an mgmtd answers heartbeats: a reply from any other node (a forgery, a confused
        // peer) must not renew the lease or move the version. A reply from an mgmtd that is no
        // longer the one the heartbeats go to is still taken: it answered a heartbeat this node
        // sent it, a standby answers NotPrimary, and a deposed primary's grants are bounded by
        // its own mgmtd lease (`lease.rs`). A node configured without mgmtd (a standalone
        // harness) takes replies from anyone.
        if !self.cfg.mgmtd.is_empty() && !self.cfg.mgmtd.contains(&from) {
            self.counters.replies_from_stranger += 1;
            return;
        }
        self.hb_unanswered = 0;
        match status {
            MgmtdStatus::StaleHeartbeat { last } if last >= self.hb_version => {
                // A restarted process: continue after the last accepted version and resend.
                self.hb_version = last;
                self.send_heartbeat(out);
            }
            MgmtdStatus::Accepted {
                timestamp, routing, ..
            } => {
                if let Some(length) = self.cfg.lease {
                    self.lease.renew(Instant(timestamp), length, routing);
                }
                if routing > self.routing.version {
                    self.poll_routing(out);
                }
            }
            MgmtdStatus::NotPrimary { primary } if primary.is_some() && primary != self.primary => {
                self.on_not_primary(primary, out)
            }
            // No primary yet (an election or a load in progress): the report must still reach
            // it, so retry after a backoff rather than wait a whole heartbeat period.
            MgmtdStatus::NotPrimary { .. } => out.set_timer(
                StorageTimer::HeartbeatRetry,
                self.cfg.forward_retry_wait.clone(),
            ),
            _ => {}
        }
    }

    pub(super) fn on_heartbeat_retry(&mut self, out: &mut Outbox<Self>) {
        self.resend_heartbeat(out);
    }

    pub(super) fn on_not_primary(&mut self, primary: Option<NodeId>, out: &mut Outbox<Self>) {
        if primary.is_some() && primary != self.primary {
            self.primary = primary;
            self.send_heartbeat(out);
            self.poll_routing(out);
        }
    }

    /// Applies the §2.6.2 rules after a routing change (`old` → current).
    pub(super) fn after_routing(&mut self, old: &RoutingInfo, out: &mut Outbox<Self>) {
        let mut changed = false;
        let states = self.public_states(old);
        if self.booting {
            let down = |s: &Option<PublicState>| {
                !matches!(
                    s,
                    Some(PublicState::Serving | PublicState::Syncing | PublicState::Waiting)
                )
            };
            if states.iter().all(|(_, _, new, _)| down(new)) {
                self.booting = false;
                changed = true;
            }
        }
        for (target, old_public, public, chain_version) in states {
            if self.booting {
                continue;
            }
            changed |= self.follow_public_state(target, (old_public, public), chain_version, out);
        }
        if changed {
            self.send_heartbeat(out);
        }
        self.maybe_start_resyncs(out);
    }

    /// Every hosted target with its public state before and after a routing change, and its
    /// chain's version now.
    #[allow(clippy::type_complexity)]
    fn public_states(
        &self,
        old: &RoutingInfo,
    ) -> Vec<(
        TargetId,
        Option<PublicState>,
        Option<PublicState>,
        ChainVersion,
    )> {
        self.targets
            .keys()
            .map(|&t| {
                let now = self.routing.chain_of_target(t);
                (
                    t,
                    old.chain_of_target(t).and_then(|c| c.state_of(t)),
                    now.and_then(|c| c.state_of(t)),
                    now.map_or(ChainVersion(0), |c| c.version),
                )
            })
            .collect()
    }

    /// Moves `target`'s local state after its public state went from `old_public` to `public`
    /// (at `chain_version`). Returns whether mgmtd should hear from this node at once.
    fn follow_public_state(
        &mut self,
        target: TargetId,
        (old_public, public): (Option<PublicState>, Option<PublicState>),
        chain_version: ChainVersion,
        out: &mut Outbox<Self>,
    ) -> bool {
        let t = self.targets.get_mut(&target).expect("hosted target");
        let before = t.local_state;
        match (t.local_state, public) {
            (LocalState::Online, Some(PublicState::Serving)) => {
                t.local_state = LocalState::UpToDate
            }
            (
                LocalState::UpToDate,
                Some(PublicState::Offline | PublicState::LastSrv | PublicState::Waiting),
            ) => t.local_state = LocalState::Online,
            // A sync round vouches for one chain version: a later SYNCING view means a new
            // round (maybe a new predecessor) must run before mgmtd may promote the target.
            (LocalState::UpToDate, Some(PublicState::Syncing))
                if t.synced_at != Some(chain_version) =>
            {
                t.local_state = LocalState::Online
            }
            _ => {}
        }
        if public != Some(PublicState::Syncing) {
            t.synced_at = None;
        }
        if public == Some(PublicState::Serving) {
            t.fresh = false; // Whatever it holds now is what the chain serves.
        }
        if t.disk_error {
            t.local_state = LocalState::Offline;
        }
        if before == LocalState::UpToDate && t.local_state != LocalState::UpToDate {
            // Out of SERVING: updates running here may no longer forward or commit, even if
            // the target is SERVING again by the time their disk I/O ends (write.rs).
            t.locks
                .running_iter_mut()
                .filter(|r| !r.sync_item && !r.waiter.req.is_syncing)
                .for_each(|r| r.displaced = true);
        }
        let mut changed = before != t.local_state;
        // mgmtd holds the target down while it is up (a false suspicion, or a report that
        // crossed a chain change): report again rather than wait for the next period.
        let held_down = matches!(public, Some(PublicState::Offline | PublicState::LastSrv));
        changed |= held_down && t.local_state != LocalState::Offline && old_public != public;
        let leaves_lastsrv = old_public == Some(PublicState::LastSrv)
            && matches!(
                public,
                Some(PublicState::Serving | PublicState::Syncing | PublicState::Waiting)
            );
        if leaves_lastsrv {
            if public == Some(PublicState::Serving) {
                // Back from LASTSRV the target is the chain's authority again (§3.5 #8
                // commits what it holds): its running updates go on, as if never displaced.
                t.locks.running_iter_mut().for_each(|r| r.displaced = false);
            }
            self.force_commit_pending(target, chain_version, out);
        }
        changed
    }

    /// §3.5 #8: pending versions on a target leaving LASTSRV are committed with the new chain
    /// version (3FS `resetUncommitted`). Chunks with a running update are left to it.
    fn force_commit_pending(
        &mut self,
        target: TargetId,
        chain_version: ChainVersion,
        out: &mut Outbox<Self>,
    ) {
        let t = &self.targets[&target];
        let pending: Vec<(ChunkId, crate::ids::ChunkVersion)> = t
            .chunks
            .values()
            .filter(|m| t.locks.running(m.chunk).is_none())
            .filter_map(|m| m.pending.as_ref().map(|p| (m.chunk, p.version)))
            .collect();
        for (chunk, version) in pending {
            self.counters.force_commits += 1;
            let op = ChunkOp::Commit {
                chunk,
                version,
                chain_version,
            };
            self.submit(out, IoPurpose::ForceCommit { target, chunk }, op);
        }
    }

    pub(super) fn force_commit_done(
        &mut self,
        target: TargetId,
        chunk: ChunkId,
        meta: Result<ChunkMeta, ChunkError>,
        out: &mut Outbox<Self>,
    ) {
        let now = *self.now;
        // Resync rounds wait for the last force commit (see `maybe_start_resyncs`).
        self.maybe_start_resyncs(out);
        let Ok(meta) = meta else { return };
        let t = self.targets.get_mut(&target).expect("hosted target");
        // The force-committed write is now visible: its client's retry must be answered with
        // it, not applied a second time (swarm seed 2001).
        let pending_tag = t.chunks.get(&chunk).and_then(|m| m.pending.as_ref()?.tag);
        if let Some(a) = meta.applied.iter().find(|a| Some(a.tag) == pending_tag) {
            t.channels
                .adopt(&a.tag, super::applied_result(a), Some(now));
        }
        debug_assert!(
            self.cfg.bug.is_some() || meta.versions_hold(),
            "chunk {chunk}: pending is not committed + 1 in {meta:?}"
        );
        if meta.committed == crate::ids::ChunkVersion(0) {
            t.chunks.remove(&chunk);
        } else {
            t.chunks.insert(chunk, meta);
        }
    }

    /// A medium error: the target goes OFFLINE until the process restarts (§2.6.2).
    pub(super) fn disk_failed(&mut self, target: TargetId, out: &mut Outbox<Self>) {
        let Some(t) = self.targets.get_mut(&target) else {
            return;
        };
        if t.disk_error {
            return;
        }
        t.disk_error = true;
        t.local_state = LocalState::Offline;
        self.send_heartbeat(out);
    }
}
