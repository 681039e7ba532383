//! Property tests of the wire codec: random messages round-trip exactly; random, truncated and
//! mutated frames decode to an error or to a message that re-encodes canonically, and never
//! panic. A small splitmix64 generator keeps the test dependency-free and reproducible: a
//! failure prints the seed of the case.

use super::*;
use crate::chunk::UpdateKind;
use crate::ids::*;
use crate::routing::ChainInfo;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn bytes(&mut self, max: u64) -> Vec<u8> {
        (0..self.below(max + 1))
            .map(|_| self.next() as u8)
            .collect()
    }
}

/// A server's short id or a client's wide one, so both wire forms round-trip.
fn node_id(r: &mut Rng) -> NodeId {
    match r.below(3) {
        0 => NodeId(u64::from(r.next() as u32)),
        1 => NodeId(u64::from(u32::MAX) + r.below(2)),
        _ => NodeId(r.next()),
    }
}

fn status(r: &mut Rng) -> Status {
    match r.below(17) {
        0 => Status::Ok,
        1 => Status::Busy,
        2 => Status::ChainVersionMismatch,
        3 => Status::ChannelLocked,
        4 => Status::ChecksumMismatch,
        5 => Status::DiskError,
        6 => Status::DuplicateUpdate,
        7 => Status::ForwardFailed,
        8 => Status::InvalidRequest,
        9 => Status::MissingUpdate,
        10 => Status::NotHead,
        11 => Status::NotCommitted,
        12 => Status::NoTarget,
        13 => Status::StaleChainVersion {
            current: ChainVersion(r.next() as u32),
        },
        14 => Status::TargetNotServing,
        15 => Status::NoLease,
        _ => Status::NoSpace,
    }
}

fn kind(r: &mut Rng) -> UpdateKind {
    match r.below(5) {
        0 => UpdateKind::Write {
            offset: r.next() as u32,
            data: r.bytes(64).into(),
        },
        1 => UpdateKind::Remove,
        2 => UpdateKind::Truncate {
            len: r.next() as u32,
        },
        3 => UpdateKind::Extend {
            len: r.next() as u32,
        },
        _ => UpdateKind::Replace {
            data: r.bytes(64).into(),
        },
    }
}

fn update(r: &mut Rng) -> UpdateReq {
    UpdateReq {
        tag: MessageTag {
            client: ClientId(r.next()),
            request: RequestId(r.next()),
            channel: ChannelId(r.next() as u32),
            seqnum: SeqNum(r.next()),
        },
        chain: VersionedChain {
            chain: ChainId(r.next() as u32),
            version: ChainVersion(r.next() as u32),
        },
        chunk: ChunkId::new(r.next(), r.next() as u32),
        kind: kind(r),
        chunk_size: r.next() as u32,
        update_version: ChunkVersion(r.next() as u32),
        checksum: r.next() as u32,
        retry: r.next() as u32,
        is_syncing: r.below(2) == 1,
    }
}

fn meta_op(r: &mut Rng) -> crate::wire::MetaOp {
    use crate::wire::MetaOp;
    let path = |r: &mut Rng| format!("/d{}/n{}", r.below(4), r.below(4));
    match r.below(15) {
        14 => MetaOp::CloseUnwritten {
            sessions: (0..r.below(4))
                .map(|_| (InodeId(r.next()), r.next()))
                .collect(),
        },
        13 => MetaOp::Mknod {
            path: path(r),
            kind: crate::wire::SpecialKind::ALL[r.below(4) as usize],
            perm: r.next() as u32,
            rdev: r.next(),
        },
        10 => MetaOp::LockDirectory {
            path: path(r),
            action: [
                crate::wire::LockAction::TryLock,
                crate::wire::LockAction::PreemptLock,
                crate::wire::LockAction::Unlock,
                crate::wire::LockAction::Clear,
            ][r.below(4) as usize],
        },
        11 => MetaOp::Sync {
            inode: InodeId(r.next()),
            length: (r.below(2) == 1).then(|| crate::wire::LengthHint {
                length: r.next(),
                truncate_ver: r.next(),
            }),
            truncated: r.below(2) == 1,
        },
        12 => MetaOp::Close {
            inode: InodeId(r.next()),
            session: r.next(),
            length: None,
        },
        8 => MetaOp::SetAttr {
            path: path(r),
            attr: crate::wire::SetAttr {
                perm: Some(r.next() as u32),
                uid: None,
                gid: Some(r.next() as u32),
                mtime: Some(r.next()),
                layout: None,
                touch: r.below(2) == 1,
                nofollow: r.below(2) == 1,
                mtime_ns: r.next() as u32,
                atime: (r.below(2) == 1).then(|| r.next()),
                atime_ns: r.next() as u32,
                atime_now: r.below(2) == 1,
            },
        },
        9 => MetaOp::BatchStat {
            paths: (0..r.below(4)).map(|_| path(r)).collect(),
        },
        0 => MetaOp::Stat {
            path: path(r),
            follow: r.below(2) == 1,
        },
        1 => MetaOp::List {
            path: path(r),
            after: r.bytes(8),
            limit: r.next() as u32,
        },
        2 => MetaOp::Create {
            path: path(r),
            perm: r.next() as u32,
            exclusive: r.below(2) == 1,
            session: (r.below(2) == 1).then(|| r.below(1 << 40)),
        },
        3 => MetaOp::Mkdirs {
            path: path(r),
            perm: r.next() as u32,
            recursive: r.below(2) == 1,
        },
        4 => MetaOp::Symlink {
            path: path(r),
            target: path(r),
        },
        5 => MetaOp::Hardlink {
            existing: path(r),
            path: path(r),
        },
        6 => MetaOp::Remove {
            path: path(r),
            recursive: r.below(2) == 1,
        },
        _ => MetaOp::Rename {
            from: path(r),
            to: path(r),
        },
    }
}

fn meta_result(r: &mut Rng) -> crate::wire::MetaResult {
    use crate::wire::MetaAnswer;
    use crate::wire::{DirEntry, EntryKind, Inode, InodeKind, MetaError};
    let inode = |r: &mut Rng| Inode {
        id: InodeId(r.next()),
        kind: match r.below(4) {
            0 => InodeKind::File {
                length: r.next(),
                truncate_ver: r.next(),
                layout: (r.below(2) == 1).then(|| crate::wire::Layout {
                    chunk_size: r.next() as u32,
                    range: crate::wire::ChainRange {
                        table: r.next() as u32,
                        table_version: r.next() as u32,
                        base: r.next() as u32,
                        stripe: r.next() as u32,
                        seed: r.next(),
                    },
                    dyn_stripe: r.next() as u32,
                }),
            },
            1 => InodeKind::Directory {
                parent: InodeId(r.next()),
                name: r.bytes(8),
                lock: (r.below(2) == 1).then(|| ClientId(r.next())),
                layout: (r.below(2) == 1).then(|| crate::wire::DirLayout {
                    chunk_size: r.next() as u32,
                    stripe: r.next() as u32,
                }),
            },
            2 => InodeKind::Symlink { target: r.bytes(8) },
            _ => InodeKind::Special {
                kind: crate::wire::SpecialKind::ALL[r.below(4) as usize],
                rdev: r.next(),
            },
        },
        uid: r.next() as u32,
        gid: r.next() as u32,
        perm: r.next() as u32,
        nlink: r.next() as u32,
        ctime: r.next(),
        mtime: r.next(),
        atime: r.next(),
        atime_ns: r.next() as u32,
        mtime_ns: r.next() as u32,
    };
    match r.below(5) {
        0 => Ok(MetaAnswer::Inode(inode(r))),
        1 => Ok(MetaAnswer::Entries(
            (0..r.below(4))
                .map(|_| {
                    let e = DirEntry {
                        inode: InodeId(r.next()),
                        kind: [
                            EntryKind::File,
                            EntryKind::Directory,
                            EntryKind::Symlink,
                            EntryKind::Special(crate::wire::SpecialKind::Fifo),
                            EntryKind::Special(crate::wire::SpecialKind::Socket),
                        ][r.below(5) as usize],
                        request: RequestId(r.next()),
                    };
                    (r.bytes(8), e)
                })
                .collect(),
        )),
        2 => Ok(MetaAnswer::Done),
        3 => Err(MetaError::Invalid("a directory cannot move into itself")),
        _ => Err([
            MetaError::NotFound,
            MetaError::NotEmpty,
            MetaError::Loop,
            MetaError::Kv(crate::kv::KvError::NoSpace),
        ][r.below(4) as usize]
            .clone()),
    }
}

fn message(r: &mut Rng) -> Msg {
    match r.below(23) {
        21 => Msg::DumpChunkMeta {
            cursor: dump_cursor(r),
        },
        22 => Msg::ChunkMetaDump(crate::msg::ChunkMetaDump {
            node: node_id(r),
            targets: (0..r.below(3))
                .map(|_| crate::msg::TargetDump {
                    target: TargetId(r.next() as u32),
                    chunks: (0..r.below(4))
                        .map(|_| crate::msg::ChunkSum {
                            chunk: update(r).chunk,
                            version: crate::ids::ChunkVersion(r.next() as u32),
                            len: r.next() as u32,
                            checksum: r.next() as u32,
                        })
                        .collect(),
                })
                .collect(),
            next: dump_cursor(r),
        }),
        19 => Msg::SpaceInfo,
        20 => Msg::SpaceInfoReply(crate::msg::SpaceInfoReply {
            node: node_id(r),
            targets: (0..r.below(4))
                .map(|_| crate::msg::TargetSpace {
                    target: TargetId(r.next() as u32),
                    capacity: r.next(),
                    used: r.next(),
                })
                .collect(),
        }),
        17 => Msg::QueryLastChunk(crate::msg::QueryLastChunkReq {
            query_id: RequestId(r.next()),
            chain: update(r).chain,
            inode: InodeId(r.next()),
            begin: r.next() as u32,
            end: r.next() as u32,
            empty: r.below(2) == 1,
            retry: r.next() as u32,
        }),
        18 => Msg::QueryLastChunkReply(crate::msg::QueryLastChunkReply {
            query_id: RequestId(r.next()),
            status: status(r),
            last: (r.below(2) == 1).then(|| crate::msg::LastChunk {
                index: r.next() as u32,
                len: r.next() as u32,
            }),
        }),
        15 => Msg::MetaReq(crate::msg::meta::MetaReq {
            client: ClientId(r.next()),
            request: RequestId(r.next()),
            user: crate::wire::User {
                groups: crate::wire::Groups::of(
                    &(0..r.below(4)).map(|_| r.next() as u32).collect::<Vec<_>>(),
                ),
                ..crate::wire::User::new(r.next() as u32, r.next() as u32)
            },
            op: meta_op(r),
        }),
        16 => Msg::MetaReply(crate::msg::meta::MetaReply {
            request: RequestId(r.next()),
            result: meta_result(r),
            dirs: crate::msg::meta::DirsChanged {
                version: r.next(),
                dirs: (0..r.below(5))
                    .filter_map(|_| match meta_result(r) {
                        Ok(crate::wire::MetaAnswer::Inode(i)) => Some(i),
                        _ => None,
                    })
                    .collect(),
            },
        }),
        0 => Msg::GetRouting {
            known: RoutingVersion(r.next()),
        },
        1 => Msg::Read(ReadReq {
            read_id: RequestId(r.next()),
            chain: VersionedChain {
                chain: ChainId(r.next() as u32),
                version: ChainVersion(r.next() as u32),
            },
            chunk: ChunkId::new(r.next(), r.next() as u32),
            offset: r.next() as u32,
            len: r.next() as u32,
            retry: r.next() as u32,
        }),
        2 => Msg::ReadReply(ReadReply {
            read_id: RequestId(r.next()),
            chunk: ChunkId::new(r.next(), r.next() as u32),
            status: status(r),
            data: r.bytes(64).into(),
            version: ChunkVersion(r.next() as u32),
            checksum: r.next() as u32,
        }),
        3 => {
            let mut routing = RoutingInfo {
                version: RoutingVersion(r.next()),
                ..RoutingInfo::default()
            };
            for _ in 0..r.below(4) {
                let id = ChainId(r.next() as u32);
                let targets: Vec<TargetId> =
                    (0..r.below(5)).map(|_| TargetId(r.next() as u32)).collect();
                routing.chains.insert(
                    id,
                    ChainInfo::all_serving(id, ChainVersion(r.next() as u32), &targets),
                );
            }
            for _ in 0..r.below(6) {
                routing
                    .targets
                    .insert(TargetId(r.next() as u32), node_id(r));
            }
            for _ in 0..r.below(3) {
                let chains = (0..r.below(4)).map(|_| ChainId(r.next() as u32)).collect();
                routing
                    .chain_tables
                    .insert((r.next() as u32, r.next() as u32), chains);
            }
            Msg::Routing(routing)
        }
        4 => Msg::Update(update(r)),
        5 => Msg::UpdateReply(UpdateReply {
            tag: update(r).tag,
            chain: update(r).chain,
            chunk: ChunkId::new(r.next(), r.next() as u32),
            update_version: ChunkVersion(r.next() as u32),
            status: status(r),
            result: (r.below(2) == 1).then(|| UpdateResult {
                commit_version: ChunkVersion(r.next() as u32),
                commit_chain_version: ChainVersion(r.next() as u32),
                len: r.next() as u32,
                checksum: r.next() as u32,
            }),
        }),
        6 => Msg::Write(update(r)),
        7 => Msg::Heartbeat(Heartbeat {
            node: node_id(r),
            hb_version: r.next(),
            timestamp: r.next(),
            targets: (0..r.below(4))
                .map(|_| LocalTargetInfo {
                    target: TargetId(r.next() as u32),
                    state: local_state(r),
                    chain_version: ChainVersion(r.next() as u32),
                    fresh: r.below(2) == 1,
                })
                .collect(),
        }),
        8 => Msg::HeartbeatReply(HeartbeatReply {
            status: mgmtd_status(r),
        }),
        9 => Msg::NotPrimary {
            primary: (r.below(2) == 1).then(|| node_id(r)),
        },
        10 => Msg::ExtendSession(ExtendSession {
            client: ClientId(r.next()),
        }),
        11 => Msg::SyncStart(SyncStartReq {
            req: sync_req(r),
            after: (r.below(2) == 1).then(|| update(r).chunk),
        }),
        12 => Msg::SyncStartReply(SyncStartReply {
            req: sync_req(r),
            after: (r.below(2) == 1).then(|| update(r).chunk),
            status: status(r),
            metas: (0..r.below(3)).map(|_| chunk_meta(r)).collect(),
            more: r.below(2) == 1,
        }),
        13 => Msg::SyncDone(sync_req(r)),
        _ => Msg::SyncDoneReply(SyncDoneReply {
            req: sync_req(r),
            status: status(r),
        }),
    }
}

fn local_state(r: &mut Rng) -> crate::routing::LocalState {
    use crate::routing::LocalState::*;
    [UpToDate, Online, Offline][r.below(3) as usize]
}

fn mgmtd_status(r: &mut Rng) -> MgmtdStatus {
    match r.below(7) {
        0 => MgmtdStatus::Ok,
        5 => MgmtdStatus::Accepted {
            hb_version: r.next(),
            timestamp: r.next(),
            routing: crate::ids::RoutingVersion(r.next()),
        },
        1 => MgmtdStatus::NotPrimary {
            primary: (r.below(2) == 1).then(|| node_id(r)),
        },
        2 => MgmtdStatus::StaleHeartbeat { last: r.next() },
        3 => MgmtdStatus::BadTimestamp,
        4 => MgmtdStatus::Disabled,
        _ => MgmtdStatus::Invalid,
    }
}

fn dump_cursor(r: &mut Rng) -> Option<crate::msg::DumpCursor> {
    (r.below(2) == 1).then(|| crate::msg::DumpCursor {
        target: TargetId(r.next() as u32),
        after: (r.below(2) == 1).then(|| update(r).chunk),
    })
}

fn sync_req(r: &mut Rng) -> SyncReq {
    SyncReq {
        chain: VersionedChain {
            chain: ChainId(r.next() as u32),
            version: ChainVersion(r.next() as u32),
        },
        target: TargetId(r.next() as u32),
    }
}

fn chunk_meta(r: &mut Rng) -> crate::chunk::ChunkMeta {
    crate::chunk::ChunkMeta {
        chunk: ChunkId::new(r.next(), r.next() as u32),
        committed: ChunkVersion(r.next() as u32),
        chain_version: ChainVersion(r.next() as u32),
        len: r.next() as u32,
        checksum: r.next() as u32,
        pending: (r.below(2) == 1).then(|| crate::chunk::PendingMeta {
            version: ChunkVersion(r.next() as u32),
            len: r.next() as u32,
            checksum: r.next() as u32,
            removes: r.below(2) == 1,
            tag: (r.below(2) == 1).then(|| crate::chunk::UpdateTag {
                client: ClientId(r.next()),
                channel: ChannelId(r.next() as u32),
                seqnum: SeqNum(r.next()),
            }),
        }),
        applied: (0..r.below(3))
            .map(|_| crate::chunk::Applied {
                tag: crate::chunk::UpdateTag {
                    client: ClientId(r.next()),
                    channel: ChannelId(r.next() as u32),
                    seqnum: SeqNum(r.next()),
                },
                version: ChunkVersion(r.next() as u32),
                chain_version: ChainVersion(r.next() as u32),
                len: r.next() as u32,
                checksum: r.next() as u32,
            })
            .collect(),
    }
}

/// Decoding must never panic; whatever decodes must re-encode to a frame that decodes equal.
fn check_decode(frame: &[u8], seed: u64) {
    if let Ok(msg) = Msg::decode(frame) {
        let again = Msg::decode(&msg.encode())
            .unwrap_or_else(|e| panic!("seed {seed}: re-encoded frame rejected: {e}"));
        assert_eq!(again, msg, "seed {seed}: decode is not canonical");
    }
}

#[test]
fn random_messages_round_trip() {
    for seed in 0..20_000u64 {
        let mut r = Rng(seed);
        let msg = message(&mut r);
        let frame = msg.encode();
        assert_eq!(Msg::decode(&frame), Ok(msg.clone()), "seed {seed}");
        // Split, as the transports and the simulator send it: the same message, and the
        // payload the sender's own buffer, not a copy of it.
        let (head, bulk) = msg.clone().encode_split();
        assert_eq!(
            head.len() + bulk.as_ref().map_or(0, |b| b.len()),
            frame.len()
        );
        let decoded = Msg::decode_with(&head, bulk.clone());
        assert_eq!(decoded, Ok(msg), "seed {seed}");
        if let (Some(sent), Some(got)) = (bulk.filter(|b| !b.is_empty()), decoded.ok()) {
            let got = got.payload().expect("a payload slot");
            assert_eq!(
                got.as_ptr(),
                sent.as_ptr(),
                "seed {seed}: shared, not copied"
            );
        }
    }
}

#[test]
fn truncated_frames_are_errors() {
    for seed in 0..2_000u64 {
        let mut r = Rng(seed);
        let frame = message(&mut r).encode();
        for cut in 0..frame.len() {
            assert!(
                Msg::decode(&frame[..cut]).is_err(),
                "seed {seed}: prefix of {cut} bytes decoded"
            );
        }
        let mut longer = frame.clone();
        longer.push(0);
        assert_eq!(
            Msg::decode(&longer),
            Err(DecodeError::TrailingBytes(1)),
            "seed {seed}"
        );
    }
}

#[test]
fn mutated_and_random_frames_never_panic() {
    for seed in 0..50_000u64 {
        let mut r = Rng(seed);
        let mut frame = message(&mut r).encode();
        for _ in 0..1 + r.below(4) {
            match r.below(4) {
                0 if !frame.is_empty() => {
                    let i = r.below(frame.len() as u64) as usize;
                    frame[i] ^= 1 << r.below(8);
                }
                1 if !frame.is_empty() => {
                    let i = r.below(frame.len() as u64) as usize;
                    frame[i] = r.next() as u8;
                }
                2 => {
                    let i = r.below(frame.len() as u64 + 1) as usize;
                    frame.insert(i, r.next() as u8);
                }
                _ if !frame.is_empty() => {
                    let i = r.below(frame.len() as u64) as usize;
                    frame.remove(i);
                }
                _ => {}
            }
        }
        check_decode(&frame, seed);
        // Entirely random bytes, with and without a valid header.
        let mut junk = r.bytes(96);
        check_decode(&junk, seed);
        let mut framed = vec![
            codec::MAGIC[0],
            codec::MAGIC[1],
            codec::CODEC_VERSION,
            1 + r.below(7) as u8,
        ];
        framed.append(&mut junk);
        check_decode(&framed, seed);
    }
}

#[test]
fn forged_lengths_are_rejected_before_allocating() {
    // A Write whose payload length claims 4 GiB: must be TooLong, not an allocation attempt.
    let mut frame = Msg::Write(update(&mut Rng(1))).encode();
    let header = 4 + 8 + 8 + 4 + 8 + 4 + 4 + 8 + 4; // magic..chunk id
    frame.truncate(header);
    frame.push(0); // UpdateKind::Write
    frame.extend_from_slice(&0u32.to_le_bytes()); // offset
    frame.extend_from_slice(&u32::MAX.to_le_bytes()); // data length
    assert!(matches!(
        Msg::decode(&frame),
        Err(DecodeError::TooLong(_) | DecodeError::Truncated)
    ));
    assert_eq!(
        Msg::decode(&[0x33, 0xF5, 9, 1]),
        Err(DecodeError::UnsupportedVersion(9))
    );
    assert_eq!(Msg::decode(&[0, 0, 1, 1]), Err(DecodeError::BadMagic));
    assert_eq!(
        Msg::decode(&[0x33, 0xF5, 1, 99]),
        Err(DecodeError::UnknownTag(99))
    );
}

#[test]
fn heartbeat_frames_are_told_apart_by_their_header() {
    let hb = super::codec::encode_frame(8, |_| {});
    assert!(super::is_heartbeat_frame(&hb));
    let other = super::Msg::GetRouting {
        known: crate::ids::RoutingVersion(3),
    }
    .encode();
    assert!(!super::is_heartbeat_frame(&other));
    assert!(!super::is_heartbeat_frame(&[0x33, 0xF5]));
}

mod pages;
