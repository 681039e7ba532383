//! The wire vocabulary: the byte codec ([`codec`]) and the nouns that cross the wire between
//! clients and servers whose meaning belongs to no one machine — the meta requests and answers
//! ([`MetaOp`], [`MetaAnswer`], [`MetaError`]), the inodes and entries they carry, the caller
//! ([`User`]) and the arguments of requests (attributes, length hints, lock actions, layouts).
//!
//! Why a leaf: the messages (`msg`), the client machine (`client`) and the meta machine
//! (`meta`) all speak these nouns. Kept in `meta`, they made `msg → meta`, `client → meta` and
//! `meta → client` one circle; here, every module depends on this one and this one on nothing
//! but the leaves below it (`ids`, `kv`'s error, `limits`, `layout`, `payload`), so
//! `meta → client` is the only link between those machines.
//!
//! Invariants: every type here encodes to the same bytes it did in its old home (the codec's
//! round-trip tests and the catalog's trace hashes pin that); decoding never panics and rejects
//! an unknown tag with [`codec::DecodeError::UnknownTag`].
//!
//! Not here: what the nouns do. Behaviour stays with its owner — resolving a path, permission
//! checks (`meta::perm`), placing a layout (`meta::placement`), the length rules
//! (`meta::length`) — as inherent impls and functions beside the machine that uses them; `meta`
//! re-exports these types under their old paths.

pub mod args;
pub mod codec;
pub mod inode;
pub mod meta_answer;
pub mod meta_error;
pub mod meta_op;
pub mod placement;
pub mod user;

pub use args::{LengthHint, LockAction, SetAttr, BATCH_STAT_MAX, CLOSE_UNWRITTEN_MAX};
pub use inode::{DirEntry, EntryKind, Inode, InodeKind, SpecialKind};
pub use meta_answer::{FsStat, MetaAnswer, MetaResult};
pub use meta_error::{MetaError, NO_DATA};
pub use meta_op::MetaOp;
pub use placement::{ChainRange, DirLayout, Layout};
pub use user::{Groups, User, GROUPS_MAX, ROOT_USER};
