//! The KV key layout of the namespace (3FS §4.1): `INOD` + inode id (little-endian, so
//! consecutive ids spread over shards), `DENT` + parent id (little-endian) + raw name bytes (so
//! one directory's entries are one range, in name order), `IDEM` + client + request for
//! idempotency records, `INOS` + inode + client + session for write sessions, and the inode id
//! allocator's counter.
//!
//! Invariant: no key of one kind is a prefix of a key of another kind. Not here: value encoding
//! (the wire codec, `mod.rs`).

use crate::ids::{ClientId, InodeId, RequestId};
use crate::kv::{Key, KeyRange};

const INODE: &[u8] = b"INOD";
const DIRENT: &[u8] = b"DENT";
const IDEM: &[u8] = b"IDEM";
/// The prefix of every idempotency record.
pub const IDEM_RANGE_PREFIX: &[u8] = IDEM;
const SESSION: &[u8] = b"INOS";
/// The inode id allocator's counter, in blocks of [`ID_BLOCK`] ids (3FS: a 52-bit counter whose
/// value v stands for ids `v << 12 | 0..4095`, sharded 32 ways; one row here).
pub const INODE_ALLOC: &[u8] = b"SING-inode-alloc";
/// Ids per allocated block.
pub const ID_BLOCK: u64 = 4096;

/// Whether `key` is an inode's row.
pub fn is_inode_key(key: &[u8]) -> bool {
    key.len() == INODE.len() + 8 && key.starts_with(INODE)
}

/// The row of inode `id`.
pub fn inode_key(id: InodeId) -> Key {
    let mut k = INODE.to_vec();
    k.extend_from_slice(&id.0.to_le_bytes());
    k
}

/// The entry `name` of directory `parent`.
pub fn dirent_key(parent: InodeId, name: &[u8]) -> Key {
    let mut k = DIRENT.to_vec();
    k.extend_from_slice(&parent.0.to_le_bytes());
    k.extend_from_slice(name);
    k
}

/// Every entry of directory `parent`, in name order, starting after `after` (exclusive; empty:
/// from the first).
pub fn dirent_range(parent: InodeId, after: &[u8]) -> KeyRange {
    let prefix = dirent_key(parent, b"");
    let mut begin = dirent_key(parent, after);
    if !after.is_empty() {
        begin.push(0); // The smallest key after `after`.
    }
    let mut end = prefix.clone();
    // The prefix ends in 8 id bytes; incrementing the last byte that is not 0xff bounds it.
    while let Some(last) = end.pop() {
        if last != 0xff {
            end.push(last + 1);
            break;
        }
    }
    KeyRange { begin, end }
}

/// The name part of an entry key of `parent`.
pub fn name_of(parent: InodeId, key: &[u8]) -> &[u8] {
    &key[dirent_key(parent, b"").len()..]
}

/// The write session `session` of `client` on file `inode`.
pub fn session_key(inode: InodeId, client: ClientId, session: u64) -> Key {
    let mut k = SESSION.to_vec();
    k.extend_from_slice(&inode.0.to_le_bytes());
    k.extend_from_slice(&client.0.to_be_bytes());
    k.extend_from_slice(&session.to_be_bytes());
    k
}

/// Every write session of file `inode`.
pub fn session_range(inode: InodeId) -> KeyRange {
    let mut p = SESSION.to_vec();
    p.extend_from_slice(&inode.0.to_le_bytes());
    KeyRange::prefix(&p)
}

/// Every write session of every file.
pub fn all_sessions() -> KeyRange {
    KeyRange::prefix(SESSION)
}

/// The parent and name of an entry key, if `key` is one.
pub fn parse_dirent_key(key: &[u8]) -> Option<(InodeId, &[u8])> {
    let rest = key.strip_prefix(DIRENT)?;
    let id = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
    Some((InodeId(id), &rest[8..]))
}

/// The inode of an inode key, if `key` is one.
pub fn parse_inode_key(key: &[u8]) -> Option<InodeId> {
    let rest = key.strip_prefix(INODE)?;
    Some(InodeId(u64::from_le_bytes(rest.try_into().ok()?)))
}

/// The file of a session key, if `key` is one.
pub fn parse_session_key(key: &[u8]) -> Option<InodeId> {
    let rest = key.strip_prefix(SESSION)?;
    Some(InodeId(u64::from_le_bytes(rest.get(..8)?.try_into().ok()?)))
}

/// The idempotency record of `request` from `client`.
pub fn idem_key(client: ClientId, request: RequestId) -> Key {
    let mut k = IDEM.to_vec();
    k.extend_from_slice(&client.0.to_be_bytes());
    k.extend_from_slice(&request.0.to_be_bytes());
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_range_holds_exactly_its_entries_in_name_order() {
        let d = InodeId(0x01ff);
        let r = dirent_range(d, b"");
        for name in [&b""[..], b"a", b"zz", &[0xff, 0xff]] {
            assert!(r.contains(&dirent_key(d, name)));
        }
        assert!(!r.contains(&dirent_key(InodeId(0x0200), b"a")));
        assert!(!r.contains(&dirent_key(InodeId(0x01fe), b"a")));
        assert!(!r.contains(&inode_key(d)));
        let after = dirent_range(d, b"b");
        assert!(!after.contains(&dirent_key(d, b"b")));
        assert!(after.contains(&dirent_key(d, b"b\0")));
        assert!(after.contains(&dirent_key(d, b"c")));
        assert_eq!(name_of(d, &dirent_key(d, b"name")), b"name");
    }
}
