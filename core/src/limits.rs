//! Every bound of t3fs in one place (TigerBeetle's `constants.zig` style).
//!
//! Queues, payloads and retry budgets are bounded so that no machine grows without limit and so
//! that the model checker's state space stays finite. Compile-time assertions tie related bounds
//! together. Timing defaults follow 3FS Appendix A where a counterpart exists.

use core::time::Duration;

/// Largest chunk size a target accepts (3FS allows up to 64 MiB).
pub const CHUNK_SIZE_MAX: u32 = 64 << 20;
/// Chunk indexes a file may use: `0..CHUNK_INDEX_END`. A chunk index is a `u32` on the wire,
/// and `queryLastChunk` bounds the indexes it looks at by an exclusive `u32` end, which meta's
/// length query and the client's truncate pass as `u32::MAX`: a chunk at index `u32::MAX` could
/// be written but never found, so a file's chunks stop one short of it. The largest file is
/// `CHUNK_INDEX_END` whole chunks (`layout::file_size_max`: 2^52 - 2^20 bytes at 1 MiB chunks).
pub const CHUNK_INDEX_END: u32 = u32::MAX;
/// Largest inline payload of one message; larger I/O is split by the client into chunk I/Os.
pub const PAYLOAD_BYTES_MAX: u32 = CHUNK_SIZE_MAX;
/// Largest encoded frame the codec accepts (payload plus headers).
pub const FRAME_BYTES_MAX: u32 = PAYLOAD_BYTES_MAX + 64 * 1024;
/// Longest list (chains, targets, chunk metas) a decoded message may hold.
pub const LIST_LEN_MAX: u32 = 1 << 16;
/// Updates waiting for one chunk's lock on one target (FIFO); beyond this the update is
/// answered `Busy` and the sender retries.
pub const CHUNK_LOCK_WAITERS_MAX: usize = 64;
/// Exactly-once channel records kept per target: 1,024 clients of 64 channels. A record is
/// evicted only after the retry horizon; a new channel beyond this answers `Busy`
/// (`storage/exactly_once.rs`).
pub const CHANNEL_RECORDS_PER_TARGET_MAX: usize = 65_536;
/// Forwarded updates a target remembers refusing for want of space, so that a late copy of one
/// is refused again (`storage/no_space.rs`); beyond this the oldest is forgotten.
pub const NO_SPACE_REFUSALS_PER_TARGET_MAX: usize = 4096;
/// How long after an update finished its client may still retry it: every attempt of the
/// client's budget (`CLIENT_RETRIES_MAX` + 1) waiting its longest reply timeout and backoff
/// (17 x (10 s + 5 s) = 255 s), rounded up to 5 minutes for a frame still in flight.
pub const RETRY_HORIZON: Duration = Duration::from_secs(300);
/// Concurrent chunk I/Os (reads + writes) one client keeps in flight.
pub const CLIENT_CHUNK_IOS_MAX: usize = 1024;
/// Concurrent calls one client machine accepts; beyond this a call returns `Busy`.
pub const CLIENT_CALLS_MAX: usize = 256;
/// Actions one `start`/`handle` call may emit.
pub const OUTBOX_ACTIONS_MAX: usize = 4096;
/// Client-side retries of one chunk I/O before the call fails (3FS: 60 s budget).
pub const CLIENT_RETRIES_MAX: u32 = 16;
/// Clock drift rate the protocol tolerates on any node by default, in parts per million
/// (0.1 %, far above what NTP-disciplined or even free-running quartz clocks show); the
/// storage-side lease is shortened by the drift of both clocks over one failure-detection
/// interval (`storage/lease.rs`).
pub const CLOCK_DRIFT_PPM_MAX: u32 = 1_000;
/// Read attempts a client remembers per chunk I/O to attribute a reply to its replica.
pub const CLIENT_READ_ATTEMPTS_KEPT: usize = 4;
/// Forwarding retries of one update before it fails upstream (3FS: 60 s budget).
pub const FORWARD_RETRIES_MAX: u32 = 16;
/// First client retry backoff (3FS `init_wait` 500 ms; halved for fast-retry statuses).
pub const CLIENT_RETRY_WAIT_MIN: Duration = Duration::from_millis(500);
/// Client retry backoff cap.
pub const CLIENT_RETRY_WAIT_MAX: Duration = Duration::from_secs(5);
/// Time a client waits for any storage reply before it retries.
pub const CLIENT_IO_TIMEOUT: Duration = Duration::from_secs(5);
/// First forwarding retry backoff (3FS: 100 ms, doubling to 1 s).
pub const FORWARD_RETRY_WAIT_MIN: Duration = Duration::from_millis(100);
/// Forwarding retry backoff cap.
pub const FORWARD_RETRY_WAIT_MAX: Duration = Duration::from_secs(1);
/// Targets one storage node hosts.
pub const TARGETS_PER_NODE_MAX: usize = 256;
/// Targets in one chain.
pub const CHAIN_TARGETS_MAX: usize = 16;

const _: () = assert!(PAYLOAD_BYTES_MAX <= FRAME_BYTES_MAX);
const _: () = assert!(CHUNK_LOCK_WAITERS_MAX > 0 && CLIENT_RETRIES_MAX > 0);
const _: () = assert!(CHAIN_TARGETS_MAX as u32 <= LIST_LEN_MAX);

/// Routing refresh and client-session extension period (3FS `auto_refresh_interval`, 10 s).
pub const ROUTING_REFRESH: Duration = Duration::from_secs(10);
/// Storage heartbeat period (3FS 10 s).
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);
/// Chain update loop period (3FS `update_chains_interval`, 1 s).
pub const CHAIN_UPDATE_INTERVAL: Duration = Duration::from_secs(1);
/// Known nodes and targets per mgmtd (bounds its tables; heartbeats beyond it are refused).
pub const MGMTD_NODES_MAX: usize = 4096;
/// Client sessions per mgmtd.
pub const CLIENT_SESSIONS_MAX: usize = 65536;
/// Queued writer operations of mgmtd (admin calls beyond it are refused as busy).
pub const MGMTD_WRITER_QUEUE_MAX: usize = 64;

/// Chunk metadata entries in one reply page: a resync's `SyncStart` reply (the successor's
/// chunks after the predecessor's cursor) and a `DumpChunkMeta` reply (committed chunks of a
/// node's targets after the tool's cursor). A target holds any number of chunks; its metadata
/// crosses the wire a page at a time, each asker following the cursor to the end. Well below
/// [`LIST_LEN_MAX`]; at the largest chunk metadata (a pending version and
/// `APPLIED_PER_CHUNK_MAX` exactly-once records, 643 bytes) a page is about 5 MiB, well below
/// [`FRAME_BYTES_MAX`].
pub const CHUNK_META_PAGE_MAX: usize = 8192;
/// Names in one meta `List` answer: a request asking for more gets this many, and its caller
/// asks again after the last name it got (`after`).
pub const DIR_LIST_PAGE_MAX: u32 = 8192;

const _: () = assert!(CHUNK_META_PAGE_MAX < LIST_LEN_MAX as usize);
const _: () = assert!(DIR_LIST_PAGE_MAX < LIST_LEN_MAX);
const _: () = assert!(CHUNK_META_PAGE_MAX as u64 * 643 < FRAME_BYTES_MAX as u64);
