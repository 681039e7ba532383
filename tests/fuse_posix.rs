//! The mount against the kernel's own file system: the same seeded random sequences of system
//! calls (create with flags, write and read at offsets, truncate, rename, link, unlink, mkdir,
//! rmdir, chmod, chgrp, utimensat, mkfifo, socket bind, symlink, readlink, readdir) run on
//! a `t3fs mount` and on a local directory, and every call must give the same result or the
//! same errno, and the two trees the same names, kinds, modes, owners, groups, link counts and
//! contents at the end. Names come from a small pool, so calls
//! collide (EEXIST, ENOENT, ENOTEMPTY, EISDIR, ENOTDIR...). An fsx-style run then hammers one
//! file with writes, truncates and reads at random offsets and lengths, checked against an
//! in-memory model, on the default mount, through the writeback cache, and with `direct_io`.
//!
//! Then sizes at the edge of the largest file a layout holds: truncates past it answer EFBIG
//! and leave the file alone, writes reaching it are cut short there, and a sparse far chunk is
//! emptied by `truncate -s 0` (shell tools: truncate, dd, tail).
//!
//! FIFOs and UNIX sockets (mkfifo, and bind of a listening socket) are drawn like the rest,
//! and every open is non-blocking so that one on a FIFO answers at once (ENXIO for a writer
//! without a reader) on both sides. Devices are not drawn (a FUSE mount is `nodev`, so opening
//! one differs by design); they have their own test (fuse_special.rs), with a FIFO carrying
//! data and a socket answering through the mount.
//!
//! Reproduce: `cargo nextest run -p t3fs --test fuse_posix` (the seeds are in the test).
//! The random sequences run as the test's user (root in CI) and, when that is root, as an
//! unprivileged user in a supplementary group too, in a directory where root's entries (a
//! sticky directory, a setgid directory, a setuid file) bring other users' inodes into play.
//! chmod draws sticky, setuid and setgid bits, utimensat NULL, explicit, NOW and OMIT times,
//! and the trees compare whether a file's mtime still holds an explicit time. Timestamps as a
//! whole are fuse_times.rs's. Needs /dev/fuse and fusermount3.

mod support;

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::{become_nobody_in, mount, processes_under, t3fs, NOBODY};

/// The supplementary group of the unprivileged runs' user.
const TEAM: u32 = 4242;

/// xorshift64*, seeded.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[self.below(v.len() as u64) as usize]
    }
}

const NAMES: &[&str] = &["a", "b", "d", "d/a", "d/b", "d/e", "d/e/a", "e", "e/a"];

/// What a call gave: a value, or the errno.
type Outcome = Result<String, i32>;

fn code(e: std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(match e.kind() {
        ErrorKind::NotFound => 2, // ENOENT
        _ => -1,
    })
}

/// One random call under `root`; its description (the same for both roots) and outcome.
fn call(root: &Path, r: &mut Rng) -> (String, Outcome) {
    let p = |n: &str| root.join(n);
    let a = r.pick(NAMES);
    let b = r.pick(NAMES);
    let off = r.below(3 * 4096 + 7);
    let len = 1 + r.below(6000) as usize;
    let byte = r.below(250) as u8 + 1;
    match r.below(16) {
        0 => {
            let excl = r.below(2) == 0;
            let trunc = r.below(2) == 0;
            let mut o = OpenOptions::new();
            o.write(true)
                .create(!excl)
                .create_new(excl)
                .truncate(trunc)
                .mode(0o640)
                .custom_flags(libc::O_NONBLOCK);
            let out = o.open(p(a)).map(|_| String::new()).map_err(code);
            (format!("open {a} excl={excl} trunc={trunc}"), out)
        }
        1 | 2 => {
            let out = OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(p(a))
                .and_then(|mut f| {
                    f.seek(SeekFrom::Start(off))?;
                    f.write_all(&vec![byte; len])
                })
                .map(|_| String::new())
                .map_err(code);
            (format!("write {a} {off}+{len}"), out)
        }
        3 => {
            let out = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(p(a))
                .and_then(|mut f| {
                    f.seek(SeekFrom::Start(off))?;
                    let mut buf = vec![0; len];
                    let n = f.read(&mut buf)?;
                    Ok(format!(
                        "{n} bytes, sum {}",
                        buf[..n].iter().map(|x| u64::from(*x)).sum::<u64>()
                    ))
                })
                .map_err(code);
            (format!("read {a} {off}+{len}"), out)
        }
        4 => {
            let to = r.below(10_000);
            let out = OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(p(a))
                .and_then(|f| f.set_len(to))
                .map(|_| String::new())
                .map_err(code);
            (format!("truncate {a} {to}"), out)
        }
        5 => (
            format!("rename {a} {b}"),
            fs::rename(p(a), p(b)).map(|_| String::new()).map_err(code),
        ),
        6 => (
            format!("link {a} {b}"),
            fs::hard_link(p(a), p(b))
                .map(|_| String::new())
                .map_err(code),
        ),
        7 => (
            format!("unlink {a}"),
            fs::remove_file(p(a)).map(|_| String::new()).map_err(code),
        ),
        8 => (
            format!("mkdir {a}"),
            fs::create_dir(p(a)).map(|_| String::new()).map_err(code),
        ),
        9 => (
            format!("rmdir {a}"),
            fs::remove_dir(p(a)).map(|_| String::new()).map_err(code),
        ),
        10 => {
            // Sticky, setuid and setgid bits among them: their rules (who may set them, what
            // a write or chown by another drops, who may remove from a sticky directory).
            let modes = [
                0o600, 0o644, 0o755, 0o700, 0o2755, 0o1777, 0o4755, 0o6775, 0o3770,
            ];
            let mode = modes[r.below(modes.len() as u64) as usize];
            let out = fs::set_permissions(p(a), fs::Permissions::from_mode(mode))
                .map(|_| String::new())
                .map_err(code);
            (format!("chmod {a} {mode:o}"), out)
        }
        12 => (format!("mkfifo {a}"), mkfifo(&p(a), 0o640)),
        14 => {
            // Root may give any group; the unprivileged run's user only its own two.
            let g = [0, NOBODY, TEAM][r.below(3) as usize];
            let out = std::os::unix::fs::chown(p(a), None, Some(g))
                .map(|_| String::new())
                .map_err(code);
            (format!("chgrp {g} {a}"), out)
        }
        15 => {
            // NULL (touch), explicit times, and NOW or an explicit time beside OMIT: each with
            // its own permission rule.
            let forms: [(&str, Option<[(i64, i64); 2]>); 4] = [
                ("now", None),
                ("explicit", Some([THEN, THEN])),
                (
                    "now/omit",
                    Some([(0, libc::UTIME_NOW), (0, libc::UTIME_OMIT)]),
                ),
                ("omit/explicit", Some([(0, libc::UTIME_OMIT), THEN])),
            ];
            let (name, times) = forms[r.below(4) as usize];
            (format!("utimensat {a} {name}"), utimens(&p(a), times))
        }
        13 => {
            // The socket's inode stays when the listener closes, as on any file system.
            let out = std::os::unix::net::UnixListener::bind(p(a))
                .map(|_| String::new())
                .map_err(code);
            (format!("bind a UNIX socket at {a}"), out)
        }
        _ => {
            let made = std::os::unix::fs::symlink(b, p(a))
                .map(|_| String::new())
                .map_err(code);
            let read = fs::read_link(p(a))
                .map(|t| t.display().to_string())
                .map_err(code);
            (format!("symlink {a} -> {b}; readlink"), made.and(read))
        }
    }
}

/// The explicit time the random calls set (2009-02-13), with nanoseconds.
const THEN: (i64, i64) = (1_234_567_890, 500);

/// utimensat(2) of `path` with `times` (None: NULL, to now, what `touch` does).
fn utimens(path: &Path, times: Option<[(i64, i64); 2]>) -> Outcome {
    support::utimensat(path, times, false).map(|()| String::new())
}

/// An entry's mtime as the trees compare it: the explicit time if it still holds it, else
/// only that it is another (now-ish: the two sides' clocks differ by the calls' pace).
fn mtime_of(m: &fs::Metadata) -> &'static str {
    match (m.mtime(), m.mtime_nsec()) == THEN {
        true => "mtime set",
        false => "mtime other",
    }
}

/// mkfifo(3) of `path` with `mode` (less the umask).
fn mkfifo(path: &Path, mode: u32) -> Outcome {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    match unsafe { libc::mkfifo(c.as_ptr(), mode) } {
        0 => Ok(String::new()),
        _ => Err(code(std::io::Error::last_os_error())),
    }
}

/// The kind of a special file, by its metadata.
fn special_type(m: &fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    match () {
        _ if t.is_fifo() => "fifo",
        _ if t.is_socket() => "socket",
        _ if t.is_char_device() => "char device",
        _ if t.is_block_device() => "block device",
        _ => "unknown",
    }
}

/// Every entry under `root`: path, kind, mode, link count and contents (files) or target.
fn tree(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        // A directory the caller may not list (its own chmod took the bits) is a line too.
        let names: Result<Vec<String>, i32> = fs::read_dir(root.join(&rel))
            .and_then(|d| {
                d.map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
                    .collect()
            })
            .map_err(code);
        let mut names = match names {
            Ok(n) => n,
            Err(e) => {
                out.push(format!("{} not listed: errno {e}", rel.display()));
                continue;
            }
        };
        names.sort();
        for n in names {
            let r = rel.join(&n);
            let full = root.join(&r);
            let m = match fs::symlink_metadata(&full) {
                Ok(m) => m,
                Err(e) => {
                    out.push(format!("{} no stat: errno {}", r.display(), code(e)));
                    continue;
                }
            };
            let what = if m.file_type().is_symlink() {
                format!("-> {}", fs::read_link(&full).unwrap().display())
            } else if m.is_dir() {
                stack.push(r.clone());
                // A directory's links: 2 and one per subdirectory, as the kernel counts them.
                format!(
                    "dir {:o} {}:{} links {}",
                    m.mode() & 0o7777,
                    m.uid(),
                    m.gid(),
                    m.nlink()
                )
            } else if !m.is_file() {
                // Never opened: a FIFO would block, a socket refuses.
                format!(
                    "{:?} {:o} {}:{} links {} rdev {:x}",
                    special_type(&m),
                    m.mode() & 0o7777,
                    m.uid(),
                    m.gid(),
                    m.nlink(),
                    m.rdev()
                )
            } else {
                let data = fs::read(&full).unwrap();
                let sum: u64 = data.iter().map(|x| u64::from(*x)).sum();
                format!(
                    "file {:o} {}:{} links {} len {} sum {sum} {}",
                    m.mode() & 0o7777,
                    m.uid(),
                    m.gid(),
                    m.nlink(),
                    data.len(),
                    mtime_of(&m)
                )
            };
            out.push(format!("{} {what}", r.display()));
        }
    }
    out.sort();
    out
}

#[test]
fn random_syscalls_give_the_kernels_results_on_the_mount_and_fsx_finds_no_difference() {
    let Some((tmp, cluster)) = support::fuse_cluster("posix") else {
        return;
    };
    let cs = cluster.to_string_lossy().to_string();
    let log = tmp.0.join("mount.log");
    // allow_other: the unprivileged runs below are another user than the mount's.
    let m = mount(&cluster, &tmp.0.join("mnt"), &["--allow-other"], &log);
    for seed in [1u64, 2, 3] {
        let (mine, theirs) = (
            m.at.join(format!("s{seed}")),
            tmp.0.join(format!("local{seed}")),
        );
        fs::create_dir(&mine).unwrap();
        fs::create_dir(&theirs).unwrap();
        differential(&mine, &theirs, seed);
    }
    // The same as an unprivileged user, in directories it owns: the kernel's checks on the
    // local side, the meta service's (for the caller's uid) on the mount.
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    for seed in [11u64, 12].into_iter().filter(|_| root) {
        let (mine, theirs) = (
            m.at.join(format!("u{seed}")),
            tmp.0.join(format!("ulocal{seed}")),
        );
        for d in [&mine, &theirs] {
            fs::create_dir(d).unwrap();
            std::os::unix::fs::chown(d, Some(NOBODY), Some(NOBODY)).unwrap();
            others_entries(d);
        }
        let root_owned = tmp.0.clone();
        let h = std::thread::spawn(move || {
            become_nobody_in(&[TEAM]);
            assert_eq!(
                fs::write(root_owned.join("denied"), b"x").map_err(code),
                Err(libc::EACCES),
                "the thread is not unprivileged"
            );
            differential(&mine, &theirs, seed);
        });
        if let Err(e) = h.join() {
            std::panic::resume_unwind(e);
        }
    }
    fsx(&m.at.join("fsx"), 4);
    far_offsets(&m.at.join("far"));
    // The same file checks through the kernel's writeback cache, and with the page cache
    // bypassed.
    let wb = mount(&cluster, &tmp.0.join("wb"), &["--writeback-cache"], &log);
    fsx(&wb.at.join("fsx-wb"), 5);
    far_writeback(&wb.at.join("far-wb"), &m.at.join("far-wb"));
    let direct = mount(&cluster, &tmp.0.join("direct"), &["--direct-io"], &log);
    fsx(&direct.at.join("fsx-direct"), 6);
    drop((m, wb, direct));
    let (ok, text) = t3fs(&["cluster", "down", "--dir", &cs], &tmp.0);
    assert!(ok, "{text}");
    assert!(processes_under(&tmp.0).is_empty(), "processes left");
}

/// Root's entries in the unprivileged runs' directory `d`, for the rules about other users'
/// inodes: `d` a sticky directory anyone may write (1777) holding root's writable file `d/a`
/// and root's directory `d/e`; `e` a setgid directory of group [`TEAM`] anyone may write; `b`
/// root's setuid and setgid file anyone may write (a write by another drops both bits).
fn others_entries(d: &Path) {
    let set = |p: &Path, mode: u32, gid: u32| {
        std::os::unix::fs::chown(p, Some(0), Some(gid)).unwrap();
        fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
    };
    for (dir, mode, gid) in [("d", 0o1777, 0), ("d/e", 0o777, 0), ("e", 0o2777, TEAM)] {
        fs::create_dir(d.join(dir)).unwrap();
        set(&d.join(dir), mode, gid);
    }
    for (file, mode) in [("d/a", 0o666), ("b", 0o6777)] {
        fs::write(d.join(file), b"root's").unwrap();
        set(&d.join(file), mode, 0);
    }
}

/// 300 seeded random calls on `mine` (the mount) and `theirs` (local): each the same outcome,
/// and the same trees at the end.
fn differential(mine: &Path, theirs: &Path, seed: u64) {
    let (mut r1, mut r2) = (Rng(seed * 0x9E37_79B9 + 1), Rng(seed * 0x9E37_79B9 + 1));
    for step in 0..300 {
        let (what, got) = call(mine, &mut r1);
        let (_, want) = call(theirs, &mut r2);
        assert_eq!(got, want, "seed {seed} step {step}: {what}");
    }
    assert_eq!(tree(mine), tree(theirs), "seed {seed}: the trees differ");
}

/// fsx-style: writes, truncates and reads of one file at random offsets and lengths, each read
/// checked against a model of the contents.
fn fsx(path: &Path, seed: u64) {
    let mut r = Rng(seed);
    let mut model: Vec<u8> = Vec::new();
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .unwrap();
    for step in 0..400 {
        let off = r.below(3 << 20) as usize;
        let len = 1 + r.below(300_000) as usize;
        match r.below(5) {
            0 | 1 => {
                let data: Vec<u8> = (0..len).map(|i| (i as u64 ^ step) as u8 | 1).collect();
                f.seek(SeekFrom::Start(off as u64)).unwrap();
                f.write_all(&data).unwrap();
                if model.len() < off + len {
                    model.resize(off + len, 0);
                }
                model[off..off + len].copy_from_slice(&data);
            }
            2 => {
                let to = r.below(3 << 20) as usize;
                f.set_len(to as u64).unwrap();
                model.resize(to, 0);
            }
            _ => {
                f.seek(SeekFrom::Start(off as u64)).unwrap();
                let mut buf = vec![0; len];
                let mut n = 0;
                while n < len {
                    let k = f.read(&mut buf[n..]).unwrap();
                    if k == 0 {
                        break;
                    }
                    n += k;
                }
                let want = &model[off.min(model.len())..(off + len).min(model.len())];
                assert_eq!(n, want.len(), "fsx step {step}: read {off}+{len} length");
                assert!(
                    buf[..n] == *want,
                    "fsx step {step}: read {off}+{len} contents differ"
                );
            }
        }
    }
    assert_eq!(
        fs::metadata(path).unwrap().len(),
        model.len() as u64,
        "fsx: final size"
    );
}

/// Runs `script` with `sh -c` in `dir`: whether it succeeded, and its stdout and stderr.
fn shell(dir: &Path, script: &str) -> (bool, String) {
    support::shell_with("-c", dir, script)
}

/// The edge of the largest file: the cluster's 1 MiB chunks and their 2^32 - 1 chunk indexes
/// make it 2^52 - 2^20 bytes (`t3fs_core::layout::file_size_max`). A truncate past it answers
/// EFBIG and leaves the file as it was (2^52 + 5 once wrapped to chunk 0 and cut it to 5
/// bytes); one to it reads back as zeros; a write reaching it is cut short there and the rest
/// answers EFBIG; a file with a chunk at the far end empties with `truncate -s 0` at once (the
/// chunks past the tail are walked as the heads name them, never listed).
fn far_offsets(dir: &Path) {
    const MAX: u64 = (1 << 52) - (1 << 20);
    const PAST: u64 = (1 << 52) + 5;
    fs::create_dir(dir).unwrap();
    let sh = |script: &str| shell(dir, script);
    let too_large = |(ok, text): (bool, String), what: &str| {
        assert!(
            !ok && text.contains("File too large"),
            "{what}: want EFBIG, got ok={ok}: {text}"
        );
    };

    // truncate(1) past the maximum, on an existing file and on a new one.
    let (ok, text) = sh("printf 'hello world' > kept");
    assert!(ok, "{text}");
    too_large(
        sh(&format!("truncate -s {PAST} kept")),
        "truncate -s 2^52+5",
    );
    too_large(
        sh(&format!("truncate -s {} kept", MAX + 1)),
        "truncate -s max+1",
    );
    assert_eq!(fs::read(dir.join("kept")).unwrap(), b"hello world");
    too_large(
        sh(&format!("truncate -s {PAST} new")),
        "truncate -s 2^52+5 new",
    );
    assert_eq!(fs::metadata(dir.join("new")).unwrap().len(), 0);
    // ftruncate(2) itself, through a handle open for write.
    let f = OpenOptions::new()
        .write(true)
        .open(dir.join("kept"))
        .unwrap();
    assert_eq!(f.set_len(PAST).map_err(code), Err(libc::EFBIG));
    assert_eq!(f.set_len(u64::MAX >> 1).map_err(code), Err(libc::EFBIG));
    drop(f);
    assert_eq!(fs::read(dir.join("kept")).unwrap(), b"hello world");

    // To the maximum itself: the last chunk, zero-filled.
    let (ok, text) = sh(&format!(
        "truncate -s {MAX} edge && stat -c %s edge && tail -c 3 edge | od -An -tx1 | tr -d ' \\n'"
    ));
    assert!(ok, "{text}");
    assert_eq!(text, format!("{MAX}\n000000"));

    // dd across the maximum: the bytes below it land (a short write), the rest is EFBIG.
    too_large(
        sh(&format!(
            "printf 0123456789 | dd of=edge bs=10 oflag=seek_bytes seek={} conv=notrunc",
            MAX - 4
        )),
        "dd across the maximum",
    );
    let (ok, text) = sh("stat -c %s edge && tail -c 4 edge");
    assert!(ok, "{text}");
    assert_eq!(text, format!("{MAX}\n0123"));
    // Whole blocks: the one ending at the maximum lands, the next is EFBIG.
    too_large(
        sh(&format!(
            "dd if=/dev/zero of=blocks bs=4096 seek={} count=2",
            MAX / 4096 - 1
        )),
        "dd of blocks past the maximum",
    );
    assert_eq!(fs::metadata(dir.join("blocks")).unwrap().len(), MAX);

    // A sparse far chunk, then truncate -s 0: quick, and the far chunk is gone for good.
    let (ok, text) = sh(&format!(
        "printf head > sparse && printf far | dd of=sparse bs=1 seek={} conv=notrunc 2>/dev/null \
         && stat -c %s sparse && tail -c 3 sparse",
        MAX - 3
    ));
    assert!(ok, "{text}");
    assert_eq!(text, format!("{MAX}\nfar"));
    let started = Instant::now();
    let (ok, text) = sh("truncate -s 0 sparse && stat -c %s sparse");
    assert!(ok, "{text}");
    assert_eq!(text, "0\n");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "truncate -s 0 of a sparse far chunk took {:?}",
        started.elapsed()
    );
    let (ok, text) = sh(&format!(
        "truncate -s {MAX} sparse && head -c 4 sparse | od -An -tx1 | tr -d ' \\n' \
         && tail -c 3 sparse | od -An -tx1 | tr -d ' \\n'"
    ));
    assert!(ok, "{text}");
    assert_eq!(text, "00000000000000");
    let (ok, text) = sh("printf again > sparse && cat sparse && stat -c %s sparse");
    assert!(ok, "{text}");
    assert_eq!(text, "again5\n");
    fs::remove_dir_all(dir).unwrap();
}

/// Through the writeback cache the kernel takes a write across the largest file into its cache
/// whole (it does not know the layout's maximum); its writeback is answered EFBIG once the
/// bytes below the maximum are written, so fsync reports it and nothing past the maximum is
/// kept. `dir` on the writeback-cache mount, `plain` the same directory on the default one.
fn far_writeback(dir: &Path, plain: &Path) {
    use std::os::unix::fs::FileExt;
    const MAX: u64 = (1 << 52) - (1 << 20);
    fs::create_dir(dir).unwrap();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .open(dir.join("edge"))
        .unwrap();
    assert_eq!(f.write_at(b"0123456789", MAX - 4).unwrap(), 10);
    assert_eq!(f.sync_all().map_err(code), Err(libc::EFBIG));
    drop(f);
    // What the cluster holds, through the other mount (no cached pages there).
    assert_eq!(fs::metadata(plain.join("edge")).unwrap().len(), MAX);
    let mut buf = [0u8; 10];
    let n = fs::File::open(plain.join("edge"))
        .unwrap()
        .read_at(&mut buf, MAX - 4)
        .unwrap();
    assert_eq!(&buf[..n], b"0123");
    fs::remove_dir_all(dir).unwrap();
}
