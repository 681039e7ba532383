//! Idempotency records (3FS §4.1 `IDEM`, §4.6): the stored answer of a mutating request, with
//! the time it was recorded, and their expiry (3FS `idempotent_record_expire`, 30 min, cleaned
//! every minute in batches of 2048).
//!
//! Invariant: a record is deleted only once it is older than the expiry, so a retry or a late
//! duplicate of a request within the expiry is answered from its record (`request.rs`); one
//! arriving later runs again, 3FS's documented trade-off for bounded KV growth.
//! Not here: writing and reading records (`request.rs`), when to clean (`server.rs`).

use super::keys::IDEM_RANGE_PREFIX;
use super::ops::Namespace;
use super::MetaError;
use crate::kv::{KeyRange, KvEngine};
use crate::mgmtd::store::decode;
use crate::wire::MetaResult;
use crate::wire_struct;

/// A stored answer.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct IdemRecord {
    /// When the request ran (the meta server's clock, seconds).
    pub at: u64,
    /// Its answer.
    pub result: MetaResult,
}
wire_struct!(IdemRecord { at, result });

type R<T> = Result<T, MetaError>;

impl<E: KvEngine + ?Sized> Namespace<'_, '_, E> {
    /// Deletes up to `batch` records after key `after` (empty: from the first) recorded more
    /// than `expire` seconds before `now`; returns how many, and the key to continue after
    /// (empty: start over).
    pub fn clean_idem(
        &mut self,
        after: &[u8],
        batch: usize,
        now: u64,
        expire: u64,
    ) -> R<(u32, Vec<u8>)> {
        let (rows, next) = self.page(KeyRange::prefix(IDEM_RANGE_PREFIX), after, batch)?;
        let mut cleaned = 0;
        for (k, v) in rows {
            let r: IdemRecord = decode(&v)?;
            if now > r.at.saturating_add(expire) {
                self.txn().clear(&k);
                cleaned += 1;
            }
        }
        Ok((cleaned, next))
    }
}
