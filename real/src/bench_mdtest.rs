//! `t3fs bench meta --cluster DIR`: mdtest's phases through the meta service over TCP.
//!
//! Knobs keep mdtest's meanings: `-n` items per rank, `-u` a unique directory per rank (else
//! every rank works in one shared tree), `-z` tree depth and `-b` branching (items are spread
//! evenly over every directory of the tree), ranks as concurrent clients. Phases, each timed from
//! the moment every rank starts it until the last rank finishes: tree creation, file creation,
//! stat, read (open for reading), removal, tree removal. Each rank issues one request at a time,
//! as an mdtest rank does. Not here: the in-process KV phases of `t3fs bench meta` without
//! `--cluster` (t3fs's CLI).

use std::time::{Duration, Instant};

use t3fs_client::client::{Client, ClientOptions};

/// An mdtest run.
#[derive(Clone, Debug)]
pub struct MdJob {
    /// Concurrent clients.
    pub ranks: usize,
    /// Items (files) per rank (`-n`).
    pub items: u64,
    /// A unique directory per rank (`-u`).
    pub unique_dir: bool,
    /// Tree depth (`-z`).
    pub depth: u32,
    /// Tree branching (`-b`).
    pub branch: u32,
}

/// One phase's figure.
#[derive(Clone, Debug)]
pub struct Phase {
    /// mdtest's name of it.
    pub name: &'static str,
    /// Operations done.
    pub ops: u64,
    /// Wall time.
    pub elapsed: Duration,
}

impl Phase {
    /// Operations per second.
    pub fn rate(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Directories of a tree of `depth` levels below `root` with `branch` children each, parents
/// first.
fn tree(root: &str, depth: u32, branch: u32) -> Vec<String> {
    let mut out = vec![root.to_string()];
    let mut level = vec![root.to_string()];
    for _ in 0..depth {
        let mut next = Vec::new();
        for d in &level {
            for k in 0..branch.max(1) {
                next.push(format!("{d}/dir.{k}"));
            }
        }
        out.extend(next.iter().cloned());
        level = next;
    }
    out
}

/// The files of rank `r`: `items` spread over `dirs`.
fn files(dirs: &[String], r: usize, items: u64) -> Vec<String> {
    (0..items)
        .map(|i| format!("{}/file.mdtest.{r}.{i}", dirs[(i as usize) % dirs.len()]))
        .collect()
}

type Step =
    fn(
        &Client,
        String,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send + '_>>;

async fn phase(
    clients: &[Client],
    name: &'static str,
    work: Vec<Vec<String>>,
    step: Step,
) -> Result<Phase, String> {
    let ops: u64 = work.iter().map(|w| w.len() as u64).sum();
    let t = Instant::now();
    let mut running = Vec::new();
    for (c, paths) in clients.iter().zip(work) {
        running.push(async move {
            for p in paths {
                step(c, p).await?;
            }
            Ok::<(), String>(())
        });
    }
    // Every rank's requests go out together; the phase ends with the slowest rank.
    let results = join_all(running).await;
    for r in results {
        r?;
    }
    Ok(Phase {
        name,
        ops,
        elapsed: t.elapsed(),
    })
}

/// Polls every future to completion concurrently on the current task.
async fn join_all<F: std::future::Future>(futs: Vec<F>) -> Vec<F::Output> {
    let mut futs: Vec<_> = futs.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in futs.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *o = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().map(|o| o.expect("ready")).collect()
}

/// Runs `job`; the phases in mdtest's order.
pub async fn run(opts: ClientOptions, job: MdJob) -> Result<Vec<Phase>, String> {
    if job.ranks == 0 || job.items == 0 {
        return Err("ranks and -n must be at least 1".into());
    }
    let mut r = [0u8; 8];
    let _ = getrandom::fill(&mut r);
    let base = format!("/mdtest-{:x}", u64::from_le_bytes(r));
    let clients = connect_ranks(&opts, job.ranks).await?;
    let trees = rank_trees(&job, &base);
    clients[0].mkdir(&base).await.map_err(|e| e.to_string())?;
    // Tree creation: with a shared tree, rank 0 makes it.
    let dir_work: Vec<Vec<String>> = (0..job.ranks)
        .map(|k| {
            if job.unique_dir || k == 0 {
                trees[k].clone()
            } else {
                Vec::new()
            }
        })
        .collect();
    let file_work: Vec<Vec<String>> = (0..job.ranks)
        .map(|k| files(&trees[k], k, job.items))
        .collect();
    let out = phases(&clients, dir_work, file_work).await?;
    let _ = clients[0].remove(&base, false).await;
    for c in &clients {
        c.close().await;
    }
    Ok(out)
}

/// One client per rank, connected in rank order.
async fn connect_ranks(opts: &ClientOptions, ranks: usize) -> Result<Vec<Client>, String> {
    let mut clients = Vec::new();
    for _ in 0..ranks {
        clients.push(
            Client::connect(opts.clone())
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    Ok(clients)
}

/// Each rank's directory tree under `base`: its own (`-u`) or the shared one.
fn rank_trees(job: &MdJob, base: &str) -> Vec<Vec<String>> {
    (0..job.ranks)
        .map(|k| {
            let root = if job.unique_dir {
                format!("{base}/rank.{k}")
            } else {
                format!("{base}/shared")
            };
            tree(&root, job.depth, job.branch)
        })
        .collect()
}

/// The six phases in mdtest's order: the trees made, the files' phases ([`file_phases`]), the
/// trees removed (children first).
async fn phases(
    clients: &[Client],
    dir_work: Vec<Vec<String>>,
    file_work: Vec<Vec<String>>,
) -> Result<Vec<Phase>, String> {
    let mut out = Vec::new();
    out.push(
        phase(clients, "Tree creation", dir_work.clone(), |c, p| {
            Box::pin(async move { c.mkdir(&p).await.map_err(|e| e.to_string()) })
        })
        .await?,
    );
    out.extend(file_phases(clients, file_work).await?);
    let rm_work: Vec<Vec<String>> = dir_work
        .into_iter()
        .map(|mut v| {
            v.reverse();
            v
        })
        .collect();
    out.push(
        phase(clients, "Tree removal", rm_work, |c, p| {
            Box::pin(async move { c.remove(&p, false).await.map_err(|e| e.to_string()) })
        })
        .await?,
    );
    Ok(out)
}

/// The files' phases in mdtest's order: created, stated, opened for reading, removed.
async fn file_phases(
    clients: &[Client],
    file_work: Vec<Vec<String>>,
) -> Result<Vec<Phase>, String> {
    let mut out = Vec::new();
    out.push(
        phase(clients, "File creation", file_work.clone(), |c, p| {
            Box::pin(async move { c.create_empty(&p).await.map_err(|e| e.to_string()) })
        })
        .await?,
    );
    out.push(
        phase(clients, "File stat", file_work.clone(), |c, p| {
            Box::pin(async move { c.stat(&p).await.map(|_| ()).map_err(|e| e.to_string()) })
        })
        .await?,
    );
    out.push(
        phase(clients, "File read", file_work.clone(), |c, p| {
            Box::pin(async move {
                c.open(&p, false)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
        })
        .await?,
    );
    out.push(
        phase(clients, "File removal", file_work, |c, p| {
            Box::pin(async move { c.remove(&p, false).await.map_err(|e| e.to_string()) })
        })
        .await?,
    );
    Ok(out)
}
