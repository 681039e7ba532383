//! Differential test of the meta namespace against a real local directory (issue 5, item 8):
//! the same random sequence of namespace operations goes to t3fs's `Namespace` (over the
//! in-memory MVCC KV) and to the kernel's file system under a fresh temporary directory, and
//! every result must agree (success, or the same errno), as must the final trees; and t3fs's GC
//! root must hold exactly the inodes it dropped for good, as many as the kernel dropped.
//!
//! The universe is tiny on purpose (three names, depth three) so names collide and every
//! error path is hit. Symlink targets are relative names in the link's own directory, so the
//! real side never leaves its temporary directory. Special files (FIFOs and sockets, and
//! character devices when the test runs as root, as mknod needs) are made, linked, renamed and
//! removed like the rest; hard links of symlinks link the symlink itself, as Linux does.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use t3fs_core::ids::{ClientId, InodeId, RequestId};
use t3fs_core::kv::mem::MemKv;
use t3fs_core::kv::Txn;
use t3fs_core::meta::{EntryKind, Inode, MetaError, Namespace, PathOp, GC_ROOT, ROOT};
use t3fs_core::wire::SpecialKind;
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
        } else if t.is_fifo() {
            EntryKind::Special(SpecialKind::Fifo)
        } else if t.is_socket() {
            EntryKind::Special(SpecialKind::Socket)
        } else if t.is_char_device() {
            EntryKind::Special(SpecialKind::CharDevice)
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

/// Inodes a successful remove or replacing rename of `victim` drops for good in the kernel:
/// a directory, or the last name of anything else.
fn dropped(victim: &fs::Metadata) -> usize {
    usize::from(victim.is_dir() || victim.nlink() == 1)
}

/// Every inode named below `dir` (t3fs's tree; directories recursively).
fn named_inodes(ns: &mut Namespace<'_, '_, MemKv>, dir: InodeId, out: &mut BTreeSet<InodeId>) {
    for (_, e) in ns.list_dir(dir, b"", 10_000).unwrap() {
        if out.insert(e.inode) && e.kind == EntryKind::Directory {
            named_inodes(ns, e.inode, out);
        }
    }
}

/// The device number mknod is given for character devices: /dev/null's (1, 3), in the
/// kernel's `new_encode_dev` form (the same here: small numbers).
const DEV_NULL: u64 = (1 << 8) | 3;

/// A kind of special file to make: a FIFO or socket, or, as root, a character device.
fn special_for(rng: &mut Rng) -> SpecialKind {
    // SAFETY: geteuid has no preconditions and touches no memory.
    #[allow(unsafe_code)]
    let root = unsafe { libc::geteuid() } == 0;
    let kinds: &[SpecialKind] = if root {
        &[
            SpecialKind::Fifo,
            SpecialKind::Socket,
            SpecialKind::CharDevice,
        ]
    } else {
        &[SpecialKind::Fifo, SpecialKind::Socket]
    };
    kinds[rng.below(kinds.len() as u64) as usize]
}

/// mknod(2) of `kind` at `path` with mode 0644 in the kernel's file system.
fn real_mknod(path: &Path, kind: SpecialKind) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes()).expect("no NUL in test paths");
    let mode = kind.mode_bits() | 0o644;
    let dev = libc::makedev(1, 3);
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::mknod(c.as_ptr(), mode as libc::mode_t, dev) };
    match rc {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Runs `steps` random operations from `seed`; returns how many inodes went under GC.
fn run(seed: u64, steps: u64) -> usize {
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
    // Every inode t3fs made, with its kind, and the inodes the kernel dropped for good.
    let mut created: BTreeMap<InodeId, EntryKind> = BTreeMap::new();
    let mut kernel_dropped = 0usize;
    for step in 0..steps {
        let op = PathOp {
            client: ClientId(1),
            request: RequestId(step + 1),
            now: step,
        };
        let (a, b) = (random_path(&mut rng), random_path(&mut rng));
        let what = rng.below(10);
        let mut t = Txn::new(&mut kv);
        let mut ns = Namespace::new(&mut t);
        // Per operation: its name, t3fs's errno, the kernel's, the inode t3fs made (if any) and
        // how many inodes the kernel dropped for good if it succeeds (the last name of a file or
        // symlink, or a directory, removed or replaced by a rename).
        let made = |r: &Result<Inode, MetaError>| r.as_ref().ok().map(|i| (i.id, i.entry_kind()));
        let (name, got, want, new, drops) = match what {
            0 => {
                let r = ns.mkdirs(&a, 0o755, false, op);
                (
                    format!("mkdir {a}"),
                    errno_of_meta(&r),
                    errno_of_io(&fs::create_dir(real(&a))),
                    made(&r),
                    0,
                )
            }
            1 | 2 => {
                let r = ns.create(&a, 0o644, true, None, op);
                (
                    format!("create O_EXCL {a}"),
                    errno_of_meta(&r),
                    errno_of_io(
                        &fs::OpenOptions::new()
                            .write(true)
                            .create_new(true)
                            .open(real(&a)),
                    ),
                    made(&r),
                    0,
                )
            }
            3 => {
                // unlink or rmdir, as the kernel's own type says.
                let victim = fs::symlink_metadata(real(&a)).ok();
                let is_dir = victim.as_ref().is_some_and(|m| m.is_dir());
                let drops = victim.map_or(0, |m| dropped(&m));
                let want = if is_dir {
                    errno_of_io(&fs::remove_dir(real(&a)))
                } else {
                    errno_of_io(&fs::remove_file(real(&a)))
                };
                (
                    format!("remove {a}"),
                    errno_of_meta(&ns.remove(&a, false, op)),
                    want,
                    None,
                    drops,
                )
            }
            4 | 5 => {
                // A replaced destination is dropped, unless it is the source itself (another
                // name of the same inode: POSIX rename then does nothing).
                let src = fs::symlink_metadata(real(&a)).ok();
                let drops = match (src, fs::symlink_metadata(real(&b))) {
                    (Some(s), Ok(d)) if s.ino() != d.ino() => dropped(&d),
                    _ => 0,
                };
                (
                    format!("rename {a} {b}"),
                    errno_of_meta(&ns.rename(&a, &b, op)),
                    errno_of_io(&fs::rename(real(&a), real(&b))),
                    None,
                    drops,
                )
            }
            6 => {
                let target = ["a", "b", "c"][rng.below(3) as usize];
                let r = ns.symlink(&a, target, op);
                (
                    format!("symlink {a} -> {target}"),
                    errno_of_meta(&r),
                    errno_of_io(&symlink(target, real(&a))),
                    made(&r),
                    0,
                )
            }
            8 | 9 => {
                let kind = special_for(&mut rng);
                let r = ns.mknod(&a, kind, 0o644, DEV_NULL, op);
                (
                    format!("mknod {kind:?} {a}"),
                    errno_of_meta(&r),
                    errno_of_io(&real_mknod(&real(&a), kind)),
                    made(&r),
                    0,
                )
            }
            _ => (
                format!("link {a} {b}"),
                errno_of_meta(&ns.hardlink(&a, &b, op)),
                errno_of_io(&fs::hard_link(real(&a), real(&b))),
                None,
                0,
            ),
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
            created.extend(new);
            kernel_dropped += drops;
        }
    }
    let mut want = BTreeMap::new();
    real_tree(&root, &root, &mut want);
    let mut got = BTreeMap::new();
    let mut t = Txn::new(&mut kv);
    let mut ns = Namespace::new(&mut t);
    meta_tree(&mut ns, "", &mut got);
    assert_eq!(got, want, "seed {seed}: final trees differ");
    // Every inode t3fs dropped for good sits under the GC root (nothing runs GC here), none
    // was lost silently and nothing else is there: the GC root holds exactly the inodes made
    // and no longer named, as many as the kernel dropped, each once, of its kind, unlinked.
    let mut named = BTreeSet::new();
    named_inodes(&mut ns, ROOT, &mut named);
    let gc = ns.list_dir(GC_ROOT, b"", 10_000).unwrap();
    let in_gc: BTreeMap<InodeId, EntryKind> = gc.iter().map(|(_, e)| (e.inode, e.kind)).collect();
    let unnamed: BTreeMap<InodeId, EntryKind> = created
        .iter()
        .filter(|(id, _)| !named.contains(*id))
        .map(|(id, k)| (*id, *k))
        .collect();
    assert_eq!(
        in_gc, unnamed,
        "seed {seed}: the GC root holds other inodes than those dropped"
    );
    assert_eq!(
        gc.len(),
        in_gc.len(),
        "seed {seed}: an inode is under GC twice"
    );
    assert_eq!(
        gc.len(),
        kernel_dropped,
        "seed {seed}: the kernel dropped {kernel_dropped} inodes, t3fs put {} under GC",
        gc.len()
    );
    for id in in_gc.keys() {
        assert_eq!(
            ns.inode(*id).unwrap().nlink,
            0,
            "seed {seed}: {id:?} under GC"
        );
    }
    let _ = fs::remove_dir_all(&root);
    gc.len()
}

#[test]
fn namespace_operations_match_a_real_directory() {
    let dropped: usize = (1..=100).map(|seed| run(seed, 300)).sum();
    // The GC-root check above must have had something to check.
    assert!(dropped > 100, "only {dropped} inodes dropped over 100 runs");
}
