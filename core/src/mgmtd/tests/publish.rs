//! The writer's publish checks trip (they exist in debug builds only, and so do these tests).

use crate::ids::{ChainId, ChainVersion, RoutingVersion, TargetId};
use crate::mgmtd::writer::debug_assert_publishable;
use crate::routing::{ChainInfo, ChainTarget, PublicState, RoutingInfo};

fn routing(version: u64, chain: ChainInfo) -> RoutingInfo {
    let mut r = RoutingInfo {
        version: RoutingVersion(version),
        ..RoutingInfo::default()
    };
    r.chains.insert(chain.chain, chain);
    r
}

fn serving(version: u32) -> ChainInfo {
    ChainInfo::all_serving(
        ChainId(1),
        ChainVersion(version),
        &[TargetId(1), TargetId(2)],
    )
}

#[test]
fn a_publish_that_keeps_the_promises_passes() {
    debug_assert_publishable(&routing(4, serving(2)), &routing(5, serving(3)));
}

#[test]
#[should_panic(expected = "routing version")]
fn a_routing_version_that_does_not_grow_trips() {
    debug_assert_publishable(&routing(5, serving(2)), &routing(5, serving(3)));
}

#[test]
#[should_panic(expected = "chain version")]
fn a_chain_version_that_goes_back_trips() {
    debug_assert_publishable(&routing(4, serving(3)), &routing(5, serving(2)));
}

#[test]
#[should_panic(expected = "breaking §2.6.1")]
fn a_chain_with_serving_and_lastsrv_trips() {
    let mut bad = serving(3);
    bad.targets[1] = ChainTarget {
        target: TargetId(2),
        state: PublicState::LastSrv,
    };
    debug_assert_publishable(&routing(4, serving(2)), &routing(5, bad));
}
