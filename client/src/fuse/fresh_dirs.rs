//! Negative entries for directories this mount made: for the attribute TTL after its mkdir, a
//! name in such a directory that no request of this mount may have added is absent, and its
//! lookup is answered ENOENT here instead of by meta.
//!
//! Why: before every `open(O_CREAT)`, `mkdir` or `symlink` of a new name the kernel looks the
//! name up, a meta request in series before the one that makes it. In a directory just made
//! (a checkpoint's, a shard's, an mdtest rank's) the answer is known: nothing is there but what
//! this mount put there. So a create in a fresh directory is one meta request, not two.
//!
//! What it gives up, and why that is the documented bound: a name another client makes in the
//! directory within the TTL of its mkdir is not seen by this mount's lookups until the TTL
//! ends, as the kernel's own entry cache does not see another client's unlink or rename for
//! the TTL. It never answers for a name that exists through this mount: a name is recorded
//! before the request that may add it is sent, whatever that request's outcome.
//!
//! Renewal: when the TTL of a known directory has ended, the next lookup in it that would ask
//! meta lists the directory instead (one request while it has fewer than [`RENEW_MAX`]
//! entries; else it is forgotten), and the directory is known again from when the listing was
//! sent: every name listed, and every name this mount may have added meanwhile. So a loop of
//! creates in its own directory keeps one request per file past the first TTL.
//!
//! Invariants: a directory is known only from when its mkdir (or its renewal's listing) was
//! sent (so its TTL ends no later than the commit's plus the TTL); every name this mount may have added to it (create, mknod,
//! mkdir, symlink, link, rename onto it) is in its set from before the request; bounded: at
//! most [`FRESH_DIRS_MAX`] directories (expired ones go first, then all) and
//! [`FRESH_NAMES_MAX`] names each (beyond, the directory is forgotten). Forgetting is always
//! safe: lookups then ask meta. Not here: answering the kernel (fs.rs), asking meta and the
//! renewal's listing (inner.rs's lookup).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::backend::lock;

/// Directories known at most.
pub const FRESH_DIRS_MAX: usize = 1024;
/// Names recorded per directory at most.
pub const FRESH_NAMES_MAX: usize = 1 << 16;
/// Entries a renewal lists at most: one page of meta's listing.
pub const RENEW_MAX: u32 = 4096;

struct Fresh {
    since: Instant,
    names: BTreeSet<Vec<u8>>,
    /// A renewal's listing is in flight (one at a time).
    renewing: bool,
}

/// What the mount knows of a name in a directory.
#[derive(Debug, Eq, PartialEq)]
pub(super) enum Known {
    /// Absent: answer ENOENT.
    Absent,
    /// Unknown: ask meta.
    Ask,
    /// Unknown, but the directory was known: list it (the caller renews it).
    Renew,
}

/// The fresh directories, by FUSE inode number.
pub(super) struct FreshDirs {
    ttl: Duration,
    by_ino: Mutex<BTreeMap<u64, Fresh>>,
}

impl FreshDirs {
    /// None known; each known for `ttl` from its mkdir.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            by_ino: Mutex::default(),
        }
    }

    /// A mkdir made directory `ino`; it was sent at `sent`.
    pub fn made(&self, ino: u64, sent: Instant) {
        if self.ttl.is_zero() {
            return;
        }
        let mut by_ino = lock(&self.by_ino);
        if by_ino.len() >= FRESH_DIRS_MAX {
            by_ino.retain(|_, f| sent.duration_since(f.since) < self.ttl);
            if by_ino.len() >= FRESH_DIRS_MAX {
                by_ino.clear();
            }
        }
        let f = Fresh {
            since: sent,
            names: BTreeSet::new(),
            renewing: false,
        };
        by_ino.insert(ino, f);
    }

    /// A request that may add `name` to directory `dir` is about to be sent.
    pub fn adding(&self, dir: u64, name: &OsStr) {
        let mut by_ino = lock(&self.by_ino);
        let Some(f) = by_ino.get_mut(&dir) else {
            return;
        };
        if f.names.len() >= FRESH_NAMES_MAX {
            by_ino.remove(&dir);
            return;
        }
        f.names.insert(name.as_bytes().to_vec());
    }

    /// What is known of `name` in `dir` now; `Renew` marks the directory as renewing.
    pub fn known(&self, dir: u64, name: &OsStr) -> Known {
        self.known_at(dir, name, Instant::now())
    }

    fn known_at(&self, dir: u64, name: &OsStr, now: Instant) -> Known {
        let mut by_ino = lock(&self.by_ino);
        let Some(f) = by_ino.get_mut(&dir) else {
            return Known::Ask;
        };
        if f.names.contains(name.as_bytes()) {
            return Known::Ask;
        }
        if now.saturating_duration_since(f.since) < self.ttl {
            return Known::Absent;
        }
        match std::mem::replace(&mut f.renewing, true) {
            true => Known::Ask,
            false => Known::Renew,
        }
    }

    /// A renewal of `dir` sent at `sent` listed `names` (all of the directory's), or failed or
    /// found too many (`None`: the directory is forgotten); whether `name` is absent.
    pub fn renewed(
        &self,
        dir: u64,
        sent: Instant,
        names: Option<Vec<Vec<u8>>>,
        name: &OsStr,
    ) -> bool {
        let mut by_ino = lock(&self.by_ino);
        let Some(names) = names else {
            by_ino.remove(&dir);
            return false;
        };
        let Some(f) = by_ino.get_mut(&dir) else {
            return false;
        };
        f.names.extend(names);
        (f.since, f.renewing) = (sent, false);
        let absent = !f.names.contains(name.as_bytes());
        if f.names.len() > FRESH_NAMES_MAX {
            by_ino.remove(&dir);
        }
        absent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_made_directory_is_known_for_the_ttl_and_never_answers_for_a_name_added_through_it() {
        let d = FreshDirs::new(Duration::from_secs(1));
        let (t0, n) = (Instant::now(), OsStr::new);
        assert_eq!(
            d.known_at(5, n("a"), t0),
            Known::Ask,
            "an unknown directory"
        );
        d.made(5, t0);
        assert_eq!(d.known_at(5, n("a"), t0), Known::Absent);
        d.adding(5, n("a"));
        assert_eq!(
            d.known_at(5, n("a"), t0),
            Known::Ask,
            "a name this mount may have added"
        );
        let late = t0 + Duration::from_millis(999);
        assert_eq!(d.known_at(5, n("b"), late), Known::Absent);
        assert_eq!(d.known_at(6, n("b"), t0), Known::Ask, "another directory");
        let ended = t0 + Duration::from_secs(1);
        assert_eq!(d.known_at(5, n("b"), ended), Known::Renew, "the TTL ended");
    }

    #[test]
    fn an_ended_directory_is_renewed_once_and_keeps_what_was_added_meanwhile() {
        let d = FreshDirs::new(Duration::from_secs(1));
        let (t0, n) = (Instant::now(), OsStr::new);
        d.made(5, t0);
        let t1 = t0 + Duration::from_secs(2);
        assert_eq!(d.known_at(5, n("a"), t1), Known::Renew);
        assert_eq!(
            d.known_at(5, n("a"), t1),
            Known::Ask,
            "one renewal at a time"
        );
        d.adding(5, n("mine"));
        assert!(d.renewed(5, t1, Some(vec![b"theirs".to_vec()]), n("a")));
        assert_eq!(d.known_at(5, n("a"), t1), Known::Absent);
        assert_eq!(d.known_at(5, n("mine"), t1), Known::Ask);
        assert_eq!(d.known_at(5, n("theirs"), t1), Known::Ask);
        assert!(!d.renewed(5, t1, None, n("a")));
        assert_eq!(
            d.known_at(5, n("a"), t1),
            Known::Ask,
            "a failed renewal forgets"
        );
    }

    #[test]
    fn beyond_its_bounds_a_directory_is_forgotten_and_lookups_ask_meta() {
        let d = FreshDirs::new(Duration::from_secs(1));
        let t0 = Instant::now();
        d.made(1, t0);
        for k in 0..FRESH_NAMES_MAX + 1 {
            d.adding(1, OsStr::new(&format!("n{k}")));
        }
        let other = d.known_at(1, OsStr::new("other"), t0);
        assert_eq!(other, Known::Ask, "too many names: forgotten");
        for ino in 10..10 + FRESH_DIRS_MAX as u64 + 1 {
            d.made(ino, t0);
        }
        assert!(lock(&d.by_ino).len() <= FRESH_DIRS_MAX);
        let off = FreshDirs::new(Duration::ZERO);
        off.made(1, t0);
        let a = off.known_at(1, OsStr::new("a"), t0);
        assert_eq!(a, Known::Ask, "no TTL, no negative entries");
    }
}
