//! The arguments meta requests carry (the caller, [`super::User`], has its own module): setattr's attributes
//! ([`SetAttr`]), a writer's length hint ([`LengthHint`]) and `lockDirectory`'s action
//! ([`LockAction`]).
//!
//! Not here: permission checks (`meta::perm`), the length rules (`meta::length`), the lock's
//! rules (`meta::lock`).

use super::codec::{DecodeError, Decoder, Encoder, Wire};
use super::placement::DirLayout;
use crate::wire_struct;

/// Paths one batch stat may ask about.
pub const BATCH_STAT_MAX: usize = 64;

/// Write sessions one `CloseUnwritten` may close: a mount sends what gathered over a few
/// milliseconds, so a few hundred covers thousands of creates a second.
pub const CLOSE_UNWRITTEN_MAX: usize = 256;

/// The attributes a setattr changes (`None`: keep).
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct SetAttr {
    /// New mode bits (chmod).
    pub perm: Option<u32>,
    /// New owner (chown).
    pub uid: Option<u32>,
    /// New group (chown).
    pub gid: Option<u32>,
    /// New modification time, seconds (utimes with an explicit time: the owner or root).
    pub mtime: Option<u64>,
    /// Its nanoseconds (with `mtime`).
    pub mtime_ns: u32,
    /// New access time, seconds (an explicit time: the owner or root).
    pub atime: Option<u64>,
    /// Its nanoseconds (with `atime`).
    pub atime_ns: u32,
    /// Set the access time to the server's now (`UTIME_NOW`): as `touch`, the owner, root or
    /// anyone who may write the file.
    pub atime_now: bool,
    /// A directory's new default layout (owner or root; directories only).
    pub layout: Option<DirLayout>,
    /// Set the modification time to the server's now (utimes with `UTIME_NOW`, or no times):
    /// the owner, root, or anyone who may write the file.
    pub touch: bool,
    /// Change a final symlink itself rather than its target (lchown, utimensat with
    /// `AT_SYMLINK_NOFOLLOW`; a FUSE setattr always names the inode itself).
    pub nofollow: bool,
}

crate::wire_struct!(SetAttr {
    perm,
    uid,
    gid,
    mtime,
    mtime_ns,
    atime,
    atime_ns,
    atime_now,
    layout,
    touch,
    nofollow
});

impl SetAttr {
    /// Whether it changes nothing (`nofollow` says which inode, not what changes).
    pub fn changes_nothing(&self) -> bool {
        Self {
            nofollow: false,
            ..*self
        } == Self::default()
    }
}

/// A writer's length hint (3FS `VersionedLength`).
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct LengthHint {
    /// The end of the writer's acknowledged writes.
    pub length: u64,
    /// The file's truncate version when the writer opened it.
    pub truncate_ver: u64,
}
wire_struct!(LengthHint {
    length,
    truncate_ver
});

/// What `lockDirectory` does.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum LockAction {
    /// Take the lock unless another client holds it.
    TryLock,
    /// Take the lock from whoever holds it.
    PreemptLock,
    /// Release the caller's lock.
    Unlock,
    /// Release anyone's lock.
    Clear,
}

impl Wire for LockAction {
    fn encode(&self, enc: &mut Encoder) {
        enc.u8(match self {
            Self::TryLock => 0,
            Self::PreemptLock => 1,
            Self::Unlock => 2,
            Self::Clear => 3,
        });
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(match dec.u8()? {
            0 => Self::TryLock,
            1 => Self::PreemptLock,
            2 => Self::Unlock,
            3 => Self::Clear,
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}
