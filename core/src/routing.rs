//! Routing info as mgmtd publishes it (3FS §2.4–2.6): chains with their chain versions and the
//! ordered list of targets with public states, plus which node hosts each target.
//!
//! Everyone (storage, clients) holds a copy and replaces it only with a newer
//! [`RoutingVersion`]. The derived roles (head, successor, tail) are computed here so that
//! storage and client agree on them. This module does not decide chain changes (mgmtd does).

use std::collections::BTreeMap;

use crate::ids::{ChainId, ChainVersion, NodeId, RoutingVersion, TargetId, VersionedChain};

/// A target's public state as mgmtd records it in the chain (3FS §2.6).
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum PublicState {
    /// Up to date; serves reads and writes.
    Serving,
    /// Being resynced by its predecessor; receives writes, serves no reads.
    Syncing,
    /// Back online, waiting to be chosen for syncing.
    Waiting,
    /// The last serving replica before the whole chain went down.
    LastSrv,
    /// Down.
    Offline,
}

impl PublicState {
    /// Whether the target receives forwarded updates (it is in the write path).
    pub fn in_write_path(self) -> bool {
        matches!(self, Self::Serving | Self::Syncing)
    }
}

/// A target's local state as its storage node reports it (3FS §2.6.2).
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum LocalState {
    /// Data is complete and current.
    UpToDate,
    /// The process is up but the data may be stale.
    Online,
    /// Not usable.
    Offline,
}

/// One entry of a chain's ordered target list.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct ChainTarget {
    /// The target.
    pub target: TargetId,
    /// Its public state.
    pub state: PublicState,
}

/// A chain at one chain version.
///
/// Invariant (maintained by mgmtd): serving targets come first, in chain order; the head is the
/// first target when it is serving.
#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct ChainInfo {
    /// The chain.
    pub chain: ChainId,
    /// Its version.
    pub version: ChainVersion,
    /// Ordered targets.
    pub targets: Vec<ChainTarget>,
}

impl ChainInfo {
    /// A chain whose targets are all serving, in the given order.
    pub fn all_serving(chain: ChainId, version: ChainVersion, targets: &[TargetId]) -> Self {
        let targets = targets
            .iter()
            .map(|&target| ChainTarget {
                target,
                state: PublicState::Serving,
            })
            .collect();
        Self {
            chain,
            version,
            targets,
        }
    }

    /// `chain@version`.
    pub fn versioned(&self) -> VersionedChain {
        VersionedChain {
            chain: self.chain,
            version: self.version,
        }
    }

    /// The head: the first target, if it is serving.
    pub fn head(&self) -> Option<TargetId> {
        self.targets
            .first()
            .filter(|t| t.state == PublicState::Serving)
            .map(|t| t.target)
    }

    /// Serving targets in chain order (those that may answer reads).
    pub fn serving(&self) -> impl Iterator<Item = TargetId> + '_ {
        self.targets
            .iter()
            .filter(|t| t.state == PublicState::Serving)
            .map(|t| t.target)
    }

    /// The public state of `target` in this chain, if it is a member.
    pub fn state_of(&self, target: TargetId) -> Option<PublicState> {
        self.targets
            .iter()
            .find(|t| t.target == target)
            .map(|t| t.state)
    }

    /// The next target after `target` that is in the write path (serving or syncing), i.e.
    /// where `target` forwards updates. `None` makes `target` the tail.
    pub fn successor_of(&self, target: TargetId) -> Option<ChainTarget> {
        let pos = self.targets.iter().position(|t| t.target == target)?;
        self.targets[pos + 1..]
            .iter()
            .copied()
            .find(|t| t.state.in_write_path())
    }
}

/// The routing info: every chain and where every target lives.
#[derive(Clone, Debug, Default, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub struct RoutingInfo {
    /// Global version; strictly increases with every published change.
    pub version: RoutingVersion,
    /// Chains by id.
    pub chains: BTreeMap<ChainId, ChainInfo>,
    /// Hosting node of each target.
    pub targets: BTreeMap<TargetId, NodeId>,
    /// Chain tables by (table id, table version): ordered chain lists files are placed on.
    /// Every version is kept so old files keep resolving (3FS §2.5).
    pub chain_tables: BTreeMap<(u32, u32), Vec<ChainId>>,
}

impl RoutingInfo {
    /// The chain `id`.
    pub fn chain(&self, id: ChainId) -> Option<&ChainInfo> {
        self.chains.get(&id)
    }

    /// The node hosting `target`.
    pub fn node_of(&self, target: TargetId) -> Option<NodeId> {
        self.targets.get(&target).copied()
    }

    /// The newest version of chain table `table`.
    pub fn latest_table(&self, table: u32) -> Option<(u32, &[ChainId])> {
        self.chain_tables
            .range((table, 0)..=(table, u32::MAX))
            .next_back()
            .map(|((_, v), chains)| (*v, chains.as_slice()))
    }

    /// The chain of the targets' `target`, if any.
    pub fn chain_of_target(&self, target: TargetId) -> Option<&ChainInfo> {
        self.chains
            .values()
            .find(|c| c.targets.iter().any(|t| t.target == target))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(states: &[(u32, PublicState)]) -> ChainInfo {
        ChainInfo {
            chain: ChainId(1),
            version: ChainVersion(1),
            targets: states
                .iter()
                .map(|&(t, state)| ChainTarget {
                    target: TargetId(t),
                    state,
                })
                .collect(),
        }
    }

    #[test]
    fn roles_follow_states() {
        use PublicState::*;
        let c = chain(&[(1, Serving), (2, Serving), (3, Syncing), (4, Offline)]);
        assert_eq!(c.head(), Some(TargetId(1)));
        assert_eq!(
            c.successor_of(TargetId(1)).map(|t| t.target),
            Some(TargetId(2))
        );
        assert_eq!(
            c.successor_of(TargetId(2)).map(|t| t.target),
            Some(TargetId(3))
        );
        assert_eq!(c.successor_of(TargetId(3)), None);
        assert_eq!(
            c.serving().collect::<Vec<_>>(),
            vec![TargetId(1), TargetId(2)]
        );
        let down = chain(&[(2, Offline), (1, Serving)]);
        assert_eq!(down.head(), None);
    }
}
