//! The supplementary groups of the process behind a FUSE request. The kernel's request header
//! carries only the caller's fsuid, fsgid and pid, so the groups are read from
//! `/proc/PID/status` (its `Groups:` line; the pid is the calling thread's, whose groups may
//! differ from its process's) and kept for [`KEEP`], as 3FS's FUSE client and
//! mountpoint-s3 do.
//!
//! Invariant: a lookup never fails a request: an unreadable status (the caller exited, or a
//! pid in another namespace) gives no supplementary groups, which can only deny, never grant.
//! A change of a live thread's groups is seen within [`KEEP`]. Entries are keyed by pid, uid
//! and gid, so a pid reused within [`KEEP`] inherits nothing unless it is the same user in the
//! same primary group (whose groups are then almost always the same ones). Not here: the permission rules
//! (meta's perm.rs) or who may name groups at all (the transport's policy: a plain client
//! credential is refused them).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use t3fs_core::wire::Groups;

/// How long a thread's groups are kept.
pub const KEEP: Duration = Duration::from_secs(1);

/// Entries kept before the expired ones are swept.
const SWEEP_AT: usize = 4096;

/// Groups by pid, each with when it was read.
#[derive(Default)]
pub struct GroupCache {
    by_pid: Mutex<BTreeMap<(u32, u32, u32), (Instant, Groups)>>,
}

impl GroupCache {
    /// The supplementary groups of `pid`, acting as `uid` and `gid` (read at most once per
    /// [`KEEP`]).
    pub fn of(&self, pid: u32, uid: u32, gid: u32) -> Groups {
        let key = (pid, uid, gid);
        let now = Instant::now();
        let mut m = self.by_pid.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, g)) = m.get(&key) {
            if now.duration_since(*at) < KEEP {
                return *g;
            }
        }
        let g = read(pid);
        if m.len() >= SWEEP_AT {
            m.retain(|_, (at, _)| now.duration_since(*at) < KEEP);
        }
        m.insert(key, (now, g));
        g
    }
}

/// `/proc/PID/status`'s groups, or none.
fn read(pid: u32) -> Groups {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    parse(&text)
}

/// The `Groups:` line of a status text.
fn parse(status: &str) -> Groups {
    let ids: Vec<u32> = status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|rest| {
            rest.split_whitespace()
                .filter_map(|g| g.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    Groups::of(&ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_groups_line_is_read_and_anything_else_gives_none() {
        let s = "Name:\tsh\nUid:\t1000\t1000\t1000\t1000\nGroups:\t4 24 27 100 \nNgid:\t0\n";
        assert_eq!(parse(s).as_slice(), &[4, 24, 27, 100]);
        assert_eq!(parse("Groups:\t\n").as_slice(), &[] as &[u32]);
        assert_eq!(parse("").as_slice(), &[] as &[u32]);
        // This very thread's status has a groups line; a pid that cannot exist has none.
        let me = std::process::id();
        assert!(std::fs::read_to_string(format!("/proc/{me}/status"))
            .unwrap()
            .contains("Groups:"));
        assert_eq!(
            GroupCache::default().of(u32::MAX, 0, 0).as_slice(),
            &[] as &[u32]
        );
    }
}
