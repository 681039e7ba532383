//! The named counters every machine keeps, as one flat list per process: the simulator sums
//! them into run reports and the real services export them as metrics. Not here: transport and
//! store counters (their drivers' own).

use super::Process;

/// Named counters of a process and the §2.6.1 rows an mgmtd exercised.
pub type ProcessCounters = (
    Vec<(&'static str, u64)>,
    Vec<(crate::mgmtd::chain_update::Row, u64)>,
);

/// The named counters of a process (machine counters a report or a metrics endpoint sums over
/// the cluster), plus the §2.6.1 rows an mgmtd exercised.
pub fn counters_of(p: &Process) -> ProcessCounters {
    match p {
        Process::Storage(s) => {
            let c = s.counters();
            (
                vec![
                    ("storage.commits", c.commits),
                    ("storage.stale_chain_version", c.stale_chain_version),
                    ("storage.forward_retries", c.forward_retries),
                    ("storage.cached_replies", c.cached_replies),
                    ("storage.resyncs_done", c.resyncs_done),
                    ("storage.resync_items", c.resync_items),
                    ("storage.resync_fatal", c.resync_fatal),
                    ("storage.force_commits", c.force_commits),
                    ("storage.updates_from_stranger", c.updates_from_stranger),
                    ("storage.replies_from_stranger", c.replies_from_stranger),
                    ("storage.lease_refusals", c.lease_refusals),
                    ("storage.no_space", c.no_space),
                    ("storage.commits_refused", c.commits_refused),
                ],
                Vec::new(),
            )
        }
        Process::Mgmtd(m) => {
            let c = m.counters();
            (
                vec![
                    ("mgmtd.commits", c.commits),
                    ("mgmtd.kv_failures", c.kv_failures),
                    ("mgmtd.chain_updates", c.chain_updates),
                    ("mgmtd.heartbeats_refused", c.heartbeats_refused),
                    ("mgmtd.tenures", c.tenures),
                ],
                c.rows.iter().map(|(r, n)| (*r, *n)).collect(),
            )
        }
        Process::Client(c) => (
            vec![
                ("client.retries", c.counters().retries),
                ("client.failed_ios", c.counters().failed_ios),
            ],
            Vec::new(),
        ),
        Process::Meta(m) => (
            vec![
                ("meta.answered", m.counters().answered),
                ("meta.retries", m.counters().retries),
                ("meta.kv_reads", m.counters().reads),
                ("meta.rows_fetched", m.counters().rows_fetched),
                ("meta.commit_unknown", m.counters().commit_unknown),
                ("meta.gc_freed", m.counters().gc_freed),
                ("meta.gc_busy", m.counters().gc_busy),
                ("meta.sessions_pruned", m.counters().sessions_pruned),
                ("meta.length_queries", m.counters().length_queries),
                ("meta.idem_cleaned", m.counters().idem_cleaned),
                ("meta.batched", m.counters().batched),
            ],
            Vec::new(),
        ),
        Process::None => (Vec::new(), Vec::new()),
    }
}
