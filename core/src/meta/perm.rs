//! Users and permission checks (3FS §4.3: every request carries the caller's uid and gid;
//! meta checks POSIX mode bits, with root exempt): search permission on every directory a path
//! walks, write and search permission on a directory whose entries change, read permission to
//! list a directory or open a file for reading, write permission to open one for writing, the
//! sticky-bit rule for removing and renaming, and ownership for chmod, chown and utimes.
//!
//! The rules (the reference model of the namespace checker applies the same ones):
//! - a caller is the owner class if its uid owns the inode, else the group class if the
//!   inode's group is its primary or one of its supplementary groups, else other; root (uid 0)
//!   passes every mode check;
//! - in a sticky directory (mode 0o1000) only root, the directory's owner or the entry's owner
//!   may remove or rename the entry, or replace it by a rename (`NotPermitted`, as Linux);
//! - chmod and utimes need the owner or root; changing the owner needs root, and the group
//!   root or the owner changing it to a group it is in (`NotPermitted`, as Linux); a chmod by
//!   a caller not in the file's group (and not root) drops the setgid bit it asks for;
//!
//! - a new inode in a setgid directory takes its group; a new directory there is setgid too.
//!
//! Not here: ACLs, the write permission Linux wants on a directory moved to another parent
//! (its `..` changes).

use super::{Inode, MetaError};
pub use crate::wire::{User, ROOT_USER};

/// Read permission.
pub const MAY_READ: u32 = 4;
/// Write permission.
pub const MAY_WRITE: u32 = 2;
/// Search (directories) or execute permission.
pub const MAY_EXEC: u32 = 1;

/// The sticky bit.
pub const STICKY: u32 = 0o1000;

impl User {
    /// Whether this user is root.
    pub fn is_root(self) -> bool {
        self.uid == 0
    }

    /// Whether the mode bits of an inode owned by `uid`/`gid` with `perm` grant all of `want`.
    pub fn may(self, uid: u32, gid: u32, perm: u32, want: u32) -> bool {
        if self.is_root() {
            return true;
        }
        let class = if self.uid == uid {
            perm >> 6
        } else if self.in_group(gid) {
            perm >> 3
        } else {
            perm
        };
        class & want == want
    }
}

/// `Access` (EACCES) unless `user` may `want` on `i`.
pub fn check(i: &Inode, user: User, want: u32) -> Result<(), MetaError> {
    match user.may(i.uid, i.gid, i.perm, want) {
        true => Ok(()),
        false => Err(MetaError::Access),
    }
}

/// The sticky-bit rule: `NotPermitted` if `dir` is sticky and `user` owns neither `dir` nor
/// `entry` (and is not root).
pub fn check_sticky(dir: &Inode, entry: &Inode, user: User) -> Result<(), MetaError> {
    let sticky = dir.perm & STICKY != 0;
    match sticky && !user.is_root() && user.uid != dir.uid && user.uid != entry.uid {
        true => Err(MetaError::NotPermitted),
        false => Ok(()),
    }
}

/// The setgid bit.
pub const SETGID: u32 = 0o2000;

/// The chown rule: `NotPermitted` unless `user` is root, or owns `i`, keeps its owner and
/// changes its group to one it is in (Linux `chown_ok`/`chgrp_ok` without capabilities).
pub fn check_chown(
    i: &Inode,
    user: User,
    uid: Option<u32>,
    gid: Option<u32>,
) -> Result<(), MetaError> {
    if user.is_root() {
        return Ok(());
    }
    let owner_kept = uid.is_none_or(|u| u == i.uid) && user.uid == i.uid;
    let group_ok = gid.is_none_or(|g| g == i.gid || user.in_group(g));
    match owner_kept && group_ok {
        true => Ok(()),
        false => Err(MetaError::NotPermitted),
    }
}

/// Whether a chmod from `old` to `new` only drops setuid or setgid bits: what the kernel asks
/// for on behalf of a writer who is not the owner (Linux `file_remove_privs`, which a FUSE
/// kernel sends as a setattr of the mode from the writer). Anyone who may write the file may
/// make this change, as a write by them would.
pub fn drops_only_setid(old: u32, new: u32) -> bool {
    let (old, new) = (old & 0o7777, new & 0o7777);
    new != old && new & !old == 0 && (old & !new) & !(0o4000 | SETGID) == 0
}

/// The mode bits a chmod to `perm` leaves on `i`: the setgid bit is dropped when the caller is
/// neither root nor in the file's group (Linux `setattr_should_drop_sgid`).
pub fn chmod_bits(i: &Inode, user: User, perm: u32) -> u32 {
    let perm = perm & 0o7777;
    match user.is_root() || user.in_group(i.gid) {
        true => perm,
        false => perm & !SETGID,
    }
}

/// A new inode in a setgid directory (Linux `inode_init_owner` and `mode_strip_sgid`): it takes
/// the directory's group, a new directory stays setgid, and a new executable-by-group file
/// loses a setgid bit its creator could not set on a file of that group (not root, not in it).
pub fn inherit_setgid(dir: &Inode, new: &mut Inode, user: User) {
    if dir.perm & SETGID == 0 {
        return;
    }
    new.gid = dir.gid;
    if new.is_dir() {
        new.perm |= SETGID;
    } else if new.perm & (SETGID | 0o010) == SETGID | 0o010
        && !user.is_root()
        && !user.in_group(new.gid)
    {
        new.perm &= !SETGID;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_pick_the_owner_group_or_other_bits_and_root_passes() {
        let u = User::new(5, 7);
        assert!(u.may(5, 0, 0o700, MAY_READ | MAY_WRITE | MAY_EXEC));
        // The owner class applies even when the group or other bits would grant more.
        assert!(!u.may(5, 7, 0o077, MAY_READ));
        assert!(u.may(9, 7, 0o050, MAY_READ | MAY_EXEC));
        assert!(!u.may(9, 8, 0o770, MAY_EXEC));
        assert!(u.may(9, 8, 0o001, MAY_EXEC));
        assert!(ROOT_USER.may(9, 8, 0, MAY_WRITE));
    }

    #[test]
    fn only_dropping_setuid_or_setgid_is_a_writers_change() {
        assert!(drops_only_setid(0o4777, 0o777));
        assert!(drops_only_setid(0o6777, 0o2777));
        assert!(drops_only_setid(0o6755, 0o755));
        assert!(
            !drops_only_setid(0o777, 0o777),
            "no change is a plain chmod"
        );
        assert!(!drops_only_setid(0o4777, 0o755), "other bits dropped too");
        assert!(!drops_only_setid(0o777, 0o4777), "a bit added");
        assert!(
            !drops_only_setid(0o5777, 0o4777),
            "the sticky bit is not the writer's"
        );
    }
}
