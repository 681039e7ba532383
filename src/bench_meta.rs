//! `t3fs bench meta`: namespace operations per second by type (create, stat, list, rename,
//! remove), each one KV transaction, against the in-memory MVCC engine and the embedded
//! persistent engine (every commit fdatasync'd); the embedded engine's create rate from
//! several threads sharing it with group commit (one fdatasync for every commit that queued
//! meanwhile), next to its one-fdatasync-per-commit figure; and the same types answered per
//! simulated second by a simulated cluster of meta servers (requests through the network and
//! the KV latency model, with conflicts between clients). Wall-clock figures for notes, not
//! tests.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant as WallClock;

use t3fs_core::ids::{ClientId, RequestId};
use t3fs_core::kv::mem::MemKv;
use t3fs_core::kv::{KvEngine, KvError, Txn};
use t3fs_core::meta::{MetaError, Namespace, PathOp};
use t3fs_services::wal_kv::{GroupStats, SharedWalKv, WalKv};

/// Threads of the group commit phase.
const GROUP_THREADS: u64 = 8;

/// One operation in its own committed transaction.
fn tx<E: KvEngine, T>(
    kv: &mut E,
    f: impl FnOnce(&mut Namespace<'_, '_, E>) -> Result<T, MetaError>,
) -> Result<T, MetaError> {
    t3fs_core::meta::transact(kv, f)
}

/// Operations per second of each phase over `files` files in 16 directories.
fn phases<E: KvEngine>(kv: &mut E, files: u64) -> Result<Vec<(&'static str, f64)>, MetaError> {
    let mut req = 0u64;
    let mut op = || {
        req += 1;
        PathOp {
            client: ClientId(1),
            request: RequestId(req),
            now: req,
        }
    };
    tx(kv, |ns| ns.init(0))?;
    for d in 0..16 {
        let o = op();
        tx(kv, |ns| ns.mkdirs(&format!("/bench/d{d}"), 0o755, true, o))?;
    }
    let name = |i: u64| format!("/bench/d{}/f{i:08}", i % 16);
    let renamed = |i: u64| format!("/bench/d{}/r{i:08}", (i + 1) % 16);
    let mut out = Vec::new();
    let mut time =
        |label: &'static str, n: u64, f: &mut dyn FnMut(u64) -> Result<(), MetaError>| {
            let start = WallClock::now();
            for i in 0..n {
                f(i)?;
            }
            out.push((label, n as f64 / start.elapsed().as_secs_f64()));
            Ok::<(), MetaError>(())
        };
    time("create", files, &mut |i| {
        let o = op();
        tx(kv, |ns| ns.create(&name(i), 0o644, true, None, o)).map(|_| ())
    })?;
    time("stat", files, &mut |i| {
        tx(kv, |ns| ns.stat(&name(i), true)).map(|_| ())
    })?;
    time(
        "list (128 per page)",
        16 * files.div_ceil(16 * 128),
        &mut |i| {
            let dir = format!("/bench/d{}", i % 16);
            tx(kv, |ns| ns.list(&dir, b"", 128)).map(|_| ())
        },
    )?;
    time("rename", files, &mut |i| {
        let o = op();
        tx(kv, |ns| ns.rename(&name(i), &renamed(i), o))
    })?;
    time("remove", files, &mut |i| {
        let o = op();
        tx(kv, |ns| ns.remove(&renamed(i), false, o))
    })?;
    Ok(out)
}

/// Creates per second from [`GROUP_THREADS`] threads sharing one embedded engine with group
/// commit, `files` in all. Each thread creates in its own directory with inode ids from its own
/// block, so the threads do not conflict on a row (as meta servers do not, 3FS §4.1); a
/// conflict that still happens is retried.
fn group_creates(dir: &Path, files: u64) -> Result<(f64, GroupStats), String> {
    let kv = SharedWalKv::open(dir).map_err(|e| e.to_string())?;
    let setup = |kv: &mut SharedWalKv| -> Result<(), MetaError> {
        let op = |r| PathOp {
            client: ClientId(100),
            request: RequestId(r),
            now: r,
        };
        tx(kv, |ns| ns.init(0))?;
        for t in 0..GROUP_THREADS {
            tx(kv, |ns| {
                ns.mkdirs(&format!("/group/t{t}"), 0o755, true, op(t + 1))
            })?;
        }
        Ok(())
    };
    setup(&mut kv.clone()).map_err(|e| format!("{e:?}"))?;
    let before = kv.stats();
    let start = WallClock::now();
    let per_thread = files.div_ceil(GROUP_THREADS);
    let worker = |t: u64, mut kv: SharedWalKv| -> Result<(), MetaError> {
        let mut ids = 0..0;
        for i in 0..per_thread {
            let op = PathOp {
                client: ClientId(200 + t),
                request: RequestId(i + 1),
                now: i,
            };
            let path = format!("/group/t{t}/f{i:08}");
            loop {
                if ids.is_empty() {
                    ids = match tx(&mut kv, |ns| ns.allocate_block()) {
                        Err(MetaError::Kv(KvError::Conflict)) => continue,
                        r => r?,
                    };
                }
                let mut txn = Txn::new(&mut kv);
                let made = Namespace::with_ids(&mut txn, ids.start..ids.start + 1)
                    .create(&path, 0o644, true, None, op)
                    .map(|_| ());
                match made.and_then(|()| Ok(txn.commit()?)) {
                    Ok(_) => {
                        ids.start += 1;
                        break;
                    }
                    Err(MetaError::Kv(KvError::Conflict)) => continue,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    };
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..GROUP_THREADS)
            .map(|t| {
                let kv = kv.clone();
                s.spawn(move || worker(t, kv))
            })
            .collect();
        threads
            .into_iter()
            .try_for_each(|h| h.join().expect("a bench thread panicked"))
    })
    .map_err(|e| format!("{e:?}"))?;
    let secs = start.elapsed().as_secs_f64();
    let after = kv.stats();
    let stats = GroupStats {
        commits: after.commits - before.commits,
        syncs: after.syncs - before.syncs,
    };
    Ok(((per_thread * GROUP_THREADS) as f64 / secs, stats))
}

/// Runs the benchmark on the embedded engines (and etcd when given), then in simulation.
pub fn run(files: u64, etcd: Option<String>) -> ExitCode {
    if let Some(url) = etcd {
        if let Err(e) = on_etcd(&url, files) {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    let dir: PathBuf = std::env::temp_dir().join(format!("t3fs-bench-meta-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut mem = MemKv::new(100_000);
    let mem_figs = phases(&mut mem, files);
    let wal_figs = WalKv::open(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))
        .and_then(|mut kv| phases(&mut kv, files).map_err(|e| format!("{e:?}")));
    let _ = std::fs::remove_dir_all(&dir);
    let group_dir = dir.with_extension("group");
    let _ = std::fs::remove_dir_all(&group_dir);
    let group = group_creates(&group_dir, files);
    let _ = std::fs::remove_dir_all(&group_dir);
    let (mem_figs, wal_figs, (group_rate, group_stats)) = match (mem_figs, wal_figs, group) {
        (Ok(m), Ok(w), Ok(g)) => (m, w, g),
        (m, w, g) => {
            eprintln!(
                "error: in-memory {:?}, embedded {:?}, group commit {:?}",
                m.err(),
                w.err(),
                g.err()
            );
            return ExitCode::from(2);
        }
    };
    println!("meta operations per second, {files} files in 16 directories, one transaction each:");
    println!(
        "{:<22} {:>14} {:>26}",
        "operation", "in-memory KV", "embedded KV (fdatasync)"
    );
    for ((label, m), (_, w)) in mem_figs.iter().zip(&wal_figs) {
        println!("{label:<22} {m:>14.0} {w:>26.0}");
    }
    let single = wal_figs.first().map_or(0.0, |(_, w)| *w);
    println!(
        "\nembedded KV creates per second, one fdatasync per commit vs group commit:\n\
         {:<44} {single:>10.0}\n\
         {:<44} {group_rate:>10.0}  ({} commits in {} fdatasyncs, {:.1} per sync)",
        "1 thread, one fdatasync per transaction",
        format!("{GROUP_THREADS} threads, group commit (SharedWalKv)"),
        group_stats.commits,
        group_stats.syncs,
        group_stats.commits as f64 / group_stats.syncs.max(1) as f64,
    );
    println!("(embedded KV files under {})", dir.display());
    simulated()
}

#[cfg(feature = "etcd")]
fn on_etcd(url: &str, files: u64) -> Result<(), String> {
    let prefix = format!("t3fs-bench-meta-{}/", std::process::id());
    let mut kv = t3fs_services::etcd_kv::EtcdKv::connect(&[url.to_string()], prefix.as_bytes())?;
    let figs = phases(&mut kv, files).map_err(|e| format!("on etcd at {url}: {e:?}"))?;
    println!("meta operations per second on etcd at {url}, {files} files, one transaction each:");
    for (label, n) in figs {
        println!("{label:<22} {n:>14.0}");
    }
    println!();
    Ok(())
}

#[cfg(not(feature = "etcd"))]
fn on_etcd(_url: &str, _files: u64) -> Result<(), String> {
    Err("this binary was built without the etcd engine; rebuild with `--features etcd`".into())
}

/// A simulated cluster: 3 meta servers, 8 clients in closed loop over one contended pool of
/// names, KV latency 0.5–3 ms and 2% injected conflicts.
const SIM_SCENARIO: &str = r#"
name = "bench_meta"
about = "meta throughput in simulation"
duration = "20s"
converge_within = "30s"
[cluster]
clients = 8
meta = 3
[workload]
chunks = 1
read_fraction = 1.0
think = "1s..2s"
[namespace]
dirs = 4
names = 8
mix = "mixed"
think = "0ms..1ms"
[faults]
kv_conflict = 0.02
"#;

fn simulated() -> ExitCode {
    let sc = match t3fs_scenario::parse("bench_meta.toml", SIM_SCENARIO) {
        Ok(sc) => sc,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let start = WallClock::now();
    let out = match t3fs_sim::run::run(&sc, 1, false) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let wall = start.elapsed().as_secs_f64();
    let Some(w) = out.world.as_ref() else {
        eprintln!(
            "error: the simulated run ended in an assertion: {}",
            out.reason
        );
        return ExitCode::from(2);
    };
    let secs = sc.duration.as_secs_f64();
    let mut by_type: std::collections::BTreeMap<&str, u64> = Default::default();
    for o in w.sim.ns_history().ops.iter().filter(|o| o.ret.is_some()) {
        use t3fs_core::meta::request::MetaOp as M;
        let t = match o.op {
            M::Create { .. } => "create",
            M::Stat { .. } => "stat",
            M::List { .. } => "list",
            M::Rename { .. } => "rename",
            M::Remove { .. } => "remove",
            M::Mkdirs { .. } => "mkdir",
            M::Symlink { .. } => "symlink",
            M::Mknod { .. } => "mknod",
            M::Hardlink { .. } => "link",
            M::Open { .. } => "open",
            M::Close { .. } | M::CloseUnwritten { .. } => "close",
            M::ExtendStripe { .. } => "extend stripe",
            M::Sync { .. } => "sync",
            M::LockDirectory { .. } => "lock directory",
            M::StatFs => "statfs",
            M::SetAttr { .. } => "setattr",
            M::BatchStat { .. } => "batch stat",
        };
        *by_type.entry(t).or_default() += 1;
    }
    println!(
        "\nsimulated cluster (3 meta servers, 8 closed-loop clients, KV latency 0.5-3 ms, 2% conflicts), {secs:.0} simulated s in {wall:.2} s wall including the namespace checker ({:.1}x real time), verdict {}:",
        out.sim_ns as f64 / 1e9 / wall,
        if out.passed() { "PASS" } else { "FAIL" }
    );
    println!("{:<22} {:>22}", "operation", "answered per sim s");
    for (t, n) in &by_type {
        println!("{t:<22} {:>22.1}", *n as f64 / secs);
    }
    let retries: u64 = w
        .nodes
        .iter()
        .filter_map(|n| match &n.proc {
            t3fs_sim::world::node::Process::Meta(m) => Some(m.counters().retries),
            _ => None,
        })
        .sum();
    println!("(meta retries after KV conflicts or unknown commits: {retries})");
    ExitCode::SUCCESS
}
