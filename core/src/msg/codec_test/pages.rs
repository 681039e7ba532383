//! Paged replies on the wire: a full page of the largest chunk metadata fits a frame, a reply
//! over its page is malformed in every encoding, and a round that fits one page keeps the
//! frames it had before replies were paged.

use super::*;

/// The largest chunk metadata: a pending version with its tag and every exactly-once record.
fn largest_meta(index: u32) -> crate::chunk::ChunkMeta {
    let tag = crate::chunk::UpdateTag {
        client: ClientId(u64::MAX),
        channel: ChannelId(u32::MAX),
        seqnum: SeqNum(u64::MAX),
    };
    crate::chunk::ChunkMeta {
        chunk: ChunkId::new(u64::MAX, index),
        committed: ChunkVersion(u32::MAX),
        chain_version: ChainVersion(u32::MAX),
        len: u32::MAX,
        checksum: u32::MAX,
        pending: Some(crate::chunk::PendingMeta {
            version: ChunkVersion(u32::MAX),
            len: u32::MAX,
            checksum: u32::MAX,
            removes: true,
            tag: Some(tag),
        }),
        applied: vec![
            crate::chunk::Applied {
                tag,
                version: ChunkVersion(u32::MAX),
                chain_version: ChainVersion(u32::MAX),
                len: u32::MAX,
                checksum: u32::MAX,
            };
            crate::chunk::APPLIED_PER_CHUNK_MAX
        ],
    }
}

fn page_reply(n: usize, after: Option<ChunkId>, more: bool) -> SyncStartReply {
    SyncStartReply {
        req: sync_req(&mut Rng(5)),
        after,
        status: Status::Ok,
        metas: (0..n as u32).map(largest_meta).collect(),
        more,
    }
}

/// `limits.rs` sizes a page by the largest chunk metadata: 643 bytes; a full page of them is
/// one frame the codec takes.
#[test]
fn a_full_page_of_the_largest_chunk_metas_fits_a_frame() {
    let mut enc = codec::Encoder::new();
    largest_meta(0).encode(&mut enc);
    assert_eq!(enc.finish().len(), 643);
    let page = crate::limits::CHUNK_META_PAGE_MAX;
    for rep in [
        page_reply(page, None, false),
        page_reply(page, Some(ChunkId::new(1, 2)), true),
    ] {
        let frame = Msg::SyncStartReply(rep.clone()).encode();
        assert!(frame.len() <= crate::limits::FRAME_BYTES_MAX as usize);
        assert_eq!(Msg::decode(&frame), Ok(Msg::SyncStartReply(rep)));
    }
}

/// A reply longer than a page is malformed, in either encoding, and so is a dump page over
/// the page size or a listing over its page: the senders never make one.
#[test]
fn replies_over_a_page_are_rejected() {
    let page = crate::limits::CHUNK_META_PAGE_MAX;
    for (after, more) in [
        (None, false),
        (None, true),
        (Some(ChunkId::new(1, 2)), false),
    ] {
        let frame = Msg::SyncStartReply(page_reply(page + 1, after, more)).encode();
        assert_eq!(
            Msg::decode(&frame),
            Err(DecodeError::TooLong(page as u32 + 1))
        );
    }
    let sum = crate::msg::ChunkSum::default();
    let dump = |sizes: &[usize]| {
        Msg::ChunkMetaDump(crate::msg::ChunkMetaDump {
            node: NodeId(1),
            targets: sizes
                .iter()
                .enumerate()
                .map(|(t, &n)| crate::msg::TargetDump {
                    target: TargetId(t as u32),
                    chunks: vec![sum; n],
                })
                .collect(),
            next: None,
        })
    };
    let full = dump(&[page / 2, page - page / 2]);
    assert_eq!(Msg::decode(&full.encode()), Ok(full));
    for sizes in [&[page + 1][..], &[page, 1]] {
        assert!(matches!(
            Msg::decode(&dump(sizes).encode()),
            Err(DecodeError::TooLong(_))
        ));
    }
    use crate::wire::MetaAnswer;
    use crate::wire::{DirEntry, EntryKind};
    let entry = DirEntry {
        inode: InodeId(3),
        kind: EntryKind::File,
        request: RequestId(0),
    };
    let listing = |n: u32| {
        Msg::MetaReply(crate::msg::meta::MetaReply {
            request: RequestId(1),
            result: Ok(MetaAnswer::Entries(
                (0..n)
                    .map(|i| (i.to_be_bytes().to_vec(), entry.clone()))
                    .collect(),
            )),
            dirs: Default::default(),
        })
    };
    let max = crate::limits::DIR_LIST_PAGE_MAX;
    assert_eq!(Msg::decode(&listing(max).encode()), Ok(listing(max)));
    assert_eq!(
        Msg::decode(&listing(max + 1).encode()),
        Err(DecodeError::TooLong(max + 1))
    );
}

/// A round's first request and a whole answer are the frames they were before replies were
/// paged (so runs whose targets fit one page are unchanged); the paged kinds are canonical.
#[test]
fn unpaged_sync_frames_keep_their_bytes() {
    let req = sync_req(&mut Rng(9));
    let first = Msg::SyncStart(SyncStartReq { req, after: None });
    assert_eq!(
        first.encode(),
        codec::encode_frame(12, |e| req.encode(e)),
        "kind 12, the request alone"
    );
    let whole = page_reply(2, None, false);
    assert_eq!(
        Msg::SyncStartReply(whole.clone()).encode(),
        codec::encode_frame(13, |e| {
            whole.req.encode(e);
            whole.status.encode(e);
            codec::encode_list(e, &whole.metas);
        }),
        "kind 13: request, status, metas"
    );
    // A later page's kinds: 29 carries a cursor, 30 a cursor and `more`.
    let later = SyncStartReq {
        req,
        after: Some(ChunkId::new(4, 5)),
    };
    assert_eq!(Msg::SyncStart(later).encode()[3], 29);
    assert_eq!(
        Msg::SyncStartReply(page_reply(1, None, true)).encode()[3],
        30
    );
    // Each message has one encoding: the paged kinds refuse what the unpaged ones carry.
    let cursorless = codec::encode_frame(29, |e| SyncStartReq { req, after: None }.encode(e));
    assert_eq!(Msg::decode(&cursorless), Err(DecodeError::Invalid));
    let unpaged = codec::encode_frame(30, |e| whole.encode(e));
    assert_eq!(Msg::decode(&unpaged), Err(DecodeError::Invalid));
}
