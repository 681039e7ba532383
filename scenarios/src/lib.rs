//! t3fs-scenario: the scenario schema and workload generators shared by simulated and real runs
//! (empty until the simulator issue lands). `scenarios/catalog/*.toml` will hold the scenario
//! files users run; a bad file will be reported with its file, line and field.
#![forbid(unsafe_code)]
