//! stat of many paths at once: [`BATCH_STAT_MAX`] paths per meta request and up to
//! [`STAT_REQUESTS_IN_FLIGHT`] such requests in flight together, for listings with detail
//! (fsspec's `ls(detail=True)`, a dataset's `from_prefix`) of directories of many thousands.
//!
//! Invariant: each path's answer is its own and in the order asked; a path removed meanwhile
//! answers its own `NotFound`. Not here: the listing of names (`Client::list_after`, paged).

use t3fs_core::client::ClientRet;
use t3fs_core::meta::request::{MetaAnswer, MetaOp};
use t3fs_core::meta::{Inode, MetaError, BATCH_STAT_MAX};

use super::{Client, ClientError};

/// Batched stat requests one `stat_many` keeps in flight: a listing of 100,000 entries is
/// about 1,600 requests, and meta answers each from its own KV reads, so several at once hide
/// the round trip while leaving the client's call bound (`CLIENT_CALLS_MAX`) to other users.
pub const STAT_REQUESTS_IN_FLIGHT: usize = 16;

impl Client {
    /// stat of each of `paths` (final symlinks followed), in order, each answered on its own.
    pub async fn stat_many(
        &self,
        paths: Vec<String>,
    ) -> Result<Vec<Result<Inode, MetaError>>, ClientError> {
        for p in &paths {
            Self::check_path(p)?;
        }
        let mut out = Vec::with_capacity(paths.len());
        for wave in paths.chunks(BATCH_STAT_MAX * STAT_REQUESTS_IN_FLIGHT) {
            let calls = wave
                .chunks(BATCH_STAT_MAX)
                .map(|g| Self::meta_call(MetaOp::BatchStat { paths: g.to_vec() }))
                .collect();
            for answer in self.batch(calls).await {
                match answer? {
                    ClientRet::Meta(Ok(MetaAnswer::Stats(v)), _) => out.extend(v),
                    ClientRet::Meta(Err(e), _) => return Err(ClientError::Meta(e)),
                    other => return Err(ClientError::answered(other)),
                }
            }
        }
        Ok(out)
    }
}
