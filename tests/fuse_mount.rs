//! `t3fs mount`: a real cluster mounted with FUSE and used by real tools (mkdir, cp -r, diff,
//! tar, mv, ln, ln -s, dd, truncate, find, rm -r, python, git, sqlite3, fio with verify on the
//! psync and io_uring engines), every result checked
//! against a local copy; POSIX errors as a local file system gives them; then `fusermount3 -u`
//! ends the mount process cleanly. Two mounts of one cluster: a file one holds open and the
//! other renames and replaces stays the file the holder reads, writes and truncates. Needs
//! /dev/fuse and fusermount3 (scripts/test.sh installs Debian's fuse3); without them it says it
//! skipped. The mounts and every process end, pass or fail.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{have_or_skip, mount, mounted, processes_under, t3fs};

/// A mount process; dropping it unmounts (lazily if busy) and kills the process.
/// Runs `script` with `sh -e` in `dir`; its output, or a panic with it.
fn sh(dir: &Path, script: &str) -> String {
    let (ok, text) = support::shell_with("-ec", dir, script);
    assert!(ok, "script failed:\n{script}\n---\n{text}");
    text
}

/// A local tree to copy in: text files, empty files, a nested directory, and random files
/// across chunk boundaries (the cluster's chunks are 1 MiB).
const MAKE_TREE: &str = r#"
mkdir -p src/a/b/c src/empty
for i in 1 2 3 4 5; do printf 'line %s\n' $i > src/a/t$i.txt; done
: > src/a/b/zero
head -c 4097 /dev/urandom > src/a/b/odd.bin
head -c 3145731 /dev/urandom > src/a/b/c/big.bin
ln -s ../t1.txt src/a/b/rel
"#;

/// The tools, on the mount (`M`) against the local tree (`L`).
const TOOLS: &str = r#"
cp -r "$L/src" tree
diff -r "$L/src" tree
sleep 1.1 # past the entry cache: `ls -l` takes its attributes from readdirplus
ls -ln tree/a/b | awk '!/^(total|d)/ {print $1, $2, $5, $9}' > "$L/ls.mnt"
ls -ln "$L/src/a/b" | awk '!/^(total|d)/ {print $1, $2, $5, $9}' > "$L/ls.local"
diff "$L/ls.local" "$L/ls.mnt" && test "$(wc -l < "$L/ls.mnt")" = 3
test "$(readlink tree/a/b/rel)" = ../t1.txt
test "$(cat tree/a/b/rel)" = "line 1"
test "$(find tree | wc -l)" = "$(cd "$L" && find src | wc -l)"
tar cf "$L/t.tar" -C tree . && mkdir untar && tar xf "$L/t.tar" -C untar && diff -r tree untar
mv tree/a/t2.txt tree/a/renamed.txt && test ! -e tree/a/t2.txt && test "$(cat tree/a/renamed.txt)" = "line 2"
mv tree/a/b tree/moved && diff -r --no-dereference "$L/src/a/b" tree/moved
ln tree/a/t3.txt hard && test "$(stat -c %h hard)" = 2 && test "$(cat hard)" = "line 3"
dd if=/dev/urandom of="$L/dd.bin" bs=1M count=3 2>/dev/null
dd if="$L/dd.bin" of=dd.bin bs=1M conv=fsync 2>/dev/null && cmp "$L/dd.bin" dd.bin
test "$(stat -c %s dd.bin)" = 3145728
echo short > dd.bin && test "$(cat dd.bin)" = short
truncate -s 3 dd.bin && test "$(cat dd.bin)" = sho
truncate -s 2000000 dd.bin && test "$(stat -c %s dd.bin)" = 2000000
test "$(head -c 3 dd.bin)" = sho && test "$(tail -c 5 dd.bin | od -An -tx1 | tr -d ' \n')" = 0000000000
chmod 600 tree/a/t4.txt && test "$(stat -c %a tree/a/t4.txt)" = 600
for i in 1 2 3 4 5 6 7 8 9 10; do echo "v$i" > again; test "$(cat again)" = "v$i"; done
rm -r untar tree/moved && test ! -e untar
echo tools ok
"#;

#[test]
fn real_tools_work_on_a_mounted_cluster() {
    let Some((tmp, cluster)) = support::fuse_cluster("fuse") else {
        return;
    };
    let cluster_s = cluster.to_string_lossy().to_string();
    let at = tmp.0.join("mnt");
    let m = mount(&cluster, &at, &["--allow-other"], &tmp.0.join("mount.log"));
    let local = tmp.0.join("local");
    std::fs::create_dir_all(&local).unwrap();
    sh(&local, MAKE_TREE);
    let script = format!("L='{}'\n{TOOLS}", local.display());
    assert!(sh(&at, &script).contains("tools ok"));

    // POSIX errors as a local file system gives them.
    let errs = sh(
        &at,
        "mkdir d && (mkdir d 2>&1 || true) && touch d/f && (rmdir d 2>&1 || true) \
         && (cat nothere 2>&1 || true) && (mkdir d/f/x 2>&1 || true)",
    );
    for want in [
        "File exists",
        "Directory not empty",
        "No such file or directory",
        "Not a directory",
    ] {
        assert!(errs.contains(want), "{want} missing:\n{errs}");
    }

    // Requests act for their caller: what another user creates is theirs, and mode bits keep
    // them out of what is not (meta checks the same user the kernel did).
    if have_or_skip("setpriv", "util-linux") {
        sh(
            &at,
            "mkdir -m 1777 shared && echo root > shared/rootfile && chmod 644 shared/rootfile",
        );
        let out = sh(
            &at,
            "setpriv --reuid 65534 --regid 65534 --clear-groups sh -c '\
               echo mine > shared/mine && stat -c \"%u:%g\" shared/mine; \
               (echo x > shared/rootfile) 2>&1 || true; \
               (mkdir untouchable 2>&1) || true; \
               (rm shared/rootfile 2>&1) || true'",
        );
        for want in [
            "65534:65534",
            "Permission denied",
            "Operation not permitted",
        ] {
            assert!(out.contains(want), "{want} missing:\n{out}");
        }
        assert!(
            sh(&at, "cat shared/rootfile").contains("root"),
            "root's file unchanged"
        );
    }
    if have_or_skip("python3", "python3") {
        let py = "import os\n\
                  d = os.urandom(300000)\n\
                  open('p.bin', 'wb').write(d)\n\
                  with open('p.bin', 'r+b') as f:\n    f.seek(1000); f.write(b'xyz')\n\
                  b = open('p.bin', 'rb').read()\n\
                  assert b == d[:1000] + b'xyz' + d[1003:], 'python: contents differ'\n\
                  print('python ok')\n";
        std::fs::write(local.join("t.py"), py).unwrap();
        let out = sh(&at, &format!("python3 '{}'", local.join("t.py").display()));
        assert!(out.contains("python ok"), "{out}");
    }
    if have_or_skip("git", "git") {
        let out = sh(
            &at,
            "mkdir repo && cd repo && git init -q . && echo hi > f && git add f \
             && git -c user.name=t -c user.email=t@t commit -qm first && git log --oneline \
             && git fsck --no-progress 2>&1 && echo git ok",
        );
        assert!(out.contains("first") && out.contains("git ok"), "{out}");
    }
    if have_or_skip("fio", "fio") {
        // Writes verified by fio as it reads them back, through both engines.
        for engine in ["psync", "io_uring"] {
            let out = sh(
                &at,
                &format!(
                    "fio --name=v --filename=fio.{engine} --rw=randwrite --bs=4k --size=4M \
                     --ioengine={engine} --iodepth=8 --verify=crc32c --do_verify=1 \
                     --output-format=terse --minimal && echo fio ok"
                ),
            );
            assert!(out.contains("fio ok"), "fio {engine}:\n{out}");
        }
    }
    if have_or_skip("sqlite3", "sqlite3") {
        let out = sh(
            &at,
            "sqlite3 db 'create table t(x); insert into t values (1), (2), (39);' \
             && sqlite3 db 'select sum(x) from t;'",
        );
        assert_eq!(out.trim(), "42", "{out}");
    }

    // A clean unmount ends the mount process with success.
    let st = Command::new("fusermount3")
        .arg("-u")
        .arg(&at)
        .status()
        .unwrap();
    assert!(st.success(), "fusermount3 -u failed");
    let mut m = m;
    let deadline = Instant::now() + Duration::from_secs(20);
    let code = loop {
        if let Some(s) = m.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the mount process outlived the unmount"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = std::fs::read_to_string(tmp.0.join("mount.log")).unwrap_or_default();
    assert!(code.success(), "t3fs mount exited {code}:\n{log}");
    assert!(!mounted(&at));
    drop(m);
    let (ok, text) = t3fs(&["cluster", "down", "--dir", &cluster_s], &tmp.0);
    assert!(ok, "{text}");
    assert!(processes_under(&tmp.0).is_empty(), "processes left");
}

/// What mount A's holder does (python3, in A's mount, the marker directory its argument): makes
/// `f`, holds it open, and once the other mount renamed it to `g` and made a new `f`, checks
/// that its descriptor still is the file it opened (size, bytes, writes, truncate) and that the
/// path `f` is the new file.
const HOLDER: &str = r#"
import os, sys, time
marks = sys.argv[1]
d = bytes((i * 7 + 3) % 251 for i in range(100000))
with open('f', 'wb') as w:
    w.write(d)
fd = os.open('f', os.O_RDWR)
assert os.pread(fd, len(d) + 10, 0) == d, 'first read'
open(os.path.join(marks, 'opened'), 'w').close()
deadline = time.time() + 60
while not os.path.exists(os.path.join(marks, 'swapped')):
    assert time.time() < deadline, 'never swapped'
    time.sleep(0.05)
# At once (the kernel may still hold f's old entry): the path f names the new file.
with open('f', 'rb') as r:
    got = r.read()
assert got == b'new\n', ('f by path', got[:16])
# Past the attribute cache, the kernel asks the mount about the held inode again.
time.sleep(1.3)
st = os.fstat(fd)
assert st.st_size == len(d), ('fstat size', st.st_size)
got = os.pread(fd, len(d) + 10, 0)
assert got == d, ('held read', len(got))
assert os.pwrite(fd, b'XYZ', 5000) == 3
os.fsync(fd)
os.ftruncate(fd, len(d) + 4096)
assert os.fstat(fd).st_size == len(d) + 4096, 'fstat after ftruncate'
os.fsync(fd)
os.close(fd)
assert os.stat('f').st_size == 4, ('stat f', os.stat('f').st_size)
assert os.stat('g').st_size == len(d) + 4096, ('stat g', os.stat('g').st_size)
print('holder ok')
"#;

#[test]
fn a_held_file_stays_itself_when_another_mount_renames_and_replaces_it() {
    if !have_or_skip("python3", "python3") {
        return;
    }
    let Some((tmp, cluster)) = support::fuse_cluster("fuse-ids") else {
        return;
    };
    let cs = cluster.to_string_lossy().to_string();
    let a = mount(&cluster, &tmp.0.join("a"), &[], &tmp.0.join("a.log"));
    let b = mount(&cluster, &tmp.0.join("b"), &[], &tmp.0.join("b.log"));
    let marks = tmp.0.join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let script = tmp.0.join("holder.py");
    std::fs::write(&script, HOLDER).unwrap();
    // Its command line names the scratch directory: the scratch's drop kills it, pass or fail.
    let mut holder = Command::new("python3")
        .arg(&script)
        .arg(&marks)
        .current_dir(&a.at)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !marks.join("opened").exists() {
        if let Some(st) = holder.try_wait().unwrap() {
            let out = holder.wait_with_output().unwrap();
            panic!("the holder ended {st} before opening:\n{}", output(&out));
        }
        assert!(Instant::now() < deadline, "the holder never opened f");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Through B: f becomes g, and a new f is made.
    std::fs::rename(b.at.join("f"), b.at.join("g")).unwrap();
    std::fs::write(b.at.join("f"), b"new\n").unwrap();
    std::fs::write(marks.join("swapped"), b"").unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while holder.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the holder did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = holder.wait_with_output().unwrap();
    let log = std::fs::read_to_string(tmp.0.join("a.log")).unwrap_or_default();
    assert!(
        out.status.success() && output(&out).contains("holder ok"),
        "holder:\n{}\nmount A's log:\n{log}",
        output(&out)
    );
    // Through B, past its attribute cache: g has A's write and truncate, the new f is untouched.
    std::thread::sleep(Duration::from_millis(1300));
    let want: Vec<u8> = (0..100_000u32)
        .map(|i| ((i * 7 + 3) % 251) as u8)
        .enumerate()
        .map(|(k, x)| match k {
            5000 => b'X',
            5001 => b'Y',
            5002 => b'Z',
            _ => x,
        })
        .chain(std::iter::repeat_n(0, 4096))
        .collect();
    let g = std::fs::read(b.at.join("g")).unwrap();
    assert!(g == want, "g through B: {} bytes, not A's writes", g.len());
    assert_eq!(std::fs::read(b.at.join("f")).unwrap(), b"new\n");
    assert_eq!(std::fs::read(a.at.join("g")).unwrap(), want, "g through A");
    drop((a, b));
    let (ok, text) = t3fs(&["cluster", "down", "--dir", &cs], &tmp.0);
    assert!(ok, "{text}");
    assert!(processes_under(&tmp.0).is_empty(), "processes left");
}

/// A process's stdout and stderr.
fn output(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
