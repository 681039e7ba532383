//! Criterion benchmarks of the data path's hot pieces, so regressions show: CRC32C (hardware and
//! the software reference) over 1 MiB, the codec round trip of a 1 MiB write, and one 1 MiB
//! chunk update plus commit through the in-memory reference store. Run with
//! `cargo bench -p t3fs-core --bench hot`; figures are throughput (bytes per second).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};

use t3fs_core::chunk::{ChunkDone, ChunkOp, ChunkStore, UpdateKind};
use t3fs_core::crc32c;
use t3fs_core::ids::{
    ChainId, ChainVersion, ChannelId, ChunkId, ChunkVersion, ClientId, InodeId, IoId, RequestId,
    SeqNum, VersionedChain,
};
use t3fs_core::msg::{MessageTag, Msg, UpdateReq};
use t3fs_core::testing::MemChunkStore;

const MIB: usize = 1 << 20;

fn payload() -> Vec<u8> {
    (0..MIB)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

fn crc(c: &mut Criterion) {
    let data = payload();
    let mut g = c.benchmark_group("crc32c_1mib");
    g.throughput(Throughput::Bytes(MIB as u64));
    g.bench_function("hardware", |b| {
        b.iter(|| crc32c::checksum(black_box(&data)))
    });
    g.bench_function("software", |b| {
        b.iter(|| crc32c::extend_software(0, black_box(&data)))
    });
    g.finish();
}

fn write_msg() -> Msg {
    let data = payload();
    Msg::Write(UpdateReq {
        tag: MessageTag {
            client: ClientId(1),
            request: RequestId(1),
            channel: ChannelId(1),
            seqnum: SeqNum(1),
        },
        chain: VersionedChain {
            chain: ChainId(1),
            version: ChainVersion(1),
        },
        chunk: ChunkId {
            inode: InodeId(1),
            index: 0,
        },
        checksum: crc32c::checksum(&data),
        kind: UpdateKind::Write {
            offset: 0,
            data: data.into(),
        },
        chunk_size: MIB as u32,
        update_version: ChunkVersion(0),
        retry: 0,
        is_syncing: false,
    })
}

fn codec(c: &mut Criterion) {
    let msg = write_msg();
    let frame = msg.encode();
    let mut g = c.benchmark_group("codec_1mib_write");
    g.throughput(Throughput::Bytes(MIB as u64));
    g.bench_function("encode", |b| b.iter(|| black_box(&msg).encode()));
    g.bench_function("decode", |b| {
        b.iter(|| Msg::decode(black_box(&frame)).expect("valid"))
    });
    g.finish();
}

fn store(c: &mut Criterion) {
    let data = payload();
    let mut g = c.benchmark_group("mem_store_1mib_update_commit");
    g.throughput(Throughput::Bytes(MIB as u64));
    g.bench_function("update+commit", |b| {
        let mut s = MemChunkStore::new();
        let chunk = ChunkId {
            inode: InodeId(1),
            index: 0,
        };
        let mut v = 0u32;
        let mut done = Vec::new();
        b.iter(|| {
            v += 1;
            s.submit(
                IoId(1),
                ChunkOp::Update {
                    chunk,
                    version: ChunkVersion(v),
                    kind: UpdateKind::Write {
                        offset: 0,
                        data: data.clone().into(),
                    },
                    tag: None,
                },
            );
            s.submit(
                IoId(2),
                ChunkOp::Commit {
                    chunk,
                    version: ChunkVersion(v),
                    chain_version: ChainVersion(1),
                },
            );
            s.poll_completions(&mut done);
            assert!(matches!(
                done.last(),
                Some((_, Ok(ChunkDone::Committed(_))))
            ));
            done.clear();
        });
    });
    g.finish();
}

criterion_group!(benches, crc, codec, store);
criterion_main!(benches);
