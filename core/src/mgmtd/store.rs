//! mgmtd's persistent rows in the KV (3FS §2.1): key layout and value encoding.
//!
//! Keys use 3FS's 4-byte ASCII prefixes followed by big-endian ids, so each table is one key
//! range in id order. Values are encoded with the wire codec (no frame). A row that fails to
//! decode is reported, never trusted: the caller skips it and counts it.
//!
//! Not here: transactions (see `writer.rs`) and anything volatile (local states, heartbeats,
//! sessions), which 3FS rebuilds from heartbeats after a failover.

use std::collections::BTreeSet;

use crate::ids::{ChainId, NodeId, TargetId};
use crate::kv::{Key, KeyRange, Value};
use crate::routing::{ChainInfo, RoutingInfo};
use crate::wire::codec::{decode_list, encode_list, DecodeError, Decoder, Encoder, Wire};
use crate::wire_struct;

/// The lease row's key (`SINGMgmtdLease`).
pub const LEASE_KEY: &[u8] = b"SINGMgmtdLease";
/// The routing-info version row's key (`SINGRoutingInfoVersion`).
pub const ROUTING_VERSION_KEY: &[u8] = b"SINGRoutingInfoVersion";
const CHAIN: &[u8] = b"CHIF";
const TARGET: &[u8] = b"TGIF";
const NODE: &[u8] = b"NODE";
const TABLE: &[u8] = b"CHIT";

/// The lease row (3FS `MgmtdLeaseInfo`). Times are the holder's clock in nanoseconds.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct LeaseInfo {
    /// The primary.
    pub primary: NodeId,
    /// When this holder's tenure began (kept across extensions: a change means a new tenure).
    pub start: u64,
    /// Expiry.
    pub end: u64,
    /// The holder's software release; an older release never takes the lease over.
    pub release_version: u32,
}
wire_struct!(LeaseInfo {
    primary,
    start,
    end,
    release_version
});

/// A persisted node row (3FS `PersistentNodeInfo`, reduced to what t3fs uses).
#[derive(Clone, Copy, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct NodeRow {
    /// Disabled by an admin: heartbeats refused; a disabled mgmtd releases its lease.
    pub disabled: bool,
}
wire_struct!(NodeRow { disabled });

fn keyed(prefix: &[u8], ids: &[u32]) -> Key {
    let mut k = prefix.to_vec();
    for id in ids {
        k.extend_from_slice(&id.to_be_bytes());
    }
    k
}

/// `CHIF` + chain.
pub fn chain_key(chain: ChainId) -> Key {
    keyed(CHAIN, &[chain.0])
}

/// Whether `key` is a chain row's key.
pub fn is_chain_key(key: &[u8]) -> bool {
    key.starts_with(CHAIN)
}
/// `TGIF` + target.
pub fn target_key(target: TargetId) -> Key {
    keyed(TARGET, &[target.0])
}
/// `NODE` + node: the 4-byte form rows were always written with for an id below `u32::MAX`
/// (every server), else `u32::MAX` and the id's 8 bytes, which sort after every short key.
pub fn node_key(node: NodeId) -> Key {
    match u32::try_from(node.0) {
        Ok(short) if short != u32::MAX => keyed(NODE, &[short]),
        _ => keyed(NODE, &[u32::MAX, (node.0 >> 32) as u32, node.0 as u32]),
    }
}

/// The node a [`node_key`] names, or `None` for a malformed key.
pub fn node_of(key: &[u8]) -> Option<NodeId> {
    match (id_of(key, 0)?, key.len()) {
        (u32::MAX, 16) => {
            let wide = u64::from(id_of(key, 1)?) << 32 | u64::from(id_of(key, 2)?);
            // One node, one key: a wide key for an id the short form holds is malformed.
            (wide >= u64::from(u32::MAX)).then_some(NodeId(wide))
        }
        (short, 8) if short != u32::MAX => Some(NodeId(u64::from(short))),
        _ => None,
    }
}
/// `CHIT` + table + version.
pub fn table_key(table: u32, version: u32) -> Key {
    keyed(TABLE, &[table, version])
}

/// Every chain row.
pub fn chains_range() -> KeyRange {
    KeyRange::prefix(CHAIN)
}
/// Every target row.
pub fn targets_range() -> KeyRange {
    KeyRange::prefix(TARGET)
}
/// Every node row.
pub fn nodes_range() -> KeyRange {
    KeyRange::prefix(NODE)
}
/// Every chain-table row.
pub fn tables_range() -> KeyRange {
    KeyRange::prefix(TABLE)
}

/// Encodes a row value.
pub fn encode<T: Wire>(value: &T) -> Value {
    let mut e = Encoder::new();
    value.encode(&mut e);
    e.finish()
}

/// Decodes a whole row value; trailing bytes are an error.
pub fn decode<T: Wire>(bytes: &[u8]) -> Result<T, DecodeError> {
    let mut d = Decoder::new(bytes);
    let v = T::decode(&mut d)?;
    match d.remaining() {
        0 => Ok(v),
        n => Err(DecodeError::TrailingBytes(n)),
    }
}

/// Encodes a chain table's chain list.
pub fn encode_table(chains: &[ChainId]) -> Value {
    let mut e = Encoder::new();
    encode_list(&mut e, chains);
    e.finish()
}

/// Decodes a chain table's chain list.
pub fn decode_table(bytes: &[u8]) -> Result<Vec<ChainId>, DecodeError> {
    let mut d = Decoder::new(bytes);
    let v = decode_list(&mut d)?;
    match d.remaining() {
        0 => Ok(v),
        n => Err(DecodeError::TrailingBytes(n)),
    }
}

/// The id encoded after a 4-byte prefix, or `None` for a malformed key.
pub fn id_of(key: &[u8], at: usize) -> Option<u32> {
    let bytes = key.get(4 + 4 * at..8 + 4 * at)?;
    Some(u32::from_be_bytes(bytes.try_into().ok()?))
}

/// Decodes a chain row.
pub fn decode_chain(bytes: &[u8]) -> Result<ChainInfo, DecodeError> {
    decode(bytes)
}

/// Builds routing info and the disabled set from the rows of a load (chain, target, chain-table
/// and node ranges, in that order), skipping undecodable rows; returns how many were skipped.
pub fn load_rows(ranges: &[Vec<(Vec<u8>, Vec<u8>)>]) -> (RoutingInfo, BTreeSet<NodeId>, u64) {
    let mut next = RoutingInfo::default();
    let mut disabled = BTreeSet::new();
    let empty = Vec::new();
    let [chains, targets, tables, nodes] = [0, 1, 2, 3].map(|i| ranges.get(i).unwrap_or(&empty));
    let mut corrupt = 0;
    for (_, v) in chains {
        match decode_chain(v) {
            Ok(c) => {
                next.chains.insert(c.chain, c);
            }
            Err(_) => corrupt += 1,
        }
    }
    for (k, v) in targets {
        match (id_of(k, 0), decode::<NodeId>(v)) {
            (Some(t), Ok(n)) => {
                next.targets.insert(TargetId(t), n);
            }
            _ => corrupt += 1,
        }
    }
    for (k, v) in tables {
        match (id_of(k, 0), id_of(k, 1), decode_table(v)) {
            (Some(t), Some(ver), Ok(list)) => {
                next.chain_tables.insert((t, ver), list);
            }
            _ => corrupt += 1,
        }
    }
    for (k, v) in nodes {
        match (node_of(k), decode::<NodeRow>(v)) {
            (Some(n), Ok(row)) => {
                if row.disabled {
                    disabled.insert(n);
                }
            }
            _ => corrupt += 1,
        }
    }
    (next, disabled, corrupt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_by_id_and_round_trip() {
        assert!(chain_key(ChainId(2)) < chain_key(ChainId(256)));
        assert!(chains_range().contains(&chain_key(ChainId(u32::MAX))));
        assert!(!chains_range().contains(&target_key(TargetId(1))));
        assert_eq!(id_of(&table_key(3, 9), 1), Some(9));
        assert_eq!(
            node_key(NodeId(5)),
            [NODE, &5u32.to_be_bytes()[..]].concat()
        );
        for n in [
            0,
            5,
            u64::from(u32::MAX) - 1,
            u64::from(u32::MAX),
            1 << 63 | 9,
            u64::MAX,
        ] {
            assert_eq!(node_of(&node_key(NodeId(n))), Some(NodeId(n)), "{n}");
            assert!(nodes_range().contains(&node_key(NodeId(n))));
        }
        assert!(node_key(NodeId(u64::from(u32::MAX) - 1)) < node_key(NodeId(u64::from(u32::MAX))));
        assert_eq!(node_of(&keyed(NODE, &[u32::MAX])), None);
        assert_eq!(node_of(&keyed(NODE, &[u32::MAX, 0, 7])), None);
        assert_eq!(node_of(&keyed(NODE, &[5, 0])), None);
        let lease = LeaseInfo {
            primary: NodeId(7),
            start: 1,
            end: 2,
            release_version: 3,
        };
        assert_eq!(decode::<LeaseInfo>(&encode(&lease)), Ok(lease));
        let mut bad = encode(&lease);
        bad.push(0);
        assert!(decode::<LeaseInfo>(&bad).is_err());
        assert!(decode::<LeaseInfo>(&bad[..3]).is_err());
    }
}
