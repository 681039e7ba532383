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

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use t3fs_real::scenario_run::steps::{how, How};

use crate::cluster_run::{run_real, Place};

/// `t3fs cluster soak`.
#[derive(Args, Debug)]
pub struct SoakArgs {
    /// How long the faults and the workload last, in minutes.
    #[arg(long, default_value_t = 30)]
    pub minutes: u64,
    /// Seed of the fault schedule and the workload.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run every node with a planted bug (`t3fs sim list` names them).
    #[arg(long)]
    pub bug: Option<String>,
    /// The cluster directory (default: a fresh one under the temporary directory, removed
    /// after a passing run).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Chunk store of every target: `file` or `uring`.
    #[arg(long, default_value = "file", value_parser = ["file", "uring"])]
    pub store: String,
    /// Where the run directory goes.
    #[arg(long, default_value = "runs")]
    pub out: PathBuf,
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
    sc.bug = a.bug.clone();
    if t3fs_real::config::bugs(sc.bug.as_deref()).is_none() {
        eprintln!(
            "error: unknown planted bug `{}` (`t3fs sim list` names them)",
            sc.bug.unwrap_or_default()
        );
        return ExitCode::from(2);
    }
    let toml = t3fs_scenario::write::to_toml(&sc);
    if a.plan {
        print!("{toml}");
        return ExitCode::SUCCESS;
    }
    let command = format!(
        "t3fs cluster soak --minutes {} --seed {}{}{}",
        a.minutes,
        a.seed,
        sc.bug
            .as_ref()
            .map(|b| format!(" --bug {b}"))
            .unwrap_or_default(),
        if a.store == "file" {
            String::new()
        } else {
            format!(" --store {}", a.store)
        }
    );
    let place = Place {
        dir: a.dir.clone(),
        store: a.store.clone(),
        out: a.out.clone(),
    };
    let code = run_real(&sc, a.seed, &place, &command);
    let saved = a
        .out
        .join(format!("soak-real-seed{}", a.seed))
        .join("soak.toml");
    if let Err(e) = std::fs::write(&saved, toml) {
        eprintln!("warning: {}: {e}", saved.display());
    }
    code
}
