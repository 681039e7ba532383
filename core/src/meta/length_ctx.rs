//! What one transaction knows about file lengths (3FS §4.4): a storage answer the caller has
//! ([`QueriedLength`]) and the file an update needs one for ([`LengthCtx`]).
//!
//! A leaf apart from the length rules (`length.rs`) because the transaction (`ops.rs`) carries
//! the context while the rules extend the transaction: kept in `length.rs`, each named the
//! other. Not here: the rules.

use super::Inode;
use crate::ids::InodeId;

/// A precise length from storage, with the inode state it was asked for.
#[derive(Clone, Copy, Debug, Eq, Hash, PartialEq)]
pub struct QueriedLength {
    /// The file.
    pub inode: InodeId,
    /// Max over the used chains of `last index · chunk size + last chunk length`.
    pub length: u64,
    /// The inode's (length, truncate_ver) when the query started.
    pub seen: (u64, u64),
}

/// The length context of one transaction: the storage answer the caller has, and the file it
/// needs one for.
#[derive(Clone, Debug, Default)]
pub struct LengthCtx {
    /// The answer of a query the caller made for this request.
    pub queried: Option<QueriedLength>,
    /// Set when an update needs a query first (with the inode as read).
    pub wants: Option<Inode>,
    /// The planted bug `meta-stale-length-hint`.
    pub trust_stale: bool,
}
