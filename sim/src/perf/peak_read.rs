//! 3FS's peak-read test in the flow model: every client keeps `concurrency` reads of
//! `read_bytes` in flight, each to a chunk on a chain drawn at random and served by one of its
//! replicas drawn at random (CRAQ reads any serving replica), bytes flowing SSD → storage NIC →
//! (fabric core) → client NIC. The result is aggregate read throughput over time against the
//! roofline (storage NICs, client NICs, SSDs) and which of them binds.
//!
//! Not here: writes, metadata, client CPU, or the background training traffic's own dynamics
//! (it takes a fixed share of the storage NICs).

use t3fs_scenario::rng::Rng;

use super::engine::{Request, Source};
use super::layout::Layout;

/// Closed-loop readers.
pub struct Readers<'a> {
    layout: &'a Layout,
    rng: Rng,
    read_bytes: f64,
    concurrency: u32,
    latency: f64,
    /// A node that serves no reads (failed).
    except: Option<u32>,
}

impl<'a> Readers<'a> {
    /// Readers on `layout`, drawing chains from `seed`.
    pub fn new(
        layout: &'a Layout,
        seed: u64,
        read_bytes: f64,
        concurrency: u32,
        latency: f64,
    ) -> Self {
        Self {
            layout,
            rng: Rng::new(seed),
            read_bytes,
            concurrency,
            latency,
            except: None,
        }
    }

    /// The same readers, reading only from replicas other than `node`'s.
    pub fn avoiding(self, node: u32) -> Self {
        Self {
            except: Some(node),
            ..self
        }
    }

    fn read(&mut self, client: u32) -> Request {
        let (node, disk) = self.layout.random_replica(&mut self.rng, self.except);
        Request {
            path: self.layout.read_path(node, disk, client),
            bytes: self.read_bytes,
            delay: self.latency,
            tag: u64::from(client),
        }
    }
}

impl Source for Readers<'_> {
    fn start(&mut self, out: &mut Vec<Request>) {
        for c in 0..self.layout.clients {
            for _ in 0..self.concurrency {
                let r = self.read(c);
                out.push(r);
            }
        }
    }

    fn done(&mut self, tag: u64, _now: f64, out: &mut Vec<Request>) {
        let r = self.read(tag as u32);
        out.push(r);
    }
}
