//! What a real run's checkers read besides the client history: the chain audit over mgmtd's
//! routing history as the watcher saw it (§2.6.1 invariants, versions that never go back or get
//! reused with other members), and each serving target's committed chunks read from its chunk
//! store on disk once the cluster is stopped, for the replicas-agree check.
//!
//! Invariant: stores are opened only after every process of the cluster has exited, so what is
//! read is what a restart would find. Only committed chunks (version > 0) are returned; the
//! comparison itself is the simulator's (`t3fs_sim::check::agreement::check`). Not here: which
//! value is right (the history checkers say that).

use std::collections::BTreeMap;

use t3fs_core::chunk::{ChunkDone, ChunkOp, ChunkStore};
use t3fs_core::ids::{ChainId, ChunkId, IoId, TargetId};
use t3fs_core::mgmtd::chain_update::{check_chain, render};
use t3fs_core::routing::{ChainInfo, PublicState};

use crate::cluster::NodeEntry;
use crate::routing_watch::Seen;

/// One target's committed chunks: (committed version, bytes) by chunk.
pub type Content = BTreeMap<ChunkId, (u32, Vec<u8>)>;

/// Per chain, its serving targets' contents in chain order.
pub type Contents = Vec<(ChainId, Vec<(TargetId, Content)>)>;

/// The §2.6.1 audit of every chain state seen, in order: `Ok` with the number of publications
/// checked, or the first violation.
pub fn audit(seen: &[Seen]) -> Result<usize, String> {
    let mut last: BTreeMap<ChainId, &ChainInfo> = BTreeMap::new();
    for s in seen {
        let c = &s.chain;
        check_chain(&c.targets).map_err(|e| format!("chain {} v{}: {e}", c.chain, c.version.0))?;
        if let Some(old) = last.get(&c.chain) {
            if c.version < old.version {
                return Err(format!(
                    "chain {} went back from v{} to v{}",
                    c.chain, old.version.0, c.version.0
                ));
            }
            if c.version == old.version && c.targets != old.targets {
                return Err(format!(
                    "chain {} published twice at v{} with different members: {} vs {}",
                    c.chain,
                    c.version.0,
                    render(&old.targets),
                    render(&c.targets)
                ));
            }
        }
        last.insert(c.chain, c);
    }
    Ok(seen.len())
}

/// The newest state seen of every chain.
pub fn newest(seen: &[Seen]) -> BTreeMap<ChainId, ChainInfo> {
    let mut out = BTreeMap::new();
    for s in seen {
        out.insert(s.chain.chain, s.chain.clone());
    }
    out
}

fn run_op(s: &mut dyn ChunkStore, op: ChunkOp) -> Result<ChunkDone, String> {
    s.submit(IoId(0), op);
    let mut done = Vec::new();
    loop {
        s.poll_completions(&mut done);
        if let Some((_, r)) = done.pop() {
            return r.map_err(|e| format!("{e:?}"));
        }
        s.wait(std::time::Duration::from_millis(1));
    }
}

/// The committed chunks of the store in `dir` (of kind `kind`).
pub fn content(kind: &str, dir: &std::path::Path) -> Result<Content, String> {
    let mut s = t3fs_services::serve::open_store(kind, dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let ChunkDone::Listed(metas) = run_op(s.as_mut(), ChunkOp::List)? else {
        return Err(format!(
            "{}: listing returned something else",
            dir.display()
        ));
    };
    let mut out = Content::new();
    for m in metas.into_iter().filter(|m| m.committed.0 > 0) {
        let op = ChunkOp::Read {
            chunk: m.chunk,
            offset: 0,
            len: m.len,
            uncommitted: false,
            unverified: false,
        };
        match run_op(s.as_mut(), op)? {
            ChunkDone::Read(Some(r)) => {
                out.insert(m.chunk, (r.version.0, r.data.into_vec()));
            }
            other => return Err(format!("reading {:?}: {other:?}", m.chunk)),
        }
    }
    Ok(out)
}

/// Per chain (newest state seen), its SERVING targets' committed contents in chain order.
pub fn serving_contents(
    seen: &[Seen],
    hosts: &BTreeMap<TargetId, t3fs_core::ids::NodeId>,
    nodes: &[NodeEntry],
) -> Result<Contents, String> {
    let mut out = Vec::new();
    for (id, c) in newest(seen) {
        let mut targets = Vec::new();
        for t in c.targets.iter().filter(|t| t.state == PublicState::Serving) {
            let node = hosts
                .get(&t.target)
                .ok_or_else(|| format!("no node hosts {} in the routing seen", t.target))?;
            let n = nodes
                .iter()
                .find(|n| u64::from(n.cfg.node.id) == node.0)
                .ok_or_else(|| format!("node {} has no config", node.0))?;
            let dir = n.cfg.node.data.join(format!("target-{}", t.target.0));
            targets.push((t.target, content(&n.cfg.node.store, &dir)?));
        }
        out.push((id, targets));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(version: u32, states: &[PublicState]) -> Seen {
        Seen {
            at: std::time::Instant::now(),
            chain: crate::routing_watch::test_chain(version, states),
        }
    }

    #[test]
    fn audit_catches_bad_states_and_versions() {
        use PublicState::*;
        let good = [seen(1, &[Serving, Serving]), seen(2, &[Serving, Offline])];
        assert_eq!(audit(&good), Ok(2));
        let back = [seen(2, &[Serving, Serving]), seen(1, &[Serving, Serving])];
        assert!(audit(&back).unwrap_err().contains("went back"));
        let reused = [seen(2, &[Serving, Serving]), seen(2, &[Serving, Offline])];
        assert!(audit(&reused).unwrap_err().contains("published twice"));
        let bad = [seen(3, &[Serving, LastSrv])];
        assert!(audit(&bad).is_err());
    }
}
