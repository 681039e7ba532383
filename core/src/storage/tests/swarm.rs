//! Regression tests of storage rules the simulator's swarm found missing (each names its seed):
//! late full-chunk copies, sync rounds that outlive their chain version, and exactly-once
//! records across a restart.

use super::*;

/// Swarm seed 2859: spiked copies of full chunks shipped to a SYNCING successor arrived after
/// newer ones and rolled the replica back below an acknowledged write.
#[test]
fn a_late_full_chunk_never_rolls_a_syncing_replica_back() {
    use PublicState::{Serving, Syncing};
    let cfg = StorageConfig::new(NodeId(3), vec![(TargetId(3), ReadMode::Committed)]);
    let syncing = routing(1, 1, &[(1, Serving), (2, Serving), (3, Syncing)]);
    let mut h = Harness {
        node: StorageNode::new(cfg, BTreeMap::new(), syncing),
        store: MemChunkStore::new(),
    };
    // A SYNCING target is ONLINE until its round's SyncDone.
    h.node.targets.get_mut(&TargetId(3)).unwrap().local_state = LocalState::Online;
    let full = |seq: u64, u: u32, data: &[u8]| UpdateReq {
        kind: UpdateKind::Replace {
            data: data.to_vec().into(),
        },
        is_syncing: true,
        ..forwarded(seq, 1, u, data)
    };
    let v8 = full(8, 8, b"eight");
    let acts = h.recv(NodeId(2), Msg::Update(v8.clone()));
    assert_eq!(acts.len(), 1, "one install: {acts:?}");
    let acts = h.complete(&acts[0]);
    let now = Some(result(8, 1, b"eight"));
    assert_eq!(acts, vec![reply(NodeId(2), &v8, Status::Ok, now)]);
    // The late copy of v6 is answered with the chunk as it is, and nothing is written.
    let v6 = full(6, 6, b"six");
    assert_eq!(
        h.recv(NodeId(2), Msg::Update(v6.clone())),
        vec![reply(NodeId(2), &v6, Status::Ok, now)]
    );
    assert_eq!(h.node.counters().stale_installs, 1);
    // The next version still installs.
    let v9 = full(9, 9, b"nine");
    let acts = h.recv(NodeId(2), Msg::Update(v9.clone()));
    let acts = h.complete(&acts[0]);
    assert_eq!(
        acts,
        vec![reply(
            NodeId(2),
            &v9,
            Status::Ok,
            Some(result(9, 1, b"nine"))
        )]
    );
}

/// Swarm seed 19 (an earlier generator): a target synced by one predecessor stayed UPTODATE
/// while its view skipped to a later SYNCING chain with another predecessor, and mgmtd promoted
/// it without that predecessor's pending write. A sync round vouches for its chain version only.
#[test]
fn an_uptodate_from_an_older_sync_round_does_not_survive_a_new_chain_version() {
    use PublicState::{Offline, Serving, Syncing};
    let cfg = StorageConfig::new(NodeId(3), vec![(TargetId(3), ReadMode::Committed)]);
    let mut h = Harness {
        node: StorageNode::new(
            cfg,
            BTreeMap::new(),
            routing(1, 1, &[(1, Serving), (2, Serving), (3, Syncing)]),
        ),
        store: MemChunkStore::new(),
    };
    let local = |h: &Harness| h.node.targets[&TargetId(3)].local_state;
    h.node.targets.get_mut(&TargetId(3)).unwrap().local_state = LocalState::Online;
    let done = crate::msg::SyncReq {
        chain: VersionedChain {
            chain: C1,
            version: ChainVersion(1),
        },
        target: TargetId(3),
    };
    h.recv(NodeId(2), Msg::SyncDone(done));
    assert_eq!(local(&h), LocalState::UpToDate);
    // Same chain version (another routing change elsewhere): the sync still holds.
    h.recv(
        NodeId(0),
        Msg::Routing(routing(2, 1, &[(1, Serving), (2, Serving), (3, Syncing)])),
    );
    assert_eq!(local(&h), LocalState::UpToDate);
    // The chain moved on with the target still SYNCING (its predecessor failed): sync again.
    h.recv(
        NodeId(0),
        Msg::Routing(routing(3, 2, &[(1, Serving), (3, Syncing), (2, Offline)])),
    );
    assert_eq!(local(&h), LocalState::Online);
}

/// Swarm seed 2001: a head restarted (disk kept) with a client's write applied; the client's
/// retry then ran again as a new version. The exactly-once record is kept with the chunk and
/// adopted at boot, so the retry is answered with the original result.
#[test]
fn a_restarted_target_answers_a_retry_of_a_write_it_applied() {
    use PublicState::Serving;
    let alone = routing(1, 1, &[(1, Serving)]);
    let cfg = StorageConfig::new(NodeId(1), vec![(TargetId(1), ReadMode::Committed)]);
    let mut h = Harness {
        node: StorageNode::new_in_service(cfg.clone(), BTreeMap::new(), alone.clone()),
        store: MemChunkStore::new(),
    };
    let req = write(1, 1, b"once");
    let acts = h.recv(CLIENT, Msg::Write(req.clone()));
    let acts = h.complete(&acts[0]);
    let commit = acts
        .iter()
        .find(|a| matches!(a, ActionOf::Io { .. }))
        .expect("a single-replica chain commits at once");
    let acts = h.complete(commit);
    let done = Some(result(1, 1, b"once"));
    assert_eq!(acts, vec![reply(CLIENT, &req, Status::Ok, done)]);
    // The process restarts from its disk; the client, which never saw the reply, retries.
    let metas = BTreeMap::from([(TargetId(1), h.store.metas())]);
    h.node = StorageNode::new_in_service(cfg, metas, alone);
    let retry = UpdateReq { retry: 1, ..req };
    assert_eq!(
        h.recv(CLIENT, Msg::Write(retry.clone())),
        vec![reply(CLIENT, &retry, Status::Ok, done)],
        "answered from the durable record, not applied again"
    );
}
