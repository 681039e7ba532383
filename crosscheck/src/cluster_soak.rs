//! `t3fs cluster soak --minutes N`: a Jepsen-style soak on real processes. A 3-replica cluster
//! runs the register workload for N minutes while recoverable faults drawn from a seed (the
//! swarm's generator, t3fs-sim's `soak`, restricted to the steps that run for real) strike one
//! after another; the run ends as a scenario run does (heal, restart, converge, read back) and
//! the simulator's checkers judge the whole history.
//!
//! The generated scenario, with every fault step, is the manifest's `config` and is saved as
//! `soak.toml` in the run directory, so `t3fs cluster run RUN_DIR/soak.toml` replays the same
//! schedule; the manifest's `steps.*` counters are the faults executed. Not here: running
//! (cluster_run.rs's `run_real`).

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use t3fs_real::scenario_run::steps::{how, How};

use crate::cluster_run::{known_bug, run_real, PlaceArgs};

/// `t3fs cluster soak`.
#[derive(Args, Debug)]
pub struct SoakArgs {
    /// How long the faults and the workload last, in minutes.
    #[arg(long, default_value_t = 30)]
    pub minutes: u64,
    /// Seed of the fault schedule and the workload.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where the cluster and the run directory go, and the planted bug.
    #[command(flatten)]
    pub place: PlaceArgs,
    /// Print the drawn fault schedule and start nothing.
    #[arg(long)]
    pub plan: bool,
}

/// `t3fs cluster soak`.
pub fn soak(a: SoakArgs) -> ExitCode {
    if a.minutes == 0 {
        eprintln!("error: --minutes must be at least 1");
        return ExitCode::from(2);
    }
    let real = |act: &t3fs_scenario::Action| how(act) == How::Real;
    let mut sc = t3fs_sim::soak::scenario(a.seed, Duration::from_secs(a.minutes * 60), &real);
    sc.bug = a.place.bug.clone();
    if let Err(e) = known_bug(sc.bug.as_deref()) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let toml = t3fs_scenario::write::to_toml(&sc);
    if a.plan {
        print!("{toml}");
        return ExitCode::SUCCESS;
    }
    let command = format!(
        "t3fs cluster soak --minutes {} --seed {}{}",
        a.minutes,
        a.seed,
        a.place.flags(sc.bug.as_deref())
    );
    let place = a.place.place();
    let code = run_real(&sc, a.seed, &place, &command);
    let saved = place
        .out
        .join(format!("soak-real-seed{}", a.seed))
        .join("soak.toml");
    if let Err(e) = std::fs::write(&saved, toml) {
        eprintln!("warning: {}: {e}", saved.display());
    }
    code
}
