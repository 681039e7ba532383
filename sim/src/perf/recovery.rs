//! One storage node fails under read load and its data is copied back to it: for every chain
//! holding one of its targets, the surviving replicas stream the target's bytes in equal parts
//! SSD → their NIC → the returning node's NIC → its SSD. Meanwhile closed-loop clients read
//! from the surviving replicas. Which peers serve the copies is the chain table's doing.
//!
//! Assumption: every serving replica holds every committed chunk, so a copy may read from any
//! of them, and the model splits it evenly. 3FS's resync streams from the chain's predecessor
//! alone, which halves (for three replicas) the peers serving copies under either table.
//!
//! Not here: the copy's chunk-by-chunk protocol (a copy is one flow per source), write
//! traffic, or a rate limit on recovery (the copies compete fairly with the reads).

use super::engine::{Request, Source};
use super::layout::Layout;
use super::peak_read::Readers;

/// Tags of recovery flows (readers' tags are client numbers).
const COPY: u64 = 1 << 40;

/// Recovery copies plus foreground readers.
pub struct Recovery<'a> {
    layout: &'a Layout,
    failed: u32,
    target_bytes: f64,
    latency: f64,
    readers: Readers<'a>,
    /// Copies not yet done.
    pub copies_left: usize,
    /// When the last copy ended, seconds.
    pub done_at: Option<f64>,
    /// Bytes each node served to the copies.
    pub served: Vec<f64>,
}

impl<'a> Recovery<'a> {
    /// Recovery of node `failed` (`target_bytes` per target) under `concurrency` reads of
    /// `read_bytes` per client.
    pub fn new(
        layout: &'a Layout,
        failed: u32,
        target_bytes: f64,
        seed: u64,
        read_bytes: f64,
        concurrency: u32,
        latency: f64,
    ) -> Self {
        Self {
            layout,
            failed,
            target_bytes,
            latency,
            readers: Readers::new(layout, seed, read_bytes, concurrency, latency).avoiding(failed),
            copies_left: 0,
            done_at: None,
            served: vec![0.0; layout.storage as usize],
        }
    }
}

impl Source for Recovery<'_> {
    fn start(&mut self, out: &mut Vec<Request>) {
        let l = self.layout;
        for k in 0..l.chains() {
            let (nodes, disk) = l.chain(k);
            if !nodes.contains(&self.failed) {
                continue;
            }
            let alive: Vec<u32> = nodes
                .iter()
                .copied()
                .filter(|&n| n != self.failed)
                .collect();
            for &from in &alive {
                let part = self.target_bytes / alive.len() as f64;
                self.served[from as usize] += part;
                self.copies_left += 1;
                out.push(Request {
                    path: l.copy_path(from, self.failed, disk),
                    bytes: part,
                    delay: self.latency,
                    tag: COPY | u64::from(k),
                });
            }
        }
        self.readers.start(out);
    }

    fn finished(&self) -> bool {
        self.done_at.is_some()
    }

    fn done(&mut self, tag: u64, now: f64, out: &mut Vec<Request>) {
        if tag & COPY != 0 {
            self.copies_left -= 1;
            if self.copies_left == 0 {
                self.done_at = Some(now);
            }
            return;
        }
        self.readers.done(tag, now, out);
    }
}
