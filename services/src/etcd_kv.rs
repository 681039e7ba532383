//! The distributed KV engine: the t3fs KV contract (`t3fs_core::kv`, FoundationDB-like
//! optimistic transactions) on etcd v3, for deployments across hosts.
//!
//! Mapping. A [`KvVersion`] is an etcd revision. Every key lives under the engine's prefix
//! (`prefix + "d" + key`), so tests and benches each get a private key space in one shared etcd;
//! `prefix + "h"` holds the tombstone horizon (below). Reads are etcd Ranges at `revision = at`;
//! a commit is one etcd Txn whose compares are the read-conflict ranges and whose puts are the
//! coalesced mutations (etcd rejects two writes of one key in a txn).
//!
//! Why tombstones: a conflict check is a compare `mod_revision < read_version + 1` over each
//! read-conflict range, true only if no key in the range changed after the read version. But a
//! key deleted from etcd compares as if it never existed (mod_revision 0), so a deletion after
//! the read would pass unseen. So a clear never deletes: it writes a tombstone (values carry a
//! tag byte: 1 live, 0 tombstone) whose mod_revision the compare does see.
//! Reads filter tombstones out; `range` pages past them until `limit` live pairs are found.
//!
//! ClearRange: etcd's DeleteRange would delete, so the engine reads the range's live keys first
//! (outside the txn, at a revision R0) and tombstones them, adding a guard compare
//! `mod_revision < R0 + 1` over the range, so that a key written between the pre-read and the
//! txn fails the txn instead of surviving the clear. A failed txn runs its failure branch in the
//! same atomic step: reads that tell which compare failed. A stale read version is `TooOld`, a
//! changed read-conflict range `Conflict`, and a guard alone means a racing write into a cleared
//! range: the engine pre-reads again and retries (a few times, then `Conflict`).
//!
//! Tombstone GC: [`EtcdKv::compact_tombstones`] deletes tombstones written at or before a
//! horizon, after raising the horizon key to it. Every commit compares the horizon's value with
//! its read version: a transaction that read before the horizon might have missed a deletion (its
//! tombstone is gone), so it gets `TooOld`; one that read after it saw every deleted tombstone
//! already, so it is unaffected.
//!
//! Errors: `TooOld` for reads below etcd's compacted revision, `Unavailable` when etcd refused
//! or was never reached, `CommitUnknown` when a commit was sent and its answer lost (see `wire`).
//! [`EtcdKv::last_error`] keeps the reason of the last failure.
//!
//! etcd settings: a commit is one txn with a compare per read-conflict range and a put per
//! written key, so etcd's `--max-txn-ops` (default 128) must exceed the largest commit;
//! `scripts/etcd.sh` starts etcd with `--max-txn-ops 100000` and a large `--max-request-bytes`.
//! Needs etcd >= 3.3 (range compares, nested txns).
//!
//! Not here: etcd history compaction (the operator's job; reads below it are `TooOld`), TLS and
//! auth, leases and watches (3FS keeps leases as rows), and sharing one engine between threads
//! (it owns a current-thread tokio runtime and blocks on it, so it must not be called from inside
//! another tokio runtime).

#[cfg(test)]
mod tests;
mod wire;

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, KeyValue, KvClient, Txn, TxnOp,
    TxnOpResponse,
};
use t3fs_core::kv::{CommitReq, Key, KeyRange, KvEngine, KvError, KvVersion, Mutation, Value};
use tokio::runtime::Runtime;

use wire::{call, decode, encode, encode_horizon, header_revision, read_revision, Fail};

/// Longest `connect` waits for a TCP connection to an endpoint.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Keys asked of etcd per Range page.
const PAGE: usize = 512;
/// Times a commit with a ClearRange re-reads the range after racing writes before giving up.
const CLEAR_RANGE_ATTEMPTS: usize = 8;

/// The engine.
pub struct EtcdKv {
    // Dropped before the runtime its channel tasks run on.
    etcd: Etcd,
    rt: Runtime,
    last_error: Option<String>,
}

/// The async half: the client and the key layout.
struct Etcd {
    kv: KvClient,
    /// `prefix + "d"`: user keys follow it.
    data: Vec<u8>,
    /// `prefix + "h"`: the tombstone horizon (an 8-byte big-endian revision).
    horizon: Vec<u8>,
}

/// What every attempt of one commit checks: its compares (tombstone horizon, read-conflict
/// ranges) and the failure-branch reads that tell which compare failed.
struct Checks {
    read_version: i64,
    compares: Vec<Compare>,
    diagnose: Vec<TxnOp>,
}

/// A commit's writes and the ClearRange guards they rely on.
struct Plan {
    writes: BTreeMap<Key, Option<Value>>,
    guards: Vec<Compare>,
}

impl EtcdKv {
    /// Connects to an etcd cluster (`http://host:port` endpoints) and claims the key space under
    /// `prefix` (it may hold data from an earlier engine with the same prefix).
    pub fn connect(endpoints: &[String], prefix: &[u8]) -> Result<EtcdKv, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?;
        let opts = ConnectOptions::new().with_connect_timeout(CONNECT_TIMEOUT);
        let etcd = rt
            .block_on(async {
                let client = call(Client::connect(endpoints, Some(opts)), false, "connect").await?;
                let mut etcd = Etcd {
                    kv: client.kv_client(),
                    data: [prefix, b"d"].concat(),
                    horizon: [prefix, b"h"].concat(),
                };
                etcd.init_horizon().await?;
                Ok::<_, Fail>(etcd)
            })
            .map_err(|f| format!("etcd at {endpoints:?}: {} ({})", f.why, f.kind))?;
        Ok(EtcdKv {
            etcd,
            rt,
            last_error: None,
        })
    }

    /// Why the last failed call failed (the detail behind its [`KvError`]).
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// Deletes the tombstones written at or before `horizon` (clamped to the current revision)
    /// and returns how many it deleted. Commits whose read version is below the horizon fail
    /// with `TooOld` from now on, so pick a horizon older than any live transaction. Nothing
    /// calls this on its own: without it, every cleared key keeps a one-byte tombstone.
    pub fn compact_tombstones(&mut self, horizon: KvVersion) -> Result<usize, KvError> {
        let r = self.rt.block_on(self.etcd.compact_tombstones(horizon));
        self.record(r)
    }

    fn record<T>(&mut self, r: Result<T, Fail>) -> Result<T, KvError> {
        r.map_err(|f| {
            self.last_error = Some(f.why);
            f.kind
        })
    }
}

impl Etcd {
    fn key(&self, user: &[u8]) -> Vec<u8> {
        [self.data.as_slice(), user].concat()
    }

    /// A compare that holds iff no key in `range` changed after revision `rev`.
    fn unchanged_since(&self, range: &KeyRange, rev: i64) -> Compare {
        let cmp = Compare::mod_revision(self.key(&range.begin), CompareOp::Less, rev + 1);
        if range.end == KeyRange::single(&range.begin).end {
            cmp // One key: a point compare.
        } else {
            cmp.with_range(self.key(&range.end))
        }
    }

    /// Creates the horizon key (at 0) unless it exists; doubles as the connectivity check.
    async fn init_horizon(&mut self) -> Result<(), Fail> {
        let txn = Txn::new()
            .when([Compare::create_revision(
                self.horizon.clone(),
                CompareOp::Equal,
                0,
            )])
            .and_then([TxnOp::put(self.horizon.clone(), encode_horizon(0), None)]);
        call(self.kv.txn(txn), false, "creating the horizon key").await?;
        Ok(())
    }

    async fn read_version(&mut self) -> Result<KvVersion, Fail> {
        // A linearizable read of one small key: its header revision covers every acknowledged
        // commit, and unlike a count over the prefix it costs the same however big the data.
        let r = call(
            self.kv.get(self.horizon.clone(), None),
            false,
            "read version",
        )
        .await?;
        Ok(KvVersion(header_revision(r.header())? as u64))
    }

    async fn get(&mut self, at: KvVersion, key: &[u8]) -> Result<Option<Value>, Fail> {
        let opts = GetOptions::new().with_revision(read_revision(at)?);
        let mut r = call(self.kv.get(self.key(key), Some(opts)), false, "get").await?;
        match r.take_kvs().first() {
            None => Ok(None),
            Some(kv) => Ok(decode(kv.value())?.map(<[u8]>::to_vec)),
        }
    }

    /// Up to `limit` entries of `[begin, end)` (etcd keys) that pass `keep`, read at `at` (or at
    /// the newest revision if `None`), paging past those that do not. Returns the revision read
    /// at, the entries, and where to continue if etcd has more.
    async fn scan(
        &mut self,
        at: Option<i64>,
        begin: Vec<u8>,
        end: &[u8],
        limit: usize,
        keep: impl Fn(&KeyValue) -> Result<bool, Fail>,
    ) -> Result<(i64, Vec<KeyValue>, Option<Vec<u8>>), Fail> {
        let (mut rev, mut out, mut cursor) = (at, Vec::new(), begin);
        // The first page asks for exactly what is wanted (without tombstones: one round trip and
        // no surplus values); each further page doubles, so a run of n tombstones costs
        // O(log n) round trips, not n / limit.
        let mut page = limit.clamp(1, PAGE);
        while out.len() < limit && cursor.as_slice() < end {
            let mut opts = GetOptions::new().with_range(end).with_limit(page as i64);
            if let Some(r) = rev {
                opts = opts.with_revision(r);
            }
            let mut resp = call(self.kv.get(cursor.clone(), Some(opts)), false, "range").await?;
            // Later pages read at the first page's revision: one consistent snapshot.
            let snapshot = *rev.get_or_insert(header_revision(resp.header())?);
            let more = resp.more();
            for kv in resp.take_kvs() {
                if out.len() == limit {
                    return Ok((snapshot, out, Some(kv.key().to_vec())));
                }
                cursor = [kv.key(), &[0]].concat();
                if keep(&kv)? {
                    out.push(kv);
                }
            }
            if !more {
                return Ok((snapshot, out, None));
            }
            page = (page * 2).min(PAGE);
        }
        let rev = match rev {
            Some(r) => r,
            None => self.read_version().await?.0 as i64,
        };
        Ok((rev, out, (cursor.as_slice() < end).then_some(cursor)))
    }

    /// Live pairs of a user range.
    async fn range(
        &mut self,
        at: Option<i64>,
        range: &KeyRange,
        limit: usize,
    ) -> Result<(i64, Vec<(Key, Value)>), Fail> {
        if range.begin >= range.end || limit == 0 {
            let rev = match at {
                Some(r) => r,
                None => self.read_version().await?.0 as i64,
            };
            return Ok((rev, Vec::new()));
        }
        let (begin, end) = (self.key(&range.begin), self.key(&range.end));
        let is_live = |kv: &KeyValue| Ok(decode(kv.value())?.is_some());
        let (rev, kvs, _) = self.scan(at, begin, &end, limit, is_live).await?;
        let skip = self.data.len();
        let pairs = kvs
            .into_iter()
            .map(|kv| {
                let (k, v) = kv.into_key_value();
                (k[skip..].to_vec(), v[1..].to_vec())
            })
            .collect();
        Ok((rev, pairs))
    }

    /// Coalesces the mutations in order, pre-reading each ClearRange's live keys.
    async fn plan(&mut self, mutations: &[Mutation]) -> Result<Plan, Fail> {
        let mut plan = Plan {
            writes: BTreeMap::new(),
            guards: Vec::new(),
        };
        // Every pre-read of one attempt reads at the same revision, so one guard per range
        // protects a single consistent picture.
        let mut at = None;
        for m in mutations {
            match m {
                Mutation::Set(k, v) => {
                    plan.writes.insert(k.clone(), Some(v.clone()));
                }
                Mutation::Clear(k) => {
                    plan.writes.insert(k.clone(), None);
                }
                Mutation::ClearRange(r) if r.begin >= r.end => {}
                Mutation::ClearRange(r) => {
                    for (_, v) in plan.writes.range_mut(r.begin.clone()..r.end.clone()) {
                        *v = None;
                    }
                    let (rev, live) = self.range(at, r, usize::MAX).await?;
                    at = Some(rev);
                    for (k, _) in live {
                        plan.writes.insert(k, None);
                    }
                    plan.guards.push(self.unchanged_since(r, rev));
                }
            }
        }
        Ok(plan)
    }

    /// The compares every attempt of `req` makes, and the reads that say which one failed.
    fn checks(&self, req: &CommitReq) -> Result<Checks, Fail> {
        let rv = i64::try_from(req.read_version.0)
            .ok()
            .filter(|&rv| rv < i64::MAX)
            .ok_or_else(|| Fail::new(KvError::TooOld, "read version beyond etcd revisions"))?;
        let mut reads: Vec<&KeyRange> = req
            .read_conflicts
            .iter()
            .filter(|r| r.begin < r.end)
            .collect();
        reads.sort();
        reads.dedup();
        // The horizon compare holds iff horizon <= rv (see the module docs).
        let mut compares = vec![Compare::value(
            self.horizon.clone(),
            CompareOp::Less,
            encode_horizon(rv as u64 + 1),
        )];
        compares.extend(reads.iter().map(|r| self.unchanged_since(r, rv)));
        // Response 0 is the horizon; then, per read-conflict range, its keys changed after rv.
        let mut diagnose = vec![TxnOp::get(self.horizon.clone(), None)];
        diagnose.extend(reads.iter().map(|r| {
            let opts = GetOptions::new()
                .with_range(self.key(&r.end))
                .with_keys_only()
                .with_min_mod_revision(rv + 1);
            TxnOp::get(self.key(&r.begin), Some(opts))
        }));
        Ok(Checks {
            read_version: rv,
            compares,
            diagnose,
        })
    }

    async fn commit(&mut self, req: &CommitReq) -> Result<KvVersion, Fail> {
        let checks = self.checks(req)?;
        for _ in 0..CLEAR_RANGE_ATTEMPTS {
            let plan = self.plan(&req.mutations).await?;
            if let Some(v) = self.attempt(&checks, plan).await? {
                return Ok(v);
            }
        }
        let why = "writes kept racing into a cleared range";
        Err(Fail::new(KvError::Conflict, why))
    }

    /// Sends one commit txn. `None`: only a ClearRange guard failed, so pre-read and try again.
    async fn attempt(&mut self, checks: &Checks, plan: Plan) -> Result<Option<KvVersion>, Fail> {
        let mut when = checks.compares.clone();
        when.extend(plan.guards);
        let puts: Vec<TxnOp> = plan
            .writes
            .iter()
            .map(|(k, v)| TxnOp::put(self.key(k), encode(v.as_deref()), None))
            .collect();
        let txn = Txn::new()
            .when(when)
            .and_then(puts)
            .or_else(checks.diagnose.clone());
        let resp = call(self.kv.txn(txn), true, "commit").await?;
        if resp.succeeded() {
            // With no puts etcd does not advance, so this may equal an earlier commit's version:
            // still a valid serialization point, as nothing the transaction read changed until it.
            return Ok(Some(KvVersion(header_revision(resp.header())? as u64)));
        }
        let gets: Vec<Vec<KeyValue>> = resp
            .op_responses()
            .into_iter()
            .map(|op| match op {
                TxnOpResponse::Get(mut g) => g.take_kvs(),
                _ => Vec::new(),
            })
            .collect();
        let horizon = gets
            .first()
            .and_then(|kvs| kvs.first())
            .and_then(|kv| wire::decode_horizon(kv.value()))
            .ok_or_else(|| Fail::new(KvError::Unavailable, "the horizon key is missing"))?;
        let rv = checks.read_version;
        if horizon > rv as u64 {
            let why = format!("read version {rv} is below the tombstone horizon {horizon}");
            return Err(Fail::new(KvError::TooOld, why));
        }
        if gets.iter().skip(1).any(|kvs| !kvs.is_empty()) {
            return Err(Fail::new(
                KvError::Conflict,
                "a read-conflict range changed",
            ));
        }
        Ok(None)
    }

    async fn compact_tombstones(&mut self, horizon: KvVersion) -> Result<usize, Fail> {
        let now = self.read_version().await?.0;
        let h = horizon.0.min(now);
        // Raise the horizon before deleting anything, so no commit that read below it can
        // succeed after a tombstone it needed is gone. It never moves backwards.
        let raise = Txn::new()
            .when([Compare::value(
                self.horizon.clone(),
                CompareOp::Less,
                encode_horizon(h),
            )])
            .and_then([TxnOp::put(self.horizon.clone(), encode_horizon(h), None)])
            .or_else([TxnOp::get(self.horizon.clone(), None)]);
        let resp = call(self.kv.txn(raise), false, "raising the horizon").await?;
        // Not raised: fine if it already stands at or above `h`, but a missing horizon key would
        // leave deletions unguarded (commits already fail closed on it), so stop there.
        let standing = resp.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Get(mut g) => g.take_kvs().first().map(|kv| kv.value().to_vec()),
            _ => None,
        });
        if !resp.succeeded() && standing.and_then(|v| wire::decode_horizon(&v)) < Some(h) {
            return Err(Fail::new(
                KvError::Unavailable,
                "the horizon key is missing",
            ));
        }
        let old_tombstone =
            |kv: &KeyValue| Ok(decode(kv.value())?.is_none() && kv.mod_revision() as u64 <= h);
        let end = KeyRange::prefix(&self.data).end;
        let (mut at, mut cursor, mut deleted) = (None, Some(self.data.clone()), 0);
        while let Some(begin) = cursor {
            let (rev, batch, next) = self.scan(at, begin, &end, PAGE, old_tombstone).await?;
            (at, cursor) = (Some(rev), next);
            // One nested txn per tombstone: it is deleted only if not rewritten since the scan.
            let ops: Vec<TxnOp> = batch
                .iter()
                .map(|kv| {
                    let same = Compare::mod_revision(kv.key(), CompareOp::Equal, kv.mod_revision());
                    let delete = TxnOp::delete(kv.key(), None);
                    TxnOp::txn(Txn::new().when([same]).and_then([delete]))
                })
                .collect();
            if ops.is_empty() {
                continue;
            }
            let resp = call(
                self.kv.txn(Txn::new().and_then(ops)),
                false,
                "deleting tombstones",
            )
            .await?;
            deleted += resp
                .op_responses()
                .iter()
                .filter(|op| matches!(op, TxnOpResponse::Txn(t) if t.succeeded()))
                .count();
        }
        Ok(deleted)
    }
}

impl KvEngine for EtcdKv {
    fn read_version(&mut self) -> Result<KvVersion, KvError> {
        let r = self.rt.block_on(self.etcd.read_version());
        self.record(r)
    }

    fn get(&mut self, at: KvVersion, key: &[u8]) -> Result<Option<Value>, KvError> {
        let r = self.rt.block_on(self.etcd.get(at, key));
        self.record(r)
    }

    fn range(
        &mut self,
        at: KvVersion,
        range: &KeyRange,
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, KvError> {
        let r = self.rt.block_on(async {
            let rev = read_revision(at)?;
            Ok(self.etcd.range(Some(rev), range, limit).await?.1)
        });
        self.record(r)
    }

    fn commit(&mut self, req: CommitReq) -> Result<KvVersion, KvError> {
        let r = self.rt.block_on(self.etcd.commit(&req));
        self.record(r)
    }
}
