//! Who asks: [`User`] (3FS `UserInfo`): a uid, a primary gid and up to [`GROUPS_MAX`]
//! supplementary groups, as the kernel gives them for the calling process.
//!
//! Invariant: a decoded group list never exceeds [`GROUPS_MAX`] (a longer one is refused, not
//! cut, so no request ever acts with fewer groups than it named). Who may name which user is
//! the transport's policy (a plain client credential acts as its own uid and gid, with no
//! supplementary groups), not this module's; the permission rules over users are `meta::perm`.

use super::codec::{DecodeError, Decoder, Encoder, Wire};

/// The most supplementary groups a request carries (Linux allows 65,536; 3FS passes what the
/// kernel gives). A caller in more is checked against its first [`GROUPS_MAX`].
pub const GROUPS_MAX: usize = 32;

/// A caller's supplementary groups: a small fixed list, so that a [`User`] stays `Copy`.
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct Groups {
    len: u8,
    ids: [u32; GROUPS_MAX],
}

impl Groups {
    /// No supplementary groups.
    pub const NONE: Groups = Groups {
        len: 0,
        ids: [0; GROUPS_MAX],
    };

    /// The first [`GROUPS_MAX`] of `ids`.
    pub fn of(ids: &[u32]) -> Self {
        let mut g = Self::NONE;
        for (slot, id) in g.ids.iter_mut().zip(ids) {
            *slot = *id;
        }
        g.len = ids.len().min(GROUPS_MAX) as u8;
        g
    }

    /// The groups, in the order given.
    pub fn as_slice(&self) -> &[u32] {
        &self.ids[..usize::from(self.len)]
    }
}

impl Wire for Groups {
    fn encode(&self, enc: &mut Encoder) {
        enc.len(self.as_slice().len());
        for id in self.as_slice() {
            id.encode(enc);
        }
    }
    fn decode(dec: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        let n = dec.len(GROUPS_MAX as u32, 4)?;
        let mut ids = [0u32; GROUPS_MAX];
        for slot in ids.iter_mut().take(n) {
            *slot = u32::decode(dec)?;
        }
        Ok(Self::of(&ids[..n]))
    }
}

/// Who asks.
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct User {
    /// User id; 0 is root.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Groups,
}
crate::wire_struct!(User { uid, gid, groups });

impl User {
    /// `uid` in primary group `gid`, with no supplementary groups.
    pub const fn new(uid: u32, gid: u32) -> Self {
        Self {
            uid,
            gid,
            groups: Groups::NONE,
        }
    }

    /// Whether this user is in group `gid`, as its primary or a supplementary group.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.as_slice().contains(&gid)
    }
}

/// Root.
pub const ROOT_USER: User = User::new(0, 0);
