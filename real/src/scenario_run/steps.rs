//! A scenario's steps on real processes: which of them run for real, which run in an
//! approximate form and which cannot run yet, all said before the run starts (`--plan`), and
//! the file's settings real processes do not honour.
//!
//! Invariant: every step of the file gets exactly one [`How`]; nothing is dropped without a
//! line saying so. Not here: resolving node references (live.rs) or executing steps
//! (execute.rs).

use t3fs_scenario::schema::Faults;
use t3fs_scenario::{Action, NodeRef, Scenario, Step};

/// How a step is carried out on real processes.
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum How {
    /// Exactly as the simulator does it.
    Real,
    /// In a real form that differs from the simulator's; the text says how.
    Approx(String),
    /// Not carried out; the text says why.
    NotRun(String),
}

/// A step with how it will run.
#[derive(Clone, Debug)]
pub struct Planned {
    /// The step.
    pub step: Step,
    /// How.
    pub how: How,
}

/// What cannot run for real: a step's verb or a background fault. Said before a run starts.
const NO_NET: &str = "needs per-message faults the transport's fault layer does not have yet";
const NO_CLIENT_NET: &str =
    "the workload's clients live in the runner's process; their links are not faulted yet";

fn is_client(r: &NodeRef) -> bool {
    matches!(r, NodeRef::Client(_))
}
const NO_DISK: &str =
    "random disk damage and failures per operation are not in the chunk store's fault layer, which has whole-disk modes (EIO, ENOSPC, latency) and one-shot rot";
const NO_DRIFT: &str =
    "drift moves the time machines read, but their timers keep true durations (the simulator stretches them)";
const NO_CLIENT_CLOCK: &str =
    "the workload's clients live in the runner's process and read its clock";

/// How `action` runs on real processes.
pub fn how(action: &Action) -> How {
    use Action as A;
    match action {
        // The runner's clients crash in its process (life.rs): the call in flight is abandoned
        // and the node stopped; a restart connects a fresh incarnation.
        A::Crash(NodeRef::Client(_)) | A::Restart(NodeRef::Client(_)) => How::Real,
        A::RestartEmpty(NodeRef::Client(_))
        | A::Pause(NodeRef::Client(_))
        | A::Resume(NodeRef::Client(_))
        | A::CrashAfterForward(NodeRef::Client(_))
        | A::PauseOnCommit(NodeRef::Client(_)) => How::NotRun(
            "the workload's clients live in the runner's process: they crash and restart, but are not frozen or emptied"
                .into(),
        ),
        A::Crash(_) | A::Restart(_) | A::RestartEmpty(_) | A::Pause(_) | A::Resume(_) => How::Real,
        A::CrashAfterForward(_) => How::Approx(
            "SIGKILL while the workload's writes flow: which update is half-way down the chain at that instant is not chosen from outside the process".into(),
        ),
        A::PauseOnCommit(_) => How::Approx(
            "SIGSTOP at the step's time, not at the mgmtd's next chain-row commit".into(),
        ),
        A::Partition { a, b, .. } | A::Repair { a, b } if a.iter().chain(b).any(is_client) => {
            How::NotRun(NO_CLIENT_NET.into())
        }
        A::Isolate(r) | A::Flap { node: r, .. } if is_client(r) => How::NotRun(NO_CLIENT_NET.into()),
        A::Heal
        | A::Partition { .. }
        | A::Isolate(_)
        | A::Repair { .. }
        | A::SetLoss(_)
        | A::SetDuplicate(_)
        | A::SetLatency(_)
        | A::Flap { .. } => How::Real,
        A::Hold { a, b } | A::Release { a, b } if a.iter().chain(b).any(is_client) => {
            How::NotRun(NO_CLIENT_NET.into())
        }
        A::Link { a, b, .. } if a.iter().chain(b).any(is_client) => How::Approx(
            "frames the runner's clients send are not slowed: their links are slowed one way, toward the clients".into(),
        ),
        A::Link { .. } | A::Hold { .. } | A::Release { .. } => How::Real,
        A::DropHeartbeats { .. } => How::Real,
        // The parser already refuses disk verbs on nodes without disks.
        A::FailDisk(_) | A::HealDisk(_) | A::SlowDisk { .. } | A::FillDisk(_) => How::Real,
        A::CorruptChunk(_) => How::Real,
        A::SkewClock { node: r, .. } | A::StepClock { node: r, .. } if is_client(r) => {
            How::NotRun(NO_CLIENT_CLOCK.into())
        }
        A::SkewClock { .. } | A::StepClock { .. } => How::Real,
        A::KvUnavailable | A::KvAvailable | A::KvFaults { .. } => How::Real,
    }
}

/// Every step of `sc` with how it runs.
pub fn plan(sc: &Scenario) -> Vec<Planned> {
    sc.steps
        .iter()
        .map(|s| Planned {
            step: s.clone(),
            how: how(&s.action),
        })
        .collect()
}

/// The scenario's settings that real processes do not honour yet: background fault rates that
/// differ from the simulator's defaults, and cluster options.
pub fn not_honoured(sc: &Scenario) -> Vec<String> {
    let d = Faults::default();
    let f = &sc.faults;
    let mut out = Vec::new();
    let mut rate = |name: &str, v: f64, why: &str| {
        if v > 0.0 {
            out.push(format!("[faults] {name} = {v}: {why}"));
        }
    };
    rate("net_spike", f.net_spike, NO_NET);
    rate("disk_spike", f.disk_spike, NO_DISK);
    rate("disk_eio", f.disk_eio, NO_DISK);
    rate("disk_corrupt", f.disk_corrupt, NO_DISK);
    rate("torn_write", f.torn_write, NO_DISK);
    rate("lost_write", f.lost_write, NO_DISK);
    if f.net_latency != d.net_latency {
        out.push(format!(
            "[faults] net_latency = {:?}: real links have loopback's own latency",
            f.net_latency
        ));
    }
    if f.disk_latency != d.disk_latency {
        out.push(format!(
            "[faults] disk_latency = {:?}: real disks have their own latency",
            f.disk_latency
        ));
    }
    if f.clock_drift_ppm > 0 {
        out.push(format!(
            "[faults] clock_drift_ppm = {}: {NO_DRIFT}",
            f.clock_drift_ppm
        ));
    }
    if f.buggify {
        out.push("[faults] buggify: a simulator-only search aid".into());
    }
    if sc.cluster.reject_dirty_reads {
        out.push("[cluster] reject_dirty_reads: real targets run committed reads".into());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_verb_is_classified_and_process_steps_run_for_real() {
        let sc = t3fs_scenario::parse(
            "x.toml",
            "name = \"x\"\nabout = \"x\"\nduration = \"5s\"\n[cluster]\nstorage_nodes = 3\nreplicas = 3\n\
             [[step]]\nat = \"1s\"\ndo = \"crash\"\nnode = \"head:1\"\n\
             [[step]]\nat = \"2s\"\ndo = \"restart_empty\"\nnode = \"storage-0\"\n\
             [[step]]\nat = \"2s\"\ndo = \"partition\"\na = [\"storage-1\"]\nb = [\"mgmtd-0\"]\n\
             [[step]]\nat = \"3s\"\ndo = \"crash_after_forward\"\nnode = \"storage-1\"\n\
             [[step]]\nat = \"4s\"\ndo = \"slow_disk\"\nnode = \"tail:1\"\nlatency = \"5ms..9ms\"\n\
             [[step]]\nat = \"4s\"\ndo = \"step_clock\"\nnode = \"primary\"\nby_ms = -3000\n\
             [faults]\nloss = 0.01\n",
        )
        .expect("scenario");
        let p = plan(&sc);
        assert_eq!(p.len(), 6);
        assert_eq!(p[0].how, How::Real);
        assert_eq!(p[1].how, How::Real);
        assert_eq!(p[2].how, How::Real);
        assert!(matches!(p[3].how, How::Approx(_)));
        assert_eq!(
            p[4].how,
            How::Real,
            "disk faults run in the chunk store's fault layer"
        );
        assert!(not_honoured(&sc).is_empty(), "loss runs in the fault layer");
        let sc = t3fs_scenario::parse(
            "y.toml",
            "name = \"y\"\nabout = \"y\"\nduration = \"5s\"\n[cluster]\nclients = 2\n\
             [[step]]\nat = \"1s\"\ndo = \"isolate\"\nnode = \"client-1\"\n\
             [[step]]\nat = \"2s\"\ndo = \"drop_heartbeats\"\nnode = \"storage-0\"\nfor = \"1s\"\n\
             [faults]\ntorn_write = 0.5\n",
        )
        .expect("scenario");
        let p = plan(&sc);
        assert!(
            matches!(p[0].how, How::NotRun(_)),
            "a client's links: {p:?}"
        );
        assert_eq!(
            p[1].how,
            How::Real,
            "heartbeats are told apart by the fault layer"
        );
        let n = not_honoured(&sc);
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(n[0].starts_with("[faults] torn_write = 0.5"));
    }
}
