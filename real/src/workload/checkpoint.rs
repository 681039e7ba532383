//! `t3fs bench checkpoint`: a distributed checkpoint saved and loaded the way
//! torch.distributed.checkpoint does it. N ranks each write their own shard file of S/N bytes
//! in pieces, in order, then make it durable; once every shard is durable, rank 0 writes the
//! manifest (`.metadata`: every shard's name, length and piece size) last, so a checkpoint
//! without a manifest is an incomplete one and is never loaded. Loading reads the manifest
//! first, then N ranks read the shards it names, and every byte is checked against what was
//! saved.
//!
//! Invariant: a piece carries its shard and its piece number in a header and trailer over a
//! pseudo-random fill (`bench_verify::stamp`), so a piece of zeros, of another shard or from
//! another offset fails the load. Not here: the store (store.rs), bounds and the report
//! (run_dir.rs).

use std::time::Instant;

use tokio::task::JoinSet;

use super::recorder::Recorder;
use super::store::Store;
use crate::bench_verify;

/// What to save and load.
#[derive(Clone, Debug)]
pub struct CheckpointJob {
    /// Ranks: writers on save, readers on load (one shard each).
    pub ranks: usize,
    /// Bytes of the whole checkpoint (split evenly over the shards, in whole pieces).
    pub size: u64,
    /// Bytes per write and per read call.
    pub piece: u64,
    /// The checkpoint's directory in the store (made if missing; must not hold a checkpoint).
    pub dir: String,
}

/// What happened.
#[derive(Debug)]
pub struct CheckpointOutcome {
    /// Seconds from the first shard write to the manifest's durability.
    pub save_secs: f64,
    /// Seconds from reading the manifest to the last shard verified.
    pub load_secs: f64,
    /// Bytes saved (and loaded).
    pub bytes: u64,
    /// Pieces checked equal to what was saved, of all pieces.
    pub verified: (u64, u64),
    /// The first mismatch, if any.
    pub mismatch: Option<String>,
}

impl CheckpointJob {
    /// Pieces per shard.
    pub fn pieces_per_shard(&self) -> u64 {
        (self.size / self.ranks.max(1) as u64 / self.piece).max(1)
    }

    fn check(&self) -> Result<(), String> {
        if self.ranks == 0 {
            return Err("ranks must be at least 1".into());
        }
        if self.piece < bench_verify::MIN_BS {
            return Err(format!(
                "piece must be at least {} bytes",
                bench_verify::MIN_BS
            ));
        }
        Ok(())
    }

    fn shard(&self, rank: usize) -> String {
        format!("{}/__{rank}_0.distcp", self.dir)
    }

    fn manifest(&self) -> String {
        format!("{}/.metadata", self.dir)
    }

    fn manifest_text(&self) -> String {
        let shards: Vec<String> = (0..self.ranks)
            .map(|r| {
                format!(
                    "{{\"file\": \"__{r}_0.distcp\", \"bytes\": {}}}",
                    self.pieces_per_shard() * self.piece
                )
            })
            .collect();
        format!(
            "{{\"format\": \"t3fs-bench-checkpoint/1\", \"piece\": {}, \"pieces\": {}, \"shards\": [{}]}}\n",
            self.piece,
            self.pieces_per_shard(),
            shards.join(", ")
        )
    }
}

/// Saves the checkpoint with one store per rank (`stores[r]`), then loads it back with the
/// same stores and checks every byte. `rec` gets `save`, `fsync`, `manifest` and `load`
/// operations and the phases `save` and `load`.
pub async fn run(
    job: &CheckpointJob,
    stores: &[Store],
    rec: &Recorder,
) -> Result<CheckpointOutcome, String> {
    let save_secs = save(job, stores, rec).await?;
    let (load_secs, verified, mismatch) = load(job, stores, rec).await?;
    Ok(CheckpointOutcome {
        save_secs,
        load_secs,
        bytes: job.ranks as u64 * job.pieces_per_shard() * job.piece,
        verified,
        mismatch,
    })
}

fn check_stores(job: &CheckpointJob, stores: &[Store]) -> Result<(), String> {
    job.check()?;
    if stores.len() != job.ranks {
        return Err(format!("{} stores for {} ranks", stores.len(), job.ranks));
    }
    Ok(())
}

/// The save: every rank's shard, then the manifest; the seconds it took.
pub async fn save(job: &CheckpointJob, stores: &[Store], rec: &Recorder) -> Result<f64, String> {
    check_stores(job, stores)?;
    let base = std::sync::Arc::new(bench_verify::base(job.piece));
    stores[0].mkdir_all(&job.dir).await?;
    rec.phase("save");
    let t = Instant::now();
    each_rank(job, stores, |r, s, j| {
        save_shard(r, s, j, base.clone(), rec.clone())
    })
    .await?;
    write_manifest(job, &stores[0], rec).await?;
    Ok(t.elapsed().as_secs_f64())
}

/// The load: the manifest, then every rank's shard, checked; the seconds it took, (pieces
/// equal to what was saved, pieces), and the first that was not.
pub async fn load(
    job: &CheckpointJob,
    stores: &[Store],
    rec: &Recorder,
) -> Result<(f64, (u64, u64), Option<String>), String> {
    check_stores(job, stores)?;
    let base = std::sync::Arc::new(bench_verify::base(job.piece));
    rec.phase("load");
    let t = Instant::now();
    let pieces = read_manifest(job, &stores[0]).await?;
    let checks = each_rank(job, stores, |r, s, j| {
        load_shard(r, s, j, pieces, base.clone(), rec.clone())
    })
    .await?;
    let ok: u64 = checks.iter().map(|c| c.0).sum();
    let mismatch = checks.into_iter().find_map(|c| c.1);
    Ok((
        t.elapsed().as_secs_f64(),
        (ok, job.ranks as u64 * pieces),
        mismatch,
    ))
}

/// Runs `f` for every rank at once; their answers in rank order, or the first error.
async fn each_rank<T, F, Fut>(job: &CheckpointJob, stores: &[Store], f: F) -> Result<Vec<T>, String>
where
    T: Send + 'static,
    F: Fn(usize, Store, CheckpointJob) -> Fut,
    Fut: std::future::Future<Output = Result<T, String>> + Send + 'static,
{
    let mut set = JoinSet::new();
    for (r, s) in stores.iter().enumerate() {
        let fut = f(r, s.clone(), job.clone());
        set.spawn(async move { (r, fut.await) });
    }
    let mut out: Vec<Option<T>> = (0..stores.len()).map(|_| None).collect();
    while let Some(j) = set.join_next().await {
        let (r, v) = j.map_err(|e| e.to_string())?;
        out[r] = Some(v.map_err(|e| format!("rank {r}: {e}"))?);
    }
    Ok(out.into_iter().flatten().collect())
}

async fn save_shard(
    rank: usize,
    store: Store,
    job: CheckpointJob,
    base: std::sync::Arc<Vec<u8>>,
    rec: Recorder,
) -> Result<(), String> {
    let h = store.create(&job.shard(rank)).await?;
    let n = job.pieces_per_shard();
    for k in 0..n {
        let data = bench_verify::stamp(&base, k, rank as u64 + 1);
        let t = Instant::now();
        store.write(&h, k * job.piece, data).await?;
        rec.done("save", job.piece, t.elapsed());
    }
    let t = Instant::now();
    store.close(h, n * job.piece).await?;
    rec.done("fsync", 0, t.elapsed());
    Ok(())
}

async fn write_manifest(job: &CheckpointJob, store: &Store, rec: &Recorder) -> Result<(), String> {
    let text = job.manifest_text().into_bytes();
    let len = text.len() as u64;
    let t = Instant::now();
    let h = store.create(&job.manifest()).await?;
    store.write(&h, 0, text).await?;
    store.close(h, len).await?;
    rec.done("manifest", len, t.elapsed());
    Ok(())
}

/// Pieces per shard, as the manifest says (and it must agree with the job).
async fn read_manifest(job: &CheckpointJob, store: &Store) -> Result<u64, String> {
    let text = store
        .read_whole(vec![job.manifest()])
        .await?
        .pop()
        .flatten()
        .ok_or("no manifest: the checkpoint is incomplete")?;
    let text = String::from_utf8(text).map_err(|_| "manifest: not UTF-8".to_string())?;
    if text != job.manifest_text() {
        return Err(format!("manifest differs from what was saved: {text}"));
    }
    Ok(job.pieces_per_shard())
}

/// (pieces equal to what was saved, the first that was not).
async fn load_shard(
    rank: usize,
    store: Store,
    job: CheckpointJob,
    pieces: u64,
    base: std::sync::Arc<Vec<u8>>,
    rec: Recorder,
) -> Result<(u64, Option<String>), String> {
    let path = job.shard(rank);
    let (h, len) = store.open(&path).await?;
    if len != pieces * job.piece {
        return Ok((
            0,
            Some(format!("{path}: {len} bytes, saved {}", pieces * job.piece)),
        ));
    }
    let (mut ok, mut bad) = (0, None);
    for k in 0..pieces {
        let t = Instant::now();
        let data = store.read(&h, k * job.piece, job.piece).await?;
        rec.done("load", data.len() as u64, t.elapsed());
        match bench_verify::decode(&data, &base, k) {
            Ok(g) if g == rank as u64 + 1 => ok += 1,
            Ok(g) => bad = bad.or(Some(format!("{path} piece {k}: from shard {}", g - 1))),
            Err(e) => bad = bad.or(Some(format!("{path}: {e}"))),
        }
    }
    Ok((ok, bad))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(dir: &str) -> CheckpointJob {
        CheckpointJob {
            ranks: 3,
            size: 3 * 4 * 4096,
            piece: 4096,
            dir: dir.into(),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_saved_checkpoint_loads_equal_and_a_damaged_or_unfinished_one_does_not() {
        let root = std::env::temp_dir().join(format!("t3fs-ckpt-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        let stores = vec![Store::Posix(root.clone()); 3];
        let rec = Recorder::new(std::time::Duration::from_millis(100));
        let o = run(&job("/a"), &stores, &rec).await.unwrap();
        assert_eq!(o.verified, (12, 12));
        assert!(o.mismatch.is_none());
        // Rank 1's piece 2 overwritten by rank 0's piece 2 (a write that landed in the wrong
        // shard): the load names it.
        let j = job("/b");
        save(&j, &stores, &rec).await.unwrap();
        let base = bench_verify::base(4096);
        let shard = root.join("b/__1_0.distcp");
        let mut bytes = std::fs::read(&shard).unwrap();
        bytes[2 * 4096..3 * 4096].copy_from_slice(&bench_verify::stamp(&base, 2, 1));
        std::fs::write(&shard, bytes).unwrap();
        let (_, verified, mismatch) = load(&j, &stores, &rec).await.unwrap();
        assert_eq!(verified, (11, 12));
        assert!(mismatch.unwrap().contains("piece 2: from shard 0"));
        // No manifest: an incomplete checkpoint is refused, not loaded.
        std::fs::remove_file(root.join("b/.metadata")).unwrap();
        let e = load(&j, &stores, &rec).await.unwrap_err();
        assert!(e.contains("incomplete"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
