//! Paths anchored at an inode (3FS's `PathAt`): `//ino:<id in hex>`, optionally followed by `/`
//! and a path walked from that inode instead of from the root.
//!
//! Why: a FUSE request names a directory by its inode number and an entry by name. Sent as a
//! path from the root, each request had to walk every ancestor (one KV row or two each) and the
//! mount had to check in a second request that the path still led to the inode the kernel named
//! (another client may have renamed a directory on the way). Anchored, a request reads only the
//! directory and the entry, and names exactly the directory the kernel meant, in one
//! transaction: a renamed ancestor changes nothing, a removed directory answers NotFound.
//!
//! Syntax: POSIX leaves the meaning of a path that starts with exactly two slashes to the
//! implementation; meta gives `//ino:` this one. Any other path keeps its meaning (`//a` is
//! still `/a`). The anchor is a real inode id in lowercase or uppercase hex; the GC directory
//! cannot be an anchor (its entries are not a client's to walk).
//!
//! What it gives up, and why that is the trust meta already extends: a walk from an anchor does
//! not check search permission on the anchor's ancestors (it checks the anchor's own). The mount
//! that sends anchored paths mounts with `default_permissions`, so the kernel has checked every
//! ancestor of the path the caller used, as it does for any file system; and a client already
//! tells meta which user it acts for, so a client able to send requests is trusted that far
//! (as a process with `CAP_DAC_READ_SEARCH` may `open_by_handle_at`). Not here: the walk itself
//! (`ops.rs`), handles that outlive an inode (a removed anchor answers NotFound).

use super::{MetaError, GC_ROOT, ROOT};
use crate::ids::InodeId;

/// What starts an anchored path.
pub const ANCHOR_PREFIX: &str = "//ino:";

/// Where `path` starts and the rest of it, absolute from there: `/a` is (root, `/a`),
/// `//ino:1f/a` is (inode 0x1f, `/a`), `//ino:1f` is (inode 0x1f, `/`).
pub fn anchor_of(path: &str) -> Result<(InodeId, &str), MetaError> {
    let Some(tail) = path.strip_prefix(ANCHOR_PREFIX) else {
        return Ok((ROOT, path));
    };
    let (hex, rest) = match tail.find('/') {
        Some(i) => tail.split_at(i),
        None => (tail, "/"),
    };
    let id = u64::from_str_radix(hex, 16)
        .map(InodeId)
        .map_err(|_| MetaError::Invalid("an anchor is //ino: and an inode id in hex"))?;
    if id == GC_ROOT {
        return Err(MetaError::Invalid("the GC directory is no anchor"));
    }
    Ok((id, rest))
}

/// The anchor part of `path`: empty for a path from the root, else `//ino:<hex>` (so that the
/// anchor followed by an absolute path from it names that path from the anchor).
pub fn anchor_part(path: &str) -> &str {
    match path.strip_prefix(ANCHOR_PREFIX) {
        Some(tail) => {
            let end = ANCHOR_PREFIX.len() + tail.find('/').unwrap_or(tail.len());
            &path[..end]
        }
        None => "",
    }
}

/// The path of `name` (or of the inode itself, when `name` is empty) anchored at `dir`; the
/// root's is the plain absolute path.
pub fn anchored(dir: InodeId, name: &str) -> String {
    match (dir == ROOT, name.is_empty()) {
        (true, true) => "/".into(),
        (true, false) => format!("/{name}"),
        (false, true) => format!("{ANCHOR_PREFIX}{:x}", dir.0),
        (false, false) => format!("{ANCHOR_PREFIX}{:x}/{name}", dir.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_parse_and_other_paths_keep_their_meaning() {
        assert_eq!(anchor_of("/a/b"), Ok((ROOT, "/a/b")));
        assert_eq!(
            anchor_of("//a/b"),
            Ok((ROOT, "//a/b")),
            "only //ino: is an anchor"
        );
        assert_eq!(anchor_of("//ino:1f/a"), Ok((InodeId(0x1f), "/a")));
        assert_eq!(anchor_of("//ino:1F"), Ok((InodeId(0x1f), "/")));
        assert!(matches!(
            anchor_of("//ino:zz/a"),
            Err(MetaError::Invalid(_))
        ));
        assert!(matches!(anchor_of("//ino:/a"), Err(MetaError::Invalid(_))));
        let gc = anchored(GC_ROOT, "x");
        assert!(matches!(anchor_of(&gc), Err(MetaError::Invalid(_))));
    }

    #[test]
    fn anchored_paths_round_trip() {
        for (dir, name) in [
            (ROOT, ""),
            (ROOT, "f"),
            (InodeId(0x2a), ""),
            (InodeId(7), "f"),
        ] {
            let p = anchored(dir, name);
            let (at, rest) = anchor_of(&p).unwrap();
            assert_eq!(at, dir, "{p}");
            assert_eq!(rest.trim_start_matches('/'), name, "{p}");
        }
        assert_eq!(anchor_part("//ino:2a/x/y"), "//ino:2a");
        assert_eq!(anchor_part("//ino:2a"), "//ino:2a");
        assert_eq!(anchor_part("/x"), "");
    }
}

/// Anchored paths through meta's operations, on the in-memory KV.
#[cfg(test)]
mod walk_tests {
    use super::*;
    use crate::meta::tests::{fresh, op, tx};

    #[test]
    fn an_anchored_walk_starts_at_its_inode_wherever_that_is_now() {
        let mut kv = fresh();
        let d = tx(&mut kv, |ns| ns.mkdirs("/a/d", 0o755, true, op(1))).unwrap();
        let at = |name: &str| anchored(d.id, name);
        // Made, found, made under (mkdir -p keeps the anchor), renamed, all from d.
        let f = tx(&mut kv, |ns| ns.create(&at("f"), 0o644, true, None, op(2))).unwrap();
        tx(&mut kv, |ns| ns.mkdirs(&at("x/y"), 0o755, true, op(3))).unwrap();
        tx(&mut kv, |ns| ns.rename("/a/d", "/b", op(4))).unwrap();
        assert_eq!(tx(&mut kv, |ns| ns.stat(&at("f"), false)).unwrap().id, f.id);
        assert!(tx(&mut kv, |ns| ns.stat("/b/x/y", false)).unwrap().is_dir());
        assert_eq!(tx(&mut kv, |ns| ns.stat(&at(""), false)).unwrap().id, d.id);
        tx(&mut kv, |ns| ns.rename(&at("f"), &at("g"), op(5))).unwrap();
        assert_eq!(tx(&mut kv, |ns| ns.stat("/b/g", false)).unwrap().id, f.id);
        // `..` from the anchor is its parent now.
        assert_eq!(
            tx(&mut kv, |ns| ns.stat(&at(".."), false)).unwrap().id,
            ROOT
        );
    }

    #[test]
    fn a_removed_anchor_names_nothing() {
        let mut kv = fresh();
        let d = tx(&mut kv, |ns| ns.mkdirs("/d", 0o755, true, op(1))).unwrap();
        let f = tx(&mut kv, |ns| ns.create("/f", 0o644, true, None, op(2))).unwrap();
        tx(&mut kv, |ns| ns.remove("/d", false, op(3))).unwrap();
        tx(&mut kv, |ns| ns.remove("/f", false, op(4))).unwrap();
        // Their rows wait for GC; through an anchor they are gone.
        let stat = |kv: &mut _, id| tx(kv, |ns| ns.stat(&anchored(id, ""), false));
        assert_eq!(stat(&mut kv, f.id), Err(MetaError::NotFound));
        assert_eq!(stat(&mut kv, d.id), Err(MetaError::NotFound));
        let made = tx(&mut kv, |ns| {
            ns.create(&anchored(d.id, "n"), 0o644, true, None, op(5))
        });
        assert_eq!(made.err(), Some(MetaError::NotFound));
    }
}
