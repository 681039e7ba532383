//! t3fs-scenario: the scenario schema, its TOML loader, the seeded generator and the workload
//! generators shared by simulated and real runs.
//!
//! `scenarios/catalog/*.toml` holds the scenario files users run (`t3fs sim run NAME`); the
//! format is documented in `scenarios/README.md`. A bad file is reported with its file, line
//! and field. Not here: executing a scenario (t3fs-sim, later t3fs-real).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod chain_table;
pub mod duration;
pub mod hardware;
pub mod history;
pub mod load;
mod load_error;
mod load_step;
pub mod namespace;
pub mod ns_files;
pub mod plan;
pub mod plan_cfg;
pub mod rng;
pub mod schema;
pub mod trip;
pub mod workload;
pub mod write;

pub use hardware::Hardware;
pub use load::{load_file, parse, ScenarioError};
pub use rng::Rng;
pub use schema::{Action, Cluster, Expect, Faults, NodeRef, Scenario, Step, Timeouts, Workload};

/// The catalog directory shipped with the sources.
pub fn catalog_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog")
}

/// Finds a scenario by file path or by catalog name (`head_crash_mid_write`).
pub fn find(name_or_path: &str) -> Result<std::path::PathBuf, String> {
    let p = std::path::Path::new(name_or_path);
    if p.is_file() {
        return Ok(p.to_path_buf());
    }
    let c = catalog_dir().join(format!("{name_or_path}.toml"));
    if c.is_file() {
        return Ok(c);
    }
    let names = catalog()
        .iter()
        .map(|(n, _)| n.clone())
        .collect::<Vec<_>>()
        .join(", ");
    Err(format!(
        "no scenario `{name_or_path}` (not a file; catalog: {names})"
    ))
}

/// The catalog's scenario names and paths, sorted by name.
pub fn catalog() -> Vec<(String, std::path::PathBuf)> {
    let mut v: Vec<(String, std::path::PathBuf)> = std::fs::read_dir(catalog_dir())
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .filter_map(|p| Some((p.file_stem()?.to_str()?.to_string(), p)))
        .collect();
    v.sort();
    v
}
