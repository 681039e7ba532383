//! What the world's SERVING targets hold at the end of a run, for the agreement checker
//! (`check::agreement`): gathering only, the rule is the checker's.

use t3fs_core::ids::{ChainId, TargetId};
use t3fs_core::routing::PublicState;

use super::World;
use crate::history::Content;

impl World {
    /// Per chain of the latest published routing, what each SERVING target's disk holds
    /// committed, in chain order: the input of `check::agreement::check`.
    pub fn serving_contents(&self) -> Vec<(ChainId, Vec<(TargetId, Content)>)> {
        let w = self;
        let chains: Vec<(ChainId, Vec<(TargetId, Content)>)> = w
            .sim
            .audit
            .chains
            .values()
            .map(|c| {
                let serving = c
                    .targets
                    .iter()
                    .filter(|t| t.state == PublicState::Serving)
                    .filter_map(|t| {
                        let node = w.layout.initial.node_of(t.target)?;
                        let disk = w.nodes[node.0 as usize].ctx.disks.get(&t.target)?;
                        let content: Content = disk
                            .store
                            .chunks()
                            .iter()
                            .filter(|(_, m)| m.committed.0 > 0)
                            .map(|(id, m)| (*id, (m.committed.0, m.data.to_vec())))
                            .collect();
                        Some((t.target, content))
                    })
                    .collect();
                (c.chain, serving)
            })
            .collect();
        chains
    }
}
