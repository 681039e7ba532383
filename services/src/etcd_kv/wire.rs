//! How the etcd engine lays its data out in etcd and how it reads etcd's failures: value tags,
//! the horizon encoding, revision conversions, and the mapping of etcd/gRPC errors onto
//! [`KvError`] with the reason kept for [`super::EtcdKv::last_error`].
//!
//! Invariant: a failure is reported as `Unavailable`, `TooOld` or `Conflict` only when etcd
//! certainly did not apply the request; anything a commit may have applied is `CommitUnknown`.

use std::future::Future;
use std::time::Duration;

use t3fs_core::kv::{KvError, KvVersion};

/// Tag byte of a live value (the user's bytes follow).
pub(super) const LIVE: u8 = 1;
/// Tag byte of a tombstone (nothing follows): a cleared key, kept so commits can see the clear.
pub(super) const TOMBSTONE: u8 = 0;
/// Longest a single etcd call may take before it counts as failed.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A failure with its detail, before it is reduced to the contract's [`KvError`].
#[derive(Debug)]
pub(super) struct Fail {
    pub(super) kind: KvError,
    pub(super) why: String,
}

impl Fail {
    pub(super) fn new(kind: KvError, why: impl Into<String>) -> Self {
        Self {
            kind,
            why: why.into(),
        }
    }
}

/// A stored value: `Some(user bytes)` if live, `None` if a tombstone.
pub(super) fn decode(stored: &[u8]) -> Result<Option<&[u8]>, Fail> {
    match stored.split_first() {
        Some((&LIVE, rest)) => Ok(Some(rest)),
        Some((&TOMBSTONE, [])) => Ok(None),
        // Someone else wrote under our prefix; refusing beats guessing what it means.
        _ => Err(Fail::new(
            KvError::Unavailable,
            "a value under the engine's prefix has no valid tag (written by another client?)",
        )),
    }
}

/// What a buffered write stores: a tagged value or a tombstone.
pub(super) fn encode(value: Option<&[u8]>) -> Vec<u8> {
    match value {
        Some(v) => {
            let mut out = Vec::with_capacity(v.len() + 1);
            out.push(LIVE);
            out.extend_from_slice(v);
            out
        }
        None => vec![TOMBSTONE],
    }
}

/// The horizon key's value: big-endian, so etcd's bytewise value compare orders it numerically.
pub(super) fn encode_horizon(h: u64) -> Vec<u8> {
    h.to_be_bytes().to_vec()
}

pub(super) fn decode_horizon(stored: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(stored.try_into().ok()?))
}

/// `at` as an etcd revision to read at. Revision 0 means "newest" to etcd, so it must never reach
/// a read: no etcd revision is that old (an empty store is at revision 1).
pub(super) fn read_revision(at: KvVersion) -> Result<i64, Fail> {
    match i64::try_from(at.0) {
        Ok(r) if r > 0 => Ok(r),
        _ => Err(Fail::new(
            KvError::TooOld,
            format!("{at} is not an etcd revision"),
        )),
    }
}

/// The revision in a response header (every etcd response carries one).
pub(super) fn header_revision(header: Option<&etcd_client::ResponseHeader>) -> Result<i64, Fail> {
    header.map(|h| h.revision()).ok_or_else(|| {
        Fail::new(
            KvError::Unavailable,
            "etcd response without a header revision",
        )
    })
}

// gRPC status codes (the numbers are fixed by the gRPC spec; etcd maps its errors onto them).
const INVALID_ARGUMENT: i32 = 3;
const PERMISSION_DENIED: i32 = 7;
const RESOURCE_EXHAUSTED: i32 = 8;
const FAILED_PRECONDITION: i32 = 9;
const OUT_OF_RANGE: i32 = 11;
const UNAUTHENTICATED: i32 = 16;

/// Whether the error arose while connecting, so the request never left this process. tonic
/// reports a failed connect as a status whose source chain holds the connect's `io::Error`.
fn never_sent(status: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind::*;
    let mut cause = status.source();
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                ConnectionRefused | AddrNotAvailable | NetworkUnreachable | HostUnreachable
            ) {
                return true;
            }
        }
        cause = e.source();
    }
    false
}

/// Maps an etcd client error. `commit` says whether the request could have written.
pub(super) fn classify(e: etcd_client::Error, commit: bool, what: &str) -> Fail {
    let why = format!("etcd {what}: {e}");
    let etcd_client::Error::GRpcStatus(status) = &e else {
        // Client-side failures (bad endpoint, channel setup) happen before anything is sent.
        return Fail::new(KvError::Unavailable, why);
    };
    let msg = status.message();
    // "mvcc: required revision has been compacted" (FailedPrecondition) and "mvcc: required
    // revision is a future revision" (OutOfRange). A future revision cannot come from this
    // cluster's linearizable reads; it means the version came from another cluster or a wiped
    // one, and the reaction both need is the same: a fresh read version.
    if msg.contains("compacted") || msg.contains("future revision") {
        return Fail::new(KvError::TooOld, why);
    }
    // etcd's space quota alarm ("etcdserver: mvcc: database space exceeded", ResourceExhausted):
    // nothing was applied, and no commit fits until an operator compacts and defragments.
    if msg.contains("database space exceeded") {
        return Fail::new(KvError::NoSpace, why);
    }
    let kind = match status.code() as i32 {
        // etcd refused the request before proposing it (too many txn ops, request too large,
        // auth): nothing was applied, and retrying later is all we can do.
        INVALID_ARGUMENT | PERMISSION_DENIED | RESOURCE_EXHAUSTED | FAILED_PRECONDITION
        | OUT_OF_RANGE | UNAUTHENTICATED => KvError::Unavailable,
        _ if !commit || never_sent(status) => KvError::Unavailable,
        // Timeouts, leader changes, broken connections after sending: the proposal may commit.
        _ => KvError::CommitUnknown,
    };
    Fail::new(kind, why)
}

/// Runs one etcd call with the request timeout. A call that times out may have reached etcd, so
/// for a commit it is `CommitUnknown`.
pub(super) async fn call<T>(
    fut: impl Future<Output = Result<T, etcd_client::Error>>,
    commit: bool,
    what: &str,
) -> Result<T, Fail> {
    match tokio::time::timeout(REQUEST_TIMEOUT, fut).await {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(classify(e, commit, what)),
        Err(_) => Err(Fail::new(
            if commit {
                KvError::CommitUnknown
            } else {
                KvError::Unavailable
            },
            format!("etcd {what}: no answer within {REQUEST_TIMEOUT:?}"),
        )),
    }
}
