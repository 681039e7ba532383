//! `t3fs bench kvcache`: 3FS's KVCache workload (3fs.md, the KVCache figure). Inference clients
//! keep the key and value vectors of earlier tokens as files of one block each; they read
//! blocks with high concurrency and a skewed popularity (recent contexts are hot), write new
//! blocks as new prompts arrive, and a garbage collector removes expired blocks in bursts. The
//! figures are 3FS's: read throughput per client, mean and peak per interval, and GC removes
//! per second, the latter beside the same store's removes per second with nothing else running,
//! measured in the same run (the teardown).
//!
//! Invariant: every block read is checked against what its writer wrote (its id in the header
//! and trailer over a shared fill); a block the GC removed before the read is a miss, never an
//! error. Popularity: a read picks the r-th newest live block, r drawn from the bounded power
//! law of density ∝ x^-skew on [1, n+1) (skew 0 is uniform). Not here: the store (store.rs) or
//! the report (run_dir.rs).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use super::recorder::Recorder;
use super::store::Store;
use crate::bench_io::Rng;
use crate::bench_verify;

/// The workload's knobs.
#[derive(Clone, Debug)]
pub struct KvcacheJob {
    /// Inference clients (each its own store handle).
    pub clients: usize,
    /// Bytes per KV block (one file each).
    pub block: u64,
    /// Blocks written before the read phase.
    pub blocks: u64,
    /// Operations in flight per client.
    pub depth: usize,
    /// Seconds of the read phase.
    pub seconds: f64,
    /// Popularity skew (the power law's exponent; 0 is uniform).
    pub skew: f64,
    /// Percentage of a client's operations that write a new block.
    pub write_percent: u32,
    /// A block is expired this many seconds after it was written.
    pub ttl: f64,
    /// The GC wakes this often and removes every expired block in one burst.
    pub gc_interval: f64,
    /// Removes in flight during a burst (and per client in the teardown).
    pub gc_depth: usize,
    /// The blocks' directory.
    pub dir: String,
}

/// What happened.
#[derive(Debug, Default)]
pub struct KvcacheOutcome {
    /// Blocks read and found equal to what was written.
    pub reads_ok: u64,
    /// Reads of blocks the GC had removed.
    pub misses: u64,
    /// The first read that returned other bytes than were written.
    pub corrupt: Option<String>,
    /// Reads that returned other bytes.
    pub corrupt_reads: u64,
    /// Blocks written during the read phase.
    pub writes: u64,
    /// GC bursts: (seconds since start, removes, seconds it took).
    pub bursts: Vec<(f64, u64, f64)>,
    /// Blocks removed in the teardown and the seconds it took.
    pub teardown: (u64, f64),
}

/// The live blocks and when each was written (seconds since the recorder's start).
#[derive(Default)]
struct Live {
    born: BTreeMap<u64, f64>,
    next: u64,
}

struct Shared {
    job: KvcacheJob,
    live: Mutex<Live>,
    base: Vec<u8>,
    rec: Recorder,
    out: Mutex<KvcacheOutcome>,
}

/// The rank (0 = most popular) of a draw `u` in [0, 1) among `n` items.
pub fn popular_rank(n: usize, skew: f64, u: f64) -> usize {
    let top = n as f64 + 1.0;
    let x = if (skew - 1.0).abs() < 1e-9 {
        top.powf(u)
    } else {
        let e = 1.0 - skew;
        ((top.powf(e) - 1.0) * u + 1.0).powf(1.0 / e)
    };
    (x.floor() as usize)
        .saturating_sub(1)
        .min(n.saturating_sub(1))
}

impl KvcacheJob {
    fn check(&self) -> Result<(), String> {
        if self.clients == 0 || self.depth == 0 || self.gc_depth == 0 {
            return Err("clients, depth and gc-depth must be at least 1".into());
        }
        if self.block < bench_verify::MIN_BS || self.blocks == 0 {
            return Err(format!(
                "need at least one block of at least {} bytes",
                bench_verify::MIN_BS
            ));
        }
        if self.write_percent > 100 || self.skew < 0.0 || self.gc_interval <= 0.0 {
            return Err("write-percent is 0..=100, skew ≥ 0, gc-interval > 0".into());
        }
        Ok(())
    }

    fn path(&self, id: u64) -> String {
        format!("{}/kv-{id:010}", self.dir)
    }
}

/// Prefill, the read phase with its GC, then the teardown; `stores[c]` is client c's.
pub async fn run(
    job: &KvcacheJob,
    stores: &[Store],
    rec: &Recorder,
) -> Result<KvcacheOutcome, String> {
    job.check()?;
    if stores.len() != job.clients {
        return Err(format!(
            "{} stores for {} clients",
            stores.len(),
            job.clients
        ));
    }
    stores[0].mkdir_all(&job.dir).await?;
    let sh = Arc::new(Shared {
        job: job.clone(),
        live: Mutex::new(Live::default()),
        base: bench_verify::base(job.block),
        rec: rec.clone(),
        out: Mutex::new(KvcacheOutcome::default()),
    });
    rec.phase("prefill");
    prefill(&sh, stores).await?;
    rec.phase("read");
    let end = Instant::now() + Duration::from_secs_f64(job.seconds);
    let gc = tokio::spawn(gc(sh.clone(), stores[0].clone(), end));
    let mut set = JoinSet::new();
    for (c, s) in stores.iter().enumerate() {
        for d in 0..job.depth {
            let seed = 0x9E37_79B9_7F4A_7C15u64 ^ ((c as u64) << 32 | d as u64 + 1);
            set.spawn(client_loop(sh.clone(), s.clone(), c, Rng(seed), end));
        }
    }
    while let Some(r) = set.join_next().await {
        r.map_err(|e| e.to_string())??;
    }
    gc.await.map_err(|e| e.to_string())??;
    rec.phase("teardown");
    teardown(&sh, stores).await?;
    let out = std::mem::take(&mut *sh.out.lock().expect("outcome"));
    Ok(out)
}

/// The next block id, if fewer than `limit` were handed out.
fn next_id(sh: &Shared, limit: u64) -> Option<u64> {
    let mut l = sh.live.lock().expect("live");
    (l.next < limit).then(|| {
        l.next += 1;
        l.next - 1
    })
}

/// Writes block `id` on `store` and makes it live.
async fn write_block(sh: &Shared, store: &Store, id: u64) -> Result<(), String> {
    let t = Instant::now();
    let h = store.create(&sh.job.path(id)).await?;
    store
        .write(&h, 0, bench_verify::stamp(&sh.base, id, id + 1))
        .await?;
    store.close(h, sh.job.block).await?;
    sh.rec.done("write", sh.job.block, t.elapsed());
    let now = sh.rec.now();
    sh.live.lock().expect("live").born.insert(id, now);
    Ok(())
}

async fn prefill(sh: &Arc<Shared>, stores: &[Store]) -> Result<(), String> {
    let mut set = JoinSet::new();
    for s in stores {
        let (sh, s) = (sh.clone(), s.clone());
        set.spawn(async move {
            // Ids are taken and checked under one lock: exactly `blocks` are written.
            while let Some(id) = next_id(&sh, sh.job.blocks) {
                write_block(&sh, &s, id).await?;
            }
            Ok::<(), String>(())
        });
    }
    while let Some(r) = set.join_next().await {
        r.map_err(|e| e.to_string())??;
    }
    Ok(())
}

/// One of a client's `depth` loops: reads of popular blocks, and now and then a new block.
async fn client_loop(
    sh: Arc<Shared>,
    store: Store,
    client: usize,
    mut rng: Rng,
    end: Instant,
) -> Result<(), String> {
    while Instant::now() < end {
        if rng.unit() * 100.0 < f64::from(sh.job.write_percent) {
            let id = next_id(&sh, u64::MAX).expect("ids left");
            write_block(&sh, &store, id).await?;
            sh.out.lock().expect("outcome").writes += 1;
            continue;
        }
        let id = {
            let l = sh.live.lock().expect("live");
            let n = l.born.len();
            if n == 0 {
                None
            } else {
                let r = popular_rank(n, sh.job.skew, rng.unit());
                l.born.keys().rev().nth(r).copied()
            }
        };
        let Some(id) = id else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        read_block(&sh, &store, client, id).await?;
    }
    Ok(())
}

/// Whether `data`, read as block `id`, is what its writer wrote.
pub fn check_block(base: &[u8], id: u64, data: &[u8]) -> Result<(), String> {
    match bench_verify::decode(data, base, id)? {
        g if g == id + 1 => Ok(()),
        g => Err(format!("block {id}: generation {g}, written {}", id + 1)),
    }
}

async fn read_block(sh: &Shared, store: &Store, client: usize, id: u64) -> Result<(), String> {
    let t = Instant::now();
    let got = store
        .read_whole(vec![sh.job.path(id)])
        .await?
        .pop()
        .flatten();
    let lat = t.elapsed();
    let mut out = sh.out.lock().expect("outcome");
    match got {
        None => {
            out.misses += 1;
            sh.rec.done("miss", 0, lat);
        }
        Some(data) => {
            sh.rec.done("read", data.len() as u64, lat);
            sh.rec.client_read(client, data.len() as u64);
            match check_block(&sh.base, id, &data) {
                Ok(()) => out.reads_ok += 1,
                Err(e) => {
                    out.corrupt_reads += 1;
                    out.corrupt.get_or_insert(e);
                }
            }
        }
    }
    Ok(())
}

/// Every `gc_interval` until `end`: takes the expired blocks out of the live set, then removes
/// them, `gc_depth` at a time.
async fn gc(sh: Arc<Shared>, store: Store, end: Instant) -> Result<(), String> {
    let every = Duration::from_secs_f64(sh.job.gc_interval);
    loop {
        let wake = Instant::now() + every;
        if wake >= end {
            return Ok(());
        }
        tokio::time::sleep_until(wake.into()).await;
        let now = sh.rec.now();
        let expired: Vec<u64> = {
            let mut l = sh.live.lock().expect("live");
            let ids: Vec<u64> = l
                .born
                .iter()
                .filter(|(_, b)| now - **b >= sh.job.ttl)
                .map(|(id, _)| *id)
                .collect();
            for id in &ids {
                l.born.remove(id);
            }
            ids
        };
        if expired.is_empty() {
            continue;
        }
        let t = Instant::now();
        let n = remove_all(&sh, &[store.clone()], expired, sh.job.gc_depth).await?;
        let took = t.elapsed().as_secs_f64();
        sh.out.lock().expect("outcome").bursts.push((now, n, took));
    }
}

/// Removes `ids` over `stores`, `depth` in flight per store; how many were there.
async fn remove_all(
    sh: &Arc<Shared>,
    stores: &[Store],
    ids: Vec<u64>,
    depth: usize,
) -> Result<u64, String> {
    let queue = Arc::new(Mutex::new(ids));
    let mut set = JoinSet::new();
    for s in stores {
        for _ in 0..depth {
            let (sh, s, q) = (sh.clone(), s.clone(), queue.clone());
            set.spawn(async move {
                let mut removed = 0u64;
                loop {
                    let Some(id) = q.lock().expect("queue").pop() else {
                        return Ok::<u64, String>(removed);
                    };
                    let t = Instant::now();
                    if s.remove(&sh.job.path(id), false).await? {
                        removed += 1;
                    }
                    sh.rec.done("remove", 0, t.elapsed());
                }
            });
        }
    }
    let mut n = 0;
    while let Some(r) = set.join_next().await {
        n += r.map_err(|e| e.to_string())??;
    }
    Ok(n)
}

/// Removes every block still live, with every client, nothing else running.
async fn teardown(sh: &Arc<Shared>, stores: &[Store]) -> Result<(), String> {
    let ids: Vec<u64> = std::mem::take(&mut sh.live.lock().expect("live").born)
        .into_keys()
        .collect();
    let t = Instant::now();
    let n = remove_all(sh, stores, ids, sh.job.gc_depth).await?;
    sh.out.lock().expect("outcome").teardown = (n, t.elapsed().as_secs_f64());
    stores[0].remove(&sh.job.dir, true).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{check_block, popular_rank};
    use crate::bench_verify::{base, stamp};

    #[test]
    fn a_block_passes_only_with_its_own_bytes() {
        let b = base(4096);
        assert!(check_block(&b, 7, &stamp(&b, 7, 8)).is_ok());
        // Another block's bytes, a stale generation, a torn block, zeros.
        assert!(check_block(&b, 7, &stamp(&b, 6, 7)).is_err());
        assert!(check_block(&b, 7, &stamp(&b, 7, 3)).is_err());
        assert!(check_block(&b, 7, &stamp(&b, 7, 8)[..4000]).is_err());
        assert!(check_block(&b, 7, &vec![0; 4096]).is_err());
    }

    #[test]
    fn popularity_is_skewed_toward_the_newest_and_uniform_at_skew_zero() {
        let n = 1000;
        let draws = |skew: f64| {
            let mut top = 0;
            for i in 0..10_000 {
                let u = (i as f64 + 0.5) / 10_000.0;
                let r = popular_rank(n, skew, u);
                assert!(r < n);
                if r < 10 {
                    top += 1;
                }
            }
            top
        };
        // Uniform: the top 1% gets 1% of the draws.
        assert!((90..=110).contains(&draws(0.0)), "{}", draws(0.0));
        // Skew 1: log-uniform, the top 10 of 1000 get ln(11)/ln(1001) ≈ 35%.
        let d = draws(1.0);
        assert!((3300..=3600).contains(&d), "{d}");
        assert!(draws(1.2) > d);
    }
}
