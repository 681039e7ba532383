//! The kernel's setattr arguments as meta's [`SetAttr`]: mode bits, owner, and the times as the
//! caller meant them (explicit, or now).
//!
//! Invariant: a time the kernel means as now reaches meta as now (`touch`, `atime_now`), whose
//! rule is a writer's; only a time the caller chose is explicit, whose rule is the owner's.
//! With the writeback cache the kernel keeps mtime and ctime itself and sends its "now" as an
//! explicit mtime together with the ctime it stamped, the same instant (truncates and
//! `touch`es); an explicit time of utimensat comes with the ctime of the call, which is not
//! it. So an mtime equal to the ctime sent is now. Not here: sizes (a setattr's truncate runs
//! first, in ns_requests.rs) or the permission rules themselves (meta's perm.rs).

use std::time::{SystemTime, UNIX_EPOCH};

use fuser::TimeOrNow;
use t3fs_core::meta::SetAttr;

/// What a setattr with these arguments asks of meta (never of a final symlink's target: the
/// kernel names the inode itself, and `Inner::setattr` says so).
pub fn set_attr_of(
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    atime: Option<TimeOrNow>,
    mtime: Option<TimeOrNow>,
    ctime: Option<SystemTime>,
) -> SetAttr {
    let mtime = mtime_meant(mtime, ctime);
    let (m, a) = (explicit(mtime), explicit(atime));
    SetAttr {
        perm: mode.map(|m| m & 0o7777),
        uid,
        gid,
        mtime: m.map(|(s, _)| s),
        mtime_ns: m.map_or(0, |(_, ns)| ns),
        atime: a.map(|(s, _)| s),
        atime_ns: a.map_or(0, |(_, ns)| ns),
        atime_now: matches!(atime, Some(TimeOrNow::Now)),
        layout: None,
        touch: matches!(mtime, Some(TimeOrNow::Now)),
        nofollow: false,
    }
}

/// The mtime as meant: an explicit one equal to the ctime sent is the kernel's now.
fn mtime_meant(mtime: Option<TimeOrNow>, ctime: Option<SystemTime>) -> Option<TimeOrNow> {
    match (mtime, ctime) {
        (Some(TimeOrNow::SpecificTime(m)), Some(c)) if m == c => Some(TimeOrNow::Now),
        _ => mtime,
    }
}

/// An explicit time as seconds and nanoseconds (before the epoch: the epoch).
fn explicit(t: Option<TimeOrNow>) -> Option<(u64, u32)> {
    match t {
        Some(TimeOrNow::SpecificTime(t)) => {
            let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
            Some((d.as_secs(), d.subsec_nanos()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(s: u64, ns: u32) -> SystemTime {
        UNIX_EPOCH + Duration::new(s, ns)
    }

    #[test]
    fn times_the_caller_chose_are_explicit_and_the_kernels_now_is_now() {
        // utimensat with explicit times: both kept to the nanosecond, whatever the ctime.
        let then = Some(TimeOrNow::SpecificTime(at(1_234_567_890, 500)));
        let a = set_attr_of(None, None, None, then, then, Some(at(1_700_000_000, 7)));
        assert_eq!(
            (a.mtime, a.mtime_ns, a.touch),
            (Some(1_234_567_890), 500, false)
        );
        assert_eq!(
            (a.atime, a.atime_ns, a.atime_now),
            (Some(1_234_567_890), 500, false)
        );
        // The writeback cache's truncate or touch: mtime the same instant as the ctime.
        let now = at(1_700_000_000, 42);
        let t = Some(TimeOrNow::SpecificTime(now));
        let a = set_attr_of(None, None, None, Some(TimeOrNow::Now), t, Some(now));
        assert_eq!((a.mtime, a.touch, a.atime_now), (None, true, true));
        // Without the writeback cache the kernel sends no ctime, and now as now.
        let a = set_attr_of(None, None, None, None, Some(TimeOrNow::Now), None);
        assert_eq!((a.mtime, a.touch, a.atime_now), (None, true, false));
        // Mode bits beyond the permission bits are the kernel's file type: not sent.
        let a = set_attr_of(Some(0o100_4755), Some(1), None, None, None, None);
        assert_eq!((a.perm, a.uid, a.gid), (Some(0o4755), Some(1), None));
        assert!(SetAttr {
            perm: None,
            uid: None,
            ..a
        }
        .changes_nothing());
    }
}
