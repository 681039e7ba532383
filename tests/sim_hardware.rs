//! Resources with service times in the message-level world (`[hardware]`): latency grows with
//! message size only when hardware is modelled, throughput stops at the binding resource and
//! never exceeds it, and runs stay a pure function of their seed.

mod support;

use support::{t3fs, Scratch};
use t3fs_sim::run;
use t3fs_sim::world::throughput::Load;

fn nic_bound() -> t3fs_scenario::Scenario {
    let path = t3fs_scenario::find("hardware_nic_bound").expect("catalog scenario");
    t3fs_scenario::load_file(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `sc` with seed 1; it must pass its verdicts.
fn load_of(sc: &t3fs_scenario::Scenario) -> (Load, u64) {
    let o = run::run(sc, 1, false).expect("runs");
    assert!(o.passed(), "{}: {}", sc.name, o.reason);
    let w = o.world.as_ref().expect("world");
    (w.load(), o.trace)
}

#[test]
fn write_latency_grows_with_size_only_with_hardware() {
    let mut sc = nic_bound();
    sc.cluster.clients = 1;
    sc.duration = core::time::Duration::from_secs(2);
    let ratio = |sc: &mut t3fs_scenario::Scenario| {
        sc.workload.write_size = 64 << 10;
        let small = load_of(sc).0.writes.p50;
        sc.workload.write_size = 1 << 20;
        let big = load_of(sc).0.writes.p50;
        big / small
    };
    let with = ratio(&mut sc);
    sc.hardware = None;
    let without = ratio(&mut sc);
    // 16x the bytes: the NIC and SSD times dominate with hardware; without it, size is free.
    assert!(with > 5.0, "with hardware 1 MiB / 64 KiB p50 = {with:.2}");
    assert!(
        (0.7..1.4).contains(&without),
        "size-blind without: {without:.2}"
    );
}

#[test]
fn throughput_saturates_at_the_storage_nics_and_never_exceeds_them() {
    let mut sc = nic_bound();
    let hw = sc.hardware.clone().expect("hardware");
    let storage = f64::from(sc.cluster.storage_nodes);
    // Storage NICs send every read and forward each write down its chain (replicas - 1 times).
    let sent =
        |l: &Load| l.reads.bytes_per_s + l.writes.bytes_per_s * f64::from(sc.cluster.replicas - 1);
    let bound = storage * hw.nic_bytes;
    let mut by_clients = Vec::new();
    for clients in [1, 8] {
        sc.cluster.clients = clients;
        let (l, _) = load_of(&sc);
        let s = sent(&l);
        assert!(
            s <= bound,
            "{clients} clients: {s:.0} B/s over the NICs' {bound:.0}"
        );
        by_clients.push(s);
    }
    let (one, eight) = (by_clients[0], by_clients[1]);
    assert!(
        eight > 2.0 * one,
        "more clients, more throughput: {one:.0} -> {eight:.0}"
    );
    assert!(
        eight > 0.45 * bound,
        "8 clients load the storage NICs: {eight:.0} of {bound:.0}"
    );
    assert!(
        eight < 6.0 * one,
        "but far from 8x: the NICs bind ({one:.0} -> {eight:.0})"
    );
}

#[test]
fn hardware_runs_are_a_function_of_their_seed() {
    let sc = nic_bound();
    let (a, ta) = load_of(&sc);
    let (b, tb) = load_of(&sc);
    assert_eq!(ta, tb);
    assert_eq!(a, b);
    let o = run::run(&sc, 2, false).expect("runs");
    assert_ne!(o.trace, ta, "another seed, another run");
}

#[test]
fn a_shared_disk_run_is_a_function_of_its_seed_and_passes_its_checks() {
    let mut sc = nic_bound();
    let hw = sc.hardware.as_mut().expect("hardware");
    (hw.ssd_read_concurrency, hw.ssd_write_concurrency) = (1.2, 1.1);
    let (a, ta) = load_of(&sc);
    let (b, tb) = load_of(&sc);
    assert_eq!((ta, a), (tb, b));
    let (_, fifo) = load_of(&nic_bound());
    assert_ne!(
        ta, fifo,
        "the shared disk serves differently from the FIFO queue"
    );
}

/// A shared SSD's writers slow one another, so their completions are re-armed.
const SHARED_DISK: &str = r#"
name = "shared-disk-log"
about = "a shared SSD's postponed completions, each logged once"
duration = "300ms"

[cluster]
mgmtd = 1
storage_nodes = 3
replicas = 3
clients = 4

[workload]
chunks = 16
write_size = 1048576
read_fraction = 0.0
think = "0us..1us"
prefill = false

[hardware]
profile = "gbe-sata"
ssd_read_concurrency = 1.2
ssd_write_concurrency = 1.1
"#;

#[test]
fn a_completion_a_shared_disk_postponed_is_logged_once_when_it_happens() {
    let tmp = Scratch(std::env::temp_dir().join(format!("t3fs-rearm-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0).expect("scratch");
    let path = tmp.0.join("shared.toml");
    std::fs::write(&path, SHARED_DISK).expect("scenario");
    let args = [
        "sim",
        "run",
        &path.to_string_lossy(),
        "--log",
        "--no-report",
    ];
    let (ok, log) = t3fs(&args, &tmp.0);
    assert!(ok, "{log}");
    // Each update names its node, chunk and version: logged twice, it was logged at a
    // projection a later writer postponed (as before rearm.rs: 459 lines for 234 updates).
    let mut seen = std::collections::BTreeSet::new();
    for line in log.lines().filter(|l| l.contains(" done: chunk_update ")) {
        let what = line.trim_start().split_once(' ').expect("time first").1;
        let what = what.split(" | ").next().expect("the event").to_string();
        assert!(seen.insert(what), "logged twice: {line}");
    }
    assert!(
        seen.len() > 100,
        "{} updates: the disk was not shared enough to test",
        seen.len()
    );
}
