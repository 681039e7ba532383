//! `t3fs bench meta`: namespace operations per second by type (create, stat, list, rename,
//! remove), each one KV transaction, against the in-memory MVCC engine and the embedded
//! persistent engine (every commit fdatasync'd). Wall-clock figures for notes, not tests.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant as WallClock;

use t3fs_core::ids::{ClientId, RequestId};
use t3fs_core::kv::mem::MemKv;
use t3fs_core::kv::KvEngine;
use t3fs_core::meta::{MetaError, Namespace, PathOp};
use t3fs_real::wal_kv::WalKv;

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
        tx(kv, |ns| ns.create(&name(i), 0o644, true, o)).map(|_| ())
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

/// Runs the benchmark on both engines.
pub fn run(files: u64) -> ExitCode {
    let dir: PathBuf = std::env::temp_dir().join(format!("t3fs-bench-meta-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut mem = MemKv::new(100_000);
    let mem_figs = phases(&mut mem, files);
    let wal_figs = WalKv::open(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))
        .and_then(|mut kv| phases(&mut kv, files).map_err(|e| format!("{e:?}")));
    let _ = std::fs::remove_dir_all(&dir);
    let (mem_figs, wal_figs) = match (mem_figs, wal_figs) {
        (Ok(m), Ok(w)) => (m, w),
        (m, w) => {
            eprintln!("error: in-memory {:?}, embedded {:?}", m.err(), w.err());
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
    println!(
        "(embedded KV files under {}; etcd is not measured: its engine is not built yet)",
        dir.display()
    );
    ExitCode::SUCCESS
}
